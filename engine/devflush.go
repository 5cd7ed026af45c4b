package engine

import (
	"fmt"
	"github.com/stratalog/strata/internal/vfs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/segment"
)

// Shared device flushes (see "Shared device flushes" in doc.go).
//
// A devFlush issues fdatasync on an anchor file of the data directory's
// filesystem on behalf of segments whose unsynced bytes need only the
// device's volatile cache flushed (segment.StartShared: zero-filled,
// already-synced blocks overwritten by completed O_DIRECT writes). Group
// commit without a goroutine of its own: the first waiter that finds no
// flush running runs one; waiters arriving meanwhile share the next, so at
// most one flush runs and one more is wanted at any time, however many
// partitions are dirty.
type devFlush struct {
	f     *os.File
	dev   uint64       // st_dev of the anchor: segments on another device sync themselves
	flush func() error // one device cache flush: fdatasync of f (tests replace it)
	// now is the engine's clock (Options.Now, set by Open), read around
	// each flush for the mean flush time in the close-time log line; nil
	// (tests that build a devFlush directly): flushes are not timed.
	now func() time.Time

	mu      sync.Mutex
	cond    sync.Cond
	started uint64 // flushes started
	done    uint64 // the flush numbered done (and every earlier one) has ended
	running bool
	err     error // sticky: a failed flush fails every later wait

	epochA atomic.Uint64 // started, readable without mu (segment.Options.FlushEpoch)

	flushes atomic.Uint64 // flushes run (tests, stats)
	waits   atomic.Uint64 // waits served
	nanos   atomic.Uint64 // time spent in flushes
}

// devFlushAnchor is the anchor file's name in the data directory.
const devFlushAnchor = ".strata-flush-anchor"

// openDevFlush creates (or reopens) the anchor file in dir, with one
// written block, fsynced with its directory entry, so its own fdatasyncs
// have no data or metadata to write: each one is the device cache flush.
// With metadata, each flush is a syncfs of the anchor's filesystem, then
// the anchor's fdatasync: syncfs writes every metadata change made before
// it (the extent conversions of completed O_DIRECT writes into unwritten
// extents, fallocate steps, truncations), and the fdatasync flushes the
// device cache after those writes completed. syncfs alone is not a flush
// on every filesystem: on XFS it forces the log, and with nothing to log
// (a round whose writes all overwrote converted blocks: small appends
// within the block the last round ended in) it issues no I/O at all
// (measured: 100 overwrites each followed by syncfs, 8 device flushes;
// TestMetaFlushFlushesOnXFS); on ext4 without a journal it issues the
// flush before it waits for the inode-table writes it started, so a
// conversion could still sit in the device's volatile cache when it
// returns.
func openDevFlush(dir string, metadata bool) (*devFlush, error) {
	path := filepath.Join(dir, devFlushAnchor)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*devFlush, error) {
		f.Close()
		return nil, fmt.Errorf("flush anchor %s: %w", path, err)
	}
	if _, err := f.WriteAt(make([]byte, 4096), 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := vfs.SyncDir(dir); err != nil {
		return fail(err)
	}
	dev, err := segment.DeviceOf(dir)
	if err != nil {
		return fail(err)
	}
	if metadata {
		return newDevFlush(f, dev, func() error {
			if err := segment.SyncFS(f); err != nil {
				return err
			}
			return segment.Fdatasync(f)
		}), nil
	}
	return newDevFlush(f, dev, func() error { return segment.Fdatasync(f) }), nil
}

func newDevFlush(f *os.File, dev uint64, flush func() error) *devFlush {
	d := &devFlush{f: f, dev: dev, flush: flush}
	d.cond.L = &d.mu
	return d
}

// epoch is the number of flushes started so far (segment.Options.
// FlushEpoch): a write that completed before epoch was read is covered by
// flush epoch+1 and every later one, since started is raised before the
// flush is issued.
func (d *devFlush) epoch() uint64 { return d.epochA.Load() }

// wait returns once a device cache flush that started after wait was
// called has ended (running it itself when none is running), or with the
// error of a failed flush. Safe for concurrent use; blocks its caller for
// at most two flushes.
func (d *devFlush) wait() error { return d.waitFor(0) }

// waitFor returns once flush number need (or a later one) has ended, with
// need from epoch()+1 read after the writes to cover completed; 0 means a
// flush that starts after waitFor was called. It runs the flush itself
// when none is running, and returns at once if that flush already ended.
func (d *devFlush) waitFor(need uint64) error {
	d.waits.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	if need == 0 || need > d.started+1 {
		need = d.started + 1 // a flush running now may have started before our writes completed
	}
	for d.done < need && d.err == nil {
		if d.running {
			d.cond.Wait()
			continue
		}
		d.running = true
		d.started++
		d.epochA.Store(d.started) // before the flush is issued
		n := d.started
		d.mu.Unlock()
		var t0 time.Time
		if d.now != nil {
			t0 = d.now()
		}
		err := d.flush()
		if d.now != nil {
			if dt := d.now().Sub(t0); dt > 0 {
				d.nanos.Add(uint64(dt))
			}
		}
		d.flushes.Add(1)
		d.mu.Lock()
		d.running = false
		d.done = n
		if err != nil && d.err == nil {
			d.err = fmt.Errorf("device cache flush: %w", err)
		}
		d.cond.Broadcast()
	}
	return d.err
}

// close closes the anchor (the file stays for the next Open).
func (d *devFlush) close() error {
	if d == nil || d.f == nil {
		return nil
	}
	return d.f.Close()
}
