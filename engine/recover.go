package engine

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stratalog/strata/segment"
)

// newLog returns an empty Log shell for t's partition p.
func (e *Engine) newLog(t *Topic, p int32) *Log {
	return &Log{
		e:           e,
		topic:       t.name,
		part:        p,
		dir:         filepath.Join(e.dir, partitionDirName(t.name, p)),
		cfg:         t.cfg,
		lastFlushMs: e.nowMs(),
	}
}

// createLog makes a new, empty partition directory with its metadata and a
// first segment at offset 0. A leftover directory of the same name (from an
// interrupted create) is moved aside first.
func (e *Engine) createLog(t *Topic, p int32) (*Log, error) {
	l := e.newLog(t, p)
	if _, err := os.Stat(l.dir); err == nil {
		if err := e.renameStray(l.dir); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(l.dir, 0o755); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(l.dir, partitionMetaFile), formatPartitionMetadata(t.id)); err != nil {
		return nil, err
	}
	s, err := l.createSegment(0)
	if err != nil {
		return nil, err
	}
	if err := syncDir(l.dir); err != nil {
		s.release()
		return nil, err
	}
	l.install([]*logSegment{s}, 0, 0)
	return l, nil
}

// install publishes the recovered or created segments; everything in them is
// durable, so HW = durable = logEnd.
func (l *Log) install(segs []*logSegment, logStart, logEnd int64) {
	l.segs.Store(&segs)
	l.active = segs[len(segs)-1]
	l.logStart.Store(logStart)
	l.logEnd.Store(logEnd)
	l.durable.Store(logEnd)
	l.hw.Store(logEnd)
}

// partitionFiles is what a partition directory holds.
type partitionFiles struct {
	bases   []int64 // .log files, sorted
	indexes map[string]bool
}

// scanPartitionDir lists segment files, removing leftovers (*.deleted,
// *.cleaned, *.swap, *.tmp) and index files without a .log.
func (e *Engine) scanPartitionDir(dir string) (partitionFiles, error) {
	pf := partitionFiles{indexes: map[string]bool{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return pf, err
	}
	logs := map[int64]bool{}
	for _, ent := range ents {
		name := ent.Name()
		path := filepath.Join(dir, name)
		switch {
		case strings.HasSuffix(name, deletedSuffix) || strings.HasSuffix(name, ".cleaned") ||
			strings.HasSuffix(name, ".swap") || strings.HasSuffix(name, tmpSuffix):
			if err := os.Remove(path); err != nil {
				return pf, err
			}
			continue
		case name == partitionMetaFile || name == epochCheckpoint:
			continue
		}
		if base, ok := parseSegmentFileName(name, logSuffix); ok && !ent.IsDir() {
			pf.bases = append(pf.bases, base)
			logs[base] = true
			continue
		}
		if _, ok := parseSegmentFileName(name, indexSuffix); ok {
			pf.indexes[name] = true
			continue
		}
		if _, ok := parseSegmentFileName(name, timeIndexSuffix); ok {
			pf.indexes[name] = true
			continue
		}
		e.logger.Warn("ignoring stray file in partition directory", "path", path)
	}
	for name := range pf.indexes {
		base, ok := parseSegmentFileName(name, indexSuffix)
		if !ok {
			base, _ = parseSegmentFileName(name, timeIndexSuffix)
		}
		if !logs[base] {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
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
	if _, err := os.Stat(l.dir); errors.Is(err, os.ErrNotExist) {
		e.logger.Warn("partition directory missing; starting it empty", "path", l.dir)
		return e.createLog(t, p)
	}
	metaPath := filepath.Join(l.dir, partitionMetaFile)
	if _, err := os.Stat(metaPath); errors.Is(err, os.ErrNotExist) {
		if err := writeFileAtomic(metaPath, formatPartitionMetadata(t.id)); err != nil {
			return nil, err
		}
	}
	pf, err := e.scanPartitionDir(l.dir)
	if err != nil {
		return nil, err
	}
	l.loadEpochs()
	loaded := l.epochs.snapshot()

	segs, logEnd, err := l.recoverSegments(pf, rp, clean)
	if err != nil {
		for _, s := range segs {
			s.release()
		}
		return nil, err
	}
	if len(segs) == 0 {
		base := max(logStart, 0)
		s, err := l.createSegment(base)
		if err != nil {
			return nil, err
		}
		if err := syncDir(l.dir); err != nil {
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
		if err := l.writeEpochCheckpoint(); err != nil {
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

// loadEpochs reads leader-epoch-checkpoint; a missing or bad file starts empty.
func (l *Log) loadEpochs() {
	data, err := readSmallFile(filepath.Join(l.dir, epochCheckpoint))
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		var entries []epochEntry
		if entries, err = parseEpochCheckpoint(data); err == nil {
			l.epochs.entries = entries
			return
		}
	}
	l.e.logger.Warn("ignoring leader epoch checkpoint", "log", l.String(), "err", err)
}

// recoverSegments opens the segments named in pf in order. Segments wholly
// below the recovery point (all of them after a clean shutdown) are trusted;
// from the segment holding the recovery point on, every batch is checked and
// the log is cut at the first bad one. It returns the open segments and the
// log end offset.
func (l *Log) recoverSegments(pf partitionFiles, rp int64, clean bool) ([]*logSegment, int64, error) {
	var segs []*logSegment
	next := int64(-1) // end offset of the previous segment
	walkedAny := false
	for i, base := range pf.bases {
		if next >= 0 && base < next {
			// Overlapping segment names: the log is damaged; keep what
			// precedes and drop the rest.
			l.e.logger.Warn("segment overlaps its predecessor; deleting it and later segments", "log", l.String(), "base", base)
			if err := l.removeSegmentFiles(pf.bases[i:]); err != nil {
				return segs, 0, err
			}
			break
		}
		last := i == len(pf.bases)-1
		s := newLogSegment(l.dir, base, l.e.logger)
		seg, err := segment.Open(s.logPath)
		if err != nil {
			return segs, 0, err
		}
		s.seg = seg
		segs = append(segs, s)
		trusted := clean || (!last && pf.bases[i+1] <= rp)
		var end int64
		var ok bool
		if trusted {
			end, ok, err = l.openTrusted(s, last, pf, i)
			if err != nil {
				return segs, 0, err
			}
		}
		truncated := false
		if !ok {
			end, truncated, err = l.walkSegment(s, max(next, base))
			if err != nil {
				return segs, 0, err
			}
			walkedAny = true
			if !last && !truncated {
				l.idxMu.Lock()
				err = s.seal()
				l.idxMu.Unlock()
				if err != nil {
					return segs, 0, err
				}
			}
			if err := l.e.syncSegment(s, s.sealed); err != nil {
				return segs, 0, err
			}
		}
		s.end.Store(s.seg.Size())
		next = end
		if truncated && !last {
			l.e.logger.Warn("log truncated at a torn or corrupt batch; deleting later segments", "log", l.String(), "segment", s.logPath, "end", end)
			if err := l.removeSegmentFiles(pf.bases[i+1:]); err != nil {
				return segs, 0, err
			}
			if s.sealed { // a sealed segment becomes the active one again
				if err := l.reopenActive(s); err != nil {
					return segs, 0, err
				}
			}
			break
		}
	}
	if walkedAny {
		if err := l.e.syncFile(l.dir, func() error { return syncDir(l.dir) }); err != nil {
			return segs, 0, err
		}
	}
	return segs, next, nil
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
	if err := s.openActiveIndexes(&l.cfg); err != nil {
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
// start with CRC checks, truncating at the first bad batch. minOffset is the
// smallest base offset the first batch may have. It returns the end offset
// and whether anything was cut off.
func (l *Log) walkSegment(s *logSegment, minOffset int64) (end int64, truncated bool, err error) {
	if s.off == nil {
		if err := s.openActiveIndexes(&l.cfg); err != nil {
			return 0, false, err
		}
	}
	s.off.Reset()
	s.tim.Reset()
	s.maxTs, s.maxTsOff, s.bytesSince, s.sealed = -1, s.base, 0, false
	size := s.seg.Size()
	end = minOffset
	badPos := int64(-1)
	l.idxMu.Lock()
	validEnd, err := s.seg.Recover(0, func(b segment.BatchInfo) {
		if badPos >= 0 {
			return
		}
		if b.BaseOffset < end || b.LastOffset-s.base > math.MaxInt32 || b.Pos > math.MaxInt32 {
			badPos = b.Pos
			return
		}
		end = b.LastOffset + 1
		l.indexBatch(s, b.MaxTimestamp, b.LastOffset, b.Pos, int64(b.Size))
		l.epochs.assign(b.LeaderEpoch, b.BaseOffset)
	})
	l.idxMu.Unlock()
	if err != nil {
		return 0, false, fmt.Errorf("recovering %s: %w", s.logPath, err)
	}
	if badPos >= 0 {
		l.e.logger.Warn("batch offsets out of order; truncating", "segment", s.logPath, "pos", badPos)
		if err := s.seg.TruncateTo(badPos); err != nil {
			return 0, false, err
		}
		validEnd = badPos
	}
	l.recoveredBases = append(l.recoveredBases, s.base)
	l.recoveredBytes += validEnd
	if validEnd < size {
		l.e.logger.Warn("truncated torn or corrupt tail", "segment", s.logPath, "validEnd", validEnd, "size", size)
	}
	if end == minOffset && validEnd == 0 {
		end = max(minOffset, s.base)
	}
	return end, validEnd < size, nil
}

// reopenActive turns a sealed segment back into the active one (after a
// truncation deleted its successors): indexes reopened at full size.
func (l *Log) reopenActive(s *logSegment) error {
	if err := s.closeIndexes(); err != nil {
		return err
	}
	s.sealed = false
	return s.openActiveIndexes(&l.cfg)
}

// removeSegmentFiles deletes the files of the segments at bases.
func (l *Log) removeSegmentFiles(bases []int64) error {
	for _, b := range bases {
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := os.Remove(segmentFileName(l.dir, b, suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}
