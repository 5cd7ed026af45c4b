package sharehost

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/share"
)

// TestDeadLetterSearch: the search for dead letters already written
// (findDeadLetters) reads the dead-letter partition from the first record
// stamped at or after the time asked (older ones are not read) and takes
// only the records whose headers name the job's group, source topic and
// partition, and the offset and delivery count of one of its letters.
func TestDeadLetterSearch(t *testing.T) {
	eng, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	tp, err := eng.CreateTopic("dlq.x", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := tp.Partition(0)
	write := func(ts int64, group, topic string, part, off, count int) {
		t.Helper()
		var b record.Builder
		b.Reset(record.CodecNone, ts)
		b.Add(ts, nil, nil, []record.RecordHeader{
			{Key: dlqHeaderTopic, Value: []byte(topic)},
			{Key: dlqHeaderPartition, Value: []byte(strconv.Itoa(part))},
			{Key: dlqHeaderOffset, Value: []byte(strconv.Itoa(off))},
			{Key: dlqHeaderGroup, Value: []byte(group)},
			{Key: dlqHeaderCount, Value: []byte(strconv.Itoa(count))},
		})
		batch, err := b.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(batch, l.LeaderEpoch()); err != nil {
			t.Fatal(err)
		}
	}
	write(1000, "g", "src", 2, 7, 1)   // before the bound: not read
	write(5000, "g", "src", 2, 8, 1)   // ours
	write(5001, "h", "src", 2, 9, 1)   // another group
	write(5002, "g", "other", 2, 9, 1) // another topic
	write(5003, "g", "src", 3, 9, 1)   // another partition
	write(5004, "g", "src", 2, 9, 2)   // another delivery count
	write(5005, "g", "src", 2, 10, 3)  // ours
	write(5006, "g", "src", 2, 11, 1)  // not a letter of the job
	durable := make(chan error, 1)
	l.WhenDurable(l.LogEndOffset()-1, func(err error) { durable <- err }) // below the high watermark
	if err := <-durable; err != nil {
		t.Fatal(err)
	}

	j := &dlqJob{k: Key{Group: "g", Part: 2}, srcName: "src", letters: []share.DeadLetter{
		{Offset: 7, Count: 1}, {Offset: 8, Count: 1}, {Offset: 9, Count: 1}, {Offset: 10, Count: 3}}}
	for _, tc := range []struct {
		ts   int64
		want []int64
	}{
		{4000, []int64{8, 10}},
		{-2, []int64{7, 8, 10}}, // the whole partition
		{6000, nil},             // nothing that recent
	} {
		m := newDLQMatch(j)
		if err := scanFrom(context.Background(), l, tc.ts, m.batches); err != nil {
			t.Fatal(err)
		}
		if got := m.found(); !slices.Equal(got, tc.want) {
			t.Errorf("from %d: found %v, want %v", tc.ts, got, tc.want)
		}
	}
}
