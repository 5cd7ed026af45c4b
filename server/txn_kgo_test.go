package server

// Transactions end to end with franz-go: a transactional producer's
// commits and aborts as read_committed and read_uncommitted consumers see
// them, fencing by a second producer instance, and a GroupTransactSession
// copy (consume-transform-produce with the input offsets in the
// transaction) restarted mid-way, checked for exactly-once output.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func txnTestConfig(c *Config, e *engine.Options) {
	groupTestConfig(c, e)
	c.Txn.AbortInterval = 100 * time.Millisecond
	c.Txn.TransactionVersion = 2
	c.Txn.PartitionVerification = true
}

// consumeValues reads topic from the start with the isolation level until
// every want value (a prefix set) is seen and then the sentinel; it returns
// every value read before the sentinel, in order per partition.
func consumeUntilSentinel(t *testing.T, addr, topic string, committed bool, sentinels int) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx := testCtx(t)
	var out []string
	seen := 0
	for seen < sentinels {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consuming %s: %v after %d values, %d sentinels", topic, err, len(out), seen)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consuming %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "sentinel" {
				seen++
				return
			}
			out = append(out, string(r.Value))
		})
	}
	return out
}

// produceSentinels writes a non-transactional "sentinel" record to every
// partition of topic: consumers stop once they have read them all.
func produceSentinels(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < partitions; p++ {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: p, Value: []byte("sentinel")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTxnProducerCommitAbort(t *testing.T) {
	addr, _, _ := startBroker(t, txnTestConfig)
	admin := newClient(t, addr)
	createTxnTestTopic(t, admin, "out", 2)
	p := newClient(t, addr, kgo.TransactionalID("commit-abort"), kgo.DefaultProduceTopic("out"),
		kgo.TransactionTimeout(30*time.Second))
	ctx := testCtx(t)
	run := func(prefix string, n int, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			p.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("EndTransaction(%v): %v", commit, err)
		}
	}
	run("c1", 50, kgo.TryCommit)
	run("ab", 50, kgo.TryAbort)
	run("c2", 50, kgo.TryCommit)
	produceSentinels(t, addr, "out", 2)

	committed := consumeUntilSentinel(t, addr, "out", true, 2)
	if len(committed) != 100 {
		t.Errorf("read_committed read %d records, want 100", len(committed))
	}
	for _, v := range committed {
		if strings.HasPrefix(v, "ab-") {
			t.Fatalf("read_committed returned aborted record %q", v)
		}
	}
	all := consumeUntilSentinel(t, addr, "out", false, 2)
	if len(all) != 150 {
		t.Errorf("read_uncommitted read %d records, want 150 (aborted ones included)", len(all))
	}
}

func TestTxnProducerFenced(t *testing.T) {
	addr, _, _ := startBroker(t, txnTestConfig)
	admin := newClient(t, addr)
	createTxnTestTopic(t, admin, "out", 1)
	ctx := testCtx(t)
	opts := []kgo.Opt{kgo.TransactionalID("fence"), kgo.DefaultProduceTopic("out"), kgo.TransactionTimeout(30 * time.Second)}
	a := newClient(t, addr, opts...)
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := a.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A second instance with the same transactional id fences the first and
	// aborts its open transaction.
	b := newClient(t, addr, opts...)
	if err := b.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := b.ProduceSync(ctx, &kgo.Record{Value: []byte("live")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := b.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	err := a.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer's commit: %v, want PRODUCER_FENCED", err)
	}
	produceSentinels(t, addr, "out", 1)
	if got := consumeUntilSentinel(t, addr, "out", true, 1); len(got) != 1 || got[0] != "live" {
		t.Fatalf("read_committed: %q, want only the live producer's record", got)
	}
}

// TestTxnGroupTransactSessionCopy copies 20,000 records from "in" to "out"
// in transactions that commit the input offsets too; the copier is killed
// with a transaction open half way and a new one takes over.
func TestTxnGroupTransactSessionCopy(t *testing.T) {
	const total = 20000
	addr, _, _ := startBroker(t, txnTestConfig)
	admin := newClient(t, addr)
	createTxnTestTopic(t, admin, "in", 2)
	createTxnTestTopic(t, admin, "out", 2)
	ctx := testCtx(t)
	src := newClient(t, addr, kgo.DefaultProduceTopic("in"))
	for i := 0; i < total; i++ {
		src.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 97)), Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	session := func() *kgo.GroupTransactSession {
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("copier"),
			kgo.ConsumerGroup("copy"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.TransactionTimeout(5*time.Second),
			kgo.SessionTimeout(6*time.Second), kgo.FetchMaxWait(100*time.Millisecond),
			kgo.DefaultProduceTopic("out"), kgo.FetchMaxPartitionBytes(32<<10), kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// copyN runs transactions until at least n input records are committed
	// (or the input is exhausted), then returns the count so far.
	copied, txns := 0, 0
	copyN := func(s *kgo.GroupTransactSession, n int, ctx context.Context) {
		for copied < n {
			fs := s.PollRecords(ctx, 500)
			if ctx.Err() != nil {
				t.Fatalf("copy: %v after %d records", ctx.Err(), copied)
			}
			if err := s.Begin(); err != nil {
				t.Fatal(err)
			}
			k := 0
			fs.EachRecord(func(r *kgo.Record) {
				k++
				s.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
			})
			ok, err := s.End(ctx, kgo.TryCommit)
			if err != nil {
				t.Fatalf("End: %v", err)
			}
			if ok {
				copied += k
				txns++
			}
		}
	}
	first := session()
	copyN(first, total/2, ctx)
	// Die with a transaction open: records produced, offsets not committed.
	fs := first.PollRecords(ctx, 500)
	if err := first.Begin(); err != nil {
		t.Fatal(err)
	}
	fs.EachRecord(func(r *kgo.Record) {
		first.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
	})
	if err := first.Client().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	first.Client().Close()
	firstCopied, firstTxns := copied, txns

	second := session()
	defer second.Close()
	// The rest: until the whole input is copied once.
	for copied < total {
		before := copied
		copyN(second, copied+1, ctx)
		if copied == before {
			t.Fatal("no progress")
		}
	}
	if copied != total {
		t.Fatalf("copied %d records, want %d", copied, total)
	}
	t.Logf("first copier: %d records in %d transactions, then died with one open; second: %d records in %d transactions",
		firstCopied, firstTxns, copied-firstCopied, txns-firstTxns)
	if firstCopied == 0 || firstCopied == total {
		t.Fatalf("the first copier copied %d of %d records: no restart mid-way", firstCopied, total)
	}
	produceSentinels(t, addr, "out", 2)
	out := consumeUntilSentinel(t, addr, "out", true, 2)
	count := map[string]int{}
	for _, v := range out {
		count[v]++
	}
	for i := 0; i < total; i++ {
		if c := count[strconv.Itoa(i)]; c != 1 {
			t.Fatalf("input record %d is in the output %d times (output %d records)", i, c, len(out))
		}
	}
	if len(out) != total {
		t.Fatalf("output has %d records, want %d", len(out), total)
	}
	// The dead copier's open transaction was aborted, not lost: its
	// records are in the log, visible to read_uncommitted only.
	if all := consumeUntilSentinel(t, addr, "out", false, 2); len(all) <= total {
		t.Fatalf("read_uncommitted read %d records, want the aborted ones beyond %d", len(all), total)
	}
}
