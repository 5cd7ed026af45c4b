package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/crcsum"
	"github.com/stratalog/strata/record"
)

// recHandler is a ReplicationHandler that records what the engine reports.
type recHandler struct {
	durable atomic.Int64
	mu      sync.Mutex
	fetches []int64
	calls   chan int64 // every Durable end, buffered
}

func newRecHandler() *recHandler {
	h := &recHandler{calls: make(chan int64, 1024)}
	h.durable.Store(-1)
	return h
}

func (h *recHandler) Durable(end int64) {
	for {
		cur := h.durable.Load()
		if end <= cur || h.durable.CompareAndSwap(cur, end) {
			break
		}
	}
	select {
	case h.calls <- end:
	default:
	}
}

func (h *recHandler) FollowerFetch(id int32, off int64) error {
	h.mu.Lock()
	h.fetches = append(h.fetches, off)
	h.mu.Unlock()
	return nil
}

// waitReported waits until h has seen a durable end >= end (hang guard only).
func (h *recHandler) waitReported(t *testing.T, end int64) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for h.durable.Load() < end {
		select {
		case <-h.calls:
		case <-deadline:
			t.Fatalf("durable end %d never reported (have %d)", end, h.durable.Load())
		}
	}
}

// syncGate blocks every fsync while closed.
type syncGate struct {
	mu   sync.Mutex
	ch   chan struct{} // nil: open
	hits atomic.Int64
}

func (g *syncGate) hook(string) error {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch != nil {
		g.hits.Add(1)
		<-ch
	}
	return nil
}

func (g *syncGate) close() {
	g.mu.Lock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
	g.mu.Unlock()
}

func (g *syncGate) open() {
	g.mu.Lock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
	g.mu.Unlock()
}

// allBytes returns the log's batches from offset from to the log end (via
// ReadReplica), concatenated.
func allBytes(t testing.TB, l *Log, from int64) []byte {
	t.Helper()
	var out []byte
	for guard := 0; guard < 100000; guard++ {
		res, err := l.ReadReplica(from, 1<<20, true)
		if err != nil {
			t.Fatalf("ReadReplica(%d): %v", from, err)
		}
		if len(res.Chunks) == 0 {
			res.Release()
			return out
		}
		data := readChunks(t, res)
		res.Release()
		out = append(out, data...)
		for rest := data; len(rest) > 0; {
			_, r, h, err := record.Next(rest)
			if err != nil {
				t.Fatal(err)
			}
			from = h.LastOffset() + 1
			rest = r
		}
	}
	t.Fatal("allBytes did not terminate")
	return nil
}

func TestReplicatedLeaderHWIsDrivenAndClamped(t *testing.T) {
	gate := &syncGate{}
	e := openEngine(t, t.TempDir(), func(o *Options) { o.syncHook = gate.hook })
	defer e.Close()
	l := mustTopic(t, e, "r", 1, nil).Partition(0)
	h := newRecHandler()
	l.SetLeader(h)
	if l.Role() != RoleLeader {
		t.Fatalf("role %v", l.Role())
	}
	info := mustAppend(t, l, batchOf(t, 5, 10, 1000, 1))
	h.waitReported(t, info.LastOffset+1)
	if hw := l.HighWatermark(); hw != 0 {
		t.Fatalf("HW %d moved by itself in replicated mode", hw)
	}
	if got := l.DurableEnd(); got != info.LastOffset+1 {
		t.Fatalf("DurableEnd %d, want %d", got, info.LastOffset+1)
	}
	// Past the durable end: clamped.
	if hw := l.AdvanceHighWatermark(1000); hw != info.LastOffset+1 {
		t.Fatalf("AdvanceHighWatermark(1000) = %d, want %d", hw, info.LastOffset+1)
	}
	// Never backwards.
	if hw := l.AdvanceHighWatermark(2); hw != info.LastOffset+1 {
		t.Fatalf("HW went back to %d", hw)
	}

	// Written but not durable: the HW cannot pass the durable end, and the
	// follower-side read sees the bytes the consumer read does not.
	gate.close()
	info2 := mustAppend(t, l, batchOf(t, 3, 10, 1001, 2))
	if hw := l.AdvanceHighWatermark(1000); hw != info.LastOffset+1 {
		t.Fatalf("HW %d passed the durable end %d while the sync was blocked", hw, l.DurableEnd())
	}
	rr, err := l.ReadReplica(info2.BaseOffset, 1<<20, true)
	if err != nil || len(rr.Chunks) == 0 {
		t.Fatalf("ReadReplica past the HW: %v, %d chunks", err, len(rr.Chunks))
	}
	rr.Release()
	cr, err := l.Read(info2.BaseOffset, 1<<20, true)
	if err != nil || len(cr.Chunks) != 0 {
		t.Fatalf("Read past the HW returned %d chunks, err %v", len(cr.Chunks), err)
	}
	gate.open()
	h.waitReported(t, info2.LastOffset+1)
	if hw := l.AdvanceHighWatermark(info2.LastOffset + 1); hw != info2.LastOffset+1 {
		t.Fatalf("HW %d after the sync", hw)
	}

	// Back to standalone: the HW follows the durable end again.
	l.SetStandalone()
	info3 := mustAppend(t, l, batchOf(t, 1, 10, 1002, 3))
	if err := waitDurable(t, l, info3.LastOffset); err != nil {
		t.Fatal(err)
	}
	if err := l.FollowerFetch(1, 0); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("FollowerFetch on a standalone log: %v", err)
	}
}

func TestNotifyEndAndWaitEnd(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "n", 1, nil).Partition(0)
	l.SetLeader(newRecHandler())
	fired := make(chan struct{}, 4)
	cancel := l.NotifyEnd(0, func() { fired <- struct{}{} })
	defer cancel()
	ch := l.WaitEnd(0)
	cancelled := l.NotifyEnd(0, func() { t.Error("a cancelled NotifyEnd fired") })
	cancelled()
	select {
	case <-fired:
		t.Fatal("NotifyEnd fired before any append")
	case <-ch:
		t.Fatal("WaitEnd closed before any append")
	default:
	}
	mustAppend(t, l, batchOf(t, 1, 10, 1000, 1))
	select {
	case <-fired:
	case <-time.After(30 * time.Second):
		t.Fatal("NotifyEnd did not fire after an append")
	}
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("WaitEnd did not close after an append")
	}
	// Already past: inline.
	now := false
	l.NotifyEnd(0, func() { now = true })()
	if !now {
		t.Fatal("NotifyEnd below the log end did not fire inline")
	}
}

// sourceLog builds a standalone log with batches in several epochs and
// small segments; it returns the log and its bytes.
func sourceLog(t *testing.T, e *Engine, name string) (*Log, []byte) {
	t.Helper()
	l := mustTopic(t, e, name, 1, smallConfig()).Partition(0)
	seed := 0
	for _, epoch := range []int32{1, 1, 1, 3, 3, 4, 4, 4, 4, 7} {
		for i := 0; i < 3; i++ {
			seed++
			if _, err := l.Append(batchOf(t, 1+seed%4, 60, int64(1000+seed), seed), epoch); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := waitDurable(t, l, l.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
	return l, allBytes(t, l, 0)
}

// copyAsFollower feeds src's bytes to dst in pieces of about chunk bytes
// (cut anywhere: a partial batch at a piece's end is ignored and resent).
func copyAsFollower(t *testing.T, dst *Log, data []byte, chunk int) {
	t.Helper()
	for len(data) > 0 {
		n := min(chunk, len(data))
		info, err := dst.AppendAsFollower(data[:n])
		if err != nil {
			t.Fatalf("AppendAsFollower: %v", err)
		}
		used := 0
		if info.BaseOffset >= 0 {
			for rest := data; len(rest) > 0; {
				b, r, h, err := record.Next(rest)
				if err != nil || h.BaseOffset > info.LastOffset {
					break
				}
				used += len(b)
				rest = r
			}
		}
		if used == 0 && n == len(data) {
			t.Fatalf("AppendAsFollower took nothing of the last %d bytes", n)
		}
		if used == 0 {
			chunk *= 2
			continue
		}
		data = data[used:]
	}
}

func TestAppendAsFollowerKeepsBytesAndEpochs(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	src, data := sourceLog(t, e, "src")
	dst := mustTopic(t, e, "dst", 1, smallConfig()).Partition(0)
	h := newRecHandler()
	dst.SetFollower(h)
	copyAsFollower(t, dst, data, 700)
	if got := allBytes(t, dst, 0); !bytes.Equal(got, data) {
		t.Fatalf("follower holds %d bytes, differing from the leader's %d", len(got), len(data))
	}
	if dst.LogEndOffset() != src.LogEndOffset() || dst.LeaderEpoch() != 7 {
		t.Fatalf("follower end %d epoch %d; leader end %d", dst.LogEndOffset(), dst.LeaderEpoch(), src.LogEndOffset())
	}
	for _, ep := range []int32{0, 1, 2, 3, 4, 5, 6, 7, 8} {
		le, lo := src.EndOffsetForEpoch(ep)
		fe, fo := dst.EndOffsetForEpoch(ep)
		if le != fe || lo != fo {
			t.Fatalf("epoch %d: leader (%d, %d), follower (%d, %d)", ep, le, lo, fe, fo)
		}
	}
	checkIndexesAgainstWalk(t, dst)
	h.waitReported(t, dst.LogEndOffset())

	// Not contiguous: refused, nothing written.
	end := dst.LogEndOffset()
	if _, err := dst.AppendAsFollower(data[:len(data)/2]); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("re-appending old batches: %v", err)
	}
	// A corrupt batch: refused.
	b := batchOf(t, 2, 10, 5000, 99)
	record.SetBaseOffset(b, end)
	bad := bytes.Clone(b)
	bad[len(bad)-1] ^= 0xFF
	if _, err := dst.AppendAsFollower(bad); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("corrupt batch: %v", err)
	}
	// Overlapping batches (offsets not increasing): refused.
	b2 := batchOf(t, 1, 10, 5001, 100)
	record.SetBaseOffset(b2, end+1)
	if _, err := dst.AppendAsFollower(append(bytes.Clone(b), b2...)); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("overlapping batches: %v", err)
	}
	if dst.LogEndOffset() != end {
		t.Fatalf("a refused append moved the log end to %d", dst.LogEndOffset())
	}
	// Control batches and batches with any epoch are taken as the leader wrote them.
	record.SetPartitionLeaderEpoch(b, 9)
	if _, err := dst.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	if dst.LeaderEpoch() != 9 || dst.EpochStartOffset() != end {
		t.Fatalf("epoch %d at %d after a batch of epoch 9 at %d", dst.LeaderEpoch(), dst.EpochStartOffset(), end)
	}
}

func TestTruncateToThenRecover(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	src, data := sourceLog(t, e, "src")
	dst := mustTopic(t, e, "dst", 1, smallConfig()).Partition(0)
	dst.SetFollower(newRecHandler())
	copyAsFollower(t, dst, data, 700)
	if len(segmentBases(t, dst.dir)) < 2 {
		t.Fatalf("want several segments, have %v", segmentBases(t, dst.dir))
	}
	// Cut inside a batch in an early, sealed segment: the whole batch goes.
	var cutBase, cutInside int64 = -1, -1
	n := 0
	for rest := data; len(rest) > 0; n++ {
		_, r, h, _ := record.Next(rest)
		if n == 6 {
			cutBase, cutInside = h.BaseOffset, h.LastOffset()
			if h.LastOffset() == h.BaseOffset {
				t.Fatal("test needs a batch of several records")
			}
		}
		rest = r
	}
	hooked := int64(-1)
	dst.SetTruncateHook(func(end int64) { hooked = end })
	newEnd, err := dst.TruncateTo(cutInside)
	if err != nil {
		t.Fatal(err)
	}
	if newEnd != cutBase || dst.LogEndOffset() != cutBase || hooked != cutBase {
		t.Fatalf("truncate to %d: end %d (log %d, hook %d), want %d", cutInside, newEnd, dst.LogEndOffset(), hooked, cutBase)
	}
	if dst.HighWatermark() > cutBase || dst.DurableEnd() > cutBase {
		t.Fatalf("HW %d / durable %d past the cut %d", dst.HighWatermark(), dst.DurableEnd(), cutBase)
	}
	prefix := allBytes(t, dst, 0)
	if !bytes.Equal(prefix, data[:len(prefix)]) {
		t.Fatal("bytes before the cut changed")
	}
	if _, lo := dst.EndOffsetForEpoch(dst.LeaderEpoch()); lo != cutBase {
		t.Fatalf("latest epoch ends at %d after truncation, want %d", lo, cutBase)
	}
	checkIndexesAgainstWalk(t, dst)
	// Re-fetch the rest: the log ends byte-identical to the source.
	copyAsFollower(t, dst, data[len(prefix):], 900)
	if !bytes.Equal(allBytes(t, dst, 0), data) {
		t.Fatal("after re-fetching, follower bytes differ")
	}
	// A different tail: truncate again and append other batches in a new
	// epoch, then crash-free restart must give exactly that.
	if _, err := dst.TruncateTo(cutBase); err != nil {
		t.Fatal(err)
	}
	other := batchOf(t, 3, 40, 9000, 77)
	record.SetBaseOffset(other, cutBase)
	record.SetPartitionLeaderEpoch(other, 8)
	if _, err := dst.AppendAsFollower(other); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Clone(prefix), other...)
	// The tail cache must not serve the truncated bytes: the newest batch,
	// read the way a consumer at the head is served, is the new one.
	dst.AdvanceHighWatermark(dst.LogEndOffset())
	waitDurableEnd(t, dst)
	dst.AdvanceHighWatermark(dst.LogEndOffset())
	mr, err := dst.ReadReplicaMem(cutBase, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, ch := range mr.Chunks {
		if ch.Buf != nil {
			got = append(got, ch.Buf...)
			continue
		}
		buf := make([]byte, ch.Len)
		if _, err := ch.File.ReadAt(buf, ch.Pos); err != nil {
			t.Fatal(err)
		}
		got = append(got, buf...)
	}
	mr.Release()
	if !bytes.Equal(got, other) {
		t.Fatalf("read at the cut returned %d bytes, not the batch appended after the truncation", len(got))
	}
	if err := waitDurableEnd(t, dst); err != nil {
		t.Fatal(err)
	}
	_ = src
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := openEngine(t, dir, nil)
	defer e2.Close()
	r := e2.Topic("dst").Partition(0)
	if got := allBytes(t, r, 0); !bytes.Equal(got, want) {
		t.Fatalf("after restart the log has %d bytes, want %d", len(got), len(want))
	}
	if r.LeaderEpoch() != 8 || r.EpochStartOffset() != cutBase {
		t.Fatalf("after restart epoch %d at %d", r.LeaderEpoch(), r.EpochStartOffset())
	}
	checkIndexesAgainstWalk(t, r)
}

// waitDurableEnd waits (hang guard only) until the log is durable to its end.
func waitDurableEnd(t *testing.T, l *Log) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for l.DurableEnd() < l.LogEndOffset() {
		if time.Now().After(deadline) {
			t.Fatalf("durable end %d never reached the log end %d", l.DurableEnd(), l.LogEndOffset())
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	_, data := sourceLog(t, e, "src")
	dst := mustTopic(t, e, "dst", 1, smallConfig()).Partition(0)
	dst.SetFollower(newRecHandler())
	copyAsFollower(t, dst, data, 1<<20)
	if err := dst.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if dst.LogStartOffset() != 1000 || dst.LogEndOffset() != 1000 || dst.HighWatermark() != 1000 || dst.EpochStartOffset() != -1 {
		t.Fatalf("start %d end %d hw %d epoch start %d", dst.LogStartOffset(), dst.LogEndOffset(), dst.HighWatermark(), dst.EpochStartOffset())
	}
	b := batchOf(t, 2, 10, 5000, 5)
	record.SetBaseOffset(b, 1000)
	record.SetPartitionLeaderEpoch(b, 12)
	if _, err := dst.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	waitDurableEnd(t, dst)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := openEngine(t, dir, nil)
	defer e2.Close()
	r := e2.Topic("dst").Partition(0)
	if r.LogStartOffset() != 1000 || r.LogEndOffset() != 1002 || !bytes.Equal(allBytes(t, r, 1000), b) {
		t.Fatalf("after restart: start %d end %d", r.LogStartOffset(), r.LogEndOffset())
	}
}

func TestDamagedMarkPersists(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	l := mustTopic(t, e, "d", 1, nil).Partition(0)
	if l.Damaged() {
		t.Fatal("a new log is damaged")
	}
	l.noteRecovery(10, 10) // nothing lost
	if l.Damaged() {
		t.Fatal("a log that lost nothing was marked damaged")
	}
	l.noteRecovery(10, 4)
	if !l.Damaged() {
		t.Fatal("a log that lost durable data is not marked damaged")
	}
	e.Close()
	e2 := openEngine(t, dir, nil)
	l2 := e2.Topic("d").Partition(0)
	if !l2.Damaged() {
		t.Fatal("the damaged mark did not survive a restart")
	}
	if err := l2.ClearDamaged(); err != nil {
		t.Fatal(err)
	}
	e2.Close()
	e3 := openEngine(t, dir, nil)
	defer e3.Close()
	if e3.Topic("d").Partition(0).Damaged() {
		t.Fatal("the cleared mark came back after a restart")
	}
}

// FuzzFollowerBatches feeds arbitrary bytes (a fetch response's records
// come off the network) to the follower-append validation: it must never
// panic, and what it accepts must be whole, CRC-valid, contiguous batches
// that a follower log then stores byte for byte, with offsets increasing
// (gaps allowed: compaction).
func FuzzFollowerBatches(f *testing.F) {
	var bld record.Builder
	bld.Reset(record.CodecNone, 1000)
	bld.Add(1000, []byte("k"), []byte("v"), nil)
	bld.Add(1001, []byte("k2"), []byte("v2"), nil)
	one, _ := bld.AppendTo(nil)
	two := bytes.Clone(one)
	record.SetBaseOffset(two, 2)
	f.Add(one)
	f.Add(append(bytes.Clone(one), two...))
	f.Add(append(bytes.Clone(one), two[:30]...))
	f.Add(append(bytes.Clone(one), one...))
	f.Add([]byte{0, 0, 0})
	bld.Reset(record.CodecNone, 7)
	bld.Add(1000, nil, bytes.Repeat([]byte("x"), 9000), nil) // long enough for combined sums
	big, _ := bld.AppendTo(nil)
	f.Add(append(bytes.Clone(big), one...))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, first, last, err := validateFollowerBatches(data, nil, 0)
		// The same bytes at offset 5 of a buffer summed as it was read
		// (a fetch response): the same answer.
		buf := append(make([]byte, 5), data...)
		var sums crcsum.Sums
		sums.Reset(buf)
		sums.Cover(len(buf))
		if n2, _, _, err2 := validateFollowerBatches(buf[5:], &sums, 5); n2 != n || (err2 == nil) != (err == nil) {
			t.Fatalf("summed: %d bytes, %v; direct: %d bytes, %v", n2, err2, n, err)
		}
		if err != nil || n == 0 {
			return
		}
		if n > len(data) {
			t.Fatalf("accepted %d of %d bytes", n, len(data))
		}
		next := first.BaseOffset
		for rest := data[:n]; len(rest) > 0; {
			b, r, h, err := record.Next(rest)
			if err != nil || !record.CheckCRC(b) || h.BaseOffset < next {
				t.Fatalf("accepted bytes hold a bad batch: %v", err)
			}
			next = h.LastOffset() + 1
			rest = r
		}
		if next != last.LastOffset()+1 {
			t.Fatalf("last header ends at %d, batches at %d", last.LastOffset()+1, next)
		}
	})
}

// TestAppendAsFollowerAcceptsFuzzSeeds runs the accepted seeds through a
// real follower log: stored byte for byte, partial tails left out.
func TestAppendAsFollowerAcceptsFuzzSeeds(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "fz", 1, nil).Partition(0)
	var bld record.Builder
	bld.Reset(record.CodecNone, 1000)
	bld.Add(1000, []byte("k"), []byte("v"), nil)
	bld.Add(1001, []byte("k2"), []byte("v2"), nil)
	one, _ := bld.AppendTo(nil)
	two := bytes.Clone(one)
	record.SetBaseOffset(two, 2)
	info, err := l.AppendAsFollower(append(append(bytes.Clone(one), two...), two[:30]...))
	if err != nil || info.BaseOffset != 0 || info.LastOffset != 3 {
		t.Fatalf("AppendAsFollower: %+v, %v", info, err)
	}
	if got := allBytes(t, l, 0); !bytes.Equal(got, append(bytes.Clone(one), two...)) {
		t.Fatalf("stored %d bytes", len(got))
	}
	if info, err := l.AppendAsFollower(two[:30]); err != nil || info.BaseOffset != -1 {
		t.Fatalf("a lone partial batch: %+v, %v", info, err)
	}
}

// TestAppendAsFollowerSummed: batches checked with the block sums of the
// buffer they were read into are stored byte for byte, a compacted one
// (offsets removed) included; a byte damaged on the way (before it was
// summed, as a fetch response's would be) fails the CRC and nothing is
// stored.
func TestAppendAsFollowerSummed(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "fs", 1, nil).Partition(0)
	var bld record.Builder
	var batches []byte
	for i := range 3 {
		bld.Reset(record.CodecNone, 1000)
		for j := range 4 {
			bld.Add(1000, nil, bytes.Repeat([]byte{byte('a' + i + j)}, 3000+100*j), nil)
		}
		b, _ := bld.AppendTo(nil)
		record.SetBaseOffset(b, int64(4*i))
		if i == 2 {
			// As compaction leaves it: the batch keeps lastOffsetDelta 5
			// over four records (offsets 8-13; the CRC covers the field).
			binary.BigEndian.PutUint32(b[23:], 5)
			binary.BigEndian.PutUint32(b[record.OffsetCRC:], crc32.Checksum(b[record.OffsetAttrs:], crc32.MakeTable(crc32.Castagnoli)))
		}
		batches = append(batches, b...)
	}
	const at = 77 // where the records lie in the response frame
	frame := func(damageAt int) ([]byte, *crcsum.Sums) {
		buf := append(make([]byte, at), batches...)
		if damageAt >= 0 {
			buf[at+damageAt] ^= 0x40
		}
		var sums crcsum.Sums
		sums.Reset(buf)
		sums.Cover(len(buf))
		return buf[at:], &sums
	}
	// A value byte in the middle of the second batch, inside a summed block.
	second, _, _, _ := record.Next(batches)
	bad, sums := frame(len(second) + 6000)
	if _, err := l.AppendAsFollowerSummed(bad, sums, at); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("damaged batch: %v, want ErrCorruptMessage", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("log end %d after a refused append", l.LogEndOffset())
	}
	good, sums := frame(-1)
	info, err := l.AppendAsFollowerSummed(good, sums, at)
	if err != nil || info.BaseOffset != 0 || info.LastOffset != 13 {
		t.Fatalf("AppendAsFollowerSummed: %+v, %v", info, err)
	}
	if got := allBytes(t, l, 0); !bytes.Equal(got, batches) {
		t.Fatalf("stored %d bytes, want %d", len(got), len(batches))
	}
}

// TestTruncateWhileReading: readers keep reading (and flushes keep running)
// while a follower log is truncated and refilled. A read racing a
// truncation may fail or, like a sendfile of a range cut under it, see
// other bytes (Kafka's lock-free reads behave the same; truncation happens
// when a replica becomes a follower, which serves no consumers); what must
// hold is no panic, no data race, and the log ending exactly right.
func TestTruncateWhileReading(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	_, data := sourceLog(t, e, "src")
	dst := mustTopic(t, e, "dst", 1, smallConfig()).Partition(0)
	dst.SetFollower(newRecHandler())
	copyAsFollower(t, dst, data, 700)
	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); !stop.Load(); i = (i + 7) % 40 {
				res, err := dst.ReadReplica(i, 4096, true)
				if err != nil {
					continue
				}
				for _, ch := range res.Chunks {
					buf := make([]byte, ch.Len)
					if ch.Buf != nil {
						copy(buf, ch.Buf)
					} else {
						_, _ = ch.File.ReadAt(buf, ch.Pos)
					}
				}
				res.Release()
				reads.Add(1)
			}
		}()
	}
	for round := 0; round < 20; round++ {
		cut := int64(5 + round%20)
		end, err := dst.TruncateTo(cut)
		if err != nil {
			t.Fatal(err)
		}
		if end > cut || dst.LogEndOffset() != end {
			t.Fatalf("truncate to %d: end %d, log end %d", cut, end, dst.LogEndOffset())
		}
		// Refill from the source bytes at the new end.
		var from int
		for rest := data; len(rest) > 0; {
			b, r, h, _ := record.Next(rest)
			if h.BaseOffset == end {
				break
			}
			from += len(b)
			rest = r
		}
		copyAsFollower(t, dst, data[from:], 900)
	}
	stop.Store(true)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("no read succeeded")
	}
	if !bytes.Equal(allBytes(t, dst, 0), data) {
		t.Fatal("after the rounds the follower differs from the source")
	}
	checkIndexesAgainstWalk(t, dst)
}

// replChunkBytes concatenates a read's chunks, memory (tail cache) or file.
func replChunkBytes(t testing.TB, res ReadResult) (data []byte, fromMem bool) {
	t.Helper()
	for _, c := range res.Chunks {
		if c.File == nil {
			data = append(data, c.Buf...)
			fromMem = fromMem || len(c.Buf) > 0
			continue
		}
		buf := make([]byte, c.Len)
		if _, err := c.File.ReadAt(buf, c.Pos); err != nil {
			t.Fatalf("ReadAt: %v", err)
		}
		data = append(data, buf...)
	}
	if int64(len(data)) != res.Bytes {
		t.Fatalf("chunks hold %d bytes, the read says %d", len(data), res.Bytes)
	}
	return data, fromMem
}

// TestFollowerReplicatesCompactedLog: a compacted leader log (offset gaps
// where the cleaner dropped whole batches) is replicated from offset 0 by a
// fresh follower fetching at its log end, as the replica fetcher does
// (ReadReplicaMem with a small max bytes, so fetch offsets land in gaps);
// the follower ends byte-identical to the leader, with the leader-epoch
// cache the batches imply, consistent indexes, and the same after a
// restart.
func TestFollowerReplicatesCompactedLog(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	le := compactEngine(t, t.TempDir(), clk)
	defer le.Close()
	tp := mustTopic(t, le, "cmp", 1, compactConfig(32<<10))
	leader := tp.Partition(0)
	var bld record.Builder
	var buf []byte
	// Every third batch holds keys of its own (they survive); the others
	// rewrite one hot set of keys, so all but the last hot batch go whole
	// and leave offset gaps between the surviving batches.
	const updates, batchLen = 12_000, 40
	appendBatch := func(epoch int32) {
		var err error
		if buf, err = bld.AppendTo(buf[:0]); err != nil {
			t.Fatal(err)
		}
		if _, err := leader.Append(buf, epoch); err != nil {
			t.Fatal(err)
		}
	}
	bld.Reset(record.CodecNone, t0)
	for i := 0; i < updates; i++ {
		key := "hot-" + strconv.Itoa(i%batchLen)
		if (i/batchLen)%3 == 0 {
			key = "cold-" + strconv.Itoa(i)
		}
		bld.Add(t0, []byte(key), []byte("value-"+strconv.Itoa(i)), nil)
		if bld.Len() == batchLen {
			appendBatch(int32(1 + i/3000)) // epochs 1..4
			bld.Reset(record.CodecNone, t0)
		}
	}
	clk.Advance(120_000) // past segment.ms: the next append rolls, sealing everything before
	bld.Reset(record.CodecNone, clk.ms.Load())
	bld.Add(clk.ms.Load(), []byte("filler"), []byte("x"), nil)
	appendBatch(6)
	if err := waitDurable(t, leader, leader.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
	st, err := tp.Compact(0)
	if err != nil {
		t.Fatal(err)
	}
	if st.RecordsRemoved == 0 {
		t.Fatalf("compaction removed nothing: %+v", st)
	}
	want := allBytes(t, leader, 0)

	// What the follower's epoch cache must say: each epoch starts at the
	// base of its first surviving batch. And the gaps the test relies on.
	type epochStart struct {
		epoch int32
		start int64
	}
	var starts []epochStart
	gaps := 0
	prevEnd := int64(0)
	for rest := want; len(rest) > 0; {
		_, r, h, err := record.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset != prevEnd {
			gaps++
		}
		if n := len(starts); n == 0 || starts[n-1].epoch != h.PartitionLeaderEpoch {
			starts = append(starts, epochStart{h.PartitionLeaderEpoch, h.BaseOffset})
		}
		prevEnd = h.LastOffset() + 1
		rest = r
	}
	if gaps < 50 || prevEnd != leader.LogEndOffset() {
		t.Fatalf("cleaned leader log has %d gaps, batches end at %d, log end %d", gaps, prevEnd, leader.LogEndOffset())
	}

	fdir := t.TempDir()
	fe := compactEngine(t, fdir, clk)
	defer func() { fe.Close() }()
	follower := mustTopic(t, fe, "cmp", 1, compactConfig(32<<10)).Partition(0)
	follower.SetFollower(newRecHandler())
	fetches, fromMem := 0, false
	for ; follower.LogEndOffset() < leader.LogEndOffset(); fetches++ {
		if fetches > 100_000 {
			t.Fatal("follower makes no progress")
		}
		res, err := leader.ReadReplicaMem(follower.LogEndOffset(), 3000, true)
		if err != nil {
			t.Fatalf("leader read at %d: %v", follower.LogEndOffset(), err)
		}
		data, mem := replChunkBytes(t, res)
		fromMem = fromMem || mem
		info, err := follower.AppendAsFollower(data)
		res.Release()
		if err != nil {
			t.Fatalf("AppendAsFollower at log end %d: %v", follower.LogEndOffset(), err)
		}
		if info.BaseOffset < 0 {
			t.Fatalf("fetch at %d returned no whole batch", follower.LogEndOffset())
		}
	}
	t.Logf("%d fetches, %d gaps, %d bytes, tail cache used: %v", fetches, gaps, len(want), fromMem)

	check := func(f *Log, when string) {
		t.Helper()
		if got := allBytes(t, f, 0); !bytes.Equal(got, want) {
			t.Fatalf("%s: follower holds %d bytes differing from the leader's %d", when, len(got), len(want))
		}
		if f.LogEndOffset() != leader.LogEndOffset() || f.LeaderEpoch() != 6 {
			t.Fatalf("%s: follower end %d epoch %d, leader end %d", when, f.LogEndOffset(), f.LeaderEpoch(), leader.LogEndOffset())
		}
		for i, s := range starts {
			end := f.LogEndOffset()
			if i+1 < len(starts) {
				end = starts[i+1].start
			}
			if ep, off := f.EndOffsetForEpoch(s.epoch); ep != s.epoch || off != end {
				t.Fatalf("%s: epoch %d ends at (%d, %d), want (%d, %d)", when, s.epoch, ep, off, s.epoch, end)
			}
		}
		checkIndexesAgainstWalk(t, f)
		// A lookup by offset inside a gap finds the next batch.
		for _, s := range starts[1:] {
			res, err := f.ReadReplica(s.start-1, 1, true)
			if err != nil {
				t.Fatal(err)
			}
			data := readChunks(t, res)
			res.Release()
			h, err := record.ParseHeader(data)
			if err != nil || h.LastOffset() < s.start-1 {
				t.Fatalf("%s: read at %d: %+v, %v", when, s.start-1, h, err)
			}
		}
	}
	check(follower, "after replication")
	if err := fe.Close(); err != nil {
		t.Fatal(err)
	}
	fe = compactEngine(t, fdir, clk)
	check(fe.Topic("cmp").Partition(0), "after a restart")
}

// TestAppendAsFollowerWideGap: a gap wider than a segment's 32-bit relative
// offsets rolls a segment based at the batch rather than at the old log end.
func TestAppendAsFollowerWideGap(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	defer func() { e.Close() }()
	l := mustTopic(t, e, "gap", 1, nil).Partition(0)
	l.SetFollower(newRecHandler())
	b1 := batchOf(t, 2, 10, 1000, 1)
	if _, err := l.AppendAsFollower(b1); err != nil {
		t.Fatal(err)
	}
	far := int64(1)<<32 + 7
	b2 := batchOf(t, 3, 10, 1001, 2)
	record.SetBaseOffset(b2, far)
	info, err := l.AppendAsFollower(b2)
	if err != nil || info.BaseOffset != far || info.LastOffset != far+2 {
		t.Fatalf("AppendAsFollower past a wide gap: %+v, %v", info, err)
	}
	if l.LogEndOffset() != far+3 || l.SegmentCount() != 2 {
		t.Fatalf("log end %d, %d segments; want %d, 2", l.LogEndOffset(), l.SegmentCount(), far+3)
	}
	// Below the log end: refused.
	if _, err := l.AppendAsFollower(b2); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("re-append: %v", err)
	}
	want := append(bytes.Clone(b1), b2...)
	checkIndexesAgainstWalk(t, l)
	if got := allBytes(t, l, 0); !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, want %d", len(got), len(want))
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, nil)
	l = e.Topic("gap").Partition(0)
	if got := allBytes(t, l, 0); !bytes.Equal(got, want) || l.LogEndOffset() != far+3 {
		t.Fatalf("after a restart: %d bytes, end %d", len(got), l.LogEndOffset())
	}
}
