package engine

import (
	"bytes"
	"github.com/stratalog/strata/internal/vfs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestOffsetCheckpointFormat(t *testing.T) {
	m := map[topicPartition]int64{{"b", 0}: 7, {"a", 1}: 3, {"a", 0}: 0}
	got := formatOffsetCheckpoint(m)
	if string(got) != "0\n3\na 0 0\na 1 3\nb 0 7\n" {
		t.Fatalf("checkpoint = %q", got)
	}
	back, err := parseOffsetCheckpoint(got)
	if err != nil || !reflect.DeepEqual(back, m) {
		t.Fatalf("round trip: %v %v", back, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "0\n1\na 0 -1\n", "0\n1\nbad/topic 0 1\n"} {
		if _, err := parseOffsetCheckpoint([]byte(bad)); err == nil {
			t.Errorf("parsed malformed checkpoint %q", bad)
		}
	}
}

func TestPartitionMetadataFormat(t *testing.T) {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	data := formatPartitionMetadata(id)
	if string(data) != "version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA\n" {
		t.Fatalf("partition.metadata = %q", data)
	}
	back, err := parsePartitionMetadata(data)
	if err != nil || back != id {
		t.Fatalf("round trip: %x %v", back, err)
	}
	for _, bad := range []string{"", "version: 1\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA\n", "version: 0\n", "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n", "version: 0\ntopic_id: short\n", "junk"} {
		if _, err := parsePartitionMetadata([]byte(bad)); err == nil {
			t.Errorf("parsed malformed partition.metadata %q", bad)
		}
	}
}

func TestEpochCache(t *testing.T) {
	var c epochCache
	for _, a := range []struct {
		epoch int32
		start int64
	}{{0, 0}, {0, 5}, {2, 10}, {5, 20}} {
		c.assign(a.epoch, a.start)
	}
	if !reflect.DeepEqual(c.entries, []epochEntry{{0, 0}, {2, 10}, {5, 20}}) {
		t.Fatalf("entries %v", c.entries)
	}
	for _, q := range []struct {
		ask      int32
		epoch    int32
		endOffst int64
	}{{0, 0, 10}, {1, 0, 10}, {2, 2, 20}, {4, 2, 20}, {5, 5, 30}, {6, -1, -1}, {-1, -1, -1}} {
		if ep, end := c.endOffsetFor(q.ask, 30); ep != q.epoch || end != q.endOffst {
			t.Errorf("endOffsetFor(%d) = (%d, %d), want (%d, %d)", q.ask, ep, end, q.epoch, q.endOffst)
		}
	}
	// A requested epoch below every entry answers with the first start.
	d := epochCache{entries: []epochEntry{{3, 100}}}
	if ep, end := d.endOffsetFor(1, 200); ep != 1 || end != 100 {
		t.Errorf("endOffsetFor below first = (%d, %d)", ep, end)
	}
	c.truncateFromEnd(20)
	if !reflect.DeepEqual(c.entries, []epochEntry{{0, 0}, {2, 10}}) {
		t.Fatalf("after truncateFromEnd(20): %v", c.entries)
	}
	c.truncateFromStart(12)
	if !reflect.DeepEqual(c.entries, []epochEntry{{2, 12}}) {
		t.Fatalf("after truncateFromStart(12): %v", c.entries)
	}
	// A lower epoch (a new leader's history) replaces newer entries, as Kafka.
	c.assign(7, 30)
	c.assign(6, 40)
	if !reflect.DeepEqual(c.entries, []epochEntry{{2, 12}, {6, 40}}) {
		t.Fatalf("after non-monotonic assign: %v", c.entries)
	}
	data := formatEpochCheckpoint(c.entries)
	back, err := parseEpochCheckpoint(data)
	if err != nil || !reflect.DeepEqual(back, c.entries) {
		t.Fatalf("epoch checkpoint round trip: %v %v", back, err)
	}
	if _, err := parseEpochCheckpoint([]byte("0\n2\n3 10\n2 20\n")); err == nil {
		t.Error("parsed decreasing epochs")
	}
}

func TestWriteFileAtomicLongName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, strings.Repeat("t", 249)+".json")
	if err := vfs.WriteFileAtomic(path, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(path, []byte("y")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "y" {
		t.Fatalf("read back %q %v", got, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("%d files left in the directory", len(ents))
	}
}

func TestTopicMetaRoundTrip(t *testing.T) {
	id := [16]byte{9: 1}
	data := formatTopicMeta("orders", id, 3, map[string]string{"retention.ms": "5"})
	m, back, err := parseTopicMeta(data)
	if err != nil || back != id || m.Name != "orders" || m.Partitions != 3 || m.Configs["retention.ms"] != "5" {
		t.Fatalf("round trip: %+v %x %v", m, back, err)
	}
}

func FuzzParseOffsetCheckpoint(f *testing.F) {
	f.Add([]byte("0\n2\na 0 5\nb.c 3 9\n"))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n1\nx 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseOffsetCheckpoint(data)
		if err != nil {
			return
		}
		// Whatever parses re-encodes to something that parses to the same.
		back, err := parseOffsetCheckpoint(formatOffsetCheckpoint(m))
		if err != nil || !reflect.DeepEqual(back, m) {
			t.Fatalf("re-encoded checkpoint differs: %v %v", back, err)
		}
		for tp, off := range m {
			if tp.Partition < 0 || off < 0 || validateTopicName(tp.Topic) != nil {
				t.Fatalf("accepted entry %v %d", tp, off)
			}
		}
	})
}

func FuzzParseEpochCheckpoint(f *testing.F) {
	f.Add([]byte("0\n2\n0 0\n3 100\n"))
	f.Add([]byte("0\n0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseEpochCheckpoint(data)
		if err != nil {
			return
		}
		for i := 1; i < len(entries); i++ {
			if entries[i].Epoch <= entries[i-1].Epoch || entries[i].StartOffset < entries[i-1].StartOffset {
				t.Fatalf("accepted non-increasing entries %v", entries)
			}
		}
		back, err := parseEpochCheckpoint(formatEpochCheckpoint(entries))
		if err != nil || !reflect.DeepEqual(back, entries) {
			t.Fatalf("round trip: %v %v", back, err)
		}
	})
}

func FuzzParsePartitionMetadata(f *testing.F) {
	f.Add([]byte("version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA\n"))
	f.Add([]byte("version: 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := parsePartitionMetadata(data)
		if err != nil {
			return
		}
		if id == ([16]byte{}) {
			t.Fatal("accepted the all-zero topic id")
		}
		if back, err := parsePartitionMetadata(formatPartitionMetadata(id)); err != nil || back != id {
			t.Fatalf("round trip: %x %v", back, err)
		}
	})
}

func FuzzParseTopicMeta(f *testing.F) {
	f.Add(formatTopicMeta("orders", [16]byte{1}, 3, map[string]string{"retention.ms": "5"}))
	f.Add([]byte(`{"version":1,"name":"..","id":"AQIDBAUGBwgJCgsMDQ4PEA","partitions":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, id, err := parseTopicMeta(data)
		if err != nil {
			return
		}
		if validateTopicName(m.Name) != nil || m.Partitions < 1 || m.Partitions > maxPartitions || id == ([16]byte{}) {
			t.Fatalf("accepted %+v", m)
		}
		again := formatTopicMeta(m.Name, id, m.Partitions, m.Configs)
		m2, id2, err := parseTopicMeta(again)
		if err != nil || id2 != id || m2.Name != m.Name || !bytes.Equal(formatTopicMeta(m2.Name, id2, m2.Partitions, m2.Configs), again) {
			t.Fatalf("round trip: %+v %v", m2, err)
		}
	})
}
