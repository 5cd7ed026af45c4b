package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/remote/objstore"
	"github.com/stratalog/strata/remote/rlm"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startTieredServer serves, on 127.0.0.1, a broker over a fresh engine
// (retentionCheck: its retention check interval, 0 for the default) and a
// remote log manager on a local-directory object store, passes run only
// by RunOnce (meta: cluster mode's metadata topic, nil for none). Test
// cleanup stops them.
func startTieredServer(t *testing.T, retentionCheck time.Duration, meta rlm.MetadataTopic) (*engine.Engine, *rlm.Manager, string) {
	t.Helper()
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(engine.Options{Dir: filepath.Join(dir, "data"), Log: engine.DefaultLogConfig(), Logger: logger,
		RetentionCheckInterval: retentionCheck})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	store, err := objstore.OpenLocal(vfs.OS, filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := rlm.Open(rlm.Options{Engine: eng, Store: store, Dir: filepath.Join(dir, "meta"), Interval: -1, Logger: logger, Metadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	s := New(Config{ClusterID: "strata-tiered-test", NumPartitions: 1, Logger: logger}, eng)
	s.SetRemoteLog(m)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() { s.Close(); <-done; s.SetRemoteLog(nil) })
	return eng, m, ln.Addr().String()
}

// A tiered topic: rolled segments are copied to a local-directory object
// store, local retention deletes them, and a kgo consumer from the
// beginning still reads every record through the broker, the first ones
// from the object store; ListOffsets answers earliest, earliest-local
// and latest-tiered.
func TestTieredFetchThroughBroker(t *testing.T) {
	eng, m, addr := startTieredServer(t, 5*time.Millisecond, nil)

	const topic, n = "tiered", 400
	const t0 = int64(1_700_000_000_000)
	tp, err := eng.CreateTopic(topic, 1, map[string]string{
		"segment.bytes": "4096", "remote.storage.enable": "true", "local.retention.bytes": "0",
		"retention.ms": "-1", "file.delete.delay.ms": "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	l := tp.Partition(0)
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i := 0; i < n; i += 10 {
		var recs []*kgo.Record
		for j := i; j < i+10; j++ {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "record-%04d-%0100d", j, j), Timestamp: time.UnixMilli(t0 + int64(j))})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// An aborted transaction, then more records so that it is tiered too.
	txp, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("tiered-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer txp.Close()
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 10; j++ {
		if err := txp.ProduceSync(ctx, &kgo.Record{Value: []byte("aborted")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := txp.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	aborted := l.HighWatermark() // the records above and their marker lie below
	for i := n; i < n+100; i += 10 {
		var recs []*kgo.Record
		for j := i; j < i+10; j++ {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "record-%04d-%0100d", j, j)})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	copied := m.CopiedEnd(l.TopicID(), topic, 0)
	if copied <= aborted {
		t.Fatalf("copied end %d: the aborted transaction (below %d) is not tiered", copied, aborted)
	}
	if copied < n/4 {
		t.Fatalf("copied end %d of %d records", copied, n)
	}
	for l.LogStartOffset() < copied {
		if ctx.Err() != nil {
			t.Fatalf("local log start %d, copied end %d", l.LogStartOffset(), copied)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// ListOffsets: earliest is remote, earliest local is the local start,
	// latest tiered the last copied offset.
	adm := kadm.NewClient(prod)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Err != nil || o.Offset != 0 {
		t.Fatalf("earliest %+v", o)
	}
	for _, tc := range []struct {
		ts   int64
		want int64
	}{{-4, l.LogStartOffset()}, {-5, copied - 1}, {t0 + 37, 37}, {t0 + 399, 399}} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = tc.ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, prod)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.Offset != tc.want {
			t.Fatalf("ListOffsets %d: %+v, want offset %d", tc.ts, p, tc.want)
		}
	}

	// DescribeConfigs shows the tiered-storage keys like the others.
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	if got["remote.storage.enable"] != "true" || got["local.retention.bytes"] != "0" || got["local.retention.ms"] != "-2" {
		t.Fatalf("DescribeConfigs: remote.storage.enable=%q local.retention.bytes=%q local.retention.ms=%q",
			got["remote.storage.enable"], got["local.retention.bytes"], got["local.retention.ms"])
	}

	// A consumer from the beginning reads every record in order.
	// read_committed: the aborted records, tiered, are dropped.
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(8192), kgo.FetchMaxPartitionBytes(8192), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	next := 0
	for next < n+100 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", next, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			want := fmt.Sprintf("record-%04d-%0100d", next, next)
			if string(r.Value) != want || (next < n && r.Offset != int64(next)) {
				t.Fatalf("record %d: got offset %d %q", next, r.Offset, r.Value[:min(12, len(r.Value))])
			}
			next++
		})
	}
	// A fetch of local data answers the partition's log start, remote.
	freq := kmsg.NewPtrFetchRequest()
	freq.ReplicaID, freq.MaxBytes = -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, l.TopicID() // the client picks the version: name and id both set
	fpart := kmsg.NewFetchRequestTopicPartition()
	fpart.FetchOffset, fpart.PartitionMaxBytes = l.LogStartOffset(), 1<<20
	ft.Partitions = append(ft.Partitions, fpart)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, prod)
	if err != nil {
		t.Fatal(err)
	}
	if p := fresp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LogStartOffset != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("local fetch: error %d, log start %d, %d bytes", p.ErrorCode, p.LogStartOffset, len(p.RecordBatches))
	}

	if st := m.Stats(); st.FetchedBytes == 0 {
		t.Fatalf("nothing read from the object store: %+v", st)
	}

	// DeleteRecords inside the tiered data moves the log start there.
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 37}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup(topic, 0); r.Err != nil || r.LowWatermark != 37 {
		t.Fatalf("DeleteRecords: %+v", r)
	}
	if starts, err = adm.ListStartOffsets(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Err != nil || o.Offset != 37 {
		t.Fatalf("earliest after DeleteRecords: %+v", o)
	}
}

// notReadyMeta is a __remote_log_metadata that this broker (id 0) leads
// every partition of, whose metadata partition ends at end and whose
// consumer applies nothing: the manager is ready for a partition only
// once end is 0.
type notReadyMeta struct{ end atomic.Int64 }

func (m *notReadyMeta) Partitions() int32 { return 1 }
func (m *notReadyMeta) Ensure()           {}
func (m *notReadyMeta) BrokerID() int32   { return 0 }
func (m *notReadyMeta) Publish(context.Context, int32, []byte, []byte) (int64, error) {
	return 0, errors.New("notReadyMeta: no publish")
}
func (m *notReadyMeta) EndOffset(context.Context, int32) (int64, error) { return m.end.Load(), nil }
func (m *notReadyMeta) Consume(ctx context.Context, _ func(int32) int64, _ func(int32, int64, []byte)) {
	<-ctx.Done()
}
func (m *notReadyMeta) Leadership(string, [16]byte, int32) (int32, bool) { return 1, true }
func (m *notReadyMeta) TopicGone([16]byte) bool                          { return false }
func (m *notReadyMeta) LeadsMetadataPartition(int32) bool                { return true }

// A tiered partition's leader whose remote-log metadata has not caught
// up (a new or restarted leader in a cluster) answers ListOffsets
// earliest, latest-tiered and by timestamp OFFSET_NOT_AVAILABLE,
// retriable, rather than its local log start, which may lie above remote
// data a consumer from the earliest offset would then skip; latest and
// earliest-local answer as before. Caught up, it answers earliest.
func TestTieredListOffsetsBeforeMetadataCaughtUp(t *testing.T) {
	meta := &notReadyMeta{}
	meta.end.Store(1)
	eng, m, addr := startTieredServer(t, 0, meta)

	const topic = "tiered"
	if _, err := eng.CreateTopic(topic, 1, map[string]string{"remote.storage.enable": "true"}); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	listOffsets := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	for _, ts := range []int64{-2, -5, 0} {
		if p := listOffsets(ts); p.ErrorCode != kerr.OffsetNotAvailable.Code || p.Offset != -1 {
			t.Fatalf("ListOffsets %d before the metadata caught up: %+v, want OFFSET_NOT_AVAILABLE", ts, p)
		}
	}
	for _, tc := range []struct{ ts, want int64 }{{-1, 5}, {-4, 0}} {
		if p := listOffsets(tc.ts); p.ErrorCode != 0 || p.Offset != tc.want {
			t.Fatalf("ListOffsets %d before the metadata caught up: %+v, want offset %d", tc.ts, p, tc.want)
		}
	}

	// Caught up: a pass finds the leader ready.
	meta.end.Store(0)
	if err := m.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if p := listOffsets(-2); p.ErrorCode != 0 || p.Offset != 0 {
		t.Fatalf("ListOffsets earliest once caught up: %+v", p)
	}
}
