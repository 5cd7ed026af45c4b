package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// prodTopic creates a topic directly in the engine.
func prodTopic(t *testing.T, eng *engine.Engine, name string, partitions int32, configs map[string]string) *engine.Topic {
	t.Helper()
	tp, err := eng.CreateTopic(name, partitions, configs)
	if err != nil {
		t.Fatalf("CreateTopic %s: %v", name, err)
	}
	return tp
}

// prodClient is a franz-go client without idempotence (InitProducerID is
// not served yet), plus opts.
func prodClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, addr, append([]kgo.Opt{kgo.DisableIdempotentWrite()}, opts...)...)
}

// prodBatch builds one batch of n records (values "<prefix>-<i>") with
// record.Builder, as a producer would send it.
func prodBatch(t *testing.T, n int, codec record.Codec, prefix string) []byte {
	t.Helper()
	var b record.Builder
	ts := time.Now().UnixMilli()
	b.Reset(codec, ts)
	for i := 0; i < n; i++ {
		b.Add(ts, nil, []byte(fmt.Sprintf("%s-%d", prefix, i)), nil)
	}
	batch, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

// prodRequest is a one-partition produce request at version v.
func prodRequest(v int16, acks int16, topic string, id [16]byte, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = v
	req.Acks = acks
	req.TimeoutMillis = int32(testTimeout / time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// prodRaw sends req on c and returns its only partition's answer.
func prodRaw(t *testing.T, c *rawConn, req *kmsg.ProduceRequest, corrID int32) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	var resp kmsg.ProduceResponse
	c.roundTrip(req, corrID, &resp)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce v%d: response shape %+v", req.Version, resp)
	}
	if req.Version >= produceFirstTopicIDVersion && resp.Topics[0].TopicID != req.Topics[0].TopicID {
		t.Fatalf("produce v%d: topic id not echoed", req.Version)
	}
	if req.Version < produceFirstTopicIDVersion && resp.Topics[0].Topic != req.Topics[0].Topic {
		t.Fatalf("produce v%d: topic %q not echoed", req.Version, resp.Topics[0].Topic)
	}
	return resp.Topics[0].Partitions[0]
}

// consumeAll reads want records from topic (all partitions) from the start,
// returning them in the order received.
func consumeAll(t *testing.T, addr, topic string, want int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr, append([]kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	ctx := testCtx(t)
	var got []*kgo.Record
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", len(got), want)
		}
		fs.EachError(func(tp string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", tp, p, err)
		})
		got = append(got, fs.Records()...)
	}
	if len(got) != want {
		t.Fatalf("consumed %d records, want %d", len(got), want)
	}
	return got
}

// checkInOrder asserts recs (one partition) are "<prefix>-<offset>" at
// offsets base, base+1, ...
func checkInOrder(t *testing.T, recs []*kgo.Record, prefix string, base int64) {
	t.Helper()
	for i, r := range recs {
		if want := fmt.Sprintf("%s-%d", prefix, base+int64(i)); string(r.Value) != want || r.Offset != base+int64(i) {
			t.Fatalf("record %d: offset %d value %q, want offset %d value %q", i, r.Offset, r.Value, base+int64(i), want)
		}
	}
}

func TestProduceAcks(t *testing.T) {
	addr, _, eng := startBroker(t)
	for _, tc := range []struct {
		name string
		acks kgo.Acks
	}{{"acks0", kgo.NoAck()}, {"acks1", kgo.LeaderAck()}, {"acksAll", kgo.AllISRAcks()}} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "produce-" + tc.name
			tp := prodTopic(t, eng, topic, 1, nil)
			cl := prodClient(t, addr, kgo.RequiredAcks(tc.acks), kgo.DefaultProduceTopic(topic))
			const n = 200
			ctx := testCtx(t)
			for i := 0; i < n; i++ {
				r := &kgo.Record{Value: []byte(fmt.Sprintf("v-%d", i))}
				res := cl.ProduceSync(ctx, r)
				if err := res.FirstErr(); err != nil {
					t.Fatalf("produce %d: %v", i, err)
				}
				if tc.acks != kgo.NoAck() && r.Offset != int64(i) {
					t.Fatalf("record %d got offset %d", i, r.Offset)
				}
			}
			if tc.acks == kgo.AllISRAcks() {
				// acks=all answered only once durable: the HW covers every record.
				if hw := tp.Partition(0).HighWatermark(); hw != n {
					t.Fatalf("high watermark %d after acks=all, want %d", hw, n)
				}
			}
			checkInOrder(t, consumeAll(t, addr, topic, n), "v", 0)
		})
	}
}

func TestProduceCompression(t *testing.T) {
	addr, _, eng := startBroker(t)
	for _, tc := range []struct {
		codec kgo.CompressionCodec
		want  record.Codec
	}{
		{kgo.NoCompression(), record.CodecNone},
		{kgo.GzipCompression(), record.CodecGzip},
		{kgo.SnappyCompression(), record.CodecSnappy},
		{kgo.Lz4Compression(), record.CodecLZ4},
		{kgo.ZstdCompression(), record.CodecZstd},
	} {
		t.Run(tc.want.String(), func(t *testing.T) {
			topic := "compressed-" + tc.want.String()
			tp := prodTopic(t, eng, topic, 1, nil)
			cl := prodClient(t, addr, kgo.ProducerBatchCompression(tc.codec), kgo.DefaultProduceTopic(topic),
				kgo.ProducerLinger(50*time.Millisecond))
			const n = 300
			recs := make([]*kgo.Record, n)
			for i := range recs {
				// Compressible values, so codecs do not fall back to none.
				recs[i] = &kgo.Record{Value: []byte(fmt.Sprintf("c-%d", i) + string(bytes.Repeat([]byte("z"), 200)))}
			}
			if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			// The batch is stored as sent: its attributes keep the codec.
			rr, err := tp.Partition(0).Read(0, 1<<20, true)
			if err != nil || len(rr.Chunks) == 0 {
				t.Fatalf("read back: %v, %d chunks", err, len(rr.Chunks))
			}
			head := make([]byte, record.HeaderSize)
			if _, err := rr.Chunks[0].File.ReadAt(head, rr.Chunks[0].Pos); err != nil {
				t.Fatal(err)
			}
			rr.Release()
			h, err := record.ParseHeader(head)
			if err != nil {
				t.Fatal(err)
			}
			if h.Codec() != tc.want {
				t.Fatalf("stored batch codec %v, want %v", h.Codec(), tc.want)
			}
			got := consumeAll(t, addr, topic, n)
			for i, r := range got {
				if !bytes.Equal(r.Value, recs[i].Value) || r.Offset != int64(i) {
					t.Fatalf("record %d: offset %d value %.10q", i, r.Offset, r.Value)
				}
			}
		})
	}
}

// TestProduceEveryVersion produces one batch at each version v3..v13 on a
// raw socket; offsets must follow each other.
func TestProduceEveryVersion(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "versions", 1, nil)
	c := dialRaw(t, addr)
	next := int64(0)
	for v := int16(produceFirstBatchVersion); v <= produceMaxVersion; v++ {
		for _, acks := range []int16{1, -1} {
			p := prodRaw(t, c, prodRequest(v, acks, tp.Name(), tp.ID(), 0, prodBatch(t, 3, record.CodecNone, "x")), int32(v))
			if p.ErrorCode != 0 || p.BaseOffset != next {
				t.Fatalf("v%d acks=%d: error %d base offset %d, want 0, %d", v, acks, p.ErrorCode, p.BaseOffset, next)
			}
			if p.LogAppendTime != -1 {
				t.Fatalf("v%d: log append time %d, want -1 (CreateTime topic)", v, p.LogAppendTime)
			}
			if v >= 5 && p.LogStartOffset != 0 {
				t.Fatalf("v%d: log start offset %d", v, p.LogStartOffset)
			}
			next += 3
		}
	}
	if hw := tp.Partition(0).HighWatermark(); hw != next {
		t.Fatalf("high watermark %d, want %d", hw, next)
	}
}

func TestProduceCorruptBatch(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "crc", 1, nil)
	c := dialRaw(t, addr)
	batch := prodBatch(t, 5, record.CodecNone, "bad")
	batch[len(batch)-1] ^= 0xff // a value byte, covered by the CRC
	p := prodRaw(t, c, prodRequest(9, -1, "crc", tp.ID(), 0, batch), 1)
	if p.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("corrupt batch: error %d, want CORRUPT_MESSAGE", p.ErrorCode)
	}
	l := tp.Partition(0)
	if l.LogEndOffset() != 0 || l.HighWatermark() != 0 {
		t.Fatalf("log changed by a corrupt batch: end %d hw %d", l.LogEndOffset(), l.HighWatermark())
	}
	// The connection stays usable and the log takes the next good batch at 0.
	p = prodRaw(t, c, prodRequest(9, -1, "crc", tp.ID(), 0, prodBatch(t, 2, record.CodecNone, "good")), 2)
	if p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("good batch after a corrupt one: error %d base %d", p.ErrorCode, p.BaseOffset)
	}
}

// TestProduceLargeRequestCRC: a request frame of sumFramesFrom or more is
// checksummed block by block as it is read, and the batches' CRCs combine
// those sums (crcsum); every batch is still checked: a byte flipped deep
// inside one batch (in whole summed blocks, away from its ends) is
// CORRUPT_MESSAGE for that partition alone, and the other batches land
// intact.
func TestProduceLargeRequestCRC(t *testing.T) {
	addr, _, eng := startBroker(t)
	const parts, perBatch = 4, 100
	tp := prodTopic(t, eng, "bigcrc", parts, nil)
	c := dialRaw(t, addr)
	value := func(p, i int) []byte {
		return fmt.Appendf(bytes.Repeat([]byte{byte('a' + p)}, 1000), "-%d-%d", p, i)
	}
	request := func(corrupt int) *kmsg.ProduceRequest {
		req := prodRequest(9, -1, "bigcrc", tp.ID(), 0, nil)
		req.Topics[0].Partitions = nil
		size := 0
		for p := range parts {
			var b record.Builder
			ts := time.Now().UnixMilli()
			b.Reset(record.CodecNone, ts)
			for i := range perBatch {
				b.Add(ts, nil, value(p, i), nil)
			}
			batch, err := b.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			if p == corrupt {
				batch[len(batch)/2] ^= 0x01
			}
			size += len(batch)
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = int32(p), batch
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
		}
		if size < sumFramesFrom {
			t.Fatalf("request of %d bytes, not summed (from %d)", size, sumFramesFrom)
		}
		return req
	}
	var resp kmsg.ProduceResponse
	c.roundTrip(request(2), 1, &resp)
	for _, p := range resp.Topics[0].Partitions {
		want := int16(0)
		if p.Partition == 2 {
			want = kerr.CorruptMessage.Code
		}
		if p.ErrorCode != want {
			t.Fatalf("partition %d: error %d, want %d", p.Partition, p.ErrorCode, want)
		}
	}
	if end := tp.Partition(2).LogEndOffset(); end != 0 {
		t.Fatalf("the corrupt batch's partition ends at %d", end)
	}
	resp = kmsg.ProduceResponse{}
	c.roundTrip(request(-1), 2, &resp)
	for _, p := range resp.Topics[0].Partitions {
		if want := int64(perBatch); p.Partition == 2 {
			want = 0
			if p.ErrorCode != 0 || p.BaseOffset != want {
				t.Fatalf("partition %d: error %d base %d, want 0, %d", p.Partition, p.ErrorCode, p.BaseOffset, want)
			}
		} else if p.ErrorCode != 0 || p.BaseOffset != want {
			t.Fatalf("partition %d: error %d base %d, want 0, %d", p.Partition, p.ErrorCode, p.BaseOffset, want)
		}
	}
	got := consumeAll(t, addr, "bigcrc", (2*parts-1)*perBatch)
	for _, r := range got {
		i := int(r.Offset % perBatch)
		if !bytes.Equal(r.Value, value(int(r.Partition), i)) {
			t.Fatalf("partition %d offset %d: value %.20q", r.Partition, r.Offset, r.Value)
		}
	}
}

func TestProduceOldVersionsUnsupported(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "old", 1, nil)
	c := dialRaw(t, addr)
	for v := int16(0); v < produceFirstBatchVersion; v++ {
		p := prodRaw(t, c, prodRequest(v, 1, "old", [16]byte{}, 0, []byte("message set bytes")), int32(100+v))
		if p.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("produce v%d: error %d, want UNSUPPORTED_VERSION", v, p.ErrorCode)
		}
	}
	if end := tp.Partition(0).LogEndOffset(); end != 0 {
		t.Fatalf("log end %d after unsupported produces", end)
	}
}

// TestProduceErrors covers the per-partition and per-request refusals.
func TestProduceErrors(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "errs", 2, nil)
	c := dialRaw(t, addr)
	good := func() []byte { return prodBatch(t, 1, record.CodecNone, "g") }
	two := append(good(), good()...)
	zstd := prodBatch(t, 10, record.CodecZstd, "zz")
	txn := kmsg.StringPtr("txn-1")

	for i, tc := range []struct {
		name string
		req  *kmsg.ProduceRequest
		want int16
	}{
		{"unknown topic", prodRequest(9, 1, "nope", [16]byte{}, 0, good()), kerr.UnknownTopicOrPartition.Code},
		{"unknown partition", prodRequest(9, 1, "errs", [16]byte{}, 7, good()), kerr.UnknownTopicOrPartition.Code},
		{"negative partition", prodRequest(9, 1, "errs", [16]byte{}, -1, good()), kerr.UnknownTopicOrPartition.Code},
		{"unknown topic id", prodRequest(13, 1, "", [16]byte{9, 9, 9}, 0, good()), kerr.UnknownTopicID.Code},
		{"null records", prodRequest(9, 1, "errs", [16]byte{}, 0, nil), kerr.InvalidRecord.Code},
		{"empty records", prodRequest(9, 1, "errs", [16]byte{}, 0, []byte{}), kerr.InvalidRecord.Code},
		{"two batches", prodRequest(9, 1, "errs", [16]byte{}, 0, two), kerr.InvalidRecord.Code},
		{"zstd before v7", prodRequest(6, 1, "errs", [16]byte{}, 0, zstd), kerr.UnsupportedCompressionType.Code},
		{"garbage", prodRequest(9, 1, "errs", [16]byte{}, 0, []byte("not a record batch at all, just text")), -2},
		{"invalid acks", prodRequest(9, 2, "errs", [16]byte{}, 0, good()), kerr.InvalidRequiredAcks.Code},
		{"internal topic", prodRequest(9, 1, "__consumer_offsets", [16]byte{}, 0, good()), kerr.InvalidTopicException.Code},
		{"transactional batch without a producer id", func() *kmsg.ProduceRequest {
			r := prodRequest(9, 1, "errs", [16]byte{}, 0, txnTestBatch(t, -1, -1, -1, true, "t", 1))
			r.TransactionID = txn
			return r
		}(), kerr.InvalidRecord.Code},
	} {
		p := prodRaw(t, c, tc.req, int32(i+1))
		if tc.want == -2 { // any refusal
			if p.ErrorCode == 0 {
				t.Errorf("%s: accepted", tc.name)
			}
		} else if p.ErrorCode != tc.want {
			t.Errorf("%s: error %d, want %d", tc.name, p.ErrorCode, tc.want)
		}
		if p.ErrorCode != 0 && tc.req.Version >= 8 && tc.want != kerr.UnknownTopicOrPartition.Code &&
			tc.want != kerr.UnknownTopicID.Code && (p.ErrorMessage == nil || *p.ErrorMessage == "") {
			t.Errorf("%s: no error message", tc.name)
		}
	}
	for p := int32(0); p < 2; p++ {
		if end := tp.Partition(p).LogEndOffset(); end != 0 {
			t.Fatalf("partition %d: log end %d after refused produces", p, end)
		}
	}
}

// TestProduceAcks0ErrorClosesConnection: an acks=0 producer hears of a
// failure only by losing its connection, as with Kafka.
func TestProduceAcks0ErrorClosesConnection(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "noack", 1, nil)
	c := dialRaw(t, addr)
	// A good acks=0 produce gets no response; the following request's answer
	// is the next frame on the wire.
	c.writeFrame(encodeRequest(prodRequest(9, 0, "noack", tp.ID(), 0, prodBatch(t, 4, record.CodecNone, "n")), 1, "raw"))
	p := prodRaw(t, c, prodRequest(9, 1, "noack", tp.ID(), 0, prodBatch(t, 1, record.CodecNone, "m")), 2)
	if p.ErrorCode != 0 || p.BaseOffset != 4 {
		t.Fatalf("after acks=0 produce: error %d base %d, want base 4", p.ErrorCode, p.BaseOffset)
	}
	c.writeFrame(encodeRequest(prodRequest(9, 0, "missing-topic", [16]byte{}, 0, prodBatch(t, 1, record.CodecNone, "x")), 3, "raw"))
	c.expectClosed()
}

// TestProduceAcksAllConcurrent runs many acks=all producers at once on one
// connection each, so durability callbacks, responses and the timers race.
func TestProduceAcksAllConcurrent(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "many", 4, nil)
	cl := prodClient(t, addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("many"),
		kgo.MaxBufferedRecords(10000))
	const n = 2000
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("m-%d", i))}, func(r *kgo.Record, err error) { errs <- err })
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	total := int64(0)
	for p := int32(0); p < 4; p++ {
		total += tp.Partition(p).HighWatermark()
	}
	if total != n {
		t.Fatalf("high watermarks sum to %d, want %d", total, n)
	}
}

// TestProduceAcksAllZeroTimeout races durability against an immediate
// timeout: every request gets exactly one answer, either success or
// REQUEST_TIMED_OUT, and the records are appended either way.
func TestProduceAcksAllZeroTimeout(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "t0", 1, nil)
	c := dialRaw(t, addr)
	const n = 50
	for i := 0; i < n; i++ {
		req := prodRequest(9, -1, "t0", tp.ID(), 0, prodBatch(t, 1, record.CodecNone, "t"))
		req.TimeoutMillis = 0
		c.writeFrame(encodeRequest(req, int32(i), "raw"))
	}
	for i := 0; i < n; i++ {
		b, err := c.readFrame()
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		var resp kmsg.ProduceResponse
		resp.Version = 9
		decodeResponse(t, b, int32(i), &resp)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 && p.ErrorCode != kerr.RequestTimedOut.Code || p.BaseOffset != int64(i) {
			t.Fatalf("response %d: error %d base %d", i, p.ErrorCode, p.BaseOffset)
		}
	}
	if end := tp.Partition(0).LogEndOffset(); end != n {
		t.Fatalf("log end %d, want %d", end, n)
	}
}

// BenchmarkProduceHandler runs handleProduce in process (acks=1, one
// partition, one 10-record batch; no socket, the response encoded and
// discarded) to show what a request costs the handler, allocations
// included: without a transactional id ("plain"), with one but no
// transactional batch ("txn-id-plain-batch": still the synchronous path),
// and a transactional batch of an open transaction ("txn-open": the
// verification path's lanes and guard, nothing to ask).
func BenchmarkProduceHandler(b *testing.B) {
	for _, tc := range []struct {
		name     string
		txnID    *string
		pid      int64
		txnBatch bool
	}{
		{"plain", nil, -1, false},
		{"txn-id-plain-batch", kmsg.StringPtr("bench"), -1, false},
		{"txn-open", kmsg.StringPtr("bench"), 7, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			logger := slog.New(slog.NewTextHandler(io.Discard, nil))
			eng, err := engine.Open(engine.Options{Dir: b.TempDir(), Log: engine.DefaultLogConfig(), Logger: logger})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			s := New(Config{NodeID: 0, ClusterID: "bench", Logger: logger, LogDefaults: engine.DefaultLogConfig(),
				Txn: TxnConfig{PartitionVerification: true, TransactionVersion: 2}}, eng)
			defer s.Close()
			if _, err := eng.CreateTopic("bench", 1, nil); err != nil {
				b.Fatal(err)
			}
			var rb record.Builder
			rb.Reset(record.CodecNone, 1000)
			if tc.pid >= 0 {
				rb.SetProducer(tc.pid, 0, 0)
			}
			for i := 0; i < 10; i++ {
				rb.Add(1000, nil, bytes.Repeat([]byte("v"), 100), nil)
			}
			batch, err := rb.AppendTo(nil)
			if err != nil {
				b.Fatal(err)
			}
			const offsetBaseSequence = 53
			patch := func(seq int32) {
				attrs := binary.BigEndian.Uint16(batch[record.OffsetAttrs:])
				if tc.txnBatch {
					attrs |= 0x10
				}
				binary.BigEndian.PutUint16(batch[record.OffsetAttrs:], attrs)
				if tc.pid >= 0 {
					binary.BigEndian.PutUint32(batch[offsetBaseSequence:], uint32(seq))
				}
				binary.BigEndian.PutUint32(batch[record.OffsetCRC:], crc32.Checksum(batch[record.OffsetAttrs:], crc32.MakeTable(crc32.Castagnoli)))
			}
			req := prodRequest(9, 1, "bench", [16]byte{}, 0, batch)
			req.TransactionID = tc.txnID
			r := &discardReply{}
			run := func() {
				rc := reqCtx{reply: r, key: 0, version: 9, req: req, log: logger}
				handleProduce(s, &rc)
			}
			seq := int32(0)
			patch(seq)
			if tc.txnBatch { // open the transaction first (the unverified engine path)
				if _, err := eng.Topic("bench").Partition(0).Append(batch, 0); err != nil {
					b.Fatal(err)
				}
				seq += 10
				patch(seq)
			}
			before := r.n
			run()
			if r.n == before {
				b.Fatal("no response")
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				seq += 10
				patch(seq)
				run()
			}
			if got := eng.Topic("bench").Partition(0).LogEndOffset(); got < int64(b.N)*10 {
				b.Fatalf("log end %d after %d requests: appends failed", got, b.N)
			}
		})
	}
}

// holdJournal: a request's appends share one journal group when it touches
// several partitions, whatever its size.
func TestHoldJournal(t *testing.T) {
	req := func(sizes ...[]int) *kmsg.ProduceRequest {
		r := kmsg.NewPtrProduceRequest()
		for _, topic := range sizes {
			rt := kmsg.NewProduceRequestTopic()
			for _, n := range topic {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = make([]byte, n)
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		req  *kmsg.ProduceRequest
		want bool
	}{
		{"one partition", req([]int{1000}), false},
		{"two partitions", req([]int{1000, 1000}), true},
		{"two topics of one partition", req([]int{1000}, []int{1000}), true},
		{"8 MiB over two partitions", req([]int{4 << 20, 4 << 20}), true},
		{"no partition", req([]int{}), false},
	} {
		if got := holdJournal(tc.req); got != tc.want {
			t.Errorf("%s: holdJournal = %v, want %v", tc.name, got, tc.want)
		}
	}
}
