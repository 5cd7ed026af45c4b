package rlm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stratalog/strata/remote/objstore"
	"github.com/stratalog/strata/remote/objstore/weedtest"
)

// The same copy, local retention and read back against a real
// S3-compatible server (SeaweedFS, which ./scripts/test builds), through
// a restart of the manager.
func TestCopyAndReadBackS3(t *testing.T) {
	w := weedtest.Start(t)
	s3 := newS3(t, w, "strata-rlm-test")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	f.store = s3
	f.produce(30)
	m := f.manager(s3, nil)
	if err := m.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	segs := m.Segments(f.log.TopicID(), 0)
	if len(segs) < 5 || finished(segs) != len(segs) {
		t.Fatalf("%d segments copied (%d finished)", len(segs), finished(segs))
	}
	if keys := f.keys(); len(keys) < 4*len(segs) {
		t.Fatalf("%d objects for %d segments", len(keys), len(segs))
	}
	f.waitLocalStart(segs[len(segs)-1].End)
	if n := f.readAll(m); n == 0 {
		t.Fatal("nothing read from S3")
	}
	m.Close()
	m2 := f.manager(s3, func(o *Options) { o.MaxCachedSegmentBytes = 1 })
	defer m2.Close()
	f.readAll(m2) // by ranges
	if got := m2.Segments(f.log.TopicID(), 0); fmt.Sprint(got) != fmt.Sprint(segs) {
		t.Fatalf("metadata after restart differs")
	}
}

// newS3 makes a bucket on w, retrying while weed starts.
func newS3(t *testing.T, w *weedtest.Server, bucket string) *objstore.S3 {
	t.Helper()
	s3, err := objstore.NewS3(objstore.S3Config{Endpoint: w.Endpoint, Bucket: bucket, Region: "us-east-1",
		PathStyle: true, AccessKeyID: weedtest.AccessKey, SecretAccessKey: weedtest.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for { // weed's S3 gateway takes a while to start
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		err := s3.CreateBucket(cctx)
		ccancel()
		if err == nil {
			return s3
		}
		select {
		case <-w.Done():
			t.Fatalf("weed exited: %v\n%s", err, w.Tail())
		case <-ctx.Done():
			t.Fatalf("weed's S3 gateway not ready: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// The S3 server stopped mid-run: produce goes on, copies retry with
// backoff, local retention deletes nothing uncopied, and once the server
// is back every segment is copied and every record reads back.
func TestS3OutageDelaysNothing(t *testing.T) {
	w := weedtest.Start(t)
	s3 := newS3(t, w, "strata-rlm-outage")
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	f.store = s3
	f.produce(10)
	m := f.manager(s3, func(o *Options) {
		o.Sleep = nil // real waits
		o.BackoffMin, o.BackoffMax, o.OpTimeout = 20*time.Millisecond, 200*time.Millisecond, 3*time.Second
	})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := m.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	before := m.CopiedEnd(f.log.TopicID(), "tiered", 0)
	f.waitLocalStart(before)

	w.Stop()
	f.produce(20) // acknowledged with the store down
	sealed := f.log.SealedSegments()
	want := sealed[len(sealed)-1].End // nothing past before is deleted meanwhile
	outage := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- m.RunOnce(ctx) }()
	for m.Stats().Retries < 3 {
		if ctx.Err() != nil {
			t.Fatal("no retries while the store is down")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := m.CopiedEnd(f.log.TopicID(), "tiered", 0); got != before {
		t.Fatalf("copied end moved to %d with the store down", got)
	}
	time.Sleep(20 * time.Millisecond) // engine retention passes (5 ms)
	if got := f.log.LogStartOffset(); got != before {
		t.Fatalf("local start %d: uncopied segments deleted (copied end %d)", got, before)
	}
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := <-errc; err != nil {
		t.Fatalf("pass across the outage: %v", err)
	}
	t.Logf("store down %v, copies done %v after its restart, %d retries", restarted.Sub(outage), time.Since(restarted), m.Stats().Retries)
	after := m.CopiedEnd(f.log.TopicID(), "tiered", 0)
	if after != want || after <= before {
		t.Fatalf("copied end %d after the outage (before %d), want %d", after, before, want)
	}
	f.waitLocalStart(after)
	f.readAll(m)
}
