package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/stratalog/strata/internal/uring"
	"github.com/stratalog/strata/segment"
)

// The segment I/O backend (broker key log.io.backend, Options.IOBackend).
//
//	auto    O_DIRECT writes through io_uring (segment.Options{Ring, Direct}),
//	        chosen by measurement (see package segment's doc): a fifth to a
//	        third of pwrite's CPU per byte for 1 KiB appends and an fdatasync
//	        bounded by the write pipeline instead of by the dirty page cache.
//	        Falls back to pwrite, with a log line saying why, when io_uring is
//	        missing or refused, or when the data directory's filesystem
//	        refuses O_DIRECT (tmpfs): a probe segment is written, synced and
//	        removed at Open.
//	uring   the same, but a host that cannot do it fails Open.
//	pwrite  pwrite into the page cache and fdatasync (segment.Create/Open).
//
// Ownership: the Engine owns the Ring and the chunk pools. Every open ring
// segment holds a reference on the backend (taken when it is created or
// opened, dropped by logSegment.closeFiles after the segment closed); the
// Engine holds one more from Open to Close. The last release closes the
// Ring, then the pools, so a ReadResult still pinning a segment after
// Engine.Close keeps the Ring alive until it is released.
//
// Pools: a Direct segment holds one chunk for its tail while active, and
// briefly one more while it submits (a full chunk's replacement or Sync's
// carried page); the others are writes in flight, returned by completions.
// A pool shared by k segments therefore cannot deadlock with k+1 chunks;
// groups of segsPerPool active segments share a pool of
// segsPerPool+DirectDepth chunks of 64 KiB (4 MiB for 32 segments), so
// every segment keeps a full pipeline of writes in flight while its
// neighbours are idle. A segment gives its share back when it is sealed
// (Seal drains its tail; a sealed segment keeps its ring descriptor for
// reads until it closes), so pools follow the number of active segments
// (partitions), not of segments on disk. Groups are mapped as needed and
// kept until Close (a pool registered with the ring cannot be unmapped
// earlier); only the first one is registered as fixed buffers
// (registration happens when the ring starts). Memory: 128 KiB per
// partition (10,000 partitions: about 1.25 GiB, of which the 64 KiB tail
// chunk each active segment holds is 625 MiB).

// IO backends (log.io.backend).
const (
	IOBackendAuto   = "auto"
	IOBackendUring  = "uring"
	IOBackendPwrite = "pwrite"
)

const (
	segsPerPool  = 32
	chunksPerSeg = 1
)

// ParseIOBackend checks a log.io.backend value ("" means auto).
func ParseIOBackend(s string) (string, error) {
	switch s {
	case "", IOBackendAuto:
		return IOBackendAuto, nil
	case IOBackendUring, IOBackendPwrite:
		return s, nil
	}
	return "", fmt.Errorf("%w: log.io.backend %q (want auto, uring or pwrite)", ErrInvalidConfig, s)
}

// fileLayer replaces real segment files (crash tests): Create and Open
// return the File a segment is made over; Create must also leave a file at
// path so directory scans find the segment.
type fileLayer interface {
	Create(path string) (segment.File, error)
	Open(path string) (segment.File, error)
}

// ioBackend makes the Engine's segments.
type ioBackend struct {
	name   string // what is active: "io_uring O_DIRECT", "pwrite" or "test files"
	ring   *uring.Ring
	files  fileLayer
	logger *slog.Logger

	mu     sync.Mutex
	groups []*poolGroup
	refs   int // the Engine's + one per open ring segment
}

// poolGroup is one shared chunk pool and the segments using it.
type poolGroup struct {
	pool  *uring.Pool
	users int
}

// newIOBackend sets up the backend named by choice ("" = auto) for dir.
func newIOBackend(choice string, dir string, files fileLayer, logger *slog.Logger) (*ioBackend, error) {
	b := &ioBackend{logger: logger, refs: 1}
	if files != nil {
		b.name, b.files = "test files", files
		return b, nil
	}
	choice, err := ParseIOBackend(choice)
	if err != nil {
		return nil, err
	}
	if choice == IOBackendPwrite {
		b.name = "pwrite"
		logger.Info("log I/O backend", "backend", b.name, "reason", "log.io.backend=pwrite")
		return b, nil
	}
	first, err := uring.NewPool(segment.DirectChunkBytes, segsPerPool*chunksPerSeg+segment.DirectDepth)
	if err != nil {
		return nil, fmt.Errorf("engine: chunk pool: %w", err)
	}
	rb := uring.BackendAuto
	if choice == IOBackendUring {
		rb = uring.BackendUring
	}
	ring, err := uring.New(uring.Config{Backend: rb, Entries: 256, Pools: []*uring.Pool{first}, Logger: logger})
	if err == nil && ring.Backend() != uring.BackendUring {
		// uring.New logged why; the ring's own pwrite fallback would only
		// add a thread hop to plain pwrite.
		ring.Close()
		ring, err = nil, fmt.Errorf("%w: io_uring fell back to pwrite", uring.ErrUnavailable)
	}
	if err == nil {
		b.ring = ring
		b.groups = []*poolGroup{{pool: first}}
		err = b.probe(dir)
		if err != nil {
			b.ring.Close()
			b.ring, b.groups = nil, nil
		}
	}
	if err != nil {
		first.Close()
		if choice == IOBackendUring {
			return nil, fmt.Errorf("engine: log.io.backend=uring: %w", err)
		}
		b.name = "pwrite"
		logger.Warn("log I/O backend", "backend", b.name, "reason", "io_uring O_DIRECT unusable, falling back", "err", err)
		return b, nil
	}
	b.name = "io_uring O_DIRECT"
	logger.Info("log I/O backend", "backend", b.name, "reason", "log.io.backend="+choice+" (measured default, see package segment)", "ring", ring.String())
	return b, nil
}

// probe writes, syncs, reads back and removes one Direct segment in dir:
// filesystems without O_DIRECT (tmpfs) or fallocate refuse here instead of
// at the first append.
func (b *ioBackend) probe(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, ".strata-direct-probe"+tmpSuffix)
	defer os.Remove(path)
	s, err := segment.CreateWith(path, 0, segment.Options{Ring: b.ring, Direct: true, Pool: b.groups[0].pool})
	if err != nil {
		return err
	}
	data := []byte("strata O_DIRECT probe")
	_, err = s.Append(data)
	if err == nil {
		err = s.Sync()
	}
	if err == nil {
		got := make([]byte, len(data))
		if _, err = s.ReadAt(got, 0); err == nil && string(got) != string(data) {
			err = errors.New("probe read back different bytes")
		}
	}
	return errors.Join(err, s.Close())
}

// direct reports whether segments are written with O_DIRECT through the ring.
func (b *ioBackend) direct() bool { return b.ring != nil }

// acquireGroup picks a pool with room for one more segment (mapping a new
// group if none has) and takes a backend reference.
func (b *ioBackend) acquireGroup() (*poolGroup, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refs == 0 {
		return nil, ErrClosed
	}
	var g *poolGroup
	for _, c := range b.groups {
		if c.users < segsPerPool {
			g = c
			break
		}
	}
	if g == nil {
		p, err := uring.NewPool(segment.DirectChunkBytes, segsPerPool*chunksPerSeg+segment.DirectDepth)
		if err != nil {
			return nil, err
		}
		g = &poolGroup{pool: p}
		b.groups = append(b.groups, g)
	}
	g.users++
	b.refs++
	return g, nil
}

// sealedGroup gives back a sealed segment's share of its pool (it holds
// no chunk; it keeps its backend reference until closed). A sealed segment
// made active again by a truncation appends without a share: a pool of
// segsPerPool+DirectDepth chunks stays live with up to that many users.
func (b *ioBackend) sealedGroup(g *poolGroup) {
	b.mu.Lock()
	g.users--
	b.mu.Unlock()
}

// releaseGroup undoes acquireGroup once the segment is closed (active:
// its share was not given back by sealedGroup).
func (b *ioBackend) releaseGroup(g *poolGroup, active bool) {
	b.mu.Lock()
	if active {
		g.users--
	}
	b.refs--
	last := b.refs == 0
	b.mu.Unlock()
	if last {
		b.shutdown()
	}
}

// close drops the Engine's reference.
func (b *ioBackend) close() {
	b.mu.Lock()
	b.refs--
	last := b.refs == 0
	b.mu.Unlock()
	if last {
		b.shutdown()
	}
}

func (b *ioBackend) shutdown() {
	if b.ring == nil {
		return
	}
	if err := b.ring.Close(); err != nil {
		b.logger.Warn("closing io_uring", "err", err)
	}
	for _, g := range b.groups {
		if err := g.pool.Close(); err != nil {
			b.logger.Warn("unmapping chunk pool", "err", err)
		}
	}
}

// create makes a new segment file for appending. The returned group (nil
// unless ring-backed) must be released after the segment is closed.
func (b *ioBackend) create(path string, prealloc int64) (*segment.Segment, *poolGroup, error) {
	switch {
	case b.files != nil:
		f, err := b.files.Create(path)
		if err != nil {
			return nil, nil, err
		}
		s, err := segment.New(path, f)
		if err != nil {
			f.Close()
		}
		return s, nil, err
	case b.ring == nil:
		s, err := segment.CreateWith(path, prealloc, segment.Options{})
		return s, nil, err
	}
	g, err := b.acquireGroup()
	if err != nil {
		return nil, nil, err
	}
	s, err := segment.CreateWith(path, prealloc, segment.Options{Ring: b.ring, Direct: true, Pool: g.pool})
	if err != nil {
		b.releaseGroup(g, true)
		return nil, nil, err
	}
	return s, g, nil
}

// open opens an existing segment file; active ones (that will take
// appends) are ring-backed, the others plain (they are only read).
func (b *ioBackend) open(path string, active bool) (*segment.Segment, *poolGroup, error) {
	switch {
	case b.files != nil:
		f, err := b.files.Open(path)
		if err != nil {
			return nil, nil, err
		}
		s, err := segment.New(path, f)
		if err != nil {
			f.Close()
		}
		return s, nil, err
	case b.ring == nil || !active:
		s, err := segment.OpenWith(path, segment.Options{})
		return s, nil, err
	}
	g, err := b.acquireGroup()
	if err != nil {
		return nil, nil, err
	}
	s, err := segment.OpenWith(path, segment.Options{Ring: b.ring, Direct: true, Pool: g.pool})
	if err != nil {
		b.releaseGroup(g, true)
		return nil, nil, err
	}
	return s, g, nil
}
