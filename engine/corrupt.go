package engine

// A corrupt partition log: a batch that fails its CRC or does not parse,
// where the bytes cannot be a torn tail of unsynced writes (see the package
// doc's Recovery section). Such a log is never truncated or deleted by the
// engine: it stops serving (every call fails with ErrLogCorrupt, which the
// server answers with KAFKA_STORAGE_ERROR for that partition only), is
// marked damaged (not eligible to lead, replication.go) and keeps a marker
// file, corruptFile, so every later Open verifies the whole log again until
// the operator repaired it (docs/operations.md, "Corrupt partition logs").

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/segment"
)

// ErrLogCorrupt is the error of every call on a corrupt partition log. It
// wraps ErrOffline: KAFKA_STORAGE_ERROR for that partition, the directory
// and the other partitions stay online.
var ErrLogCorrupt = fmt.Errorf("%w: partition log corrupt", ErrOffline)

// corruptFile marks a partition whose log was found corrupt. It holds a
// line describing the damage (for the operator); its presence makes Open
// verify every batch of the log (as Options.VerifyRecovery does).
const corruptFile = "log-corrupt"

// Corruption describes the first bad batch found in a partition's log.
type Corruption struct {
	Segment     string // path of the segment file
	Pos         int64  // byte position of the bad batch in it
	FirstOffset int64  // the first offset at or after the bad batch (the end of the valid data before it)
	NextValid   int64  // base offset of the next valid batch after it in the same segment, -1 if none
	Reason      string
}

// Offsets describes the offsets the damage affects: the bad bytes hold
// [FirstOffset, NextValid) when a valid batch follows them, else the log
// from FirstOffset on.
func (c *Corruption) Offsets() string {
	if c.NextValid > c.FirstOffset {
		return fmt.Sprintf("[%d, %d)", c.FirstOffset, c.NextValid)
	}
	return fmt.Sprintf("[%d, ...)", c.FirstOffset)
}

func (c *Corruption) String() string {
	return fmt.Sprintf("%s at byte %d of %s (offsets %s)", c.Reason, c.Pos, c.Segment, c.Offsets())
}

// Corruption returns the damage that stopped the log, nil if none.
func (l *Log) Corruption() *Corruption { return l.corrupt.Load() }

// markCorrupt stops the log for good (until a restart after a repair):
// every later Append, Read, truncation and admin call fails with
// ErrLogCorrupt, waiters get it, the damage is logged once as an ERROR and
// recorded in corruptFile, and the log is marked damaged. Nothing on disk
// is truncated or removed. opening: called by Open's recovery, before the
// log is published (no lock needed).
func (l *Log) markCorrupt(c *Corruption, opening bool) error {
	if !l.corrupt.CompareAndSwap(nil, c) {
		return fmt.Errorf("%w: %s: %s", ErrLogCorrupt, l, l.corrupt.Load())
	}
	err := fmt.Errorf("%w: %s: %s", ErrLogCorrupt, l, c)
	l.e.logger.Error("partition log corrupt: partition offline, nothing truncated (see docs/operations.md, Corrupt partition logs)",
		"log", l.String(), "segment", c.Segment, "pos", c.Pos, "offsets", c.Offsets(), "reason", c.Reason)
	if werr := vfs.WriteFileAtomicFS(l.e.fs, filepath.Join(l.dir, corruptFile), []byte(c.String()+"\n")); werr != nil {
		l.e.logger.Warn("writing the corruption marker", "log", l.String(), "err", werr)
	}
	if derr := l.MarkDamaged(); derr != nil {
		l.e.logger.Warn("marking log damaged", "log", l.String(), "err", derr)
	}
	if opening {
		l.closed = true
	} else {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
	}
	l.fail(err)
	return err
}

// corruptMarked reports whether the partition directory holds corruptFile.
func (l *Log) corruptMarked() bool {
	_, err := l.e.fs.Stat(filepath.Join(l.dir, corruptFile))
	return err == nil
}

// clearCorruptMark removes corruptFile after a full verification of the log
// found nothing wrong (the operator repaired or removed the damage).
func (l *Log) clearCorruptMark() {
	err := l.e.fs.Remove(filepath.Join(l.dir, corruptFile))
	if err == nil {
		err = l.e.fs.SyncDir(l.dir)
		l.e.logger.Info("partition log verified: no corruption left; marker removed", "log", l.String())
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		l.e.logger.Warn("removing the corruption marker", "log", l.String(), "err", err)
	}
}

// verifySegment checks the CRC of every batch of a segment recovery trusted
// (below the recovery point, or after a clean shutdown) when the whole log
// is verified. Any bad batch there is corruption: those bytes were durable.
func (l *Log) verifySegment(s *logSegment) (*Corruption, error) {
	next := s.base
	validEnd, err := s.seg.Verify(0, func(b segment.BatchInfo) { next = b.LastOffset + 1 })
	if err != nil {
		return nil, fmt.Errorf("verifying %s: %w", s.logPath, err)
	}
	if validEnd >= s.seg.Size() {
		return nil, nil
	}
	return l.corruptionAt(s, validEnd, next, "batch below the recovery point fails its checks")
}

// corruptionAt describes a bad batch at pos of s whose offsets start at
// first, looking for the next valid batch after it.
func (l *Log) corruptionAt(s *logSegment, pos, first int64, reason string) (*Corruption, error) {
	nb, found, err := s.seg.NextValidBatch(pos, first)
	if err != nil {
		return nil, fmt.Errorf("verifying %s: %w", s.logPath, err)
	}
	c := &Corruption{Segment: s.logPath, Pos: pos, FirstOffset: first, NextValid: -1, Reason: reason}
	if found {
		c.NextValid = nb.BaseOffset
	}
	return c, nil
}

// readCorruption is called by a read whose header scan of s failed with
// err. A header that does not parse below the readable end, read again
// (a concurrent truncation can show a reader bytes mid-change), is
// corruption: the log is marked corrupt and the read fails with
// ErrLogCorrupt instead of sending the bytes. Any other error is returned
// as is.
func (l *Log) readCorruption(s *logSegment, offset int64, err error) error {
	var ce *segment.CorruptError
	if !errors.As(err, &ce) {
		return err
	}
	var hb [record.HeaderSize]byte
	if ce.Pos+record.HeaderSize > s.seg.Size() {
		return err
	}
	if _, rerr := s.seg.ReadAt(hb[:], ce.Pos); rerr != nil {
		return err
	}
	if segment.SaneHeader(hb[:]) {
		return err // changed under the reader: not corrupt now
	}
	// The offsets: the end of the last whole batch before the bad one,
	// scanned from the index entry at or below the offset read.
	l.idxMu.RLock()
	_, from := s.offLookup(offset)
	l.idxMu.RUnlock()
	first := s.base
	if from > 0 {
		first = offset // at most: refined by the scan
	}
	_ = s.seg.Scan(from, ce.Pos, func(b segment.BatchInfo) bool { first = b.LastOffset + 1; return true })
	c := &Corruption{Segment: s.logPath, Pos: ce.Pos, FirstOffset: first, NextValid: -1,
		Reason: "batch header does not parse (found by a read)"}
	return l.markCorrupt(c, false)
}

// checkChunk checks the CRCs of the batches [pos, pos+n) of s that a read
// is about to send, when they lie in bytes Open's recovery trusted without
// checking (below s.trustEnd): a batch that fails marks the log corrupt
// and the read fails with ErrLogCorrupt instead of sending it. Each byte is
// checked once for sequential readers (s.checked moves up over contiguous
// checked chunks); a read above that mark checks its own chunk. Bytes
// appended or walked since Open are not checked again: their CRCs were
// checked on the way in.
func (l *Log) checkChunk(s *logSegment, pos, n int64) error {
	if pos >= s.trustEnd {
		return nil
	}
	from, to := max(pos, s.checked.Load()), pos+n
	if from >= to {
		return nil
	}
	// from: the chunk's start, or the checked mark inside it (a batch
	// boundary).
	next := int64(-1)
	validEnd, err := s.seg.VerifyRange(from, to, func(b segment.BatchInfo) { next = b.LastOffset + 1 })
	if err != nil {
		return fmt.Errorf("checking %s: %w", s.logPath, err)
	}
	if validEnd < to {
		first := next
		if first < 0 { // the first batch checked is the bad one
			var hb [record.HeaderSize]byte
			first = s.base
			if _, err := s.seg.ReadAt(hb[:], validEnd); err == nil {
				if h, err := record.ParseHeader(hb[:]); err == nil && h.BaseOffset >= s.base {
					first = h.BaseOffset
				}
			}
		}
		c, err := l.corruptionAt(s, validEnd, first, "batch fails its CRC (found by a read)")
		if err != nil {
			return err
		}
		return l.markCorrupt(c, false)
	}
	for {
		cur := s.checked.Load()
		if from > cur || to <= cur || s.checked.CompareAndSwap(cur, to) {
			return nil
		}
	}
}

// corruptSuffix names the files a cut of a corrupt log keeps aside
// (Options.RefetchCorrupt): <segment>.log.corrupt holds the damaged
// segment's bytes from the bad batch on, and later segments' .log files
// are renamed to it. Open leaves them alone; the operator removes them.
const corruptSuffix = ".corrupt"

// cutCorrupt cuts s at the bad batch in a cluster (Options.RefetchCorrupt):
// the bytes from it on and the later segments (at bases later) are kept
// aside as *.corrupt files, s is truncated there, the later segments'
// indexes removed, and the log marked damaged: not eligible to lead, its
// replica re-fetches the rest from the leader (replica package). Open's
// recovery continues with s as the last segment.
func (l *Log) cutCorrupt(s *logSegment, bad *Corruption, later []int64) error {
	l.e.logger.Error("partition log corrupt: cut at the last good offset, the replica re-fetches the rest from the leader; the cut bytes are kept as *"+corruptSuffix+" files",
		"log", l.String(), "segment", s.logPath, "pos", bad.Pos, "offsets", bad.Offsets(), "reason", bad.Reason)
	size := s.seg.Size()
	f, err := l.e.fs.OpenFile(s.logPath+corruptSuffix, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, min(size-bad.Pos, 1<<20))
	for off := bad.Pos; off < size && err == nil; {
		n := min(int64(len(buf)), size-off)
		if _, err = s.seg.ReadAt(buf[:n], off); err == nil {
			_, err = f.Write(buf[:n])
		}
		off += n
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("keeping %s aside: %w", s.logPath, err)
	}
	for _, b := range later {
		p := segmentFileName(l.dir, b, logSuffix)
		if err := l.e.fs.Rename(p, p+corruptSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := removeSegmentPaths(l.e.fs, segmentFileName(l.dir, b, indexSuffix), segmentFileName(l.dir, b, timeIndexSuffix),
			segmentFileName(l.dir, b, txnIndexSuffix)); err != nil {
			return err
		}
	}
	if err := l.e.syncDir(l.dir); err != nil {
		return err
	}
	if err := s.seg.TruncateTo(bad.Pos); err != nil {
		return err
	}
	return l.MarkDamaged()
}

// CorruptLogs returns the hosted logs that are corrupt (Log.Corruption is
// set), for reports: the offline-partitions gauge, admin output.
func (e *Engine) CorruptLogs() []*Log {
	var out []*Log
	for _, t := range e.Topics() {
		for _, l := range t.hostedLogs() {
			if l.Corruption() != nil {
				out = append(out, l)
			}
		}
	}
	return out
}
