package engine

import (
	"errors"
	"github.com/stratalog/strata/partitioner"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestTopicsPersistAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	a := mustTopic(t, e, "alpha", 3, map[string]string{"retention.ms": "1000", "segment.bytes": "100000"})
	b := mustTopic(t, e, "beta.x", 1, nil)
	mustTopic(t, e, "gamma", 2, nil)
	if a.ID() == ([16]byte{}) || a.ID() == b.ID() {
		t.Fatalf("topic ids %x %x", a.ID(), b.ID())
	}
	if err := e.CreatePartitions("beta.x", 4); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteTopic("gamma"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Partition(2).Append(batchOf(t, 2, 10, 1, 0), 0); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := openEngine(t, dir, nil)
	defer e2.Close()
	var names []string
	for _, tp := range e2.Topics() {
		names = append(names, tp.Name())
	}
	if !reflect.DeepEqual(names, []string{"alpha", "beta.x"}) {
		t.Fatalf("topics after reopen: %v", names)
	}
	a2 := e2.Topic("alpha")
	if a2.ID() != a.ID() || a2.Partitions() != 3 || e2.TopicByID(a.ID()) != a2 {
		t.Fatalf("alpha after reopen: id %x partitions %d", a2.ID(), a2.Partitions())
	}
	if got := a2.Overrides(); !reflect.DeepEqual(got, map[string]string{"retention.ms": "1000", "segment.bytes": "100000"}) {
		t.Fatalf("overrides after reopen: %v", got)
	}
	if c := a2.Config(); c.RetentionMs != 1000 || c.SegmentBytes != 100000 || c.MaxMessageBytes != DefaultLogConfig().MaxMessageBytes {
		t.Fatalf("config after reopen: %+v", c)
	}
	if e2.Topic("beta.x").Partitions() != 4 {
		t.Fatalf("beta.x has %d partitions after reopen", e2.Topic("beta.x").Partitions())
	}
	if e2.Topic("gamma") != nil {
		t.Fatal("deleted topic came back")
	}
	if hw, _ := a2.HighWatermark(2); hw != 2 {
		t.Fatalf("alpha-2 HW %d after reopen", hw)
	}
	data, err := os.ReadFile(filepath.Join(dir, "alpha-1", partitionMetaFile))
	if err != nil || string(data) != "version: 0\ntopic_id: "+formatTopicID(a.ID())+"\n" {
		t.Fatalf("partition.metadata = %q (%v)", data, err)
	}
	ck, err := os.ReadFile(filepath.Join(dir, recoveryPointFile))
	if err != nil || !strings.HasPrefix(string(ck), "0\n7\n") || !strings.Contains(string(ck), "alpha 2 2\n") {
		t.Fatalf("recovery-point-offset-checkpoint = %q (%v)", ck, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gamma-0")); !os.IsNotExist(err) {
		t.Fatalf("gamma-0 still on disk: %v", err)
	}
}

func TestTopicAdminErrors(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	mustTopic(t, e, "a.b", 1, nil)
	for _, tc := range []struct {
		name  string
		parts int32
		cfg   map[string]string
		want  error
	}{
		{"a.b", 1, nil, ErrTopicExists},
		{"a_b", 1, nil, ErrInvalidTopic}, // collides with a.b
		{"", 1, nil, ErrInvalidTopic},
		{".", 1, nil, ErrInvalidTopic},
		{"..", 1, nil, ErrInvalidTopic},
		{"bad/name", 1, nil, ErrInvalidTopic},
		{strings.Repeat("x", 250), 1, nil, ErrInvalidTopic},
		{"ok", 0, nil, ErrInvalidPartitions},
		{"ok", -3, nil, ErrInvalidPartitions},
		{"ok", 1, map[string]string{"nope": "1"}, ErrInvalidConfig},
		{"ok", 1, map[string]string{"segment.bytes": "1"}, ErrInvalidConfig},
	} {
		if _, err := e.CreateTopic(tc.name, tc.parts, tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("CreateTopic(%q, %d, %v) = %v, want %v", tc.name, tc.parts, tc.cfg, err, tc.want)
		}
	}
	if _, err := e.CreateTopic(strings.Repeat("x", 249), 1, nil); err != nil {
		t.Errorf("249-character name rejected: %v", err)
	}
	if err := e.CreatePartitions("a.b", 1); !errors.Is(err, ErrInvalidPartitions) {
		t.Errorf("CreatePartitions to the same count: %v", err)
	}
	if err := e.CreatePartitions("nope", 3); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("CreatePartitions of unknown topic: %v", err)
	}
	if err := e.DeleteTopic("nope"); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("DeleteTopic of unknown topic: %v", err)
	}
	tp := e.Topic("a.b")
	if tp.Partition(1) != nil || tp.Partition(-1) != nil {
		t.Error("Partition out of range is not nil")
	}
	if _, err := tp.HighWatermark(5); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("HighWatermark(5): %v", err)
	}
}

func TestDeleteTopicWhileReading(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "dr", 1, smallConfig()).Partition(0)
	info := mustAppend(t, l, batchOf(t, 3, 100, 1, 0))
	if err := waitDurable(t, l, info.LastOffset); err != nil {
		t.Fatal(err)
	}
	res, err := l.Read(0, 1<<20, true)
	if err != nil || len(res.Chunks) != 1 {
		t.Fatalf("Read: %v", err)
	}
	pending := make(chan error, 1)
	l.WhenDurable(1000, func(err error) { pending <- err })
	if err := e.DeleteTopic("dr"); err != nil {
		t.Fatal(err)
	}
	if err := <-pending; !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("pending WhenDurable after delete: %v", err)
	}
	if data := readChunks(t, res); len(data) != int(res.Bytes) {
		t.Fatal("pinned chunk unreadable after DeleteTopic")
	}
	res.Release()
	if _, err := l.Append(batchOf(t, 1, 1, 1, 0), 0); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("Append to a deleted topic: %v", err)
	}
	if _, err := e.CreateTopic("dr", 2, nil); err != nil {
		t.Fatalf("re-creating a deleted topic: %v", err)
	}
}

func TestEmbeddedProduceConsume(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	tp := mustTopic(t, e, "emb", 4, nil)
	keys := []string{"user-1", "user-2", "order-77", ""}
	offsets := map[int32]int64{}
	for i := 0; i < 40; i++ {
		k := []byte(keys[i%len(keys)])
		p, off, err := tp.Produce(k, []byte("v"+string(rune('a'+i%26))))
		if err != nil {
			t.Fatal(err)
		}
		if want := partitioner.KeyPartition(k, 4); p != want {
			t.Fatalf("key %q went to partition %d, murmur2 says %d", k, p, want)
		}
		if off != offsets[p] {
			t.Fatalf("partition %d: offset %d, want %d", p, off, offsets[p])
		}
		offsets[p]++
		if hw, _ := tp.HighWatermark(p); hw <= off {
			t.Fatalf("Produce returned before the HW passed %d (HW %d)", off, hw)
		}
	}
	seen := map[int32]bool{}
	for i := 0; i < 8; i++ {
		p, _, err := tp.Produce(nil, []byte("rr"))
		if err != nil {
			t.Fatal(err)
		}
		seen[p] = true
	}
	if len(seen) != 4 {
		t.Fatalf("nil keys hit partitions %v, want all 4 round-robin", seen)
	}
	p := partitioner.KeyPartition([]byte("user-1"), 4)
	recs, err := tp.Consume(p, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	hw, _ := tp.HighWatermark(p)
	if int64(len(recs)) != hw {
		t.Fatalf("consumed %d records from partition %d, HW %d", len(recs), p, hw)
	}
	for i, r := range recs {
		if r.Offset != int64(i) || r.Partition != p || r.Timestamp.IsZero() {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if some, _ := tp.Consume(p, 2, 3); len(some) != 3 || some[0].Offset != 2 {
		t.Fatalf("Consume(from 2, max 3) = %d records starting %v", len(some), some)
	}
	if err := tp.Truncate(p, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Consume(p, 0, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Consume below the truncation point: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := openEngine(t, dir, nil)
	defer e2.Close()
	after, err := e2.Topic("emb").Consume(p, 3, 1000)
	if err != nil || int64(len(after)) != hw-3 || string(after[0].Key) != string(recs[3].Key) {
		t.Fatalf("after reopen: %d records (%v)", len(after), err)
	}
}
