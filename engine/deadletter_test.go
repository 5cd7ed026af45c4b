package engine

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/stratalog/strata/partitioner"
	"github.com/stratalog/strata/record"
)

// hrec is a record with headers for appendRecords.
type hrec struct {
	key, value []byte
	headers    []record.RecordHeader
}

// appendRecords appends recs to l as one batch and waits until it is
// durable; it returns the first offset.
func appendRecords(t testing.TB, l *Log, recs ...hrec) int64 {
	t.Helper()
	var b record.Builder
	b.Reset(record.CodecNone, 1000)
	for _, r := range recs {
		b.Add(1000, r.key, r.value, r.headers)
	}
	batch, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	info := mustAppend(t, l, batch)
	if err := waitDurable(t, l, info.LastOffset); err != nil {
		t.Fatal(err)
	}
	return info.BaseOffset
}

// dlqTopic creates a dead-letter topic (errors.deadletterqueue.group.enable=true).
func dlqTopic(t testing.TB, e *Engine, name string, partitions int32) *Topic {
	t.Helper()
	return mustTopic(t, e, name, partitions, map[string]string{"errors.deadletterqueue.group.enable": "true", "preallocate": "false"})
}

// consumeAll returns every record of t's partition p.
func consumeAll(t testing.TB, tp *Topic, p int32) []Record {
	t.Helper()
	recs, err := tp.Consume(p, tp.Partition(p).LogStartOffset(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// sameHeaders compares headers byte for byte, a null value apart from an
// empty one.
func sameHeaders(got []RecordHeader, want []record.RecordHeader) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d headers %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Key != w.Key || !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) {
			return fmt.Errorf("header %d is %q=%q (null %v), want %q=%q (null %v)", i, g.Key, g.Value, g.Value == nil, w.Key, w.Value, w.Value == nil)
		}
	}
	return nil
}

func header(k, v string) record.RecordHeader { return record.RecordHeader{Key: k, Value: []byte(v)} }

func TestDeadLetterMoveHeadersAndGroup(t *testing.T) {
	clk := newFakeClock(1_700_000_000_000)
	e := openEngine(t, t.TempDir(), func(o *Options) { o.Now = clk.Now })
	defer e.Close()
	orders := mustTopic(t, e, "orders", 5, map[string]string{"preallocate": "false"})
	dlq := dlqTopic(t, e, "dlq.orders", 3)
	l := orders.Partition(4)
	var recs []hrec
	for i := range 8 {
		r := hrec{key: fmt.Appendf(nil, "k%d", i), value: fmt.Appendf(nil, "v%d", i),
			headers: []record.RecordHeader{header("source", "app"), {Key: "null", Value: nil}, {Key: "empty", Value: []byte{}}}}
		if i == 3 {
			r.key = nil // a null key
			// a dead letter moved again: its old context headers are replaced
			r.headers = append(r.headers, header("__dlq.errors.topic", "older"), header("__dlq.errors.delivery.count", "4"))
		}
		if i == 4 {
			r.value = nil
		}
		recs = append(recs, r)
	}
	appendRecords(t, l, recs...)
	if err := e.Commit("billing", "orders", 4, 3); err != nil {
		t.Fatal(err)
	}
	if err := e.Commit("audit", "orders", 4, 7); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5000)

	res, err := e.MoveToDeadLetter(TopicPartition{"orders", 4}, 2, 6, "", DeadLetterOptions{Group: "billing", Reason: "bad schema"})
	if err != nil {
		t.Fatal(err)
	}
	want := DeadLetterResult{Topic: "dlq.orders", Partition: 1, Moved: 4, FirstOffset: 0, LastOffset: 3, Committed: 3, CommittedMoved: true}
	if res != want {
		t.Fatalf("result %+v, want %+v", res, want)
	}
	if got, err := e.Committed("billing", "orders", 4); err != nil || got != 6 {
		t.Fatalf("billing's committed offset %d (%v), want 6", got, err)
	}
	got := consumeAll(t, dlq, 1)
	if len(got) != 4 {
		t.Fatalf("%d dead letters, want 4", len(got))
	}
	for i, r := range got {
		src := recs[2+i]
		if r.Offset != int64(i) || !bytes.Equal(r.Key, src.key) || (r.Key == nil) != (src.key == nil) ||
			!bytes.Equal(r.Value, src.value) || (r.Value == nil) != (src.value == nil) {
			t.Errorf("dead letter %d: offset %d %q=%q, want offset %d %q=%q", i, r.Offset, r.Key, r.Value, i, src.key, src.value)
		}
		if ts := r.Timestamp.UnixMilli(); ts != clk.Now().UnixMilli() {
			t.Errorf("dead letter %d: timestamp %d, want the engine's time %d", i, ts, clk.Now().UnixMilli())
		}
		wantH := []record.RecordHeader{header("source", "app"), {Key: "null"}, {Key: "empty", Value: []byte{}},
			header("__dlq.errors.topic", "orders"), header("__dlq.errors.partition", "4"),
			header("__dlq.errors.offset", strconv.Itoa(2+i)), header("__dlq.errors.group", "billing"),
			header("__dlq.errors.message", "bad schema")}
		if err := sameHeaders(r.Headers, wantH); err != nil {
			t.Errorf("dead letter %d: %v", i, err)
		}
	}
	if n := len(consumeAll(t, dlq, 0)) + len(consumeAll(t, dlq, 2)); n != 0 {
		t.Errorf("%d dead letters in other partitions than 4 mod 3", n)
	}
	if n := len(consumeAll(t, orders, 4)); n != 8 {
		t.Errorf("the source partition holds %d records after the move, want 8", n)
	}

	// A group whose offset is outside the range keeps it; no group: no
	// group header, the default reason.
	res, err = e.MoveToDeadLetter(TopicPartition{"orders", 4}, 0, 2, "dlq.orders", DeadLetterOptions{Group: "audit"})
	if err != nil || res.Committed != 7 || res.CommittedMoved || res.FirstOffset != 4 || res.LastOffset != 5 {
		t.Fatalf("move with audit: %+v, %v", res, err)
	}
	if got, _ := e.Committed("audit", "orders", 4); got != 7 {
		t.Fatalf("audit's committed offset %d, want 7 (outside the range: unchanged)", got)
	}
	res, err = e.MoveToDeadLetter(TopicPartition{"orders", 4}, 7, 8, "dlq.orders", DeadLetterOptions{})
	if err != nil || res.Moved != 1 || res.Committed != -1 {
		t.Fatalf("move without a group: %+v, %v", res, err)
	}
	last := consumeAll(t, dlq, 1)[6]
	if err := sameHeaders(last.Headers, []record.RecordHeader{header("source", "app"), {Key: "null"}, {Key: "empty", Value: []byte{}},
		header("__dlq.errors.topic", "orders"), header("__dlq.errors.partition", "4"),
		header("__dlq.errors.offset", "7"), header("__dlq.errors.message", "moved")}); err != nil {
		t.Error(err)
	}

	// A group with a member is refused before anything is written, and
	// so is a share group.
	g, err := e.ConsumerGroup("live", GroupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := g.Join(MemberOptions{Topics: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	hw := dlq.Partition(1).HighWatermark()
	if _, err := e.MoveToDeadLetter(TopicPartition{"orders", 4}, 0, 8, "", DeadLetterOptions{Group: "live"}); !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("group with a member: %v, want ErrGroupNotEmpty", err)
	}
	if _, err := e.ShareGroup("queue", ShareGroupOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.MoveToDeadLetter(TopicPartition{"orders", 4}, 0, 8, "", DeadLetterOptions{Group: "queue"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("share group: %v, want ErrInvalidConfig", err)
	}
	if got := dlq.Partition(1).HighWatermark(); got != hw {
		t.Fatalf("refused moves wrote: high watermark %d, want %d", got, hw)
	}
	// Once the member left, the group's offset is moved.
	if err := e.Commit("live", "orders", 4, 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Leave(); err != nil {
		t.Fatal(err)
	}
	res, err = e.MoveToDeadLetter(TopicPartition{"orders", 4}, 0, 2, "", DeadLetterOptions{Group: "live"})
	if err != nil || !res.CommittedMoved {
		t.Fatalf("empty embedded group: %+v, %v", res, err)
	}
	if got, _ := e.Committed("live", "orders", 4); got != 2 {
		t.Fatalf("live's committed offset %d, want 2", got)
	}
}

// An aborted transaction's records in the range are not moved, a committed
// one's are; the range may not pass the last stable offset (an open
// transaction).
func TestDeadLetterMoveReadCommitted(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	src := mustTopic(t, e, "payments", 1, smallConfig()) // several segments: several reads
	dlq := dlqTopic(t, e, "dlq.payments", 1)
	l := src.Partition(0)
	txnScenario(t, l) // committed 3-4 and 8-9 (producer 1), aborted 5-7 and 51 (producer 2), open from 53
	lso := l.LastStableOffset()
	if lso != 53 {
		t.Fatalf("LSO %d, want 53", lso)
	}
	if len(*l.segs.Load()) < 3 {
		t.Fatalf("%d segments, want several", len(*l.segs.Load()))
	}
	res, err := e.MoveToDeadLetter(TopicPartition{"payments", 0}, 0, lso, "", DeadLetterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for o := int64(0); o < 50; o++ {
		if o < 5 || o > 7 {
			want = append(want, o)
		}
	}
	var got []int64
	srcRecs := map[int64]Record{}
	for _, r := range consumeAll(t, src, 0) {
		srcRecs[r.Offset] = r
	}
	for _, r := range consumeAll(t, dlq, 0) {
		o, err := strconv.ParseInt(string(r.Headers[len(r.Headers)-2].Value), 10, 64)
		if err != nil || r.Headers[len(r.Headers)-2].Key != "__dlq.errors.offset" {
			t.Fatalf("dead letter %d: headers %v", r.Offset, r.Headers)
		}
		if s := srcRecs[o]; !bytes.Equal(s.Key, r.Key) || !bytes.Equal(s.Value, r.Value) {
			t.Errorf("dead letter of offset %d: %q=%q, the source record is %q=%q", o, r.Key, r.Value, s.Key, s.Value)
		}
		got = append(got, o)
	}
	if !slices.Equal(got, want) || res.Moved != len(want) {
		t.Fatalf("moved %d records of offsets %v, want %v", res.Moved, got, want)
	}
	// A range of aborted records and markers only moves nothing.
	res, err = e.MoveToDeadLetter(TopicPartition{"payments", 0}, 50, 53, "", DeadLetterOptions{})
	if err != nil || res.Moved != 0 || res.FirstOffset != -1 {
		t.Fatalf("aborted-only range: %+v, %v", res, err)
	}
	if _, err := e.MoveToDeadLetter(TopicPartition{"payments", 0}, 50, 54, "", DeadLetterOptions{}); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("a range past the last stable offset: %v, want ErrOffsetOutOfRange", err)
	}
}

func TestDeadLetterMoveRefused(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	orders := mustTopic(t, e, "orders", 1, map[string]string{"preallocate": "false"})
	appendRecords(t, orders.Partition(0), hrec{key: []byte("a"), value: []byte("1")}, hrec{key: []byte("b"), value: []byte("2")},
		hrec{key: []byte("c"), value: []byte("3")})
	mustTopic(t, e, "dlq.plain", 1, map[string]string{"preallocate": "false"})
	enabled := dlqTopic(t, e, "dlq.orders", 1)
	dlqTopic(t, e, "errors", 1)
	dlqTopic(t, e, "__dlq.internal", 1)
	dlqTopic(t, e, "dlq.self", 1)
	if err := orders.Truncate(0, 1); err != nil {
		t.Fatal(err)
	}
	src := TopicPartition{"orders", 0}
	for _, c := range []struct {
		name     string
		src      TopicPartition
		from, to int64
		dlq      string
		want     error
	}{
		{"no errors.deadletterqueue.group.enable", src, 1, 3, "dlq.plain", ErrInvalidConfig},
		{"missing topic", src, 1, 3, "dlq.missing", ErrUnknownTopic},
		{"no dlq. prefix", src, 1, 3, "errors", ErrInvalidConfig},
		{"__ name", src, 1, 3, "__dlq.internal", ErrInvalidConfig},
		{"the source topic", TopicPartition{"dlq.self", 0}, 0, 1, "dlq.self", ErrInvalidConfig},
		{"below the log start", src, 0, 3, "dlq.orders", ErrOffsetOutOfRange},
		{"past the end", src, 1, 4, "dlq.orders", ErrOffsetOutOfRange},
		{"empty range", src, 2, 2, "dlq.orders", ErrInvalidConfig},
		{"unknown source partition", TopicPartition{"orders", 1}, 0, 1, "dlq.orders", ErrUnknownTopic},
		{"unknown source topic", TopicPartition{"nope", 0}, 0, 1, "dlq.orders", ErrUnknownTopic},
	} {
		res, err := e.MoveToDeadLetter(c.src, c.from, c.to, c.dlq, DeadLetterOptions{})
		if !errors.Is(err, c.want) || res.Moved != 0 {
			t.Errorf("%s: %+v, %v; want %v", c.name, res, err, c.want)
		}
	}
	for _, name := range []string{"dlq.plain", "dlq.orders", "errors", "__dlq.internal"} {
		if hw := e.Topic(name).Partition(0).HighWatermark(); hw != 0 {
			t.Errorf("%s has %d records after refused moves", name, hw)
		}
	}
	// The same topic becomes usable with the config.
	if err := e.SetTopicConfig("dlq.plain", map[string]string{"errors.deadletterqueue.group.enable": "true"}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.MoveToDeadLetter(src, 1, 3, "dlq.plain", DeadLetterOptions{}); err != nil || res.Moved != 2 {
		t.Fatalf("after setting the config: %+v, %v", res, err)
	}
	if enabled.Partition(0).HighWatermark() != 0 {
		t.Fatal("dlq.orders was written")
	}
}

// Records moved from several partitions and topics re-driven: to their
// partitions, with their headers only, filtered by source topic; a dead
// letter with no record is skipped and counted.
func TestDeadLetterRedrive(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	noPrealloc := map[string]string{"preallocate": "false"}
	orders := mustTopic(t, e, "orders", 3, noPrealloc)
	payments := mustTopic(t, e, "payments", 1, noPrealloc)
	dlq := dlqTopic(t, e, "dlq.shared", 2)
	for p := range int32(3) {
		for i := range 3 {
			appendRecords(t, orders.Partition(p), hrec{key: fmt.Appendf(nil, "o%d-%d", p, i), value: []byte("v"),
				headers: []record.RecordHeader{header("h", strconv.Itoa(int(p)))}})
		}
	}
	appendRecords(t, payments.Partition(0), hrec{key: []byte("pay"), value: []byte("1")}, hrec{value: []byte("keyless")})
	for p := range int32(3) { // orders 0 and 2 to dlq partition 0, orders 1 to 1
		if _, err := e.MoveToDeadLetter(TopicPartition{"orders", p}, 0, 3, "dlq.shared", DeadLetterOptions{Group: "g"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.MoveToDeadLetter(TopicPartition{"payments", 0}, 0, 2, "dlq.shared", DeadLetterOptions{}); err != nil {
		t.Fatal(err)
	}
	// A share group's dead letter without a copy of the record.
	appendRecords(t, dlq.Partition(1), hrec{headers: []record.RecordHeader{header("__dlq.errors.topic", "orders"),
		header("__dlq.errors.partition", "1"), header("__dlq.errors.offset", "0"), header("__dlq.errors.delivery.count", "5")}})

	// Only orders' dead letters, back to orders: each to its partition.
	res, err := e.RedriveDeadLetters("dlq.shared", "orders", RedriveOptions{SourceTopic: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Redriven != 9 || res.SkippedNoRecord != 1 || res.SkippedOtherTopic != 2 {
		t.Fatalf("redrive: %+v", res)
	}
	wantParts := []RedrivenPartition{{Partition: 0, From: 0, To: 8, Redriven: 6}, {Partition: 1, From: 0, To: 4, Redriven: 3}}
	if !slices.Equal(res.Partitions, wantParts) {
		t.Fatalf("partitions %+v, want %+v", res.Partitions, wantParts)
	}
	for p := range int32(3) {
		recs := consumeAll(t, orders, p)
		if len(recs) != 6 {
			t.Fatalf("orders-%d holds %d records, want 3 + 3 re-driven", p, len(recs))
		}
		for i, r := range recs[3:] {
			if r.Offset != int64(3+i) || string(r.Key) != fmt.Sprintf("o%d-%d", p, i) || string(r.Value) != "v" {
				t.Errorf("orders-%d: re-driven %d is %d %q=%q", p, i, r.Offset, r.Key, r.Value)
			}
			if err := sameHeaders(r.Headers, []record.RecordHeader{header("h", strconv.Itoa(int(p)))}); err != nil {
				t.Errorf("orders-%d offset %d: %v", p, r.Offset, err)
			}
		}
	}

	// payments' dead letters (dead-letter partition 0, offsets 6 and 7)
	// to another topic that has their partition, 0.
	retry := mustTopic(t, e, "retry", 2, noPrealloc)
	res, err = e.RedriveDeadLetters("dlq.shared", "retry", RedriveOptions{Partitions: []int32{0}, From: 6, To: 100, SourceTopic: "payments"})
	if err != nil || res.Redriven != 2 || res.SkippedOtherTopic != 0 || len(res.Partitions) != 1 || res.Partitions[0].From != 6 || res.Partitions[0].To != 8 {
		t.Fatalf("payments to retry: %+v, %v", res, err)
	}
	if recs := consumeAll(t, retry, 0); len(recs) != 2 || string(recs[0].Key) != "pay" || recs[1].Key != nil || string(recs[1].Value) != "keyless" {
		t.Fatalf("retry-0 holds %+v", recs)
	}

	// orders-2's dead letters to a 2-partition topic: partition 2 is not
	// there, so by key.
	res, err = e.RedriveDeadLetters("dlq.shared", "retry", RedriveOptions{Partitions: []int32{0}, To: 6, SourceTopic: "orders"})
	if err != nil || res.Redriven != 6 {
		t.Fatalf("orders to retry: %+v, %v", res, err)
	}
	byKey := map[string]int32{}
	for p := range int32(2) {
		for _, r := range consumeAll(t, retry, p) {
			byKey[string(r.Key)] = p
		}
	}
	for i := range 3 {
		if p := byKey[fmt.Sprintf("o0-%d", i)]; p != 0 {
			t.Errorf("o0-%d went to retry-%d, want its partition 0", i, p)
		}
		k := fmt.Sprintf("o2-%d", i)
		if p, ok := byKey[k]; !ok || p != partitioner.KeyPartition([]byte(k), 2) {
			t.Errorf("%s went to retry-%d (%v), want its key's partition %d", k, p, ok, partitioner.KeyPartition([]byte(k), 2))
		}
	}

	// Refusals write nothing.
	if _, err := e.RedriveDeadLetters("dlq.shared", "dlq.shared", RedriveOptions{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("re-drive to itself: %v", err)
	}
	if _, err := e.RedriveDeadLetters("dlq.shared", "nope", RedriveOptions{}); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("unknown target: %v", err)
	}
	if _, err := e.RedriveDeadLetters("dlq.shared", "orders", RedriveOptions{Partitions: []int32{0, 5}}); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("unknown partition: %v", err)
	}
	if err := dlq.Truncate(0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := e.RedriveDeadLetters("dlq.shared", "orders", RedriveOptions{From: 1}); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("from below the log start: %v", err)
	}
	for p := range int32(3) {
		if n := len(consumeAll(t, orders, p)); n != 6 {
			t.Errorf("orders-%d holds %d records after refused re-drives, want 6", p, n)
		}
	}
}

// The move's and the re-drive's memory does not grow with the range: they
// read and append a chunk at a time, and append in batches of at most
// deadLetterBatchBytes.
func TestDeadLetterBatches(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	src := mustTopic(t, e, "big", 1, map[string]string{"preallocate": "false"})
	dlqTopic(t, e, "dlq.big", 1)
	l := src.Partition(0)
	value := bytes.Repeat([]byte("x"), 10_000)
	for range 40 { // 40 batches of 10 records: 4 MB
		recs := make([]hrec, 10)
		for i := range recs {
			recs[i] = hrec{key: []byte("k"), value: value}
		}
		appendRecords(t, l, recs...)
	}
	res, err := e.MoveToDeadLetter(TopicPartition{"big", 0}, 0, 400, "", DeadLetterOptions{})
	if err != nil || res.Moved != 400 {
		t.Fatalf("move: %+v, %v", res, err)
	}
	batches, _ := readAll(t, e.Topic("dlq.big").Partition(0), 0, 1<<30)
	if len(batches) < 4 {
		t.Fatalf("%d dead-letter batches for 4 MB, want at least 4 (of at most %d bytes)", len(batches), deadLetterBatchBytes)
	}
	for i, b := range batches {
		if len(b) > deadLetterBatchBytes+1000 {
			t.Errorf("batch %d is %d bytes", i, len(b))
		}
	}
}

// No allocation per record: 2000 small records in 4 batches move with a
// few allocations per batch read or appended.
func TestDeadLetterMoveAllocs(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	src := mustTopic(t, e, "small", 1, map[string]string{"preallocate": "false"})
	dlqTopic(t, e, "dlq.small", 1)
	for range 4 {
		recs := make([]hrec, 500)
		for i := range recs {
			recs[i] = hrec{key: []byte("key"), value: []byte("value"), headers: []record.RecordHeader{header("trace", "abc")}}
		}
		appendRecords(t, src.Partition(0), recs...)
	}
	allocs := testing.AllocsPerRun(3, func() {
		if res, err := e.MoveToDeadLetter(TopicPartition{"small", 0}, 0, 2000, "", DeadLetterOptions{Group: "g"}); err != nil || res.Moved != 2000 {
			t.Fatalf("move: %+v, %v", res, err)
		}
	})
	if allocs > 300 {
		t.Errorf("a move of 2000 records in 4 batches allocates %.0f times", allocs)
	}
	t.Logf("%.0f allocations to move 2000 records", allocs)
	allocs = testing.AllocsPerRun(3, func() {
		if res, err := e.RedriveDeadLetters("dlq.small", "small", RedriveOptions{To: 2000}); err != nil || res.Redriven != 2000 {
			t.Fatalf("redrive: %+v, %v", res, err)
		}
	})
	if allocs > 300 {
		t.Errorf("a re-drive of 2000 records allocates %.0f times", allocs)
	}
	t.Logf("%.0f allocations to re-drive 2000 records", allocs)
}

// Dead letters with no partition header the target has: by key, and round
// robin for a null key.
func TestDeadLetterRedriveNoPartition(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	target := mustTopic(t, e, "target", 2, map[string]string{"preallocate": "false"})
	dlq := dlqTopic(t, e, "dlq.x", 1)
	appendRecords(t, dlq.Partition(0),
		hrec{value: []byte("a"), headers: []record.RecordHeader{header("__dlq.errors.partition", "7")}},
		hrec{value: []byte("b"), headers: []record.RecordHeader{header("__dlq.errors.partition", "-1")}},
		hrec{value: []byte("c")},
		hrec{key: []byte("key-1"), value: []byte("d"), headers: []record.RecordHeader{header("__dlq.errors.partition", "x")}})
	res, err := e.RedriveDeadLetters("dlq.x", "target", RedriveOptions{})
	if err != nil || res.Redriven != 4 {
		t.Fatalf("%+v, %v", res, err)
	}
	got := map[string]int32{}
	for p := range int32(2) {
		for _, r := range consumeAll(t, target, p) {
			got[string(r.Value)] = p
		}
	}
	kp := partitioner.KeyPartition([]byte("key-1"), 2)
	if want := map[string]int32{"a": 0, "b": 1, "c": 0, "d": kp}; !maps.Equal(got, want) {
		t.Fatalf("partitions %v, want %v", got, want)
	}
}
