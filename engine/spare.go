package engine

import (
	"errors"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/stratalog/strata/internal/vfs"
)

// Spare files: a partition keeps the files it deletes in the steady
// churn of a log (the files of segments retention or DeleteRecords
// deleted, the producer snapshots no longer kept) as empty spares in its
// directory, and makes the files of its next segments and snapshots by
// renaming spares to their names instead of creating new files. A spare
// is such a file cut to size 0 (its blocks freed as an unlink would) and
// renamed to <name>.spare; creating a file at the name a spare was
// renamed to opens that inode again, and the file system allocates none.
//
// Why: this host's ext4 (no journal) allocates a new inode by scanning the
// block group's inode bitmap from its start and skipping every free inode
// deleted within the last 60 seconds, or 360 while its inode table block
// is not written back (fs/ext4/ialloc.c: find_inode_bit calls
// recently_deleted, which looks up each such inode's table block, when the
// file system has no journal). A broker that rolls segments and deletes
// snapshots and segments continuously has hundreds to thousands of such
// inodes in its partitions' groups: creating a file took ~260 us of CPU
// (2,000 files made in a directory after a few thousand deletions), a
// roll creates four (the data file, two indexes, the producer
// snapshot's temporary file) and deletes a snapshot, and with 4 MiB
// segments and 96 partitions at 100,000 records/s os.OpenFile was 10-14 %
// of the broker's CPU (docs/performance.md, "Session 37"). Renaming a
// spare changes a directory entry, which the roll's directory sync
// (ioBackend.create) makes durable with the new files.
//
// The pool: when the last reference to a segment deleted from the log's
// start goes (logSegment.closeFiles), each of its files that does not go
// to the recycled-file pool (recycle.go, ends mode) becomes a spare while
// the partition holds fewer than sparesMax, and so does each snapshot
// removed (removeSnapshot); the rest are unlinked as before. newSegment
// takes one spare for each of the new segment's files after removing
// whatever was left at their names, and snapshotProducers one for its
// temporary file. Open adopts the *.spare files it finds (recover.go),
// so a restart does not free them either. A crash may also leave index
// files without a data file (removed at Open), a removed snapshot cut to 0
// bytes under its own name (it does not load and is removed as any
// unreadable snapshot), or, on this file system without a journal, a
// spare's rename kept and its truncation lost: adopt cuts spares again,
// and a new segment's file over such an inode holds an older segment's
// bytes only until its first sync, which a restart before it treats as it
// treats any unsynced tail (batches whose offsets do not follow are cut,
// indexes of a segment past the recovery point are rebuilt). Only on the
// operating system's file system (the MemFS of tests has no inodes to
// spare).

const (
	spareSuffix = ".spare"
	// sparesMax bounds a partition's spares: a roll takes four, and a
	// retention pass (every 5 minutes by default, its files released a
	// minute later) deletes what the partition wrote in 5 minutes, three
	// files a segment: ~75 segments of 4 MiB at 1 MB/s. The inodes a pool
	// holds are ones the partition had before; they cost no blocks.
	sparesMax = 256
)

// segmentFS is the file system of l's segment files (logSegment.fsys).
func (l *Log) segmentFS() vfs.FS {
	if l.e.io == nil || l.e.io.fs == nil {
		return vfs.OS
	}
	return l.e.io.fs
}

// sparePool is a partition's spare files.
type sparePool struct {
	mu     sync.Mutex
	paths  []string
	closed bool // the log closed or was deleted: nothing enters or leaves
}

// put cuts the file at path (a deleted segment's *.deleted file, or a
// producer snapshot no longer kept) to 0 bytes and renames it to a spare;
// false when it does not go there (pool closed or full, or a call
// failed): remove it then.
func (p *sparePool) put(fsys vfs.FS, path string) bool {
	if fsys != vfs.OS || path == "" {
		return false
	}
	name := strings.TrimSuffix(path, deletedSuffix) + spareSuffix
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.paths) >= sparesMax || slices.Contains(p.paths, name) {
		return false
	}
	if err := fsys.Truncate(path, 0); err != nil {
		return false
	}
	if err := fsys.Rename(path, name); err != nil {
		return false
	}
	p.paths = append(p.paths, name)
	return true
}

// take renames a spare to path (where no file is), so that creating path
// opens the spare's inode; false when the pool has none (or renaming
// failed: that spare is removed).
func (p *sparePool) take(fsys vfs.FS, path string) bool {
	if fsys != vfs.OS {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && len(p.paths) > 0 {
		name := p.paths[len(p.paths)-1]
		p.paths = p.paths[:len(p.paths)-1]
		if err := fsys.Rename(name, path); err == nil {
			return true
		}
		_ = fsys.Remove(name) // best effort: Open removes or adopts what is left
	}
	return false
}

// adopt takes the spares Open found (paths) into the pool, up to
// sparesMax, and removes the others (all of them off the operating
// system's file system). Each is cut to 0 bytes again: a crash may have
// kept a spare's rename and lost its truncation.
func (p *sparePool) adopt(fsys vfs.FS, paths []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, path := range paths {
		if fsys == vfs.OS && !p.closed && len(p.paths) < sparesMax && fsys.Truncate(path, 0) == nil {
			p.paths = append(p.paths, path)
			continue
		}
		if err := fsys.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// close stops the pool; its files stay (the next Open adopts them, a
// deleted partition's go with its directory).
func (p *sparePool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// size is the number of spares.
func (p *sparePool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.paths)
}
