package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/segment"
)

// Recycled segment files (Options.JournalEnds only): a partition keeps the
// .log files retention (or DeleteRecords, the way a follower follows its
// leader's log start) deletes in a small pool in its directory and makes
// its next segments over them instead of over fresh zero-filled files, as
// PostgreSQL and RocksDB recycle their WAL files. A deleted segment's file
// has every block up to its size allocated, written and durable with its
// metadata (it was sealed and synced), so appends into it are pure
// overwrites that the round's device cache flush alone makes durable: no
// fallocate, no zeros, and the device writes each record byte once
// (segment.RecycleWith). A file is zero-filled only past the old file's
// size, or when the pool is empty; in this mode a fresh file's zero-fill
// also stops at segment.bytes (segment.Options.CapLead) instead of running
// a step past it (a fresh 1 MiB segment wrote 3-4 MiB of zeros without
// the cap: TestRecycledSegmentsFeedRolls).
//
// The pool: when the last reference to a segment deleted by retention or
// DeleteRecords goes (logSegment.closeFiles: after every reader released
// it, and for retention after file.delete.delay.ms), its .log.deleted file
// is renamed to <old base>.log.recycle instead of unlinked, if the pool
// holds fewer than recyclePoolMax files; its index files go as before.
// createSegment takes one when it has one whose old offsets all lie below
// the new base (end):
// renames it to the new <base>.log, opens it without truncating (Size 0),
// and fsyncs the directory before the segment is used, so no journal
// record names a segment whose name a crash could undo. Directory scans
// at Open keep up to recyclePoolMax *.log.recycle files of a partition in
// its pool and remove the rest (all of them outside this mode); Kafka's
// scan ignores the suffix. A deleted topic's pool goes with its directory.
//
// Why two: retention deletes about one segment per roll in steady state,
// so one file waits for the next roll and a second covers a pass that
// deletes two at once; every pooled file holds a segment's worth of disk
// beyond retention.bytes, so more would cost disk for nothing.
//
// Why only with the journal's end records: a recycled file holds an old
// segment's batches past the new segment's end, whole and with valid
// CRCs. Recovery in the other modes tells a lost write from damage by its
// zeroed header and keeps every valid batch after it; here recovery stops
// at the durable end the end records vouch for (walkSegment) and a batch
// whose offsets do not follow the previous one's ends the walk, so old
// batches (offsets below the segment's base) are never taken for the
// segment's own. Every acknowledged round of a recycled segment has an end
// record (it shares the journal's flush from its first round, with durable
// end 0). A segment no end record names (none staged yet, or the journal's
// start moved past them) keeps the whole batches the walk finds; a bad
// batch past the recovery point is a lost write (over old bytes, zeros or
// torn) and is cut, not reported (walkSegment): damage to acknowledged
// bytes there looks the same, the price of not zero-filling (as for the
// newest round's bytes in journal_replay.go's trustEnds).

const (
	recycleSuffix  = ".recycle" // <old base>.log.recycle
	recyclePoolMax = 2          // pooled files per partition (see above)
	// recycleMinBytes: smaller files (segments rolled by segment.ms) save
	// less zero-fill than a later, larger one would.
	recycleMinBytes = 256 << 10
)

// segPool is a partition's pool of recycled segment files.
type segPool struct {
	mu     sync.Mutex
	files  []pooledFile
	closed bool // the log closed or was deleted: nothing enters or leaves
}

// pooledFile is one file of a pool; end bounds the offsets of the batches
// it holds (they are all below it).
type pooledFile struct {
	path string
	end  int64
}

// recycles reports whether l's deleted segment files are pooled and its
// new segments made over them: ends mode with zero-filled O_DIRECT
// segments sharing device flushes in l's directory.
func (l *Log) recycles() bool {
	e := l.e
	return e.jnlEnds && e.jnl != nil && e.io != nil && e.io.files == nil && e.io.direct() && e.io.prewrite(l.dir)
}

// poolVictims sends the data files of segments cut from the log's start
// (retention, DeleteRecords: a follower follows its leader's log start
// with DeleteRecords, so its deletions come that way) to l's pool once
// released; every offset they hold is below the new log start. Caller
// holds l.mu and has moved the log start.
func (l *Log) poolVictims(victims []*logSegment) {
	for _, v := range victims {
		v.spares.Store(&l.spares) // their files' inodes serve the next rolls (spare.go)
	}
	if !l.recycles() || l.e.floor.refused.Load() != nil {
		return // below the free-space floor deleted files are unlinked (drainPools)
	}
	for _, v := range victims {
		v.poolEnd = l.logStart.Load()
		v.pool.Store(&l.pool)
	}
}

// put renames a deleted segment's data file (path, *.log.deleted, size
// bytes, offsets below end) into the pool; false when it does not go there
// (pool closed or full, file too small, rename failed): remove it then.
func (p *segPool) put(fsys vfs.FS, path string, size, end int64) bool {
	if !strings.HasSuffix(path, logSuffix+deletedSuffix) || size < recycleMinBytes {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.files) >= recyclePoolMax {
		return false
	}
	name := strings.TrimSuffix(path, deletedSuffix) + recycleSuffix
	if err := fsys.Rename(path, name); err != nil {
		return false
	}
	p.files = append(p.files, pooledFile{path: name, end: end})
	return true
}

// take removes from the pool a file whose offsets all lie below base.
func (p *segPool) take(base int64) (pooledFile, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return pooledFile{}, false
	}
	for i := len(p.files) - 1; i >= 0; i-- {
		if f := p.files[i]; f.end <= base {
			p.files = append(p.files[:i], p.files[i+1:]...)
			return f, true
		}
	}
	return pooledFile{}, false
}

// adopt takes f into the pool unless it is full (Open's scan).
func (p *segPool) adopt(f pooledFile) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.files) >= recyclePoolMax {
		return false
	}
	p.files = append(p.files, f)
	return true
}

// close stops the pool; its files stay where they are (a clean restart
// adopts them, a deleted partition's go with its directory).
func (p *segPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// drain removes every pooled file and returns how many bytes that freed
// (the pool stays open: later deletions may fill it again).
func (p *segPool) drain(fsys vfs.FS) (files int, bytes int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, f := range p.files {
		var size int64
		if fi, serr := fsys.Stat(f.path); serr == nil {
			size = fi.Size()
		}
		if rerr := fsys.Remove(f.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			errs = append(errs, rerr)
			continue
		}
		files++
		bytes += size
	}
	p.files = p.files[:0]
	return files, bytes, errors.Join(errs...)
}

// drainPools empties every partition's pool: the free-space floor's first
// remedy (diskfloor.go), since each pooled file holds a segment's worth of
// disk beyond retention. It reports the files removed.
func (e *Engine) drainPools() int {
	total, freed := 0, int64(0)
	for _, l := range e.allLogs() {
		n, b, err := l.pool.drain(e.fs)
		if err != nil {
			e.logger.Warn("removing pooled segment files", "dir", l.dir, "err", err)
		}
		total += n
		freed += b
	}
	if total > 0 {
		e.logger.Info("free-space floor: removed the pooled segment files", "files", total, "bytes", freed)
	}
	return total
}

// size is the number of pooled files.
func (p *segPool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.files)
}

// adoptRecycled takes the *.log.recycle files Open found in l's directory
// (paths) into its pool, up to recyclePoolMax, and removes the others (all
// of them unless l recycles, or without a segment whose base bounds their
// offsets). firstBase is the base of l's first recovered segment: every
// pooled file was deleted below it.
func (l *Log) adoptRecycled(paths []string, firstBase int64, ok bool) error {
	keep := ok && l.recycles()
	var errs []error
	for _, path := range paths {
		if keep && l.pool.adopt(pooledFile{path: path, end: firstBase}) {
			continue
		}
		if err := l.e.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// newSegmentFile makes the data file of a new active segment at path
// (base): over a pooled file when l's pool has one for base, else a fresh
// one of prealloc bytes. A pooled file that cannot be reused is removed
// and a fresh file made instead.
func (l *Log) newSegmentFile(path string, base, prealloc int64) (*segment.Segment, *poolGroup, error) {
	if l.recycles() {
		if f, ok := l.pool.take(base); ok {
			seg, grp, err := l.recycleFile(f.path, path)
			if err == nil {
				l.e.recycledSegs.Add(1)
				return seg, grp, nil
			}
			l.e.logger.Warn("reusing a recycled segment file failed; creating a fresh one", "from", f.path, "to", path, "err", err)
			if rerr := l.e.fs.Remove(f.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				l.e.logger.Warn("removing a recycled segment file", "path", f.path, "err", rerr)
			}
		}
	}
	l.spares.take(l.segmentFS(), path)                            // over a spare inode (spare.go)
	return l.e.io.create(path, prealloc, l.config().WriteCaching) // truncates a renamed file left at path
}

// recycleFile renames the pooled file from to path and opens it as a new
// segment over its old blocks (segment.RecycleWith, which fsyncs the
// directory); the zero-fill past them stops at segment.bytes.
func (l *Log) recycleFile(from, path string) (*segment.Segment, *poolGroup, error) {
	if err := l.e.fs.Rename(from, path); err != nil {
		return nil, nil, err
	}
	return l.e.io.recycle(path, l.config().SegmentBytes, l.config().WriteCaching)
}

// recycle opens the file at path as a recycled Direct segment
// (segment.RecycleWith). The group must be released after it is closed.
func (b *ioBackend) recycle(path string, prealloc int64, big bool) (*segment.Segment, *poolGroup, error) {
	if b.ring == nil || b.files != nil {
		return nil, nil, errors.ErrUnsupported
	}
	g, err := b.acquireGroup(big)
	if err != nil {
		return nil, nil, err
	}
	s, err := segment.RecycleWith(path, prealloc, b.segOptions(filepath.Dir(path), g.pool))
	if err != nil {
		b.releaseGroup(g, true)
		return nil, nil, err
	}
	return s, g, nil
}
