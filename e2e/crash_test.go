package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCrashKeepsAcknowledgedRecords kills a broker with SIGKILL in the middle
// of an acks=all produce loop, restarts it, and checks that every
// acknowledged record is readable and that every batch on disk is whole and
// passes its CRC. Then it appends garbage to the active segments (a torn
// write), restarts again and checks the same.
//
// It runs with the four ways acks=all appends are made durable: the
// journal holding the records, segments written once behind it (the
// default: the journal replays what the segments lack); segments written
// once, their rounds' ends in the journal (log.io.journal.ends: recovery
// trusts the durable ends the journal names); without the journal, segments zero-filled ahead of the
// appends with shared device flushes; and without it, written once into
// unwritten extents with shared syncfs flushes and private index mappings,
// whose index entries a SIGKILL loses back to the last write-back.
func TestCrashKeepsAcknowledgedRecords(t *testing.T) {
	for _, c := range durabilityModes {
		t.Run(c.name, func(t *testing.T) {
			crashKeepsAcknowledgedRecords(t, "log.segment.bytes=1048576\n"+c.props)
		})
	}
}

// durabilityModes are the broker's ways of making acks=all appends
// durable, as properties.
var durabilityModes = []struct{ name, props string }{
	{"journal-records", ""},
	{"journal-ends", "log.io.journal.ends=true\n"},
	{"no-journal-zero-fill", "log.io.journal.bytes=0\nlog.io.zero.fill=true\n"},
	{"no-journal-write-once", "log.io.journal.bytes=0\nlog.io.zero.fill=false\n"},
}

func crashKeepsAcknowledgedRecords(t *testing.T, props string) {
	b := startBroker(t, "", "--config", writeProps(t, props))
	ctx := testCtx(t, 5*time.Minute)
	const topic, partitions = "crash", 4
	if resp, err := b.admin().CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(3*time.Second),
		kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
	)
	produceCtx, stopProducing := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // the produce loop: bounded by count and by stopProducing
		defer close(done)
		var wg sync.WaitGroup
		for i := 0; i < 2_000_000 && produceCtx.Err() == nil; i++ {
			v := fmt.Sprintf("rec-%09d-%s", i, string(value(i%7, i)[:64]))
			wg.Add(1)
			cl.Produce(produceCtx, &kgo.Record{Key: []byte(fmt.Sprint(i % 97)), Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err == nil {
					mu.Lock()
					acked[string(r.Value)] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}()
	// Kill once a good number of records are acknowledged.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 30_000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d records acknowledged in 2 minutes\n%s", n, b.logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.kill()
	stopProducing()
	mu.Lock()
	t.Logf("killed the broker with %d records acknowledged", len(acked))
	mu.Unlock()

	// The idempotent producer (franz-go's default) keeps the batches that
	// were in flight at the kill and retries them until the broker is back,
	// so restart before waiting for the produce loop; records acknowledged
	// after the restart are checked too.
	b.start()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("produce callbacks still pending 2 minutes after the restart")
	}
	cl.Close()
	mu.Lock()
	ackedCopy := acked
	mu.Unlock()
	checkAllPresent(ctx, t, b, topic, ackedCopy)
	b.stop()
	checkSegments(t, b.dataDir, topic, partitions)

	// A torn tail: garbage after the last batch of every partition's newest segment.
	r := rand.New(rand.NewPCG(7, 7))
	for p := 0; p < partitions; p++ {
		logs, _ := filepath.Glob(filepath.Join(b.dataDir, fmt.Sprintf("%s-%d", topic, p), "*.log"))
		sort.Strings(logs)
		f, err := os.OpenFile(logs[len(logs)-1], os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		junk := make([]byte, 1+r.IntN(300))
		for i := range junk {
			junk[i] = byte(r.Uint32())
		}
		if _, err := f.Write(junk); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	b.start()
	checkAllPresent(ctx, t, b, topic, ackedCopy)
	b.stop()
	checkSegments(t, b.dataDir, topic, partitions)
}

// checkAllPresent consumes the topic to its end and requires every acked value.
func checkAllPresent(ctx context.Context, t *testing.T, b *broker, topic string, acked map[string]bool) {
	t.Helper()
	ends, err := b.admin().ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			remaining[o.Partition] = o.Offset
		}
	})
	cl := b.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := make(map[string]bool, len(acked))
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out consuming; partitions not finished: %v", remaining)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(rec *kgo.Record) {
			seen[string(rec.Value)] = true
			if end, ok := remaining[rec.Partition]; ok && rec.Offset+1 >= end {
				delete(remaining, rec.Partition)
			}
		})
	}
	missing := 0
	for v := range acked {
		if !seen[v] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged records are missing after the crash", missing, len(acked))
	}
}

// checkSegments walks every segment file on disk like a naive reader: every
// batch whole, CRC valid, offsets increasing.
func checkSegments(t *testing.T, dataDir, topic string, partitions int) {
	t.Helper()
	for p := 0; p < partitions; p++ {
		logs, _ := filepath.Glob(filepath.Join(dataDir, fmt.Sprintf("%s-%d", topic, p), "*.log"))
		sort.Strings(logs)
		next := int64(-1)
		for _, path := range logs {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for pos := 0; pos < len(data); {
				batch, _, h, err := record.Next(data[pos:])
				if err != nil {
					t.Fatalf("%s at %d: %v", path, pos, err)
				}
				if !record.CheckCRC(batch) {
					t.Fatalf("%s at %d: bad CRC served on disk after recovery", path, pos)
				}
				if h.BaseOffset <= next {
					t.Fatalf("%s at %d: offset %d after %d", path, pos, h.BaseOffset, next)
				}
				next = h.LastOffset()
				pos += len(batch)
			}
		}
	}
}
