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
	s3, err := objstore.NewS3(objstore.S3Config{Endpoint: w.Endpoint, Bucket: "strata-rlm-test", Region: "us-east-1",
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
			break
		}
		select {
		case <-w.Done():
			t.Fatalf("weed exited: %v\n%s", err, w.Tail())
		case <-ctx.Done():
			t.Fatalf("weed's S3 gateway not ready: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
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
