package engine

import (
	"errors"
	"fmt"
	"github.com/stratalog/strata/internal/vfs"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/segment"
)

// newLog returns an empty Log shell for t's partition p.
func (e *Engine) newLog(t *Topic, p int32) *Log {
	l := &Log{
		e:           e,
		topic:       t.name,
		topicID:     t.id,
		part:        p,
		dir:         filepath.Join(e.dir, partitionDirName(t.name, p)),
		lastFlushMs: e.nowMs(),
	}
	l.cfg.Store(t.cfg.Load())
	l.producers.snapMs = snapshotDueFrom(e.nowMs(), p) // loadProducers sets it again for a log it opens
	return l
}

// createLog makes a new, empty partition directory with its metadata and a
// first segment at offset 0. A leftover directory of the same name (from an
// interrupted create) is moved aside first.
func (e *Engine) createLog(t *Topic, p int32) (*Log, error) {
	l := e.newLog(t, p)
	if _, err := e.fs.Stat(l.dir); err == nil {
		if err := e.renameStray(l.dir); err != nil {
			return nil, err
		}
	}
	if err := e.fs.Mkdir(l.dir, 0o755); err != nil {
		return nil, err
	}
	if err := vfs.WriteFileAtomicFS(e.fs, filepath.Join(l.dir, partitionMetaFile), formatPartitionMetadata(t.id)); err != nil {
		return nil, err
	}
	s, err := l.createSegment(0)
	if err != nil {
		return nil, err
	}
	if err := l.e.syncDir(l.dir); err != nil {
		s.release()
		return nil, err
	}
	l.install([]*logSegment{s}, 0, 0)
	return l, nil
}

// install publishes the recovered or created segments; everything in them is
// durable, so HW = durable = logEnd.
func (l *Log) install(segs []*logSegment, logStart, logEnd int64) {
	if l.e.prefaultTails {
		l.e.tails.prefaultLog() // its share of the tail cache, mapped ahead (slab.go)
	}
	l.segs.Store(&segs)
	l.active = segs[len(segs)-1]
	l.logStart.Store(logStart)
	l.logEnd.Store(logEnd)
	l.durable.Store(logEnd)
	l.hw.Store(logEnd)
}

// partitionFiles is what a partition directory holds.
type partitionFiles struct {
	bases    []int64 // .log files, sorted
	indexes  map[string]bool
	recycled []string // pooled segment files, *.log.recycle (recycle.go)
	spares   []string // emptied files kept for rolls, *.spare (spare.go)
}

// scanPartitionDir lists segment files, removing leftovers (*.deleted,
// *.cleaned, *.swap, *.tmp) and index files without a .log.
func (e *Engine) scanPartitionDir(dir string) (partitionFiles, error) {
	pf := partitionFiles{indexes: map[string]bool{}}
	if err := promoteSwapFiles(e.fs, dir); err != nil { // an interrupted compaction swap (cleaner.go)
		return pf, err
	}
	ents, err := e.partitionDirEntries(dir)
	if err != nil {
		return pf, err
	}
	logs := map[int64]bool{}
	onFS := map[string]vfs.FS{} // the file system of each index file
	for _, de := range ents {
		ent := de.DirEntry
		name := ent.Name()
		path := filepath.Join(dir, name)
		switch {
		case strings.HasSuffix(name, deletedSuffix) || strings.HasSuffix(name, ".cleaned") ||
			strings.HasSuffix(name, ".swap") || strings.HasSuffix(name, tmpSuffix):
			if err := de.fsys.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return pf, err
			}
			continue
		case name == partitionMetaFile || name == epochCheckpoint || name == damagedFile || name == corruptFile ||
			strings.HasSuffix(name, corruptSuffix): // bytes a corrupt log's cut kept aside (corrupt.go)
			continue
		case strings.HasSuffix(name, snapshotSuffix): // producer state (producers.go)
			continue
		case strings.HasSuffix(name, spareSuffix) && !ent.IsDir(): // an emptied file kept for rolls (spare.go)
			pf.spares = append(pf.spares, path)
			continue
		case strings.HasSuffix(name, logSuffix+recycleSuffix) && !ent.IsDir(): // a pooled segment file (recycle.go)
			pf.recycled = append(pf.recycled, path)
			continue
		}
		if base, ok := parseSegmentFileName(name, logSuffix); ok && !ent.IsDir() {
			pf.bases = append(pf.bases, base)
			logs[base] = true
			continue
		}
		if _, ok := parseSegmentFileName(name, indexSuffix); ok {
			pf.indexes[name], onFS[name] = true, de.fsys
			continue
		}
		if _, ok := parseSegmentFileName(name, timeIndexSuffix); ok {
			pf.indexes[name], onFS[name] = true, de.fsys
			continue
		}
		if _, ok := parseSegmentFileName(name, txnIndexSuffix); ok { // aborted transactions (txnindex.go)
			pf.indexes[name], onFS[name] = true, de.fsys
			continue
		}
		e.logger.Warn("ignoring stray file in partition directory", "path", path)
	}
	for name := range pf.indexes {
		base, ok := parseSegmentFileName(name, indexSuffix)
		if !ok {
			base, ok = parseSegmentFileName(name, timeIndexSuffix)
		}
		if !ok {
			base, _ = parseSegmentFileName(name, txnIndexSuffix)
		}
		if !logs[base] {
			if err := onFS[name].Remove(filepath.Join(dir, name)); err != nil {
				return pf, err
			}
			delete(pf.indexes, name)
		}
	}
	sort.Slice(pf.bases, func(i, j int) bool { return pf.bases[i] < pf.bases[j] })
	return pf, nil
}

// openLog opens and recovers one partition log (see the package doc's
// Recovery section). rp is the recovery point, logStart the checkpointed log
// start offset, clean whether the previous Close completed.
func (e *Engine) openLog(t *Topic, p int32, rp, logStart int64, clean bool) (*Log, error) {
	l := e.newLog(t, p)
	if _, err := e.fs.Stat(l.dir); errors.Is(err, os.ErrNotExist) {
		e.logger.Warn("partition directory missing; starting it empty", "path", l.dir)
		return e.createLog(t, p)
	}
	metaPath := filepath.Join(l.dir, partitionMetaFile)
	if _, err := e.fs.Stat(metaPath); errors.Is(err, os.ErrNotExist) {
		if err := vfs.WriteFileAtomicFS(e.fs, metaPath, formatPartitionMetadata(t.id)); err != nil {
			return nil, err
		}
	}
	pf, err := e.scanPartitionDir(l.dir)
	if err != nil {
		return nil, err
	}
	l.loadEpochs()
	loaded := l.epochs.snapshot()

	walkStart := l.e.now()
	marked := l.corruptMarked()
	segs, logEnd, bad, err := l.recoverSegments(pf, rp, clean, e.verify || marked)
	if err != nil {
		for _, s := range segs {
			s.release()
		}
		return nil, err
	}
	if bad != nil {
		// Corrupt (corrupt.go): the segments up to the bad one are open,
		// the later ones untouched on disk; nothing is cut or rewritten
		// (not the epochs, not the producer snapshots) and the log serves
		// nothing.
		start := min(max(logStart, segs[0].base), logEnd)
		l.install(segs, start, logEnd)
		_ = l.markCorrupt(bad, true)
		return l, nil
	}
	if marked {
		l.clearCorruptMark()
	}
	if len(l.recoveredBases) > 0 {
		l.e.logger.Info("recovered unflushed segments", "log", l.String(), "recoveryPoint", rp, "logEnd", logEnd,
			"segments", len(l.recoveredBases), "bytesWalked", l.recoveredBytes, "took", l.e.now().Sub(walkStart))
	}
	// Pooled files were deleted below the first segment's base (recycle.go).
	firstBase := int64(0)
	if len(segs) > 0 {
		firstBase = segs[0].base
	}
	if err := l.spares.adopt(e.fs, pf.spares); err != nil {
		e.logger.Warn("removing spare files", "log", l.String(), "err", err)
	}
	if err := l.adoptRecycled(pf.recycled, firstBase, len(segs) > 0); err != nil {
		e.logger.Warn("removing recycled segment files", "log", l.String(), "err", err)
	}
	if len(segs) == 0 {
		base := max(logStart, 0)
		s, err := l.createSegment(base)
		if err != nil {
			return nil, err
		}
		if err := l.e.syncDir(l.dir); err != nil {
			s.release()
			return nil, err
		}
		segs, logEnd = []*logSegment{s}, base
	}
	start := max(logStart, segs[0].base)
	if start > logEnd {
		e.logger.Warn("log start offset beyond recovered log end; clamping", "log", l.String(), "logStart", start, "logEnd", logEnd)
		start = logEnd
	}
	l.epochs.truncateFromEnd(logEnd)
	l.epochs.truncateFromStart(start)
	if latest, ok := l.epochs.latest(); ok {
		l.epoch.Store(latest)
	}
	if !epochsEqual(loaded, l.epochs.entries) {
		if err := l.saveEpochs(); err != nil {
			for _, s := range segs {
				s.release()
			}
			return nil, err
		}
	}
	if a := segs[len(segs)-1]; a.end.Load() > 0 {
		a.firstAppendMs = e.nowMs()
	}
	l.install(segs, start, logEnd)
	if !clean {
		l.noteRecovery(rp, logEnd) // durable data lost: not eligible to lead (replication.go)
	}
	l.loadProducers() // producer state: snapshot + log tail (producers.go)
	return l, nil
}

func epochsEqual(a, b []epochEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// recoverSegments opens the segments named in pf in order. Segments wholly
// below the recovery point (all of them after a clean shutdown) are trusted
// (with verify, their CRCs are checked too); from the segment holding the
// recovery point on, every batch is checked. A torn tail is cut; a bad
// batch that cannot be one (walkSegment) stops the walk with the
// corruption returned and nothing cut: the segments opened so far and the
// end of the valid data before the bad batch come with it. Otherwise it
// returns the open segments and the log end offset.
func (l *Log) recoverSegments(pf partitionFiles, rp int64, clean, verify bool) ([]*logSegment, int64, *Corruption, error) {
	var segs []*logSegment
	next := int64(-1) // end offset of the previous segment
	walkedAny := false
	for i, base := range pf.bases {
		if next >= 0 && base < next {
			// Overlapping segment names: the log is damaged; keep what
			// precedes and drop the rest.
			l.e.logger.Warn("segment overlaps its predecessor; deleting it and later segments", "log", l.String(), "base", base)
			if err := l.removeSegmentFiles(pf.bases[i:]); err != nil {
				return segs, 0, nil, err
			}
			break
		}
		last := i == len(pf.bases)-1
		s := newLogSegment(l.dir, base, l.e.logger)
		s.txnLoaded = !pf.indexes[filepath.Base(s.txnPath)] // no .txnindex: no aborted transactions (txnindex.go)
		seg, grp, err := l.e.io.open(s.logPath, last, l.config().WriteCaching)
		if err != nil {
			return segs, 0, nil, err
		}
		s.seg, s.io, s.grp, s.grpOut = seg, l.e.io, grp, grp != nil
		segs = append(segs, s)
		// Trusted: wholly below the recovery point (not up to it: a
		// segment ending there may have been sealed after the checkpoint
		// was taken, its indexes unsynced; recoveryPoint).
		trusted := clean || (!last && pf.bases[i+1] < rp)
		var end int64
		var ok bool
		cut := false // a corrupt batch cut off (Options.RefetchCorrupt): s is the last segment now
		if trusted {
			end, ok, err = l.openTrusted(s, last, pf, i)
			if err != nil {
				return segs, 0, nil, err
			}
			if ok && verify {
				bad, err := l.verifySegment(s)
				if err != nil {
					return segs, 0, nil, err
				}
				if bad != nil && !l.e.refetchCorrupt {
					s.end.Store(s.seg.Size())
					return segs, bad.FirstOffset, bad, nil
				}
				if bad != nil { // cut it; the sealed indexes are rebuilt by the walk below
					if err := l.cutCorrupt(s, bad, pf.bases[i+1:]); err != nil {
						return segs, 0, nil, err
					}
					ok, last, cut = false, true, true
					if err := s.closeIndexes(); err != nil {
						return segs, 0, nil, err
					}
					s.off, s.tim, s.sealed = nil, nil, false
				}
			} else if ok {
				s.trustEnd = s.seg.Size() // checked by reads (corrupt.go)
			}
		}
		truncated := false
		if !ok {
			var bad *Corruption
			end, truncated, bad, err = l.walkSegment(s, max(next, base), rp, last, clean, verify)
			if err != nil {
				return segs, 0, nil, err
			}
			if bad != nil && !l.e.refetchCorrupt {
				s.end.Store(s.seg.Size())
				return segs, bad.FirstOffset, bad, nil
			}
			if bad != nil { // cut it: the walk indexed the batches before it
				if err := l.cutCorrupt(s, bad, pf.bases[i+1:]); err != nil {
					return segs, 0, nil, err
				}
				last, cut = true, true
			}
			walkedAny = true
			if !last && !truncated {
				l.idxMu.Lock()
				err = s.seal()
				l.idxMu.Unlock()
				if err != nil {
					return segs, 0, nil, err
				}
			}
			if err := l.e.syncSegment(s, s.sealed); err != nil {
				return segs, 0, nil, err
			}
		}
		s.end.Store(s.seg.Size())
		next = end
		if cut {
			if err := l.reopenRing(s); err != nil { // opened plain, as a sealed one
				return segs, 0, nil, err
			}
			break
		}
		// A walked segment that ends before the next one begins, at or past
		// the recovery point, lost its unsynced tail while the next file
		// kept some of its own unsynced writes (pages reach the disk in any
		// order): what follows the hole was never acknowledged. Not on
		// compacted topics, where a cleaned segment legitimately ends below
		// its successor's base (the checkpoint may lag the durable end by
		// a second): there the unacknowledged batches after such a hole stay.
		gap := !ok && !last && end < pf.bases[i+1] && end >= rp && !l.config().compacted()
		if (truncated || gap) && !last {
			l.e.logger.Warn("log truncated at a torn tail past the recovery point; deleting later segments (unsynced writes)", "log", l.String(), "segment", s.logPath, "end", end)
			if err := l.removeSegmentFiles(pf.bases[i+1:]); err != nil {
				return segs, 0, nil, err
			}
			if s.sealed { // a sealed segment becomes the active one again
				if err := l.reopenActive(s); err != nil {
					return segs, 0, nil, err
				}
				if err := l.reopenRing(s); err != nil {
					return segs, 0, nil, err
				}
			}
			break
		}
	}
	if walkedAny {
		if err := l.e.syncFile(l.dir, func() error { return l.e.syncDir(l.dir) }); err != nil {
			return segs, 0, nil, err
		}
	}
	return segs, next, nil, nil
}

// openTrusted opens the indexes of a segment below the recovery point. ok is
// false when they fail their checks and the segment must be walked instead.
// end is the segment's end offset.
func (l *Log) openTrusted(s *logSegment, last bool, pf partitionFiles, i int) (end int64, ok bool, err error) {
	if !last {
		missing, err := s.openSealedIndexes()
		if err != nil {
			return 0, false, err
		}
		s.sealed = true
		if missing || s.checkIndexes() != nil {
			l.e.logger.Warn("rebuilding index", "segment", s.logPath)
			return 0, false, s.closeIndexes()
		}
		if s.tim != nil {
			if ts, off, ok := s.tim.Last(); ok {
				s.maxTs, s.maxTsOff = ts, off
			}
		}
		return pf.bases[i+1], true, nil
	}
	// The active segment after a clean shutdown: its end offset comes from
	// the last offset index entry plus a header scan of what follows it.
	if !pf.indexes[filepath.Base(s.offPath)] || !pf.indexes[filepath.Base(s.timPath)] {
		return 0, false, nil
	}
	if err := s.openActiveIndexes(l.config()); err != nil {
		return 0, false, err
	}
	if s.checkIndexes() != nil {
		l.e.logger.Warn("rebuilding index", "segment", s.logPath)
		return 0, false, s.closeIndexes()
	}
	from := int64(0)
	end = s.base
	if eo, pos, ok := s.off.Last(); ok {
		from, end = pos, eo+1
	}
	size := s.seg.Size()
	scanned := from
	bad := false
	err = s.seg.Scan(from, size, func(b segment.BatchInfo) bool {
		if b.Pos != scanned || b.BaseOffset < s.base {
			bad = true
			return false
		}
		scanned = b.Pos + int64(b.Size)
		end = b.LastOffset + 1
		return true
	})
	if err != nil || bad || scanned != size {
		return 0, false, s.closeIndexes()
	}
	if s.tim != nil {
		if ts, off, ok := s.tim.Last(); ok {
			s.maxTs, s.maxTsOff = ts, off
		}
	}
	if s.off.Entries() > 0 {
		s.bytesSince = size - from
	} else {
		s.bytesSince = size
	}
	return end, true, nil
}

// walkSegment rebuilds a segment's indexes by walking every batch from the
// start with CRC checks. minOffset is the smallest base offset the first
// batch may have. It returns the end offset and whether anything was cut
// off.
//
// A bad batch (torn, zeroed, failing its CRC) ends the walk. It is
// corruption, returned with nothing cut, when a valid batch follows it in
// the segment (the bytes were written whole and damaged since), or when
// its offsets lie below the recovery point (they were durable before the
// crash) and it is whole (its header parses and its bytes are all there:
// damaged in place) or later segments follow. Otherwise it is a torn
// tail, cut off: a crash loses unsynced writes from the end, and a file
// cut short below the recovery point keeps what it has (noteRecovery
// marks the log damaged).
//
// One exception to the first rule: after a crash (not clean), a bad batch
// at or past the recovery point whose header bytes are all zero is a
// write that never reached the disk, and the valid batches after it are
// later writes that did: unsynced writes are not persisted in order (a
// device's volatile cache, page writeback), and a failed fdatasync drops
// the pages it covered while a concurrent append's write can still land.
// Nothing from the hole on was acknowledged (an acknowledgement waits for
// a flush covering every earlier write of the log), so it is cut like a
// torn tail, with a WARN saying how many bytes of valid batches went with
// it. A byte flipped in place never zeroes a whole header, so damage to
// written bytes stays corruption.
//
// When the recovery point rp lies inside s, the walk starts at the batch of
// the last offset index entry below rp (resumePoint) instead of at 0: the
// bytes before it were synced before rp was checkpointed, so only the
// unflushed tail is read and CRC-checked, whatever the segment's size.
func (l *Log) walkSegment(s *logSegment, minOffset, rp int64, last, clean, verify bool) (end int64, truncated bool, bad *Corruption, err error) {
	if s.off == nil {
		if rp > s.base {
			// A crash leaves an active index at its preallocated size, its
			// tail zero entries; cut them so the entries can be checked.
			if err := trimIndexFile(l.e.fs, s.offPath, offsetEntrySize); err != nil {
				return 0, false, nil, err
			}
			if err := trimIndexFile(l.e.fs, s.timPath, timeEntrySize); err != nil {
				return 0, false, nil, err
			}
		}
		if err := s.openActiveIndexes(l.config()); err != nil {
			return 0, false, nil, err
		}
	}
	s.bytesSince, s.sealed = 0, false
	from, firstBase, ok := int64(0), int64(0), false
	if !verify { // verify walks the whole segment
		from, firstBase, ok = l.resumePoint(s, rp)
	}
	if ok {
		if ts, off, ok := s.tim.Last(); ok {
			s.maxTs, s.maxTsOff = ts, off
		} else {
			s.maxTs, s.maxTsOff = -1, s.base
		}
		minOffset = max(minOffset, firstBase)
	} else {
		from = 0
		s.off.Reset()
		s.tim.Reset()
		s.maxTs, s.maxTsOff = -1, s.base
	}
	size := s.seg.Size()
	end = minOffset
	badPos := int64(-1)
	// With the journal's end records (Options.JournalEnds) the last
	// segment's batches past the durable end they vouch for and at or past
	// the recovery point were never acknowledged, and in a recycled file
	// (recycle.go) they may be an old segment's: the walk stops there.
	durableEnd, ends := l.durableEnd(s)
	stopAt, pastEnd := int64(-1), false
	if ends && last && !clean {
		stopAt = durableEnd
	}
	// The leader-epoch cache loaded from leader-epoch-checkpoint is
	// trusted below the first batch the walk reads, and rebuilt from the
	// batches from there on: the file holds every entry that starts below
	// the recovery point (Engine.writeRecoveryCheckpoint), and may hold
	// later ones too, which assigning a walked batch's older epoch would
	// cut together with the earlier entries of that epoch (a cache ending
	// (3, 37) (4, 45) and a walk from 42 made (3, 42) (4, 45); found by
	// the crash rounds, TestCrashKeepsEveryAcknowledgedRecord).
	rebuild := len(l.recoveredBases) == 0 // this Open's first walked segment
	l.idxMu.Lock()
	validEnd, err := s.seg.Verify(from, func(b segment.BatchInfo) {
		if badPos >= 0 {
			return
		}
		if stopAt >= 0 && b.Pos >= stopAt && b.BaseOffset >= rp {
			badPos, pastEnd = b.Pos, true
			return
		}
		if b.BaseOffset < end || b.LastOffset-s.base > math.MaxInt32 || b.Pos > math.MaxInt32 {
			badPos = b.Pos
			return
		}
		end = b.LastOffset + 1
		l.indexBatch(s, b.MaxTimestamp, b.LastOffset, b.Pos, int64(b.Size))
		if rebuild {
			l.epochs.truncateFromEnd(b.BaseOffset)
			rebuild = false
		}
		l.epochs.assign(b.LeaderEpoch, b.BaseOffset)
	})
	l.idxMu.Unlock()
	if err != nil {
		return 0, false, nil, fmt.Errorf("recovering %s: %w", s.logPath, err)
	}
	l.recoveredBases = append(l.recoveredBases, s.base)
	l.recoveredBytes += validEnd - from
	s.trustEnd = from // the bytes before the resume point are checked by reads (corrupt.go)
	switch {
	case badPos >= 0:
		why := "batch offsets out of order; truncating"
		if pastEnd {
			why = "batches past the durable end the journal's end records name (never acknowledged); truncating"
		}
		l.e.logger.Warn(why, "segment", s.logPath, "pos", badPos, "bytes_cut", size-badPos)
		if err := s.seg.TruncateTo(badPos); err != nil {
			return 0, false, nil, err
		}
		validEnd = badPos
	case validEnd < size:
		reason := "batch fails its checks below the recovery point"
		switch {
		case ends && validEnd < durableEnd:
			reason = "batch fails its checks below the durable end the journal's end records name"
		case end >= rp:
			reason = "batch fails its checks with valid batches after it"
		}
		bad, err := l.corruptionAt(s, validEnd, end, reason)
		if err != nil {
			return 0, false, nil, err
		}
		// A lost write leaves a zeroed header in a zero-filled segment; with
		// the journal's end records (Options.JournalEnds) anything at or
		// past the durable end they vouch for was never acknowledged,
		// whatever bytes it left.
		// Below that end it is damage to acknowledged bytes, even with
		// nothing valid after it (which would otherwise look like a torn
		// tail).
		// In ends mode a segment no end record names (its rounds synced
		// themselves, or a journal checkpoint flushed its bytes and moved
		// the start past their records) has every acknowledged byte
		// below the recovery point or made durable by a flush, which a
		// crash does not tear: a bad batch past the recovery point there
		// is a lost write too, over zeros, over a recycled file's old
		// bytes (recycle.go) or torn at a sector, whatever lies after it.
		// Damage in place to those flushed bytes looks the same: the price
		// of not zero-filling headers, as for the newest round in trustEnds.
		lostWrite := bad.NextValid >= 0 && !clean && end >= rp && (zeroHeaderAt(s, validEnd, size) || (ends && validEnd >= durableEnd) ||
			(!ends && l.e.jnlEnds))
		if (bad.NextValid >= 0 && !lostWrite) || (end < rp && (!last || wholeBatchAt(s, validEnd, size))) || (ends && validEnd < durableEnd) {
			return end, false, bad, nil
		}
		if lostWrite {
			l.e.logger.Warn("a write lost in the crash (a zeroed batch header, or bytes past the durable end the journal's end records name) before later writes that reached the disk; cutting from it (none of it was acknowledged)",
				"segment", s.logPath, "pos", validEnd, "offset", end, "bytes_cut", size-validEnd, "next_valid_offset", bad.NextValid)
		}
		// A torn tail: cut it at the bad batch. Not Segment.Recover from
		// there: a walk that starts at the bad batch knows no previous
		// offset, so it would take a batch Verify refused only for its
		// offsets (a torn write that lost the sector holding its base
		// offset, which the CRC does not cover, and kept the rest).
		if err := s.seg.TruncateTo(validEnd); err != nil {
			return 0, false, nil, fmt.Errorf("recovering %s: %w", s.logPath, err)
		}
		l.e.logger.Warn("truncated torn tail (writes not synced before the crash)", "segment", s.logPath, "validEnd", validEnd, "size", size)
	}
	if end == minOffset && validEnd == 0 {
		end = max(minOffset, s.base)
	}
	return end, validEnd < size, nil, nil
}

// durableEnd returns the durable end of s the journal's end records vouch
// for (journal_replay.go, trustEnds), if they name s.
func (l *Log) durableEnd(s *logSegment) (int64, bool) {
	if l.e.jnl == nil {
		return 0, false
	}
	end, ok := l.e.jnl.replayed.ends[s.logPath]
	return end, ok
}

// zeroHeaderAt reports whether the batch header's bytes at pos of s (as
// many as lie below size) are all zero: nothing was ever written there.
func zeroHeaderAt(s *logSegment, pos, size int64) bool {
	var hb [record.HeaderSize]byte
	n := min(int64(len(hb)), size-pos)
	if n <= 0 {
		return false
	}
	if _, err := s.seg.ReadAt(hb[:n], pos); err != nil {
		return false
	}
	for _, c := range hb[:n] {
		if c != 0 {
			return false
		}
	}
	return true
}

// wholeBatchAt reports whether the bytes at pos of s start with a header
// that parses and whose batch ends within size: a batch that is all there.
func wholeBatchAt(s *logSegment, pos, size int64) bool {
	var hb [record.HeaderSize]byte
	if pos+record.HeaderSize > size {
		return false
	}
	if _, err := s.seg.ReadAt(hb[:], pos); err != nil {
		return false
	}
	h, err := record.ParseHeader(hb[:])
	return err == nil && segment.SaneHeader(hb[:]) && pos+int64(h.Size()) <= size
}

// reopenActive turns a sealed segment back into the active one (after a
// truncation deleted its successors): indexes reopened at full size.
func (l *Log) reopenActive(s *logSegment) error {
	if err := s.closeIndexes(); err != nil {
		return err
	}
	s.sealed = false
	if err := s.seg.SetFileCache(nil); err != nil { // active: keeps its descriptor
		return err
	}
	return s.openActiveIndexes(l.config())
}

// reopenRing reopens a segment that recovery opened plain (as a sealed
// one) ring-backed, now that it is the active one again. Only while
// recovering: no reader can hold the plain segment's file. At run time a
// sealed segment made active by a truncation keeps its backend (a plain
// one appends with pwrite; a Direct one extends the file as it goes).
func (l *Log) reopenRing(s *logSegment) error {
	if s.grp != nil || !l.e.io.direct() {
		return nil
	}
	seg, grp, err := l.e.io.open(s.logPath, true, l.config().WriteCaching)
	if err != nil {
		return err
	}
	old := s.seg
	s.seg, s.io, s.grp, s.grpOut = seg, l.e.io, grp, grp != nil
	return old.Close()
}

// removeSegmentFiles deletes the files of the segments at bases.
func (l *Log) removeSegmentFiles(bases []int64) error {
	for _, b := range bases {
		if err := removeSegmentPaths(l.e.fs, segmentFileName(l.dir, b, logSuffix), segmentFileName(l.dir, b, indexSuffix),
			segmentFileName(l.dir, b, timeIndexSuffix), segmentFileName(l.dir, b, txnIndexSuffix)); err != nil {
			return err
		}
	}
	return nil
}

// resumePoint finds where the walk of s may start when the recovery point
// rp lies inside it: the position of the batch that the last offset index
// entry below rp points at, if the indexes pass their checks and that batch
// is whole, passes its CRC and ends at the entry's offset. The indexes are
// cut to the entries at or below it (the walk re-adds the rest). The
// active indexes are not synced while appends run, but their files start
// zeroed and are only appended to, so a crash leaves them with correct
// entries, zero entries (which fail Check unless trimmed off the end) or
// fewer entries, never wrong ones.
func (l *Log) resumePoint(s *logSegment, rp int64) (pos, firstBase int64, ok bool) {
	size := s.seg.Size()
	if rp <= s.base || s.off == nil || s.tim == nil {
		return 0, 0, false
	}
	if err := errors.Join(s.off.Check(size), s.tim.Check()); err != nil {
		l.e.logger.Warn("index below the recovery point unusable; walking the whole segment", "segment", s.logPath, "err", err)
		return 0, 0, false
	}
	eo, p := s.off.Lookup(rp - 1)
	if p <= 0 || eo < s.base || eo >= rp {
		return 0, 0, false
	}
	var hb [record.HeaderSize]byte
	if _, err := s.seg.ReadAt(hb[:], p); err != nil {
		return 0, 0, false
	}
	h, err := record.ParseHeader(hb[:])
	if err != nil || h.LastOffset() != eo || int64(h.Size()) > size-p || h.Size() < record.HeaderSize ||
		h.Size() > int(l.config().MaxMessageBytes)+record.HeaderSize {
		return 0, 0, false // (a larger batch is not trusted with an allocation: walk instead)
	}
	batch := make([]byte, h.Size())
	if _, err := s.seg.ReadAt(batch, p); err != nil || !record.CheckCRC(batch) {
		l.e.logger.Warn("batch at the index entry below the recovery point fails its check; walking the whole segment", "segment", s.logPath, "pos", p, "err", err)
		return 0, 0, false
	}
	s.off.TruncateTo(eo + 1)
	s.tim.TruncateTo(eo + 1)
	// The time index names this batch too (the writer appends both
	// entries at once while timestamps grow): its last entry is the
	// segment's largest timestamp so far, which a lost or torn tail of it
	// (an active segment's indexes are never synced) would understate, so
	// that timestamp lookups skipped the segment. Else walk it whole.
	if ts, to, ok := s.tim.Last(); !ok || to != eo || ts < h.MaxTimestamp {
		l.e.logger.Warn("time index below the recovery point behind the offset index; walking the whole segment", "segment", s.logPath)
		return 0, 0, false
	}
	return p, h.BaseOffset, true
}

// trimIndexFile cuts an index file after its last entry that is not all
// zeros (reading backwards in blocks; the zero tail of a preallocated index
// is mostly sparse). A missing file is left alone. On a file system other
// than the operating system's (whose indexes are heap-backed and never
// grown ahead of their entries, index.Options.FS) the file is read whole.
func trimIndexFile(fsys vfs.FS, path string, entrySize int) error {
	if fsys != vfs.OS {
		return trimIndexFileFS(fsys, path, entrySize)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	end := st.Size() / int64(entrySize) * int64(entrySize)
	// Skip the sparse tail: start at the end of the last data extent
	// (lseek SEEK_DATA/SEEK_HOLE; where unsupported, the whole file).
	const seekData, seekHole = 3, 4
	dataEnd := int64(0)
	for pos := int64(0); pos < end; {
		d, err := f.Seek(pos, seekData)
		if err != nil {
			if pos == 0 && !errors.Is(err, syscall.ENXIO) {
				dataEnd = end // no SEEK_DATA here
			}
			break
		}
		h, err := f.Seek(d, seekHole)
		if err != nil {
			dataEnd = end
			break
		}
		dataEnd, pos = h, h
	}
	end = min(end, (dataEnd+int64(entrySize)-1)/int64(entrySize)*int64(entrySize))
	const block = 64 << 10 // a multiple of both entry sizes (8, 12)
	buf := make([]byte, block-block%(8*12))
	keep := int64(0)
	for hi := end; hi > 0 && keep == 0; {
		lo := max(hi-int64(len(buf)), 0)
		lo -= lo % int64(entrySize)
		b := buf[:hi-lo]
		if _, err := f.ReadAt(b, lo); err != nil {
			return err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != 0 {
				keep = lo + (int64(i)/int64(entrySize)+1)*int64(entrySize)
				break
			}
		}
		hi = lo
	}
	if keep == st.Size() {
		return nil
	}
	return f.Truncate(keep)
}

// trimIndexFileFS is trimIndexFile on a file system other than the OS's.
func trimIndexFileFS(fsys vfs.FS, path string, entrySize int) error {
	b, err := vfs.ReadFileLimit(fsys, path, 1<<31-1)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	keep := int64(0)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			keep = (int64(i)/int64(entrySize) + 1) * int64(entrySize)
			break
		}
	}
	if keep >= int64(len(b)) {
		return nil
	}
	return fsys.Truncate(path, keep)
}

// dirEntry is an entry of a partition directory and the file system that
// holds it.
type dirEntry struct {
	fs.DirEntry
	fsys vfs.FS
}

// partitionDirEntries lists a partition directory of the engine's file
// system (Options.fs), sorted by name.
func (e *Engine) partitionDirEntries(dir string) ([]dirEntry, error) {
	ents, err := e.fs.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]dirEntry, 0, len(ents))
	for _, ent := range ents {
		out = append(out, dirEntry{ent, e.fs})
	}
	return out, nil
}

// syncDir makes the entries of the directory dir durable on the engine's
// file system (Options.fs), which holds every file and directory of the
// engine.
func (e *Engine) syncDir(dir string) error { return e.fs.SyncDir(dir) }
