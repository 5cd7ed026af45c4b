package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stratalog/strata/internal/vfs"
)

// TestCrashKeepsMetadataOperations drives the engine's directory and
// metadata operations over a vfs.MemFS and loses the power after each one
// returned (a strict crash: only what was synced survives): creating a
// topic and growing it, changing its config, marking a partition damaged
// and clearing the mark, a replicas-only topic's hosted partitions
// (create, host, drop) and deleting a topic. After each restart the engine
// finds what the operation did, and nothing ever reached the operating
// system's file system.
func TestCrashKeepsMetadataOperations(t *testing.T) {
	dir := t.TempDir()
	fsys := newDataFS(t, dir)
	open := func() *Engine { return openEngine(t, dir, func(o *Options) { o.fs = fsys }) }
	e := open()
	restart := func() {
		t.Helper()
		after := fsys.Crash(vfs.CrashOptions{})
		_ = e.Close() // after the power loss: errors expected
		fsys = after
		e = open()
	}
	defer func() { e.Close() }()
	topic := func(name string) *Topic {
		t.Helper()
		tp := e.Topic(name)
		if tp == nil {
			t.Fatalf("topic %s lost", name)
		}
		return tp
	}
	hosted := func(name string, p int32) bool {
		_, err := fsys.Stat(filepath.Join(dir, partitionDirName(name, p)))
		return err == nil && e.partitionHosted(name, p)
	}

	mustTopic(t, e, "a", 2, nil)
	l := topic("a").Partition(1)
	info := mustAppend(t, l, batchOf(t, 2, 10, 1, 1))
	if err := waitDurable(t, l, info.LastOffset); err != nil {
		t.Fatal(err)
	}
	restart()
	if n := topic("a").Partitions(); n != 2 {
		t.Fatalf("topic a has %d partitions after the restart, want 2", n)
	}
	if end := topic("a").Partition(1).LogEndOffset(); end != info.LastOffset+1 {
		t.Fatalf("a-1 ends at %d after the restart, want %d", end, info.LastOffset+1)
	}

	if err := e.CreatePartitions("a", 4); err != nil {
		t.Fatal(err)
	}
	restart()
	if n := topic("a").Partitions(); n != 4 {
		t.Fatalf("topic a has %d partitions after the restart, want 4", n)
	}
	mustAppend(t, topic("a").Partition(3), batchOf(t, 1, 10, 1, 2))

	if err := e.SetTopicConfig("a", map[string]string{"retention.ms": "123456"}); err != nil {
		t.Fatal(err)
	}
	restart()
	if r := topic("a").Config().RetentionMs; r != 123456 {
		t.Fatalf("retention.ms %d after the restart, want 123456", r)
	}

	if err := topic("a").Partition(0).MarkDamaged(); err != nil {
		t.Fatal(err)
	}
	restart()
	if !topic("a").Partition(0).Damaged() {
		t.Fatal("the damaged mark was lost")
	}
	if err := topic("a").Partition(0).ClearDamaged(); err != nil {
		t.Fatal(err)
	}
	restart()
	if topic("a").Partition(0).Damaged() {
		t.Fatal("the cleared damaged mark came back")
	}

	if _, err := e.CreateReplicaTopic("r", [16]byte{7}, 3, nil, []int32{0}); err != nil {
		t.Fatal(err)
	}
	restart()
	if !hosted("r", 0) || hosted("r", 1) || hosted("r", 2) {
		t.Fatalf("replica topic r hosts 0:%v 1:%v 2:%v after the restart, want only 0", hosted("r", 0), hosted("r", 1), hosted("r", 2))
	}
	if _, err := e.HostPartition("r", 2); err != nil {
		t.Fatal(err)
	}
	restart()
	if !hosted("r", 2) {
		t.Fatal("r-2 not hosted after the restart")
	}
	if err := e.DropPartition("r", 0); err != nil {
		t.Fatal(err)
	}
	restart()
	if hosted("r", 0) || !hosted("r", 2) {
		t.Fatalf("after dropping r-0 and a restart: hosts 0:%v 2:%v, want only 2", hosted("r", 0), hosted("r", 2))
	}

	if err := e.DeleteTopic("a"); err != nil {
		t.Fatal(err)
	}
	restart()
	if e.Topic("a") != nil {
		t.Fatal("deleted topic a is back after the restart")
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		if tp, _, ok := parsePartitionDirName(ent.Name()); ok && tp == "a" {
			t.Fatalf("deleted topic a's directory %s is still there", ent.Name())
		}
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("the engine reached the operating system's file system: %d entries in %s (%v)", len(ents), dir, err)
	}
}
