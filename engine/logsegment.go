package engine

import (
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/index"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/segment"
)

// logSegment is one segment of a Log: the .log file and its two indexes.
//
// Ownership: the Log holds one reference from creation until the segment
// leaves the segment list (DeleteRecords, DeleteTopic, Close); every reader
// and the flusher hold one more while they use the files. Files are closed
// (and, once deleted, unlinked) when the count reaches zero, so a reader's
// *os.File stays valid until it calls Release.
//
// Descriptors: the indexes hold none (mapped); a sealed segment's .log
// descriptor is closed while idle and synced, beyond the Engine's
// sealedFilesOpen most recently used (segment.FileCache, set at seal and
// when recovery opens a sealed segment), and reopened by path at its next
// use; a read returning a file chunk pins it (Segment.Pin) until
// ReadResult.Release.
type logSegment struct {
	base   int64
	seg    *segment.Segment
	logger *slog.Logger
	io     *ioBackend // set with grp
	grp    *poolGroup // the chunk pool of a ring-backed seg, released after it closes
	grpOut bool       // grp counts s among its active segments (until seal or close)

	// Guarded by Log.idxMu: readers RLock, the appender and seal Lock.
	off      *index.OffsetIndex // nil: a sealed segment whose offset index has no entries
	tim      *index.TimeIndex   // nil: a sealed segment whose time index has no entries
	maxTs    int64              // largest batch max timestamp so far, -1 if none
	maxTsOff int64              // last offset of the batch that first reached maxTs
	sealed   bool

	// Aborted transactions (txnindex.go), guarded by Log.idxMu; txnLoaded
	// (aborted holds the .txnindex file's entries) is written under Log.mu
	// or before the segment is published.
	aborted   []abortedTxn
	txnLoaded bool

	// Guarded by Log.mu (appender only).
	bytesSince    int64 // bytes appended since the last index entry
	firstAppendMs int64 // clock time of the first append, -1 if none yet

	end atomic.Int64 // bytes written and visible to readers

	// idxUnsynced: sealed (seal) and its index files not yet synced by a
	// flush (syncSegment); the recovery-point checkpoint stays at or below
	// its end until they are (Log.recoveryPoint), since recovery trusts
	// the indexes of the segments that end below it.
	idxUnsynced atomic.Bool
	refs        atomic.Int32 // see type comment; 0 = closed

	// The bytes [0, trustEnd) were trusted by Open's recovery without a
	// CRC check; reads check them before sending them, and checked (a
	// batch boundary) is how far they have been checked (corrupt.go).
	// trustEnd is set before the segment is published.
	trustEnd int64
	checked  atomic.Int64

	// Paths, rewritten once when the segment is renamed to *.deleted;
	// read them with paths() unless the segment is private to the caller.
	pathMu                    sync.Mutex
	logPath, offPath, timPath string
	// pool, set by retention before the rename (recycle.go): the last
	// release puts the data file there instead of unlinking it; poolEnd
	// bounds the offsets it holds.
	pool    atomic.Pointer[segPool]
	poolEnd int64
	// spares, set by retention before the rename (spare.go): the last
	// release makes the files not pooled spares instead of unlinking them.
	spares atomic.Pointer[sparePool]
	// copyMem: the segment's bytes in memory for its remote copy
	// (copycache.go), handed over by the roll that sealed it.
	copyMem  atomic.Pointer[copyMem]
	deleting atomic.Bool // set before the rename starts
	deleted  atomic.Bool // files renamed; unlink at close
	txnPath  string      // .txnindex (txnindex.go), created at its first entry
}

// readEnd is the end of the bytes readers may take from the file: the
// append end, or less for a Direct segment whose tail is not written yet
// (segment.Segment.Written).
func (s *logSegment) readEnd() int64 { return min(s.end.Load(), s.seg.Written()) }

// paths returns the segment's current file paths.
func (s *logSegment) paths() (log, off, tim string) {
	s.pathMu.Lock()
	defer s.pathMu.Unlock()
	return s.logPath, s.offPath, s.timPath
}

func newLogSegment(dir string, base int64, logger *slog.Logger) *logSegment {
	s := &logSegment{
		base:          base,
		logger:        logger,
		maxTs:         -1,
		maxTsOff:      base,
		firstAppendMs: -1,
		logPath:       segmentFileName(dir, base, logSuffix),
		offPath:       segmentFileName(dir, base, indexSuffix),
		timPath:       segmentFileName(dir, base, timeIndexSuffix),
		txnPath:       segmentFileName(dir, base, txnIndexSuffix),
	}
	s.refs.Store(1)
	return s
}

// acquire takes a reference; false if the segment is already closed.
func (s *logSegment) acquire() bool {
	for {
		r := s.refs.Load()
		if r <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// release drops a reference, closing (and unlinking, if deleted) the files
// when it was the last.
func (s *logSegment) release() {
	n := s.refs.Add(-1)
	if n > 0 {
		return
	}
	if n < 0 {
		panic("engine: segment reference count below zero")
	}
	s.closeFiles()
}

func (s *logSegment) closeFiles() {
	s.dropCopy() // copycache.go
	var errs []error
	closed := false // the data file closed cleanly (a failed one is never pooled)
	if s.seg != nil {
		err := s.seg.Close()
		closed = err == nil
		errs = append(errs, err)
		if s.grp != nil {
			s.io.releaseGroup(s.grp, s.grpOut)
			s.grp, s.grpOut = nil, false
		}
	}
	if s.off != nil {
		errs = append(errs, s.off.Close())
	}
	if s.tim != nil {
		errs = append(errs, s.tim.Close())
	}
	if s.deleted.Load() {
		lp, op, tp := s.paths()
		paths := []string{lp, op, tp, s.txnPathOf()}
		if p := s.pool.Load(); p != nil && closed && p.put(s.fsys(), lp, s.end.Load(), s.poolEnd) {
			paths = paths[1:] // pooled (recycle.go): only the indexes go
		}
		if sp := s.spares.Load(); sp != nil {
			// Spare inodes for the next rolls (spare.go); the rest are
			// unlinked.
			paths = slices.DeleteFunc(paths, func(p string) bool { return sp.put(s.fsys(), p) })
		}
		errs = append(errs, removeSegmentPaths(s.fsys(), paths...))
	}
	if err := errors.Join(errs...); err != nil {
		s.logger.Warn("closing segment", "path", s.logPath, "err", err)
	}
}

// markDeleted renames the segment's files to *.deleted; they are unlinked
// when the last reference is released. Called without any reader lock: the
// segment is already out of the segment list. The directory is synced
// after the data file's rename unless syncDir is false (retention: see
// deleteRetainedSegments).
func (s *logSegment) markDeleted(idxMu *sync.RWMutex, syncDir bool) {
	s.deleting.Store(true)
	idxMu.Lock()
	defer idxMu.Unlock()
	s.pathMu.Lock()
	defer s.pathMu.Unlock()
	var errs []error
	if err := s.renameLog(s.logPath+deletedSuffix, syncDir); err == nil {
		s.logPath += deletedSuffix
	} else {
		errs = append(errs, err)
	}
	if s.off != nil {
		if err := s.off.Rename(s.offPath + deletedSuffix); err == nil {
			s.offPath += deletedSuffix
		} else {
			errs = append(errs, err)
		}
	} else if err := s.fsys().Rename(s.offPath, s.offPath+deletedSuffix); err == nil {
		s.offPath += deletedSuffix
	}
	if s.tim != nil {
		if err := s.tim.Rename(s.timPath + deletedSuffix); err == nil {
			s.timPath += deletedSuffix
		} else {
			errs = append(errs, err)
		}
	} else if err := s.fsys().Rename(s.timPath, s.timPath+deletedSuffix); err == nil {
		s.timPath += deletedSuffix
	}
	// The .txnindex exists only once it has an entry; without one the path
	// still moves, so a later segment at the same base keeps its own file.
	if err := s.fsys().Rename(s.txnPath, s.txnPath+deletedSuffix); err == nil || errors.Is(err, os.ErrNotExist) {
		s.txnPath += deletedSuffix
	} else {
		errs = append(errs, err)
	}
	s.deleted.Store(true)
	if err := errors.Join(errs...); err != nil {
		s.logger.Warn("renaming deleted segment", "path", s.logPath, "err", err)
	}
}

// fsys is the file system of the segment's index and transaction-index
// files: the Engine's (ioBackend.fs), vfs.OS for a segment without a
// backend yet. The .log file has its own seam (fileLayer).
func (s *logSegment) fsys() vfs.FS {
	if s.io == nil || s.io.fs == nil {
		return vfs.OS
	}
	return s.io.fs
}

// indexOptions opens the segment's indexes: mapped (private or shared) on
// the operating system's file system, heap-backed on any other.
func (s *logSegment) indexOptions(private bool) index.Options {
	o := index.Options{Private: private}
	if fsys := s.fsys(); fsys != vfs.OS {
		o.FS = fsys
	}
	return o
}

// removeSegmentPaths removes a segment's files (data, offset, time,
// transaction index) from fsys, the engine's file system, ignoring
// missing ones and empty paths.
func removeSegmentPaths(fsys vfs.FS, paths ...string) error {
	var errs []error
	for _, p := range paths {
		if p == "" {
			continue
		}
		if err := fsys.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Index accessors tolerate the nil (empty sealed) indexes. Callers hold idxMu.

func (s *logSegment) offLookup(offset int64) (int64, int64) {
	if s.off == nil {
		return s.base, 0
	}
	return s.off.Lookup(offset)
}

func (s *logSegment) timLookup(ts int64) (int64, int64) {
	if s.tim == nil {
		return -1, s.base
	}
	return s.tim.Lookup(ts)
}

func (s *logSegment) offEntries() int {
	if s.off == nil {
		return 0
	}
	return s.off.Entries()
}

func (s *logSegment) timEntries() int {
	if s.tim == nil {
		return 0
	}
	return s.tim.Entries()
}

// openActiveIndexes opens (or creates) both indexes sized for appending.
// With shared syncfs flushes they are mapped private (ioBackend.metaFlush):
// written back at seal, close and each recovery-point checkpoint
// (writeBackIndexes) rather than with every flush.
func (s *logSegment) openActiveIndexes(cfg *LogConfig) error {
	o := s.indexOptions(s.io != nil && s.io.metaFlush)
	off, err := index.OpenOffsetWith(s.offPath, s.base, growSize(s.fsys(), s.offPath, cfg.offsetIndexBytes(), offsetEntrySize), o)
	if err != nil {
		return err
	}
	tim, err := index.OpenTimeWith(s.timPath, s.base, growSize(s.fsys(), s.timPath, cfg.timeIndexBytes(), timeEntrySize), o)
	if err != nil {
		off.Close()
		return err
	}
	s.off, s.tim = off, tim
	return nil
}

// growSize is the size to open an active index with: the configured size,
// or the existing file's (rounded down to whole entries) if that is larger.
func growSize(fsys vfs.FS, path string, want, entry int) int {
	if fi, err := fsys.Stat(path); err == nil {
		if have := int(fi.Size()) / entry * entry; have > want {
			return have
		}
	}
	return want
}

// openSealedIndexes opens both indexes at exactly their trimmed sizes (a
// file with no entries is left unopened: nil index). missing reports that an
// index file does not exist at all.
func (s *logSegment) openSealedIndexes() (missing bool, err error) {
	offSize, offOK := fileSize(s.fsys(), s.offPath)
	timSize, timOK := fileSize(s.fsys(), s.timPath)
	if !offOK || !timOK {
		return true, nil
	}
	offSize = offSize / offsetEntrySize * offsetEntrySize
	timSize = timSize / timeEntrySize * timeEntrySize
	if offSize > 0 {
		if s.off, err = index.OpenOffsetWith(s.offPath, s.base, int(offSize), s.indexOptions(false)); err != nil {
			return false, err
		}
	}
	if timSize > 0 {
		if s.tim, err = index.OpenTimeWith(s.timPath, s.base, int(timSize), s.indexOptions(false)); err != nil {
			return false, err
		}
	}
	return false, nil
}

func fileSize(fsys vfs.FS, path string) (int64, bool) {
	fi, err := fsys.Stat(path)
	if err != nil {
		return 0, false
	}
	return fi.Size(), true
}

// closeIndexes closes both indexes (trimming them to their entries).
func (s *logSegment) closeIndexes() error {
	var errs []error
	if s.off != nil {
		errs = append(errs, s.off.Close())
		s.off = nil
	}
	if s.tim != nil {
		errs = append(errs, s.tim.Close())
		s.tim = nil
	}
	return errors.Join(errs...)
}

// seal finishes a segment that will take no more appends: the time index
// gets a final entry for the largest timestamp (its reserved slot), both
// indexes are trimmed to their entries and reopened read-only sized, and the
// .log's preallocated tail is released. Caller holds Log.mu and Log.idxMu.
// The files still need an fsync (the flusher does it before the recovery
// point moves past the segment).
func (s *logSegment) seal() error {
	if s.tim != nil && s.maxTs > -1 {
		if err := s.tim.Append(s.maxTs, s.maxTsOff); err != nil && !errors.Is(err, index.ErrFull) {
			return err
		}
	}
	if err := s.closeIndexes(); err != nil {
		return err
	}
	if _, err := s.openSealedIndexes(); err != nil {
		return err
	}
	s.sealed = true
	s.idxUnsynced.Store(true) // before the roll publishes the next segment
	if err := s.seg.Seal(); err != nil {
		return err
	}
	if s.io != nil {
		// Idle sealed segments give their descriptor back (backend.go,
		// sealedFilesOpen); parked only once the flusher synced it.
		if err := s.seg.SetFileCache(s.io.cache); err != nil {
			return err
		}
	}
	if s.grpOut {
		// A sealed Direct segment holds no chunk (Seal drained its tail):
		// its pool's share goes to the next active segment.
		s.io.sealedGroup(s.grp)
		s.grpOut = false
	}
	return nil
}

// checkIndexes validates both indexes against the segment's size.
func (s *logSegment) checkIndexes() error {
	if s.off != nil {
		if err := s.off.Check(s.seg.Size()); err != nil {
			return err
		}
	}
	if s.tim != nil {
		if err := s.tim.Check(); err != nil {
			return err
		}
	}
	return nil
}
