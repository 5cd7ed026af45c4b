package loadgen

import (
	"context"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumerEnv spawns a broker, creates topic with partitions and returns a
// run environment for one consumer (its clock starting now) and an admin
// client producing to the topic by default.
func consumerEnv(ctx context.Context, t *testing.T, topic string, partitions int32) (*runEnv, *kgo.Client) {
	t.Helper()
	cl, err := Spawn(ctx, SpawnOptions{Bin: strataBin, Brokers: 1, SegmentBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	cfg := DefaultConfig()
	cfg.Topic, cfg.Partitions, cfg.Consumers = topic, partitions, 1
	admin, err := kgo.NewClient(kgo.SeedBrokers(cl.Addrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	ti, err := ensureTopic(ctx, admin, &cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now()
	return &runEnv{cfg: &cfg, base: base, baseUnix: base.UnixNano(), st: newRunStats(), topic: ti}, admin
}

// TestNativeConsumerSession drives one fetcher of the native consumer by
// hand against a spawned broker: it must count exactly the run's records
// (older ones skipped, none twice) through one full fetch and incremental
// ones, and recover from a fetch session the broker does not know by
// opening a new one.
func TestNativeConsumerSession(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	env, admin := consumerEnv(ctx, t, "native-consumer", 4)
	ti := env.topic

	produce := func(n int, stamp int64) {
		t.Helper()
		recs := make([]*kgo.Record, n)
		for i := range recs {
			v := make([]byte, 64)
			binary.BigEndian.PutUint64(v, uint64(stamp))
			recs[i] = &kgo.Record{Value: v, Partition: int32(i % int(ti.partitions))}
		}
		if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(50, 1) // before the run: skipped

	rec := newRecorder()
	c, err := newNativeConsumer(env, 0, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}, rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	if len(c.fetchers) != 1 {
		t.Fatalf("%d fetchers for one broker", len(c.fetchers))
	}
	f := c.fetchers[0]
	consumeUntil := func(want int64) {
		t.Helper()
		for i := 0; env.st.consumed.Load() < want; i++ {
			if i == 200 || ctx.Err() != nil {
				t.Fatalf("consumed %d of %d after %d fetches", env.st.consumed.Load(), want, i)
			}
			resp, err := f.fetch()
			if err != nil {
				t.Fatal(err)
			}
			if resp != nil && f.consume(resp) {
				t.Fatalf("partition errors: %v", env.st.errors)
			}
		}
		if got := env.st.consumed.Load(); got != want {
			t.Fatalf("consumed %d, want %d", got, want)
		}
	}

	for round := range 3 {
		produce(100, env.baseUnix+int64(round))
		consumeUntil(int64(100 * (round + 1)))
	}
	if f.full.Load() != 1 || f.fetches.Load() < 3 || f.session == 0 {
		t.Fatalf("fetches %d, full %d, session %d: want one full fetch opening a session", f.fetches.Load(), f.full.Load(), f.session)
	}
	// The next fetch tells the session the last offsets (and waits for
	// data that does not come); after it nothing moved, so the request
	// after lists nothing.
	if resp, err := f.fetch(); err != nil || resp == nil || f.consume(resp) {
		t.Fatalf("idle fetch: %v %v", resp, err)
	}
	f.build()
	if len(f.req.Topics) != 0 {
		t.Fatalf("incremental request with no new offsets lists %d topics", len(f.req.Topics))
	}

	f.session += 1000 // a session the broker never opened
	produce(100, env.baseUnix+10)
	consumeUntil(400)
	if f.full.Load() != 2 {
		t.Fatalf("full fetches %d after a lost session, want 2", f.full.Load())
	}
	var h = newHist()
	rec.collect(h)
	if h.TotalCount() != 400 || env.st.consumeErrors.Load() != 0 {
		t.Fatalf("latencies recorded %d, consume errors %d", h.TotalCount(), env.st.consumeErrors.Load())
	}
}

// TestNativeConsumerStops checks run returns once its context ends while a
// fetch waits at the broker (the connection is closed under it).
func TestNativeConsumerStops(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	env, _ := consumerEnv(ctx, t, "native-stop", 2)
	c, err := newNativeConsumer(env, 0, map[int32]int64{}, newRecorder())
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.run(rctx) }()
	time.Sleep(200 * time.Millisecond) // a fetch is waiting for data
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	if n := env.st.consumeErrors.Load(); n != 0 {
		t.Fatalf("%d consume errors on a clean stop: %v", n, env.st.errors)
	}
}
