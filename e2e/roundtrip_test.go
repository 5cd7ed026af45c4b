package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/stratalog/strata/partitioner"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// roundTripRecords per codec: 20 MiB of 1 KiB values, thousands of
	// batches over 6 partitions and 1000 keys (100,000 took ~4 of the
	// package's 15 minutes under -race on 2 cores for no other assertion).
	roundTripRecords = 20_000
	roundTripKeys    = 1000
	valueBytes       = 1024
)

// value returns a deterministic 1 KiB value for (key, seq): the first 12
// bytes say which record it is, the rest is seeded noise so compression has
// honest work to do (eight bytes per draw: the generator is the test's own
// hot loop, run again for every record consumed).
func value(key, seq int) []byte {
	v := make([]byte, valueBytes)
	binary.BigEndian.PutUint32(v[0:], uint32(key))
	binary.BigEndian.PutUint64(v[4:], uint64(seq))
	r := rand.NewPCG(uint64(key), uint64(seq))
	var w [8]byte
	for i := 12; i < len(v); i += 8 {
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(v[i:], w[:])
	}
	return v
}

// TestFranzGoRoundTripEveryCodec produces 20,000 keyed 1 KiB records with
// acks=all for each codec and consumes them back: every record exactly once,
// in order per key, on the partition Kafka's murmur2 partitioner picks.
func TestFranzGoRoundTripEveryCodec(t *testing.T) {
	b := startBroker(t, "")
	ctx := testCtx(t, 10*time.Minute)
	adm := b.admin()
	const partitions = 6
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "roundtrip-" + c.name
			resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
			if err != nil || resp.Err != nil {
				t.Fatalf("create topic: %v %v", err, resp.Err)
			}
			produceKeyed(ctx, t, b, topic, c.codec)
			consumeKeyed(ctx, t, b, topic, partitions)
		})
	}
}

func produceKeyed(ctx context.Context, t *testing.T, b *broker, topic string, codec kgo.CompressionCodec) {
	t.Helper()
	cl := b.client(
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		acked    atomic.Int64
	)
	seqs := make([]int, roundTripKeys)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < roundTripRecords; i++ {
		k := r.IntN(roundTripKeys)
		rec := &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", k)), Value: value(k, seqs[k])}
		seqs[k]++
		wg.Add(1)
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				errOnce.Do(func() { firstErr = err })
				return
			}
			acked.Add(1)
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce: %v (acked %d)", firstErr, acked.Load())
	}
	if acked.Load() != roundTripRecords {
		t.Fatalf("acked %d of %d", acked.Load(), roundTripRecords)
	}
}

func consumeKeyed(ctx context.Context, t *testing.T, b *broker, topic string, partitions int32) {
	t.Helper()
	cl := b.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	next := make(map[string]int, roundTripKeys)
	total := 0
	for total < roundTripRecords {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d before the deadline", total, roundTripRecords)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", tp, p, err) })
		fs.EachRecord(func(rec *kgo.Record) {
			total++
			key := string(rec.Key)
			if want := partitioner.KeyPartition(rec.Key, partitions); rec.Partition != want {
				t.Fatalf("key %s on partition %d, Kafka's partitioner says %d", key, rec.Partition, want)
			}
			digits, ok := strings.CutPrefix(key, "key-")
			k, err := strconv.Atoi(digits)
			if !ok || err != nil {
				t.Fatalf("bad key %q", key)
			}
			seq := next[key]
			if string(rec.Value) != string(value(k, seq)) {
				t.Fatalf("key %s: record at offset %d is not seq %d (out of order, duplicated or corrupt)", key, rec.Offset, seq)
			}
			next[key] = seq + 1
		})
	}
	if total != roundTripRecords {
		t.Fatalf("consumed %d records, want %d", total, roundTripRecords)
	}
}

// TestListOffsetsByTimestampAndDeleteRecords checks ListOffsets by time
// through the time index and that DeleteRecords moves the start offset
// without renumbering what is left.
func TestListOffsetsByTimestampAndDeleteRecords(t *testing.T) {
	// Small segments and a dense index so the lookup crosses segments and index entries.
	b := startBroker(t, "", "--config", writeProps(t, "log.segment.bytes=65536\nlog.index.interval.bytes=1024\n"))
	ctx := testCtx(t, 2*time.Minute)
	adm := b.admin()
	const topic = "times"
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	cl := b.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	base := time.UnixMilli(1_700_000_000_000)
	const n = 1000
	for i := 0; i < n; i++ {
		rec := &kgo.Record{Value: value(0, i), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, probe := range []struct {
		ms   int64
		want int64
	}{
		{base.UnixMilli() - 1, 0},
		{base.UnixMilli(), 0},
		{base.Add(500 * time.Second).UnixMilli(), 500},
		{base.Add(500*time.Second + time.Millisecond).UnixMilli(), 501},
		{base.Add(999 * time.Second).UnixMilli(), 999},
	} {
		offs, err := adm.ListOffsetsAfterMilli(ctx, probe.ms, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offs.Lookup(topic, 0)
		if !ok || o.Err != nil || o.Offset != probe.want {
			t.Fatalf("offset after %d: %+v, want %d", probe.ms, o, probe.want)
		}
	}
	// Past the last record: Kafka answers -1; kadm maps that to the end offset.
	offs, err := adm.ListOffsetsAfterMilli(ctx, base.Add(2000*time.Second).UnixMilli(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup(topic, 0); o.Err != nil || (o.Offset != n && o.Offset != -1) {
		t.Fatalf("offset after the end: %+v", o)
	}

	const cut = 600
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 0, At: cut})
	dres, err := adm.DeleteRecords(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := dres.Lookup(topic, 0); !ok || r.Err != nil || r.LowWatermark != cut {
		t.Fatalf("delete records: %+v", r)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Offset != cut {
		t.Fatalf("start offset after delete = %d, want %d", o.Offset, cut)
	}
	// The survivors keep their offsets, also across a restart.
	b.restart()
	consumer := b.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := 0
	for seen < n-cut {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", seen, n-cut)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		fs.EachRecord(func(rec *kgo.Record) {
			if want := int64(cut + seen); rec.Offset != want || string(rec.Value) != string(value(0, int(want))) {
				t.Fatalf("record at offset %d, want %d with its original value", rec.Offset, want)
			}
			seen++
		})
	}
}

func writeProps(t *testing.T, body string) string {
	t.Helper()
	path := t.TempDir() + "/server.properties"
	if err := writeFile(path, body); err != nil {
		t.Fatal(err)
	}
	return path
}
