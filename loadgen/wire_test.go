package loadgen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/stratalog/strata/partitioner"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/batcher"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testBatches returns n encoded batches for distinct partitions.
func testBatches(t testing.TB, acc *batcher.Accumulator, n int) []*batcher.Batch {
	t.Helper()
	now := time.Unix(1700000000, 0)
	for p := range n {
		// Keyed so each batch lands on a known partition: find keys by trial.
		for i := 0; ; i++ {
			key := fmt.Appendf(nil, "k%d", i)
			if partitioner.KeyPartition(key, acc.Partitions()) == int32(p) {
				for j := range 3 {
					acc.Append(now, now.UnixMilli(), key, bytes.Repeat([]byte{byte(p)}, 100+j), int64(j))
				}
				break
			}
		}
	}
	acc.Flush()
	out, err := acc.Drain(now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != n {
		t.Fatalf("%d batches, want %d", len(out), n)
	}
	return out
}

// decodeFrame checks a produce frame's header and decodes its body with kmsg.
func decodeFrame(t *testing.T, frame []byte) (int16, int32, *kmsg.ProduceRequest) {
	t.Helper()
	if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
		t.Fatalf("size field %d, frame %d bytes", binary.BigEndian.Uint32(frame), len(frame))
	}
	b := frame[4:]
	key, version := int16(binary.BigEndian.Uint16(b)), int16(binary.BigEndian.Uint16(b[2:]))
	corr := int32(binary.BigEndian.Uint32(b[4:]))
	idLen := int(binary.BigEndian.Uint16(b[8:]))
	if key != 0 || string(b[10:10+idLen]) != loadgenClientID {
		t.Fatalf("header key %d client id %q", key, b[10:10+idLen])
	}
	body := b[10+idLen:]
	if version >= produceFlexible {
		var err error
		if body, err = skipTags(body); err != nil {
			t.Fatal(err)
		}
	}
	req := &kmsg.ProduceRequest{Version: version}
	if err := req.ReadFrom(body); err != nil {
		t.Fatalf("kmsg cannot decode the v%d body: %v", version, err)
	}
	return version, corr, req
}

func TestProduceFrameDecodesWithKmsg(t *testing.T) {
	acc, err := batcher.NewAccumulator(batcher.Config{Partitions: 8, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	batches := testBatches(t, acc, 5)
	for _, version := range []int16{3, 7, 8, 9, 11, 12} {
		var req produceReq
		req.batches = batches
		for range 2 { // reuse the request's buffers
			req.appendFrame(version, 77, -1, "the-topic")
		}
		var frame []byte
		for _, b := range req.bufs {
			frame = append(frame, b...)
		}
		// The batch bytes are not copied: they are iovecs of their own.
		for i, b := range batches {
			if &req.bufs[2*i+1][0] != &b.Bytes[0] {
				t.Fatalf("v%d: batch %d was copied into the frame", version, i)
			}
		}
		v, corr, got := decodeFrame(t, frame)
		if v != version || corr != 77 || got.Acks != -1 || got.TimeoutMillis != produceTimeoutMs || got.TransactionID != nil {
			t.Fatalf("v%d: decoded version %d corr %d acks %d timeout %d", version, v, corr, got.Acks, got.TimeoutMillis)
		}
		if len(got.Topics) != 1 || got.Topics[0].Topic != "the-topic" || len(got.Topics[0].Partitions) != len(batches) {
			t.Fatalf("v%d: topics %+v", version, got.Topics)
		}
		for i, p := range got.Topics[0].Partitions {
			if p.Partition != batches[i].Partition || !bytes.Equal(p.Records, batches[i].Bytes) {
				t.Fatalf("v%d partition %d: records differ", version, i)
			}
			if _, err := record.Validate(p.Records); err != nil {
				t.Fatalf("v%d: batch in frame: %v", version, err)
			}
		}
		if req.records != 15 {
			t.Fatalf("request counts %d records, want 15", req.records)
		}
	}
}

// encodeResponse frames a produce response as a broker would.
func encodeResponse(corr int32, resp *kmsg.ProduceResponse) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if resp.Version >= produceFlexible {
		b = append(b, 0)
	}
	return resp.AppendTo(b)
}

func TestParseProduceResponse(t *testing.T) {
	for _, version := range []int16{3, 8, 9, 12} {
		resp := kmsg.NewProduceResponse()
		resp.Version = version
		topic := kmsg.NewProduceResponseTopic()
		topic.Topic = "t"
		for p := range int32(3) {
			pr := kmsg.NewProduceResponseTopicPartition()
			pr.Partition = p
			if p == 1 {
				pr.ErrorCode = kerr.NotLeaderForPartition.Code
			}
			topic.Partitions = append(topic.Partitions, pr)
		}
		resp.Topics = append(resp.Topics, topic)
		frame := encodeResponse(9, &resp)

		var got kmsg.ProduceResponse
		if err := parseProduceResponse(frame, version, 9, &got); err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		req := &produceReq{batches: []*batcher.Batch{{Partition: 0}, {Partition: 1}, {Partition: 2}, {Partition: 5}}}
		errs := partitionErrors(req, &got, "t", nil)
		if errs[0] != nil || !errors.Is(errs[1], kerr.NotLeaderForPartition) || errs[2] != nil || !errors.Is(errs[3], errMissingPartition) {
			t.Fatalf("v%d: partition errors %v", version, errs)
		}
		if err := parseProduceResponse(frame, version, 10, &got); err == nil {
			t.Fatalf("v%d: wrong correlation id accepted", version)
		}
		for cut := range len(frame) {
			parseProduceResponse(frame[:cut], version, 9, &got) // must not panic
		}
	}
}

// FuzzParseProduceResponse feeds arbitrary frames to the response decoder:
// it must never panic, must reject a frame whose correlation id differs,
// and whatever it accepts must have the requested version.
func FuzzParseProduceResponse(f *testing.F) {
	for _, v := range []int16{3, 9} {
		resp := kmsg.NewProduceResponse()
		resp.Version = v
		topic := kmsg.NewProduceResponseTopic()
		topic.Topic = "t"
		topic.Partitions = append(topic.Partitions, kmsg.NewProduceResponseTopicPartition())
		resp.Topics = append(resp.Topics, topic)
		f.Add(encodeResponse(1, &resp), v)
	}
	f.Add([]byte{0, 0, 0, 1, 0xff, 0xff, 0xff}, int16(9))
	f.Fuzz(func(t *testing.T, frame []byte, version int16) {
		version = produceMinVersion + (version&0x7fff)%(produceMaxVersion-produceMinVersion+1)
		var resp kmsg.ProduceResponse
		err := parseProduceResponse(frame, version, 1, &resp)
		if err == nil {
			if resp.Version != version {
				t.Fatalf("decoded version %d, asked %d", resp.Version, version)
			}
			if len(frame) < 4 || binary.BigEndian.Uint32(frame) != 1 {
				t.Fatal("accepted a frame with another correlation id")
			}
			req := &produceReq{batches: []*batcher.Batch{{Partition: 0}}}
			if errs := partitionErrors(req, &resp, "t", nil); len(errs) != 1 {
				t.Fatalf("%d errors for one batch", len(errs))
			}
		}
	})
}

// fakeBroker answers produce requests on a loopback listener: it decodes
// every frame with kmsg, checks each batch's CRC, and answers in order,
// failing partition failPartition with NOT_LEADER. It can hold its answers
// until release is closed, to show requests pipelining.
type fakeBroker struct {
	ln            net.Listener
	failPartition int32
	release       chan struct{}
	mu            sync.Mutex
	corrs         []int32
	records       int
	wg            sync.WaitGroup
}

func newFakeBroker(t *testing.T, failPartition int32) *fakeBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBroker{ln: ln, failPartition: failPartition, release: make(chan struct{})}
	fb.wg.Add(1)
	go fb.serve(t)
	t.Cleanup(func() {
		ln.Close()
		select {
		case <-fb.release:
		default:
			close(fb.release)
		}
		fb.wg.Wait()
	})
	return fb
}

func (fb *fakeBroker) serve(t *testing.T) {
	defer fb.wg.Done()
	conn, err := fb.ln.Accept()
	if err != nil {
		return
	}
	defer conn.Close()
	out := make(chan []byte, 100)
	defer close(out)
	fb.wg.Add(1)
	go func() { // writes the responses, in order, once released
		defer fb.wg.Done()
		<-fb.release
		for b := range out {
			conn.Write(b)
		}
	}()
	for {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		frame := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
		copy(frame, size[:])
		if _, err := io.ReadFull(conn, frame[4:]); err != nil {
			return
		}
		version, corr, req := decodeFrame(t, frame)
		resp := kmsg.NewProduceResponse()
		resp.Version = version
		for _, rt := range req.Topics {
			topic := kmsg.NewProduceResponseTopic()
			topic.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				if !record.CheckCRC(rp.Records) {
					t.Errorf("bad CRC in partition %d", rp.Partition)
				}
				h, _ := record.ParseHeader(rp.Records)
				pr := kmsg.NewProduceResponseTopicPartition()
				pr.Partition = rp.Partition
				if rp.Partition == fb.failPartition {
					pr.ErrorCode = kerr.NotLeaderForPartition.Code
				}
				topic.Partitions = append(topic.Partitions, pr)
				fb.mu.Lock()
				fb.records += int(h.NumRecords)
				fb.mu.Unlock()
			}
			resp.Topics = append(resp.Topics, topic)
		}
		fb.mu.Lock()
		fb.corrs = append(fb.corrs, corr)
		fb.mu.Unlock()
		body := encodeResponse(corr, &resp)
		out <- append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
}

func (fb *fakeBroker) received() int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return len(fb.corrs)
}

func TestNativeConnPipelinesAndAccounts(t *testing.T) {
	fb := newFakeBroker(t, 3)
	cfg := DefaultConfig()
	cfg.MaxInflight = 3
	cfg.RecordBytes = 100
	st := newRunStats()
	env := &runEnv{cfg: &cfg, base: time.Now(), st: st}
	acc, err := batcher.NewAccumulator(batcher.Config{Partitions: 8, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rec := st.produce.add()
	c, err := dialNative(env, fb.ln.Addr().String(), 9, acc, rec)
	if err != nil {
		t.Fatal(err)
	}
	// Three requests go out before any response: the in-flight limit.
	for range 3 {
		req := c.takeReq()
		req.batches = append(req.batches, testBatches(t, acc, 4)...) // partitions 0..3
		c.send(req)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fb.received() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if fb.received() != 3 {
		t.Fatalf("broker received %d pipelined requests, want 3", fb.received())
	}
	select {
	case <-c.free:
		t.Fatal("a request slot was free with 3 in flight")
	default:
	}
	close(fb.release)
	req := c.takeReq() // frees once responses arrive
	req.batches = append(req.batches, testBatches(t, acc, 4)...)
	c.send(req)
	c.close(10 * time.Second)

	// 4 requests × 4 batches × 3 records; partition 3 fails each time.
	if a, f := st.acked.Load(), st.failed.Load(); a != 36 || f != 12 {
		t.Fatalf("acked %d failed %d, want 36 and 12", a, f)
	}
	if st.requests.Load() != 4 || st.batches.Load() != 16 {
		t.Fatalf("requests %d batches %d", st.requests.Load(), st.batches.Load())
	}
	if errs := st.errorList(); len(errs) != 1 || errs[0].Count != 12 {
		t.Fatalf("errors %+v", errs)
	}
	h := newHist()
	rec.collect(h)
	if h.TotalCount() != 36 {
		t.Fatalf("%d latencies recorded, want 36", h.TotalCount())
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	for i, corr := range fb.corrs {
		if corr != int32(i+1) {
			t.Fatalf("correlation ids %v", fb.corrs)
		}
	}
}

func TestNativeConnFailsInflightWhenBrokerDies(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	cfg := DefaultConfig()
	cfg.RecordBytes = 100
	st := newRunStats()
	env := &runEnv{cfg: &cfg, base: time.Now(), st: st}
	acc, _ := batcher.NewAccumulator(batcher.Config{Partitions: 4, Linger: time.Hour})
	c, err := dialNative(env, ln.Addr().String(), 3, acc, st.produce.add())
	if err != nil {
		t.Fatal(err)
	}
	req := c.takeReq()
	req.batches = append(req.batches, testBatches(t, acc, 2)...)
	c.send(req)
	if sc, ok := <-accepted; ok {
		sc.Close() // the broker goes away without answering
	}
	c.close(10 * time.Second)
	if st.failed.Load() != 6 || st.acked.Load() != 0 {
		t.Fatalf("failed %d acked %d, want 6 and 0", st.failed.Load(), st.acked.Load())
	}
	// A later send on the dead connection fails at once.
	req = c.takeReq()
	req.batches = append(req.batches, testBatches(t, acc, 1)...)
	c.send(req)
	if st.failed.Load() != 9 {
		t.Fatalf("failed %d after sending on a dead connection, want 9", st.failed.Load())
	}
}

// skipTags skips a request header's tagged-fields section: uvarint count,
// then count × (uvarint tag, uvarint size, size bytes).
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errors.New("loadgen: malformed tagged fields")
	}
	b = b[k:]
	for range n {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("loadgen: malformed tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("loadgen: malformed tag size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}
