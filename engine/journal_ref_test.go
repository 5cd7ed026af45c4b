package engine

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/vfs"
)

// TestJournalWritesFromSegmentChunks: appends of journalSpanMin bytes or
// more are journaled as ref records, written from the segments' chunk
// memory (no staging copy) where the segments are io_uring O_DIRECT ones;
// after a crash (a copy of the directory as the process left it) replay
// puts every acknowledged batch back from them. Without that backend the
// same appends are copied (no ref group) and come back all the same.
func TestJournalWritesFromSegmentChunks(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, journalOpts)
	const parts = 4
	tp := mustTopic(t, e, "r", parts, nil)
	// 12 records of 1 KiB a batch (~12 KiB, above journalSpanMin), plus
	// small ones in between (copied), so groups mix both kinds.
	want := appendJournaled(t, tp, parts, 80, 12, 1024, 1)
	small := appendJournaled(t, tp, parts, 8, 1, 100, 900)
	for p := range want {
		want[p] = append(want[p], small[p]...)
	}
	st, _ := e.JournalStats()
	direct := e.io.ring != nil
	if direct && st.RefGroups == 0 {
		t.Fatalf("io_uring O_DIRECT segments, %d groups, none written from segment chunks", st.Groups)
	}
	if !direct && st.RefGroups != 0 {
		t.Fatalf("%d ref groups without O_DIRECT segments", st.RefGroups)
	}
	crash := t.TempDir()
	copyDir(t, dir, crash)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := openEngine(t, crash, journalOpts)
	defer e2.Close()
	if e2.jnl.replayed.written == 0 {
		t.Fatalf("replay wrote nothing (%+v)", e2.jnl.replayed)
	}
	for p := 0; p < parts; p++ {
		checkLog(t, e2, "r", p, want[p])
	}
}

// TestJournalRefGroupCoversEveryDataByte: in a group written from segment
// chunks, a byte changed anywhere in the records or in the batches the ref
// records point at fails the group's check (replay stops before it); the
// padding around the spans (other bytes of the chunks) is not covered and
// changing it changes nothing.
func TestJournalRefGroupCoversEveryDataByte(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, journalOpts)
	if e.io.ring == nil {
		t.Fatal("needs io_uring O_DIRECT segments (the development and CI machines have them)")
	}
	tp := mustTopic(t, e, "c", 2, nil)
	appendJournaled(t, tp, 2, 6, 10, 1000, 3)
	crash := t.TempDir()
	copyDir(t, dir, crash)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	var buf []byte
	var g journalGroupRef
	for i := 0; i < journalFiles && buf == nil; i++ {
		path := filepath.Join(crash, journalDirName, fmt.Sprintf("journal-%d", i))
		f, err := vfs.OS.OpenFile(path, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		gs, err := scanJournalFile(f, i, fi.Size())
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range gs {
			if x.area > 0 {
				g, buf = x, make([]byte, x.length)
				if _, err := f.ReadAt(buf, x.off); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		f.Close()
	}
	if buf == nil {
		t.Fatal("no ref group in the journal")
	}
	if !validGroup(buf, g, journalMagicRef) {
		t.Fatal("the intact group fails its check")
	}
	covered := make([]bool, len(buf))
	for i := 8; i < g.area; i++ {
		covered[i] = true
	}
	// The records end before the area's padding: walk them for their end
	// and for the spans' data.
	p := journalGroupHdr
	for k := uint32(0); k < g.count; k++ {
		n := int(binary.BigEndian.Uint32(buf[p:]))
		if buf[p+5]&journalFlagRef != 0 {
			nameLen := int(binary.BigEndian.Uint16(buf[p+28:]))
			f := buf[p+journalRecHdr+nameLen : p+n]
			spans := int(binary.BigEndian.Uint16(f[4:]))
			for i := 0; i < spans; i++ {
				s := f[journalRefHdr+journalRefSpan*i:]
				at := g.area + int(binary.BigEndian.Uint32(s[0:])+binary.BigEndian.Uint32(s[4:]))
				for b := at; b < at+int(binary.BigEndian.Uint32(s[8:])); b++ {
					covered[b] = true
				}
			}
		}
		p += n
	}
	for i := p; i < g.area; i++ {
		covered[i] = false // the records' padding
	}
	padding := 0
	for i := 8; i < len(buf); i++ {
		buf[i] ^= 0x01
		ok := validGroup(buf, g, journalMagicRef)
		buf[i] ^= 0x01
		if covered[i] && ok {
			t.Fatalf("byte %d of %d (payload area at %d) flipped passes the check", i, len(buf), g.area)
		}
		if !covered[i] {
			padding++
			if !ok {
				t.Fatalf("padding byte %d flipped fails the check", i)
			}
		}
	}
	if padding == 0 {
		t.Fatal("no padding byte in the group: the test did not exercise span alignment")
	}
}

// TestJournalShedsPinsBeforeWaitingForACheckpoint: when the writer must
// wait for a checkpoint before it overwrites a file (the checkpoints are
// held here), it first copies the span memory of its group and of the
// stage into their own buffers and lets the chunks go, and the stage then
// copies appends instead of pinning chunks (a checkpoint needs segment
// locks an appender may hold while it waits for a chunk). Every append is
// durable once the checkpoints run again, and back after a crash.
func TestJournalShedsPinsBeforeWaitingForACheckpoint(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, journalOpts)
	defer e.Close()
	if e.io.ring == nil {
		t.Fatal("needs io_uring O_DIRECT segments (the development and CI machines have them)")
	}
	const parts = 4
	tp := mustTopic(t, e, "s", parts, nil)
	j := e.jnl
	j.ckptMu.Lock() // no checkpoint can run: the writer must wait at its first wrap
	held := true
	defer func() {
		if held {
			j.ckptMu.Unlock()
		}
	}()
	type appended struct {
		want [][][]byte
		err  error
	}
	done := make(chan appended, 1)
	go func() {
		want := make([][][]byte, parts)
		last := make([]int64, parts)
		// 32 records of 1 KiB a batch: ~2.5x the 16 MiB journal.
		for i := 0; i < 1200; i++ {
			p := i % parts
			b := batchOf(t, 32, 1024, 1_700_000_000_000, 7000+i)
			info, err := tp.Partition(int32(p)).Append(b, 0)
			if err != nil {
				done <- appended{err: err}
				return
			}
			want[p] = append(want[p], b)
			last[p] = info.LastOffset
		}
		for p := 0; p < parts; p++ {
			if err := waitDurable(t, tp.Partition(int32(p)), last[p]); err != nil {
				done <- appended{err: err}
				return
			}
		}
		done <- appended{want: want}
	}()
	deadline := time.Now().Add(30 * time.Second) // a hang guard, not a timing assertion
	for {
		j.mu.Lock()
		shed, staged := j.noPins, len(j.stage.spans)
		j.mu.Unlock()
		if shed {
			if staged != 0 {
				t.Fatalf("the stage holds %d spans while the writer waits for a checkpoint", staged)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never waited for a checkpoint")
		}
		time.Sleep(time.Millisecond)
	}
	j.ckptMu.Unlock()
	held = false
	var got appended
	select {
	case got = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("appends never became durable after the checkpoints resumed")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	if st, _ := e.JournalStats(); st.CheckpointWait.Count == 0 {
		t.Fatal("the writer's wait for a checkpoint is not in JournalStats")
	}
	crash := t.TempDir()
	copyDir(t, dir, crash)
	e2 := openEngine(t, crash, journalOpts)
	defer e2.Close()
	for p := 0; p < parts; p++ {
		checkLog(t, e2, "s", p, got.want[p])
	}
}
