package engine

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/record"
)

// Producer snapshots of segments to copy (KIP-405).
//
// Kafka copies every segment with the producer snapshot taken at its end
// (RemoteLogManager's LogSegmentData requires one) and has it because it
// keeps each segment's snapshot for as long as the segment, for every
// topic. Strata keeps its newest three snapshots, and for a topic with
// remote.storage.enable also those of segments not copied yet
// (producers.go uploadPendingSnapshot); a segment that rolled before the
// topic got remote.storage.enable has usually lost its snapshot to the
// trimming by then. Kafka's own copy of a segment without a snapshot (a
// topic from before Kafka 2.8) fails at every pass (a
// NullPointerException; KAFKA-15195, KAFKA-16209; its documentation lists
// such segments as unsupported): that partition never tiers. Copying one
// without producer state would let a replica restored from it take a
// producer's retry as new records. So the missing snapshot is rebuilt
// from the log, as Kafka would have kept it: segmentSnapshot replays the
// batches from the newest snapshot below the segment's end (or, with none
// in the local log, from the first local segment), as Open does when its
// snapshots are lost, and writes the result as that segment's snapshot
// file, which is then copied and trimmed like the snapshot a roll writes.
//
// The replay reads sealed segments without Log.mu (their bytes no longer
// change), so produce is not held up; each rebuilt file is written under
// Log.mu after checking that the segment it ends is still in the log as
// replayed (a truncation meanwhile fails the rebuild, and the copy is
// tried again at the next pass). The state rebuilt from the first local
// segment starts with what the oldest snapshot above the segment's end
// tells of the producers before that segment (stateBelow): producers
// known from batches retention deleted, which the engine still knows.

// maxRebuiltAhead bounds the snapshots one rebuild writes past the one
// asked for (the next segments' missing ones, so the copies after it
// replay one segment each): the work of one OpenSealedSegment call stays
// bounded, and the chain continues from the newest one written.
const maxRebuiltAhead = 32

// errLogChanged: the log was truncated or restarted under a rebuild.
var errLogChanged = errors.New("engine: log changed while rebuilding a producer snapshot")

// segmentSnapshot returns the producer snapshot at end, the end of the
// sealed segment seg: the file if the engine has it, else rebuilt from
// the log (see above).
func (l *Log) segmentSnapshot(seg SealedSegment) ([]byte, error) {
	b, err := readOptional(l.e.fs, l.snapshotPath(seg.End))
	if err != nil || b != nil {
		return b, err
	}
	return l.rebuildSegmentSnapshots(seg.End)
}

// rebuildSegmentSnapshots writes the producer snapshot at end (a sealed
// segment's end) and those missing at the ends of up to maxRebuiltAhead
// following sealed segments, and returns the one at end.
func (l *Log) rebuildSegmentSnapshots(end int64) ([]byte, error) {
	segs := *l.segs.Load()
	if len(segs) == 0 {
		return nil, fmt.Errorf("%w: %s has no segments", ErrSegmentGone, l)
	}
	firstBase := segs[0].base
	offs, err := l.listSnapshots()
	if err != nil {
		return nil, fmt.Errorf("engine: %s: listing producer snapshots: %w", l, err)
	}
	have := make(map[int64]bool, len(offs))
	for _, off := range offs {
		have[off] = true
	}
	nowMs := l.e.nowMs()

	// The base: the newest snapshot in [first base, end) that reads back
	// whole, else the first local segment with what the oldest snapshot
	// above end tells of the producers before it (stateBelow).
	from, entries := int64(-1), map[int64]*producerEntry(nil)
	for i := len(offs) - 1; i >= 0 && from < 0; i-- {
		off := offs[i]
		if off >= end || off < firstBase {
			continue
		}
		got, err := l.readSnapshot(off)
		if err != nil {
			continue // trimmed meanwhile, or torn: an older one will do
		}
		from, entries = off, got
	}
	if from < 0 {
		from, entries = firstBase, map[int64]*producerEntry{}
		for _, off := range offs {
			if off <= end {
				continue
			}
			if later, err := l.readSnapshot(off); err == nil {
				for pid, e := range later {
					if b := stateBelow(e, firstBase); b != nil {
						entries[pid] = b
					}
				}
				break
			}
		}
	}
	if entries == nil {
		entries = map[int64]*producerEntry{}
	}

	// The boundaries to write: every sealed segment end in (from, end]
	// without a snapshot, then the missing ones right after end.
	sealed := l.SealedSegments()
	var want []int64
	ahead := 0
	for _, s := range sealed {
		if s.End <= from {
			continue
		}
		if s.End <= end {
			if s.End == end || !have[s.End] {
				want = append(want, s.End)
			}
			continue
		}
		if have[s.End] || ahead == maxRebuiltAhead {
			break
		}
		ahead++
		want = append(want, s.End)
	}
	if !slices.Contains(want, end) {
		return nil, fmt.Errorf("%w: %s has no sealed segment ending at %d", ErrSegmentGone, l, end)
	}

	r := snapshotReplay{entries: entries, nowMs: nowMs}
	var out []byte
	pos := from
	for _, x := range want {
		last, lastEnd, err := l.replayDetached(&r, pos, x)
		if err != nil {
			return nil, err
		}
		pos = x
		data := encodeProducerSnapshot(x, r.entries)
		if err := l.installRebuiltSnapshot(x, data, last, lastEnd); err != nil {
			return nil, err
		}
		if x == end {
			out = data
		}
	}
	return out, nil
}

// installRebuiltSnapshot writes data as the snapshot at x and lists it
// with the log's snapshots, if the segment last (whose bytes ended at
// lastEnd when replayed, and which ends at x) is still sealed and in the
// log unchanged. Truncations and restarts replace or unseal it, so a
// snapshot is never written for a log it no longer describes.
func (l *Log) installRebuiltSnapshot(x int64, data []byte, last *logSegment, lastEnd int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.closedErr()
	}
	if err := l.e.Offline(); err != nil {
		return err
	}
	segs := *l.segs.Load()
	i := floorSegment(segs, last.base)
	if i < 0 || segs[i] != last || i+1 >= len(segs) || segs[i+1].base != x || last.end.Load() != lastEnd {
		return fmt.Errorf("%w: %s at %d", errLogChanged, l, x)
	}
	l.idxMu.RLock()
	sealed := last.sealed
	l.idxMu.RUnlock()
	if !sealed {
		return fmt.Errorf("%w: %s at %d", errLogChanged, l, x)
	}
	if err := vfs.ReplaceFileNoSyncFS(l.e.fs, l.snapshotPath(x), data); err != nil {
		return fmt.Errorf("engine: %s: writing the rebuilt producer snapshot at %d: %w", l, x, err)
	}
	ps := &l.producers
	if i, found := slices.BinarySearch(ps.snapshots, x); !found {
		ps.snapshots = slices.Insert(ps.snapshots, i, x)
	}
	return nil
}

// replayDetached applies the batches of [from, to) to r, reading the
// sealed segments holding them without Log.mu; to must be a segment's
// base. It returns the segment ending at to and its byte length as read.
func (l *Log) replayDetached(r *snapshotReplay, from, to int64) (*logSegment, int64, error) {
	segs := *l.segs.Load()
	i := floorSegment(segs, from)
	if i < 0 || from < segs[0].base {
		return nil, 0, fmt.Errorf("%w: %s offset %d below the first segment", ErrSegmentGone, l, from)
	}
	var last *logSegment
	var lastEnd int64
	for ; i < len(segs) && segs[i].base < to; i++ {
		s := segs[i]
		if i+1 >= len(segs) || !s.acquire() {
			return nil, 0, fmt.Errorf("%w: %s segment %d", ErrSegmentGone, l, s.base)
		}
		l.idxMu.RLock()
		sealed := s.sealed
		pos := int64(0)
		if s.base < from {
			_, pos = s.offLookup(from)
		}
		l.idxMu.RUnlock()
		limit := s.end.Load()
		if !sealed || s.readEnd() != limit {
			s.release()
			return nil, 0, fmt.Errorf("%w: %s at %d", errLogChanged, l, s.base)
		}
		s.seg.Pin()
		err := r.segment(s, pos, limit, from, to)
		s.seg.Unpin()
		s.release()
		if err != nil {
			return nil, 0, err
		}
		last, lastEnd = s, limit
	}
	if last == nil || i >= len(segs) || segs[i].base != to {
		return nil, 0, fmt.Errorf("%w: %s has no segment boundary at %d", errLogChanged, l, to)
	}
	return last, lastEnd, nil
}

// snapshotReplay is producer state rebuilt apart from the log's own: the
// rules of replayBatch and replayMarker (producers.go, txn.go) on a map of
// its own, without the open-transaction list, the aborted index and the
// verification guards those also keep up to date.
type snapshotReplay struct {
	entries map[int64]*producerEntry
	nowMs   int64
	buf     []byte
}

// segment applies the batches of s's bytes [pos, limit) whose offsets
// reach into [from, to).
func (r *snapshotReplay) segment(s *logSegment, pos, limit, from, to int64) error {
	if r.buf == nil {
		r.buf = make([]byte, replayReadBytes)
	}
	buf := r.buf
	bufPos, bufLen := int64(0), 0
	read := func(at int64) error {
		n, err := s.seg.ReadAt(buf[:min(int64(len(buf)), limit-at)], at)
		if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
			return fmt.Errorf("engine: rebuilding producer state from %s at %d: %w", s.seg.Path(), at, err)
		}
		bufPos, bufLen = at, n
		return nil
	}
	for pos < limit {
		if pos < bufPos || pos+record.HeaderSize > bufPos+int64(bufLen) {
			if err := read(pos); err != nil {
				return err
			}
		}
		h, err := record.ParseHeader(buf[pos-bufPos : bufLen])
		if err != nil {
			return fmt.Errorf("engine: rebuilding producer state from %s at %d: %w", s.seg.Path(), pos, err)
		}
		if h.BaseOffset >= to {
			return nil
		}
		size := int64(h.Size())
		if h.LastOffset() >= from && h.ProducerID >= 0 {
			if h.Control() {
				var batch []byte
				if size <= int64(len(buf)) {
					if pos+size > bufPos+int64(bufLen) {
						if err := read(pos); err != nil {
							return err
						}
					}
					if pos+size <= bufPos+int64(bufLen) {
						batch = buf[pos-bufPos : pos-bufPos+size]
					}
				}
				r.marker(&h, batch)
			} else {
				r.data(&h)
			}
		}
		pos += size
	}
	return nil
}

func (r *snapshotReplay) entry(pid int64) *producerEntry {
	e := r.entries[pid]
	if e == nil {
		e = newProducerEntry()
		r.entries[pid] = e
	}
	return e
}

// data is replayBatch on r.
func (r *snapshotReplay) data(h *record.Header) {
	e := r.entries[h.ProducerID]
	if e != nil {
		if b := e.newest(); b != nil && h.LastOffset() <= b.lastOffset {
			return
		}
	}
	e = r.entry(h.ProducerID)
	if h.Transactional() && e.txnFirstOffset < 0 {
		e.txnFirstOffset = h.BaseOffset
	}
	e.lastMs = r.nowMs
	if h.BaseSequence < 0 {
		e.epoch = h.ProducerEpoch
		return
	}
	e.add(h.ProducerEpoch, producerBatch{
		firstSeq: h.BaseSequence, lastSeq: incrementSequence(h.BaseSequence, h.LastOffsetDelta),
		firstOffset: h.BaseOffset, lastOffset: h.LastOffset(), maxTimestamp: h.MaxTimestamp,
	})
}

// marker is replayMarker and applyMarker on r: a batch that is not a
// transaction marker (or could not be read whole) changes nothing.
func (r *snapshotReplay) marker(h *record.Header, batch []byte) {
	_, coordEpoch, err := parseMarkerBatch(batch)
	if err != nil {
		return
	}
	e := r.entry(h.ProducerID)
	e.lastMs = r.nowMs
	if h.ProducerEpoch != e.epoch {
		e.epoch, e.n, e.head = h.ProducerEpoch, 0, 0
	}
	e.coordinatorEpoch = coordEpoch
	e.txnFirstOffset = -1
}

// stateBelow is what can be known, from a producer's entry in a later
// snapshot, of its state before offset base: its retained batches below
// base (the ring keeps the last five, and an epoch change would have
// emptied it, so those batches are of the same epoch), and its open
// transaction if that began below base; nil when none of its retained
// batches lies below base (its state there is unknown: a replay from
// base meets it at its next batch). An entry without batches (an epoch
// bumped by a marker) is taken as it is. lastMs and the coordinator
// epoch are the later ones.
func stateBelow(e *producerEntry, base int64) *producerEntry {
	if e.n == 0 {
		if e.txnFirstOffset >= base {
			return nil
		}
		return e
	}
	b := newProducerEntry()
	b.epoch, b.lastMs, b.coordinatorEpoch = e.epoch, e.lastMs, e.coordinatorEpoch
	for i := 0; i < int(e.n); i++ {
		if x := e.at(i); x.lastOffset < base {
			b.add(e.epoch, *x)
		}
	}
	if b.n == 0 {
		return nil
	}
	if e.txnFirstOffset >= 0 && e.txnFirstOffset < base {
		b.txnFirstOffset = e.txnFirstOffset
	}
	return b
}
