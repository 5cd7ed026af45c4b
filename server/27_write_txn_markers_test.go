package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnTestBatch builds a batch of producer pid/epoch from sequence seq with
// values "<prefix>-<i>", transactional when txn is set.
func txnTestBatch(t *testing.T, pid int64, epoch int16, seq int32, txn bool, prefix string, n int) []byte {
	t.Helper()
	var b record.Builder
	ts := time.Now().UnixMilli()
	b.Reset(record.CodecNone, ts)
	b.SetProducer(pid, epoch, seq)
	if txn {
		b.SetTransactional()
	}
	for i := 0; i < n; i++ {
		b.Add(ts, []byte("k"), []byte(fmt.Sprintf("%s-%d", prefix, i)), nil)
	}
	out, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// txnProduce sends one batch through cl (acks=all) and returns its answer.
// The client picks the version (v13+ names the topic by id: eng has it).
// cl is a client or (in a cluster) the leader's *kgo.Broker.
func txnProduce(t *testing.T, cl kmsg.Requestor, eng *engine.Engine, topic string, batch []byte, txnID *string) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := prodRequest(9, -1, topic, eng.Topic(topic).ID(), 0, batch)
	req.TransactionID = txnID
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return resp.Topics[0].Partitions[0]
}

// writeMarker sends WriteTxnMarkers for one partition through cl (which
// routes it to the partition's leader) and returns its code.
func writeMarker(t *testing.T, cl *kgo.Client, version int16, topic string, partition int32, pid int64, epoch int16, coord int32, commit bool) int16 {
	t.Helper()
	req := markerRequest(version, topic, partition, pid, epoch, coord, commit)
	kresp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("WriteTxnMarkers: %v", err)
	}
	return markerCode(t, kresp, topic, partition, pid)
}

// writeMarkerRaw is writeMarker on a plain connection (no client-side
// routing: the broker answers for partitions it does not know).
func writeMarkerRaw(t *testing.T, c *rawConn, corrID int32, version int16, topic string, partition int32, pid int64, epoch int16, coord int32, commit bool) int16 {
	t.Helper()
	req := markerRequest(version, topic, partition, pid, epoch, coord, commit)
	var resp kmsg.WriteTxnMarkersResponse
	resp.Version = version
	c.roundTrip(req, corrID, &resp)
	return markerCode(t, &resp, topic, partition, pid)
}

func markerRequest(version int16, topic string, partition int32, pid int64, epoch int16, coord int32, commit bool) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = version
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed = pid, epoch, coord, commit
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{partition}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	return req
}

func markerCode(t *testing.T, kresp *kmsg.WriteTxnMarkersResponse, topic string, partition int32, pid int64) int16 {
	t.Helper()
	if len(kresp.Markers) != 1 || kresp.Markers[0].ProducerID != pid || len(kresp.Markers[0].Topics) != 1 ||
		kresp.Markers[0].Topics[0].Topic != topic || len(kresp.Markers[0].Topics[0].Partitions) != 1 ||
		kresp.Markers[0].Topics[0].Partitions[0].Partition != partition {
		t.Fatalf("WriteTxnMarkers response shape: %+v", kresp)
	}
	return kresp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

// lsoOf returns the read_committed and read_uncommitted latest offsets.
func lsoOf(t *testing.T, adm *kadm.Client, topic string) (committed, end int64) {
	t.Helper()
	c, err := adm.ListCommittedOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	e, err := adm.ListEndOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	co, _ := c.Lookup(topic, 0)
	eo, _ := e.Lookup(topic, 0)
	if co.Err != nil || eo.Err != nil {
		t.Fatalf("list offsets: %v %v", co.Err, eo.Err)
	}
	return co.Offset, eo.Offset
}

// fetchCommitted is a raw read_committed Fetch of partition 0 from offset.
func fetchCommitted(t *testing.T, cl kmsg.Requestor, eng *engine.Engine, topic string, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	req.IsolationLevel = 1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, eng.Topic(topic).ID()
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, offset, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch: error %d", p.ErrorCode)
	}
	return p
}

// valuesOf decodes the data records of a fetched partition, in order.
func valuesOf(t *testing.T, p kmsg.FetchResponseTopicPartition) (values []string, lastOffset int64) {
	t.Helper()
	lastOffset = -1
	for b := p.RecordBatches; len(b) > 0; {
		batch, rest, h, err := record.Next(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Control() {
			record.Iterate(batch, func(h *record.Header, r *record.Record) error {
				values = append(values, string(r.Value))
				return nil
			})
		}
		lastOffset, b = h.LastOffset(), rest
	}
	return values, lastOffset
}

// consumeValues consumes want records of topic from the start with cl's
// isolation level and returns their values.
func consumeValues(t *testing.T, addr, topic string, want int, level kgo.IsolationLevel) []string {
	t.Helper()
	recs := consumeAll(t, addr, topic, want, kgo.FetchIsolationLevel(level))
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

// txnLayout writes, on partition 0 of topic: p-0 p-1 (plain), a-0..a-2
// (producer 1000, transactional), q-0 (plain), b-0 b-1 (producer 2000,
// transactional): offsets 0-1, 2-4, 5, 6-7.
func txnLayout(t *testing.T, cl kmsg.Requestor, eng *engine.Engine, topic string) {
	t.Helper()
	txnID := kmsg.StringPtr("tx-a")
	for _, b := range []struct {
		batch []byte
		id    *string
		base  int64
	}{
		{txnTestBatch(t, -1, -1, -1, false, "p", 2), nil, 0},
		{txnTestBatch(t, 1000, 0, 0, true, "a", 3), txnID, 2},
		{txnTestBatch(t, -1, -1, -1, false, "q", 1), nil, 5},
		{txnTestBatch(t, 2000, 0, 0, true, "b", 2), kmsg.StringPtr("tx-b"), 6},
	} {
		if p := txnProduce(t, cl, eng, topic, b.batch, b.id); p.ErrorCode != 0 || p.BaseOffset != b.base {
			t.Fatalf("produce at %d: error %d base %d", b.base, p.ErrorCode, p.BaseOffset)
		}
	}
}

// TestTxnReadCommitted: transactional batches and markers written with raw
// requests; read_committed clients never see aborted records and stop at
// the last stable offset, read_uncommitted ones see everything.
func TestTxnReadCommitted(t *testing.T) {
	addr, _, eng := startBroker(t)
	prodTopic(t, eng, "tx", 1, nil)
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	txnLayout(t, cl, eng, "tx")

	if c, e := lsoOf(t, adm, "tx"); c != 2 || e != 8 {
		t.Fatalf("open transactions: LSO %d end %d, want 2 and 8", c, e)
	}
	p := fetchCommitted(t, cl, eng, "tx", 0)
	if vals, last := valuesOf(t, p); p.LastStableOffset != 2 || p.HighWatermark != 8 || last != 1 || !slices.Equal(vals, []string{"p-0", "p-1"}) {
		t.Fatalf("read_committed fetch: LSO %d HW %d, values %v to %d", p.LastStableOffset, p.HighWatermark, vals, last)
	}
	if p.AbortedTransactions == nil || len(p.AbortedTransactions) != 0 {
		t.Fatalf("aborted transactions %v, want an empty array", p.AbortedTransactions)
	}

	// A producer inside a transaction may not write outside it.
	if r := txnProduce(t, cl, eng, "tx", txnTestBatch(t, 1000, 0, 3, false, "x", 1), nil); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("non-transactional batch of an open transaction: error %d", r.ErrorCode)
	}
	// Open transactions show in DescribeProducers.
	dp, err := adm.DescribeProducers(testCtx(t), kadm.TopicsSet{"tx": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	starts := map[int64]int64{}
	dp.EachProducer(func(d kadm.DescribedProducer) { starts[d.ProducerID] = d.CurrentTxnStartOffset })
	if starts[1000] != 2 || starts[2000] != 6 {
		t.Fatalf("DescribeProducers transaction starts %v", starts)
	}

	// Abort producer 1000 (v0), commit producer 2000 (v1, flexible).
	if code := writeMarker(t, cl, 0, "tx", 0, 1000, 0, 5, false); code != 0 {
		t.Fatalf("abort marker: error %d", code)
	}
	if c, e := lsoOf(t, adm, "tx"); c != 6 || e != 9 {
		t.Fatalf("after the abort: LSO %d end %d, want 6 and 9", c, e)
	}
	if code := writeMarker(t, cl, 1, "tx", 0, 2000, 0, 5, true); code != 0 {
		t.Fatalf("commit marker: error %d", code)
	}
	if c, e := lsoOf(t, adm, "tx"); c != 10 || e != 10 {
		t.Fatalf("after the commit: LSO %d end %d, want 10", c, e)
	}
	p = fetchCommitted(t, cl, eng, "tx", 0)
	if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != 1000 || p.AbortedTransactions[0].FirstOffset != 2 {
		t.Fatalf("aborted transactions %+v, want producer 1000 from 2", p.AbortedTransactions)
	}
	if p = fetchCommitted(t, cl, eng, "tx", 9); len(p.AbortedTransactions) != 0 {
		t.Fatalf("fetch past the abort: aborted %+v", p.AbortedTransactions)
	}

	// Marker errors.
	raw := dialRaw(t, addr)
	for i, tc := range []struct {
		name   string
		topic  string
		part   int32
		pid    int64
		epoch  int16
		coord  int32
		want   int16
		commit bool
	}{
		{"unknown topic", "nope", 0, 1000, 0, 5, kerr.UnknownTopicOrPartition.Code, false},
		{"unknown partition", "tx", 3, 1000, 0, 5, kerr.UnknownTopicOrPartition.Code, false},
		{"stale coordinator", "tx", 0, 1000, 0, 4, kerr.TransactionCoordinatorFenced.Code, false},
	} {
		if code := writeMarkerRaw(t, raw, int32(i+1), int16(i%2), tc.topic, tc.part, tc.pid, tc.epoch, tc.coord, tc.commit); code != tc.want {
			t.Errorf("%s: error %d, want %d", tc.name, code, tc.want)
		}
	}
	// A marker with a bumped epoch fences the old one.
	if code := writeMarker(t, cl, 1, "tx", 0, 2000, 3, 5, false); code != 0 {
		t.Fatalf("fencing marker: %d", code)
	}
	if code := writeMarker(t, cl, 1, "tx", 0, 2000, 2, 5, false); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("older marker epoch: error %d, want INVALID_PRODUCER_EPOCH", code)
	}

	// Real consumers.
	committed := consumeValues(t, addr, "tx", 5, kgo.ReadCommitted())
	if !slices.Equal(committed, []string{"p-0", "p-1", "q-0", "b-0", "b-1"}) {
		t.Fatalf("read_committed consumer got %v", committed)
	}
	all := consumeValues(t, addr, "tx", 8, kgo.ReadUncommitted())
	if !slices.Equal(all, []string{"p-0", "p-1", "a-0", "a-1", "a-2", "q-0", "b-0", "b-1"}) {
		t.Fatalf("read_uncommitted consumer got %v", all)
	}
}

// TestTxnConsumerWaitsForCommit: a read_committed consumer blocked at an
// open transaction receives it once the commit marker is written.
func TestTxnConsumerWaitsForCommit(t *testing.T) {
	addr, _, eng := startBroker(t)
	prodTopic(t, eng, "wait", 1, nil)
	cl := newClient(t, addr)
	if p := txnProduce(t, cl, eng, "wait", txnTestBatch(t, 77, 0, 0, true, "w", 4), kmsg.StringPtr("w")); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	consumer := newClient(t, addr, kgo.ConsumeTopics("wait"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	got := make(chan []string, 1)
	go func() {
		var vals []string
		ctx := testCtx(t)
		for len(vals) < 4 && ctx.Err() == nil {
			consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
		}
		got <- vals
	}()
	// Nothing is readable while the transaction is open: the LSO holds.
	adm := kadm.NewClient(cl)
	if c, e := lsoOf(t, adm, "wait"); c != 0 || e != 4 {
		t.Fatalf("LSO %d end %d", c, e)
	}
	if code := writeMarker(t, cl, 1, "wait", 0, 77, 0, 0, true); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if vals := <-got; !slices.Equal(vals, []string{"w-0", "w-1", "w-2", "w-3"}) {
		t.Fatalf("consumer got %v", vals)
	}
}

// markerBroker is a broker on a given data directory, stopped explicitly.
type markerBroker struct {
	addr   string
	s      *Server
	eng    *engine.Engine
	served chan error
}

func startMarkerBroker(t *testing.T, dir string) *markerBroker {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(engine.Options{Dir: dir, Log: engine.DefaultLogConfig(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &markerBroker{addr: ln.Addr().String(), eng: eng, served: make(chan error, 1)}
	b.s = New(Config{NodeID: 0, ClusterID: "txn", NumPartitions: 1, Logger: logger, LogDefaults: engine.DefaultLogConfig()}, eng)
	go func() { b.served <- b.s.Serve(ln) }()
	return b
}

func (b *markerBroker) stop(t *testing.T) {
	t.Helper()
	if err := b.s.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Error(err)
	}
	select {
	case <-b.served:
	case <-time.After(testTimeout):
		t.Error("Serve did not return")
	}
	if err := b.eng.Close(); err != nil {
		t.Error(err)
	}
}

// copyDataDir copies a data directory as it is on disk this instant (what a
// SIGKILL leaves: written bytes, no clean shutdown marker).
func copyDataDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTxnRestart: the LSO of an open transaction and the aborted
// transactions survive a clean restart and a crash (a copy of the live
// directory, opened without a clean shutdown).
func TestTxnRestart(t *testing.T) {
	dir := t.TempDir()
	b := startMarkerBroker(t, dir)
	if _, err := b.eng.CreateTopic("rs", 1, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	txnLayout(t, cl, b.eng, "rs")
	if code := writeMarker(t, cl, 1, "rs", 0, 1000, 0, 1, false); code != 0 {
		t.Fatalf("abort: %d", code)
	}
	crash := filepath.Join(t.TempDir(), "crash")
	copyDataDir(t, dir, crash)
	cl.Close()
	b.stop(t)

	for _, d := range []string{dir, crash} {
		b := startMarkerBroker(t, d)
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
		if err != nil {
			t.Fatal(err)
		}
		adm := kadm.NewClient(cl)
		if c, e := lsoOf(t, adm, "rs"); c != 6 || e != 9 {
			t.Fatalf("%s: LSO %d end %d after restart, want 6 and 9", d, c, e)
		}
		if code := writeMarker(t, cl, 1, "rs", 0, 2000, 0, 1, true); code != 0 {
			t.Fatalf("%s: commit after restart: %d", d, code)
		}
		p := fetchCommitted(t, cl, b.eng, "rs", 0)
		if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != 1000 || p.AbortedTransactions[0].FirstOffset != 2 {
			t.Fatalf("%s: aborted transactions %+v after restart", d, p.AbortedTransactions)
		}
		if c, _ := lsoOf(t, adm, "rs"); c != 10 {
			t.Fatalf("%s: LSO %d after the commit", d, c)
		}
		vals := consumeValues(t, b.addr, "rs", 5, kgo.ReadCommitted())
		if !slices.Equal(vals, []string{"p-0", "p-1", "q-0", "b-0", "b-1"}) {
			t.Fatalf("%s: read_committed after restart: %v", d, vals)
		}
		cl.Close()
		b.stop(t)
	}
}

// TestTxnClusterFailover: in a 3-broker cluster, a follower that becomes
// leader reports the open transaction's LSO and the aborted transactions
// it replicated, and takes the commit marker.
func TestTxnClusterFailover(t *testing.T) {
	brokers, _ := startInCluster(t, 3)
	seeds := []string{brokers[0].addr, brokers[1].addr, brokers[2].addr}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	waitRegistered(t, brokers)
	const topic = "txc"
	ct, err := adm.CreateTopic(testCtx(t), 1, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, topic)
	if err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}
	leader := int32(-1)
	for _, b := range brokers {
		waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
			mt := clusterTopic(r, topic)
			if mt == nil || len(mt.Partitions) != 1 || len(mt.Partitions[0].ISR) != 3 || mt.Partitions[0].Leader < 0 {
				return "partition not ready"
			}
			leader = mt.Partitions[0].Leader
			return ""
		})
	}
	eng := brokers[leader].eng
	// p-0 p-1, a-0..a-2 (producer 1000, to abort), q-0, b-0 b-1 (producer 2000, open).
	txnLayout(t, cl.Broker(int(leader)), eng, topic)
	if code := writeMarker(t, cl, 1, topic, 0, 1000, 0, 3, false); code != 0 {
		t.Fatalf("abort: %d", code)
	}
	if c, e := lsoOf(t, adm, topic); c != 6 || e != 9 {
		t.Fatalf("leader: LSO %d end %d", c, e)
	}
	// Every replica holds the marker (acks=all semantics), then the leader goes.
	for _, b := range brokers {
		deadline := time.Now().Add(testTimeout)
		for b.eng.Topic(topic).Partition(0).LogEndOffset() < 9 {
			if time.Now().After(deadline) {
				t.Fatalf("broker %d did not replicate the marker", b.id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	brokers[leader].stop(t)
	var rest []string
	for _, b := range brokers {
		if b.id != leader {
			rest = append(rest, b.addr)
		}
	}
	cl2, err := kgo.NewClient(kgo.SeedBrokers(rest...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	newLeader := int32(-1)
	for _, b := range brokers {
		if b.id == leader {
			continue
		}
		waitMetadata(t, cl2, b, func(r *kmsg.MetadataResponse) string {
			mt := clusterTopic(r, topic)
			if mt == nil || mt.Partitions[0].Leader < 0 || mt.Partitions[0].Leader == leader {
				return "no new leader"
			}
			newLeader = mt.Partitions[0].Leader
			return ""
		})
	}
	adm2 := kadm.NewClient(cl2)
	deadline := time.Now().Add(testTimeout)
	for {
		c, e := lsoOf(t, adm2, topic)
		if c == 6 && e == 9 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new leader %d: LSO %d end %d, want 6 and 9", newLeader, c, e)
		}
		time.Sleep(20 * time.Millisecond) // the new leader's HW catches up first
	}
	p := fetchCommitted(t, cl2.Broker(int(newLeader)), brokers[newLeader].eng, topic, 0)
	if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != 1000 || p.AbortedTransactions[0].FirstOffset != 2 {
		t.Fatalf("new leader: aborted transactions %+v", p.AbortedTransactions)
	}
	// The coordinator resends with its epoch: the new leader takes the commit.
	if code := writeMarker(t, cl2, 1, topic, 0, 2000, 0, 3, true); code != 0 {
		t.Fatalf("commit on the new leader: %d", code)
	}
	if c, e := lsoOf(t, adm2, topic); c != 10 || e != 10 {
		t.Fatalf("after the commit: LSO %d end %d", c, e)
	}
	vals := consumeValues(t, rest[0], topic, 5, kgo.ReadCommitted())
	if !slices.Equal(vals, []string{"p-0", "p-1", "q-0", "b-0", "b-1"}) {
		t.Fatalf("read_committed on the new leader: %v", vals)
	}
}
