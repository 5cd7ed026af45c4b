package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/vfs"
)

// epochGate is a file system whose writes of leader-epoch-checkpoint wait
// until the gate opens.
type epochGate struct {
	vfs.FS
	open chan struct{}
}

func (g *epochGate) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if filepath.Base(name) == filepath.Base(vfs.TmpPath(epochCheckpoint)) && flag&os.O_CREATE != 0 {
		<-g.open
	}
	return g.FS.OpenFile(name, flag, perm)
}

// An append that starts a leader epoch, or a new leader's
// AssignLeaderEpoch, does not write the epoch file: the next
// recovery-point checkpoint does.
func TestAppendDoesNotWaitForTheEpochFile(t *testing.T) {
	for _, journal := range []bool{true, false} {
		t.Run(fmt.Sprintf("journal=%v", journal), func(t *testing.T) {
			dir := t.TempDir()
			mfs := newDataFS(t, dir)
			g := &epochGate{FS: mfs, open: make(chan struct{})}
			e := openEngine(t, dir, func(o *Options) {
				o.fs = g
				if journal {
					o.JournalBytes, o.journalFS = journalMinBytes, o.fs
				}
			})
			defer e.Close()
			release := sync.OnceFunc(func() { close(g.open) })
			defer release() // before Close, which writes the file
			l := mustTopic(t, e, "ep", 1, smallConfig()).Partition(0)
			returns := func(what string, f func() error) {
				t.Helper()
				done := make(chan error, 1)
				go func() { done <- f() }()
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(30 * time.Second): // deadlock guard, not a timing assertion
					release()
					t.Fatalf("%s waited for leader-epoch-checkpoint to be written", what)
				}
			}
			returns("Append", func() error {
				_, err := l.Append(batchOf(t, 2, 10, 1, 0), 0)
				return err
			})
			if got := l.LeaderEpoch(); got != 0 {
				t.Fatalf("LeaderEpoch = %d after the first append at epoch 0", got)
			}
			returns("AssignLeaderEpoch", func() error { return l.AssignLeaderEpoch(2) })
			if got := l.LeaderEpoch(); got != 2 {
				t.Fatalf("LeaderEpoch = %d after AssignLeaderEpoch(2)", got)
			}
			if _, err := mfs.Stat(filepath.Join(l.dir, epochCheckpoint)); err == nil {
				t.Fatal("leader-epoch-checkpoint exists before any checkpoint")
			}
		})
	}
}

// A recovery point never passes a leader epoch whose entry is not in the
// epoch file: writeRecoveryCheckpoint writes the epoch files appends left
// to it first. Here the first epoch starts in a segment below the recovery
// point, which recovery does not walk, so after a crash only the file can
// hold its start; the later epoch, past the recovery point, comes back
// from the walk.
func TestRecoveryPointWritesTheEpochFileFirst(t *testing.T) {
	for _, journal := range []bool{true, false} {
		t.Run(fmt.Sprintf("journal=%v", journal), func(t *testing.T) {
			dir := t.TempDir()
			mfs := newDataFS(t, dir)
			withFS := func(fsys vfs.FS) func(*Options) {
				return func(o *Options) {
					o.fs = fsys
					if journal {
						o.JournalBytes, o.journalFS = journalMinBytes, o.fs
					}
				}
			}
			e := openEngine(t, dir, withFS(mfs))
			defer e.Close()
			l := mustTopic(t, e, "ep", 1, smallConfig()).Partition(0)
			var last AppendInfo
			for i := range 30 { // ~9 KiB: two rolls of 4 KiB segments or more
				info, err := l.Append(batchOf(t, 2, 100, 1, i), 0)
				if err != nil {
					t.Fatal(err)
				}
				last = info
			}
			if err := waitDurable(t, l, last.LastOffset); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { // the rolls' flush jobs are over: their indexes are synced
				l.mu.Lock()
				defer l.mu.Unlock()
				return (l.flushState == flushIdle || l.flushState == flushDeferred) && len(l.pending) == 0
			})
			if err := e.writeRecoveryCheckpoint(); err != nil {
				t.Fatal(err)
			}
			epoch3 := last.LastOffset + 1
			for i := range 2 {
				info, err := l.Append(batchOf(t, 2, 100, 1, 100+i), 3)
				if err != nil {
					t.Fatal(err)
				}
				last = info
			}
			if err := waitDurable(t, l, last.LastOffset); err != nil {
				t.Fatal(err)
			}

			after := mfs.Crash(vfs.CrashOptions{})
			e2 := openEngine(t, dir, withFS(after))
			defer e2.Close()
			l2 := e2.Topic("ep").Partition(0)
			if slices.Contains(l2.recoveredBases, 0) {
				t.Fatalf("recovery walked the first segment (walked %v): the test needs it below the recovery point", l2.recoveredBases)
			}
			l2.epochMu.Lock()
			got := l2.epochs.snapshot()
			l2.epochMu.Unlock()
			want := []epochEntry{{0, 0}, {3, epoch3}}
			if !slices.Equal(got, want) {
				t.Fatalf("leader epochs after the crash %v, want %v (recovery walked %v)", got, want, l2.recoveredBases)
			}
		})
	}
}
