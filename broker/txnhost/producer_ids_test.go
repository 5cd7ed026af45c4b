package txnhost

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// fakeQuorum answers AllocateProducerIDs from a script, then with
// consecutive blocks.
type fakeQuorum struct {
	mu     sync.Mutex
	script []controller.Result
	next   int64
	calls  []controller.AllocateProducerIDs
}

func (q *fakeQuorum) Propose(ctx context.Context, cmd controller.Command) (controller.Result, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	a, ok := cmd.(controller.AllocateProducerIDs)
	if !ok {
		return controller.Result{}, errors.New("unexpected command")
	}
	q.calls = append(q.calls, a)
	if len(q.script) > 0 {
		r := q.script[0]
		q.script = q.script[1:]
		return r, nil
	}
	r := controller.Result{ProducerIDStart: controller.FirstProducerID + q.next, ProducerIDLen: 1000}
	q.next += 1000
	return r, nil
}

func TestControllerBlocksRetriesUntilRegisteredAndFresh(t *testing.T) {
	q := &fakeQuorum{script: []controller.Result{{Code: kerr.StaleBrokerEpoch.Code}}}
	var epoch atomic.Int64
	clock := &fakeClock{}
	src := NewControllerBlocks(context.Background(), BlocksConfig{NodeID: 3, Epoch: func() int64 {
		if len(clock.sleeps) >= 2 { // registered after two backoffs
			epoch.CompareAndSwap(0, 7)
		}
		return epoch.Load()
	}, Controller: q, Clock: clock})
	defer src.Close()
	b, err := src.Allocate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b.First != controller.FirstProducerID || b.Size != 1000 {
		t.Fatalf("block %+v", b)
	}
	if len(q.calls) != 2 || q.calls[0] != (controller.AllocateProducerIDs{BrokerID: 3, BrokerEpoch: 7}) {
		t.Fatalf("proposals %+v", q.calls)
	}
	// Backoffs double from 10 ms: unregistered twice, stale once.
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	if len(clock.sleeps) != len(want) {
		t.Fatalf("sleeps %v, want %v", clock.sleeps, want)
	}
	for i := range want {
		if clock.sleeps[i] != want[i] {
			t.Fatalf("sleeps %v, want %v", clock.sleeps, want)
		}
	}
}

func TestControllerBlocksPrefetchAndErrors(t *testing.T) {
	q := &fakeQuorum{}
	src := NewControllerBlocks(context.Background(), BlocksConfig{NodeID: 1, Epoch: func() int64 { return 1 }, Controller: q, Clock: &fakeClock{}})
	b1, err := src.AllocateBlock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !src.Prefetched(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no block prefetched")
		}
	}
	b2, err := src.AllocateBlock(context.Background())
	if err != nil || b2.First != b1.First+b1.Size {
		t.Fatalf("second block %+v after %+v: %v", b2, b1, err)
	}
	src.Close()

	// An exhausted id space is final; an invalid block is refused.
	for _, tc := range []struct {
		r    controller.Result
		want error
	}{
		{controller.Result{Code: kerr.UnknownServerError.Code}, txn.ErrIDsExhausted},
		{controller.Result{ProducerIDStart: 5, ProducerIDLen: 10}, nil},
	} {
		src := NewControllerBlocks(context.Background(), BlocksConfig{NodeID: 1, Epoch: func() int64 { return 1 },
			Controller: &fakeQuorum{script: []controller.Result{tc.r}}, Clock: &fakeClock{}})
		_, err := src.Allocate(context.Background())
		src.Close()
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Fatalf("result %+v: err %v, want %v", tc.r, err, tc.want)
		}
	}

	// A closed source ends an allocation instead of retrying forever.
	src = NewControllerBlocks(context.Background(), BlocksConfig{NodeID: 1, Epoch: func() int64 { return 0 }, Controller: q, Clock: &fakeClock{}})
	src.Close()
	if _, err := src.Allocate(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("allocate on a closed source: %v", err)
	}
}
