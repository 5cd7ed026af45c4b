package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/metrics/metricstest"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// chunkRecords adds up the record counts of a chunk's whole batches, in
// memory and in a file at an offset, and stops at a batch the chunk cuts:
// small batches that share the 4 KiB header window, batches larger than
// it, and the two mixed, over chunks starting and ending at every kind of
// batch boundary.
func TestChunkRecords(t *testing.T) {
	var log []byte
	var ends, counts []int // per batch: its end in log, its records
	add := func(batch []byte, n int) {
		log = append(log, batch...)
		ends = append(ends, len(log))
		counts = append(counts, n)
	}
	big := func(n, valueBytes int) []byte {
		var b record.Builder
		b.Reset(record.CodecNone, 1_700_000_000_000)
		for range n {
			b.Add(1_700_000_000_000, nil, make([]byte, valueBytes), nil)
		}
		batch, err := b.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		return batch
	}
	add(prodBatch(t, 1, record.CodecNone, "a"), 1)
	add(prodBatch(t, 5, record.CodecSnappy, "b"), 5)
	add(prodBatch(t, 17, record.CodecNone, "c"), 17)
	for i := range 150 { // about 11 KiB of small batches: several windows
		add(prodBatch(t, 1+i%3, record.CodecNone, "s"+strconv.Itoa(i)), 1+i%3)
	}
	add(big(2, 6000), 2) // larger than the window
	add(big(1, 5000), 1)
	for i := range 10 {
		add(prodBatch(t, 2, record.CodecNone, "t"+strconv.Itoa(i)), 2)
	}
	add(big(3, 3000), 3)
	if len(log) < 4*headerWindow {
		t.Fatalf("the log is only %d bytes", len(log))
	}
	path := filepath.Join(t.TempDir(), "seg")
	const at = 100
	if err := os.WriteFile(path, append(make([]byte, at), log...), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := func(i int) int { // where batch i starts
		if i == 0 {
			return 0
		}
		return ends[i-1]
	}
	sum := func(i, j int) int64 { // records of batches [i, j)
		var n int64
		for _, c := range counts[i:j] {
			n += int64(c)
		}
		return n
	}
	last := len(counts)
	type span struct {
		name      string
		from, len int
		want      int64
	}
	spans := []span{
		{"all", 0, len(log), sum(0, last)},
		{"first two", 0, ends[1], 6},
		{"the last one cut", 0, len(log) - 1, sum(0, last-1)},
		{"less than a header", 0, record.HeaderSize - 1, 0},
		{"a big batch's header only", start(153), record.HeaderSize, 0},
	}
	for i := 0; i < last; i += 7 { // from every 7th batch to every 5th after it
		for j := i + 1; j <= last; j += 5 {
			spans = append(spans, span{"batches " + strconv.Itoa(i) + "-" + strconv.Itoa(j), start(i), ends[j-1] - start(i), sum(i, j)})
		}
	}
	var buf [headerWindow]byte
	// The whole log's headers take a few reads, not one per batch: a
	// window per 4 KiB of small batches, one per big batch (the read
	// syscalls of the process, /proc/self/io's syscr).
	before := readSyscalls(t)
	if got := chunkRecords(engine.Chunk{File: f, Pos: at, Len: int64(len(log))}, &buf); got != sum(0, last) {
		t.Fatalf("the whole log in a file: %d records, want %d", got, sum(0, last))
	}
	if reads := readSyscalls(t) - before; reads > int64(last)/4 {
		t.Errorf("%d reads for the headers of %d batches in %d bytes", reads, last, len(log))
	}
	for _, tc := range spans {
		mem := engine.Chunk{Buf: log[tc.from : tc.from+tc.len], Len: int64(tc.len)}
		file := engine.Chunk{File: f, Pos: int64(at + tc.from), Len: int64(tc.len)}
		if got := chunkRecords(mem, &buf); got != tc.want {
			t.Errorf("%s in memory: %d records, want %d", tc.name, got, tc.want)
		}
		if got := chunkRecords(file, &buf); got != tc.want {
			t.Errorf("%s in a file: %d records, want %d", tc.name, got, tc.want)
		}
	}
}

// readSyscalls is the number of read system calls (read, pread) this
// process made (/proc/self/io).
func readSyscalls(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no syscr in /proc/self/io:\n%s", b)
	return 0
}

// Counting a Fetch response's records allocates nothing: memory and file
// chunks, topics by name (v12) and by id (v13+); and counts them all.
func TestMeterRecordsOutAllocatesNothing(t *testing.T) {
	addr, _, s := startMeteredBroker(t)
	ctx := testCtx(t)
	if _, err := newAdmin(t, addr).CreateTopic(ctx, 1, 1, nil, "counted"); err != nil {
		t.Fatal(err)
	}
	topic := s.eng.Topic("counted")
	if topic == nil {
		t.Fatal("topic not created")
	}
	batches := append(prodBatch(t, 3, record.CodecNone, "a"), prodBatch(t, 4, record.CodecNone, "b")...)
	path := filepath.Join(t.TempDir(), "seg")
	if err := os.WriteFile(path, batches, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunks := []engine.Chunk{{Buf: batches, Len: int64(len(batches))}, {File: f, Len: int64(len(batches))}}
	bodies := []fetchBody{
		{version: 12, topics: []fetchTopic{{name: "counted", partitions: []fetchPartition{{chunks: chunks}}}}},
		{version: 16, topics: []fetchTopic{{id: topic.ID(), partitions: []fetchPartition{{chunks: chunks}}}}},
	}
	s.meterRecordsOut(&bodies[0], true) // the topic's counters exist from here on
	allocs := testing.AllocsPerRun(50, func() {
		for i := range bodies {
			s.meterRecordsOut(&bodies[i], true)
		}
		s.meterRecordsOut(&bodies[0], false) // a follower's: not counted
	})
	// The race detector's build moves the header buffer to the heap
	// (race_on_test.go): the bound holds in plain builds.
	if allocs != 0 && !raceDetector {
		t.Fatalf("%v allocations per Fetch response counted", allocs)
	}
	// 1 + 51*2 responses of 14 records each (AllocsPerRun runs once more).
	want := float64(14 * (1 + 51*2))
	fams, err := s.cfg.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	f2 := metricstest.Families{}
	for _, fam := range fams {
		f2[fam.GetName()] = fam
	}
	if got := f2.Counter(metrics.TopicRecordsOut, "topic", "counted"); got != want {
		t.Fatalf("records out %v, want %v", got, want)
	}
}

// A real franz-go consume of batches of several records each: the records
// and bytes out scraped from /metrics are what the consumer read, served
// from the tail cache (memory chunks) and from the segment files (file
// chunks, the tail cache off).
func TestMetricsRecordsOutAgreeWithConsumer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tailBytes int64
	}{{"tail cache", 64 << 20}, {"segment files", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			addr, url, _ := startMeteredBroker(t, func(_ *Config, o *engine.Options) { o.TailCacheBytes = tc.tailBytes })
			ctx := testCtx(t)
			if _, err := newAdmin(t, addr).CreateTopic(ctx, 3, 1, nil, "out"); err != nil {
				t.Fatal(err)
			}
			counts := newClientCounts()
			// The consumer waits at the head first (its first Fetch seen by
			// the broker): the tail cache keeps a partition's new batches
			// while a consumer reads there.
			cons := newClient(t, addr, kgo.WithHooks(counts), kgo.ConsumeTopics("out"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(3000),
				kgo.FetchMaxWait(100*time.Millisecond))
			const n = 600
			polled := make(chan error, 1)
			var got int
			go func() {
				for polls := 0; got < n; polls++ {
					if polls > 10*n {
						polled <- fmt.Errorf("%d polls, %d of %d records", polls, got, n)
						return
					}
					fs := cons.PollFetches(ctx)
					if err := fs.Err0(); err != nil {
						polled <- err
						return
					}
					got += fs.NumRecords()
				}
				polled <- nil
			}()
			for i := 0; scrapeMetrics(t, url).Find(metrics.RequestsTotal, "request", "Fetch") == nil; i++ {
				if i == 3000 {
					t.Fatal("the consumer sent no Fetch")
				}
				time.Sleep(10 * time.Millisecond)
			}
			prod := newClient(t, addr, kgo.WithHooks(counts), kgo.DefaultProduceTopic("out"),
				kgo.ProducerBatchMaxBytes(1500), kgo.ProducerLinger(0))
			rs := make([]*kgo.Record, n)
			for i := range rs {
				rs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i % 5)), Value: []byte(strings.Repeat("v", 20+i%40))}
			}
			if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := <-polled; err != nil {
				t.Fatal(err)
			}
			cons.Close() // no fetch after the records counted
			after := scrapeMetrics(t, url)
			counts.mu.Lock()
			recordsIn, recordsOut, bytesOut := counts.recordsIn["out"], counts.recordsOut["out"], counts.bytesOut["out"]
			counts.mu.Unlock()
			if recordsIn != n || recordsOut != n || got != n {
				t.Fatalf("client: produced %d, read %d in batches, polled %d; want %d each", recordsIn, recordsOut, got, n)
			}
			if got := after.Counter(metrics.TopicRecordsOut, "topic", "out"); got != float64(recordsOut) {
				t.Errorf("records out %v, the consumer read %d", got, recordsOut)
			}
			if got := after.Counter(metrics.TopicBytesOut, "topic", "out"); got != float64(bytesOut) {
				t.Errorf("bytes out %v, the consumer read %d", got, bytesOut)
			}
			hits := after.Counter(metrics.TailCacheHits)
			if tc.tailBytes > 0 && hits == 0 {
				t.Errorf("tail cache on but no hits: the memory chunks were not exercised")
			}
			if tc.tailBytes < 0 && hits != 0 {
				t.Errorf("tail cache off but %v hits", hits)
			}
		})
	}
}

// TestMetricsRecordsOutShareFetch: a ShareFetch response's batches count
// in the topic's bytes and records out, as a Fetch's do.
func TestMetricsRecordsOutShareFetch(t *testing.T) {
	addr, url, s := startMeteredBroker(t, withShare(0))
	cl := newClient(t, addr)
	createShareTopic(t, kadm.NewClient(cl), "sq", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest")
	for b := range 3 { // three batches of 10
		vs := make([]string, 10)
		for i := range vs {
			vs[i] = fmt.Sprintf("v%d-%d", b, i)
		}
		produceValues(t, cl, "sq", vs...)
	}
	if got := scrapeMetrics(t, url).Counter(metrics.TopicRecordsOut, "topic", "sq"); got != 0 {
		t.Fatalf("records out %v before any fetch", got)
	}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "raw-member", []string{"sq"}
	if hbr := issue[*kmsg.ShareGroupHeartbeatResponse](t, cl, hb); hbr.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(hbr.ErrorCode))
	}
	r := rawShareFetch(t, cl, "sg", "raw-member", 0, s.eng.Topic("sq").ID(), nil)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("share fetch: %+v", r)
	}
	data := r.Topics[0].Partitions[0].Records
	var recs int
	for rest := data; len(rest) > 0; {
		batch, next, _, err := record.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		rest = next
		if err := record.Iterate(batch, func(*record.Header, *record.Record) error { recs++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if recs != 30 {
		t.Fatalf("the response holds %d records, want 30", recs)
	}
	after := scrapeMetrics(t, url)
	if got := after.Counter(metrics.TopicRecordsOut, "topic", "sq"); got != float64(recs) {
		t.Errorf("records out %v, the share fetch sent %d", got, recs)
	}
	if got := after.Counter(metrics.TopicBytesOut, "topic", "sq"); got != float64(len(data)) {
		t.Errorf("bytes out %v, the share fetch sent %d", got, len(data))
	}
}
