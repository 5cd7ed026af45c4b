package engine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// partitionDirs lists the "<topic>-<n>" directories of dir, sorted.
func partitionDirs(t *testing.T, dir, topic string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ent := range ents {
		if tp, _, ok := parsePartitionDirName(ent.Name()); ok && tp == topic && ent.IsDir() {
			out = append(out, ent.Name())
		}
	}
	slices.Sort(out)
	return out
}

func hostedSet(tp *Topic) []int32 {
	var out []int32
	for p := int32(0); p < tp.Partitions(); p++ {
		if tp.Partition(p) != nil {
			out = append(out, p)
		}
	}
	return out
}

// TestReplicaTopicHostsOnlyItsPartitions: a replicas-only topic has logs
// (directories) only for the partitions given, across restarts; partitions
// are added (HostPartition) and dropped (DropPartition) one at a time; the
// engine's walks (config changes, retention, close) skip the holes.
func TestReplicaTopicHostsOnlyItsPartitions(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	id := [16]byte{0: 7, 15: 9}
	tp, err := e.CreateReplicaTopic("rt", id, 4, map[string]string{"retention.ms": "600000"}, []int32{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := partitionDirs(t, dir, "rt"); !slices.Equal(got, []string{"rt-1", "rt-3"}) {
		t.Fatalf("directories %v, want [rt-1 rt-3]", got)
	}
	if tp.Partitions() != 4 || !tp.ReplicasOnly() || !slices.Equal(hostedSet(tp), []int32{1, 3}) {
		t.Fatalf("partitions %d, hosted %v", tp.Partitions(), hostedSet(tp))
	}
	l1 := tp.Partition(1)
	info, err := l1.Append(makeBatch(t, testRecord{ts: 1, key: []byte("k"), value: []byte("v")}), 0)
	if err != nil {
		t.Fatal(err)
	}
	// Config changes and retention walk only the hosted logs.
	if err := e.SetTopicConfig("rt", map[string]string{"retention.ms": "700000"}); err != nil {
		t.Fatal(err)
	}
	e.enforceRetention()
	if _, _, err := tp.Produce(nil, []byte("x")); !errors.Is(err, ErrNotHosted) { // round robin starts at rt-0
		t.Fatalf("embedded Produce: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, dir, nil)
	tp = e.Topic("rt")
	if tp == nil || tp.ID() != id || !tp.ReplicasOnly() || !slices.Equal(hostedSet(tp), []int32{1, 3}) {
		t.Fatalf("after reopen: %v hosted %v", tp, hostedSet(tp))
	}
	if got := partitionDirs(t, dir, "rt"); !slices.Equal(got, []string{"rt-1", "rt-3"}) {
		t.Fatalf("reopen recreated directories: %v", got)
	}
	if end := tp.Partition(1).LogEndOffset(); end < info.LastOffset+1 {
		t.Fatalf("rt-1 log end %d after reopen, want > %d", end, info.LastOffset)
	}
	if tp.Overrides()["retention.ms"] != "700000" {
		t.Fatalf("overrides %v", tp.Overrides())
	}

	// Becoming a replica of rt-0, then no longer of rt-1.
	l0, err := e.HostPartition("rt", 0)
	if err != nil || l0 == nil || l0.LogEndOffset() != 0 {
		t.Fatalf("HostPartition: %v %v", l0, err)
	}
	if again, err := e.HostPartition("rt", 0); err != nil || again != l0 {
		t.Fatalf("HostPartition of a hosted partition: %v %v", again, err)
	}
	if err := e.DropPartition("rt", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.DropPartition("rt", 1); err != nil {
		t.Fatalf("dropping a partition not hosted: %v", err)
	}
	if _, err := l1.Read(0, 1<<20, true); err == nil {
		t.Fatal("read from a dropped log succeeded")
	}
	if _, err := e.HostPartition("rt", 4); err == nil {
		t.Fatal("HostPartition beyond the partition count succeeded")
	}
	if err := e.GrowReplicaTopic("rt", 6); err != nil {
		t.Fatal(err)
	}
	if got := partitionDirs(t, dir, "rt"); !slices.Equal(got, []string{"rt-0", "rt-3"}) {
		t.Fatalf("directories %v, want [rt-0 rt-3]", got)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, dir, nil)
	defer e.Close()
	tp = e.Topic("rt")
	if tp.Partitions() != 6 || !slices.Equal(hostedSet(tp), []int32{0, 3}) {
		t.Fatalf("after reopen: %d partitions, hosted %v", tp.Partitions(), hostedSet(tp))
	}
	ents, _ := os.ReadDir(dir)
	for _, ent := range ents {
		if strings.HasSuffix(ent.Name(), deleteDirSuffix) || strings.HasSuffix(ent.Name(), strayDirSuffix) {
			t.Fatalf("leftover %s", ent.Name())
		}
	}
	if err := e.DeleteTopic("rt"); err != nil {
		t.Fatal(err)
	}
	if got := partitionDirs(t, dir, "rt"); len(got) != 0 {
		t.Fatalf("directories after DeleteTopic: %v", got)
	}
}

// TestDropPartitionOfDenseTopic: dropping a partition of a topic created
// with every partition makes it replicas-only, so the next Open does not
// bring the dropped directory back.
func TestDropPartitionOfDenseTopic(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	if _, err := e.CreateTopicWithID("dt", [16]byte{0: 1, 15: 2}, 3, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.DropPartition("dt", 2); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "dt-2")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dt-2 still there: %v", err)
	}
	e = openEngine(t, dir, nil)
	defer e.Close()
	if got := hostedSet(e.Topic("dt")); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("hosted after reopen %v, want [0 1]", got)
	}
	if got := partitionDirs(t, dir, "dt"); !slices.Equal(got, []string{"dt-0", "dt-1"}) {
		t.Fatalf("directories %v", got)
	}
}
