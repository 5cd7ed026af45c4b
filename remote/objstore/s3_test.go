package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/remote/objstore/weedtest"
)

// The S3 store against a real S3-compatible server: SeaweedFS's weed
// (module github.com/seaweedfs/seaweedfs, the pseudo-version in
// weedtest.Version), which ./scripts/test builds into $(go env
// GOPATH)/bin. The test starts `weed server -s3` on 127.0.0.1 ports in a
// temporary directory with one static identity (weedtest.Start), waits
// until S3 answers, runs the conformance suite, then stops it and checks
// that the store, now down, fails with Transient errors.

var bucketSeq atomic.Int64

// newWeedStore makes a fresh bucket on w, retrying while weed starts.
func newWeedStore(t *testing.T, w *weedtest.Server, partSize int64) *S3 {
	t.Helper()
	s, err := NewS3(S3Config{
		Endpoint: w.Endpoint, Bucket: fmt.Sprintf("strata-test-%d", bucketSeq.Add(1)),
		Region: "us-east-1", PathStyle: true,
		AccessKeyID: weedtest.AccessKey, SecretAccessKey: weedtest.SecretKey, PartSize: partSize,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.CreateBucket(cctx)
		ccancel()
		if err == nil {
			return s
		}
		select {
		case <-w.Done():
			t.Fatalf("weed exited: %v\n%s", err, w.Tail())
		case <-ctx.Done():
			t.Fatalf("weed's S3 gateway not ready: %v\n%s", err, w.Tail())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func TestS3ConformanceSeaweedFS(t *testing.T) {
	w := weedtest.Start(t)
	const part = minPartSize
	runConformance(t, suite{
		newStore: func(t *testing.T) ObjectStore { return newWeedStore(t, w, part) },
		bigSize:  2*part + part/2, // three parts
	})

	t.Run("WrongCredentialsArePermanent", func(t *testing.T) {
		good := newWeedStore(t, w, part)
		s, err := NewS3(S3Config{Endpoint: w.Endpoint, Bucket: good.bucket, PathStyle: true,
			AccessKeyID: weedtest.AccessKey, SecretAccessKey: "wrong-secret"})
		if err != nil {
			t.Fatal(err)
		}
		data := []byte("x")
		_, err = s.Put(testCtx(t), "k", strings.NewReader("x"), 1, SumOf(data))
		wantKind(t, "put with a wrong secret", err, Permanent, nil)
	})

	t.Run("StoreDownIsTransient", func(t *testing.T) {
		s := newWeedStore(t, w, part)
		data := []byte("before the outage")
		put(t, s, "k", data)
		w.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.Put(ctx, "k2", strings.NewReader("x"), 1, SumOf([]byte("x")))
		wantKind(t, "put to a stopped store", err, Transient, nil)
		_, _, err = s.Get(ctx, "k")
		wantKind(t, "get from a stopped store", err, Transient, nil)
		if errors.Is(err, ErrNotFound) {
			t.Fatal("a stopped store reported NotFound")
		}
		if ctx.Err() != nil {
			t.Fatal("calls to a stopped store waited for their deadline")
		}
	})
}
