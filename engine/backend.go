package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/internal/uring"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/segment"
)

// The segment I/O backend (broker key log.io.backend, Options.IOBackend).
//
//	auto    uring where io_uring and O_DIRECT work (the probe below), else
//	        pwrite with a warning saying why (see "Why auto is uring").
//	uring   O_DIRECT writes through io_uring (segment.Options{Ring, Direct}):
//	        a fifth to a third of pwrite's CPU per byte for 1 KiB appends and
//	        an fdatasync bounded by the write pipeline instead of by the dirty
//	        page cache (see package segment's doc). A host without io_uring,
//	        or a filesystem refusing O_DIRECT (tmpfs), fails Open: a probe
//	        segment is written, synced and removed first.
//	pwrite  pwrite into the page cache and fdatasync (segment.Create/Open).
//
// # Why auto is uring (measured 02:56-03:00 UTC, load average 1.4-5)
//
// Through the broker (strata loadgen --spawn 1 --engine native --rate
// 100000 --duration 10s --warmup 3s --consumers 1, two runs of each
// backend, interleaved): produce p99 10.3 and 22.7 ms with uring against
// 41.3 and 43.7 ms with pwrite, end-to-end p99 10.9 and 24.4 against 44.3
// and 63.9 ms, at about the same broker CPU (5.97 and 6.73 µs/record
// against 5.63 and 6.47) and 147 MiB RSS against 29-37 MiB (chunk pools and
// tail cache). The segment benchmark (go test -bench 'BenchmarkAppender/
// (Pwrite|RingDirect)/' ./segment/, two runs): paced at 200 MB/s of 1 KiB
// appends with a 2 ms flusher, 1.25-1.31 CPU-s/GiB and sync p99 2.0-2.1 ms
// for O_DIRECT against 3.19-3.29 and 2.5-2.7 ms for pwrite; 64 KiB appends
// 1.06-1.19 against 0.80 CPU-s/GiB, sync p99 5.8-8.9 against 9.0-12.5 ms;
// unpaced 1 KiB appends 914-955 MB/s against 388-400, unpaced 64 KiB
// appends 776-853 MB/s against 1,118-1,192 but with pwrite's sync p99 at
// 113-120 ms (the page cache's dirty backlog) against 8.9-11.8 ms. Where
// every append waits for its own fdatasync (BenchmarkBackendAppendDurable:
// 16 producers, 4 partitions) pwrite is 10-20 % ahead (64 KiB: 542-545
// against 443-459 MB/s, 1.5-2.0 CPU-s/GiB both). The produce p99 target
// (15 ms) is what decides: pwrite's fsync tail is the dirty page cache's
// size, the ring's is its write pipeline's.
//
// The coherence failure that made auto pwrite for a while
// (TestTailCacheConcurrentReaders with log.io.backend=uring failed 2-5
// runs in 10) was not the page cache: Log.Read's jump through the offset
// index (scanRead -> indexJump) was bounded by the HW and the byte budget
// but not by the segment's written end, and index entries are added at
// append, before the write-behind puts the bytes in the file, so with
// write.caching (HW = log end) a read could return a file range past
// Written(): zeros of the unwritten reservation, or a torn batch. The jump
// now stops at the written end (TestDirectReadIndexJumpStopsAtWritten,
// TestHeadReadersEveryBackend). The page cache itself stays coherent: the
// kernel (iomap_dio_rw, 6.18 here) drops cached pages of an O_DIRECT
// write's range before the write and again after it completes, after the
// unwritten extents are converted, under each folio's lock, so a buffered
// read racing the write (including readahead past the written end, which
// reads unwritten blocks as zeros) cannot leave a stale page behind; a
// failed invalidation would log "Page cache invalidation failure on direct
// I/O" and fail the next fdatasync with EIO, never pass silently. Package
// segment's TestDirectHeadReadsCoherent holds the kernel to that (pread
// and sendfile of the partial last page while the ring rewrites it). So
// file reads still go up to Written(), not to the page boundary below it:
// stopping at the page boundary would leave a batch in the partial page
// unreadable from the file (Read, follower fetches) until more bytes
// arrive. Catch-up reads of an O_DIRECT segment (not in the page cache)
// need reading ahead; the kernel's readahead is off on an active segment's
// read descriptor (it read the zero-filled reservation past Written, which
// the next O_DIRECT write dropped again) and Log.read's scan asks
// segment.Prefetch to read ahead up to Written instead (segment/doc.go,
// "Readahead").
//
// Ownership: the Engine owns the Ring and the chunk pools. Every open ring
// segment holds a reference on the backend (taken when it is created or
// opened, dropped by logSegment.closeFiles after the segment closed); the
// Engine holds one more from Open to Close. The last release closes the
// Ring, then the pools, so a ReadResult still pinning a segment after
// Engine.Close keeps the Ring alive until it is released.
//
// Pools live on 2 MiB huge pages where the kernel grants them (a group
// pool is 6 MiB: uring.NewPool aligns and madvises it), so a chunk's write
// is one device segment; on this VM's virtio disk, which has no indirect
// descriptors, a 68 KiB write from 4 KiB pages took 19 of its queue's 256
// slots and device busy time at 200,000 records/s was a third higher
// (docs/performance.md, "Session 9").
//
// Pools: a Direct segment holds one chunk for its tail while active, and
// briefly one more while it submits (a full chunk's replacement or Sync's
// carried page); the others are writes in flight, returned by completions.
// A pool shared by k segments therefore cannot deadlock with k+1 chunks;
// groups of segsPerPool active segments share a pool of
// segsPerPool+poolSpareChunks chunks (64; 128 in the first richGroups
// pools, see richSpareChunks), so every segment keeps a pipeline of
// writes in flight while its neighbours are idle. Pools have
// chunks of poolChunkBytes (128 KiB: 8 MiB a pool), except up to
// bigChunkGroups pools of bigPoolChunkBytes (256 KiB: 16 MiB a pool) for
// the active segments of logs with write caching (log.write.caching /
// write.caching; beyond those pools they share the others). Chunks are
// larger than the segment package's 64 KiB default because a produce
// batch (up to 64 KiB with the usual client batch.size) that crosses a
// chunk boundary costs two device writes before its fdatasync: at 100,000
// 1 KiB records/s over 96 partitions 128 KiB chunks cut the ring's ops
// from 2.9 to 2.0 per batch (1 write + 1 fdatasync; docs/performance.md).
// And every chunk write costs the broker a submission in the kernel (the
// block layer and a virtio notification here) whatever its size: with
// write caching, where chunk writes are the whole device path, 256 KiB
// chunks halved the device writes of a keyed closed loop and cut the
// broker's CPU per record by 0-15 % in five rounds (512 KiB gained nothing
// more). Where the journal makes appends durable (acks=all without write
// caching) the larger chunks cut broker CPU in a closed loop too, but
// doubled the journal's commit p99 and the broker's produce p99 at 100,000
// records/s (not traced; the candidates: every checkpoint writes each
// log's partial chunk, twice as much, and chunk writes queue before the
// journal's in the device): those logs keep 128 KiB (docs/performance.md,
// session 31). The big pools are bounded so that memory at high partition
// counts stays what it was (the tail chunk each active segment holds). A
// segment gives its share back when it is sealed (Seal drains its tail; a
// sealed segment keeps its ring descriptor for reads until it closes), so
// pools follow the number of active segments
// (partitions), not of segments on disk. Groups are mapped as needed and
// kept until Close (a pool registered with the ring cannot be unmapped
// earlier); each is registered with the ring as one fixed buffer (the
// first at ring setup, later ones by Ring.RegisterPool), so chunk writes
// are WRITE_FIXED: no page pinning per write (that pinning was 5 % of the
// broker's CPU at 340,000 records/s with only the first pool registered).
// Memory: 256 KiB per partition (10,000 partitions: about 2.5 GiB, of
// which the 128 KiB tail chunk each active segment holds is 1.25 GiB),
// plus at most 64 MiB of big pools and 32 MiB of the first pools' extra
// spare chunks.

// sealedFilesOpen is how many idle sealed segments keep their .log
// descriptor open (segment.FileCache, least recently read first to close).
// A partition's active segment always holds one; its sealed segments hold
// one only while read (a fetch pins it until its sendfile ended) or while
// among the sealedFilesOpen most recently used, and reopen by path
// otherwise. Index files hold none (package index maps them). So the
// descriptors a broker needs are about one per partition, one per
// connection and sealedFilesOpen, whatever the number of segments: 10,000
// partitions fit the 20,000 limit here with room for clients.
var sealedFilesOpen = 1024 // a var for tests

// IO backends (log.io.backend).
const (
	IOBackendAuto   = "auto"
	IOBackendUring  = "uring"
	IOBackendPwrite = "pwrite"
)

const (
	segsPerPool  = 32
	chunksPerSeg = 1
	// poolChunkBytes and bigPoolChunkBytes are the chunk sizes of the
	// shared pools; at most bigChunkGroups pools have the big ones, for
	// segments of logs with write caching (see above).
	poolChunkBytes    = 2 * segment.DirectChunkBytes
	bigPoolChunkBytes = 4 * segment.DirectChunkBytes
	bigChunkGroups    = 4
)

// poolSpareChunks are the chunks of a pool beyond one per segment: writes
// in flight and chunks the journal's spans hold (journalMaxPins).
const poolSpareChunks = segment.DirectDepth

// The first richGroups ordinary pools mapped have richSpareChunks spare
// chunks. What spare chunks hold — full chunks waiting for the device
// (segmentBackgroundDepth lets 16 in at once) and chunks the journal's
// spans pin until their group is written — is bounded by the device and
// the journal's groups, not by the number of partitions, but one produce
// request of a keyed client fills chunks in every pool at once: a keyed
// closed loop over 96 partitions (three pools) took a group's worth of
// chunks per pool, and the connection's reader spent most of its time in
// Pool.Get waiting for the device to give chunks back (an execution trace:
// 2.95 s of 4 s; its time per request p50 13.4 ms, and 4.1 ms with three
// times the spare chunks). Only the first pools get them, so that memory
// at high partition counts stays what it was: at most richGroups x
// (richSpareChunks - poolSpareChunks) x 128 KiB = 32 MiB more.
const (
	richGroups      = 4
	richSpareChunks = 3 * segment.DirectDepth
)

// segmentBackgroundDepth, when > 0, is the most full-chunk segment writes
// (write-behind: nothing waits for them soon) in the device at once
// (uring.Config.BackgroundDepth), and the journal holds new ones back
// while it writes a group (journal.pauseBG); 0: unbounded. The device
// serves requests in order, so a journal group queued behind dozens of
// 128 KiB chunk writes waited for them: keyed closed loop, 16 gave
// 641,000-656,000 rec/s against 528,000-574,000 unbounded and 535,000-561,000
// for the session's first build, journal writes p50 0.4 against 0.7 ms
// (docs/performance.md, session 15). Partial writes (a sync, a checkpoint,
// a read of the tail) are not held back: something waits for them.
const segmentBackgroundDepth = 16

// zeroFillBytes is the size of the zero-fill buffer (each zero-fill write
// of a PreWrite segment writes at most this much; less where the device
// takes fewer pages per request: zeroWriteBytes).
const zeroFillBytes = 1 << 20

// zeroWriteBytes is how much of the zero-fill buffer one write uses: all
// of it, or as many pages as one request to the device can carry
// (maxSegments, 0 = unknown or not limiting). A buffer of 4 KiB pages is
// one segment per page: on this VM's virtio disk (max_segments 254) a
// 1 MiB write went out as two requests, 1,016 KiB and 8 KiB, each paying
// the device's ~45 µs per request. The buffer is normally a 2 MiB huge
// page (uring.NewPool), physically contiguous: one segment, so the caller
// passes 0 then.
func zeroWriteBytes(buf, maxSegments int) int {
	if maxSegments <= 0 {
		return buf
	}
	return min(buf, max(maxSegments, 16)*uring.Alignment)
}

// newGroupPool maps one shared chunk pool, of big chunks if big. An
// appender that finds it empty first lets the journal write a group it
// holds open (b.starved): that group's spans may pin the chunks the
// appender waits for.
func (b *ioBackend) newGroupPool(big, rich bool) (*uring.Pool, error) {
	chunk, spare := poolChunkBytes, poolSpareChunks
	if big {
		chunk = bigPoolChunkBytes
	}
	if rich {
		spare = richSpareChunks
	}
	p, err := uring.NewPool(chunk, segsPerPool*chunksPerSeg+spare)
	if err == nil {
		p.SetStarveHook(b.starved)
	}
	return p, err
}

// starved is the chunk pools' starve hook: it stops the journal holding
// its next group open (journal.hold), if there is a journal.
func (b *ioBackend) starved() {
	if f := b.onStarve.Load(); f != nil {
		(*f)()
	}
}

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

// sharedFiles is a fileLayer whose files sit on a device with a volatile
// write cache shared by all of them, and whose segment files are
// zero-filled ahead of their appends as segment.Options.PreWrite does
// (the ends-mode crash test's layer over a vfs.MemFS with its device
// cache on: journal_ends_crash_test.go). It exists so that the shared
// flush paths (flushBatch, shareFlush with Options.JournalEnds, the
// journal's checkpoints) run over a file layer: a segment over a layer's
// File has no ring writer, so its own StartShared always answers "not
// shared"; with a sharedFiles layer the backend asks the layer instead
// (startShared and the methods after it), and devFlush's flush is the
// layer's Flush. Whether a write the layer calls shared really needed no
// metadata is for the layer's file system to decide at a crash, not
// trusted. Production backends never have one.
type sharedFiles interface {
	fileLayer
	// Flush is one device cache flush: an fdatasync of a file of the
	// layer.
	Flush() error
	// Shareable reports whether every byte of the segment file at path
	// below size was written over blocks made durable with their
	// metadata (zero-filled and synced ahead), and no truncation came
	// since the file's last own Sync: segment.Segment.StartShared's
	// condition for a ring segment.
	Shareable(path string, size int64) bool
	// MarkDurable and Durable are segment.Segment's for the file at path:
	// its durable end after a device cache flush, and the end the last
	// own Sync or flush covered (-1 after a truncation until the next
	// Sync).
	MarkDurable(path string, end int64)
	Durable(path string) int64
}

// ioBackend makes the Engine's segments.
type ioBackend struct {
	// onStarve is the journal's unhold, set once it is open (starved).
	onStarve atomic.Pointer[func()]
	name     string // what is active: "io_uring O_DIRECT", "pwrite" or "test files"
	ring     *uring.Ring
	cache    *segment.FileCache // descriptors of idle sealed segments (see sealedFilesOpen)
	files    fileLayer
	shared   sharedFiles // files, when it shares device flushes (tests)
	logger   *slog.Logger
	// dev shares device cache flushes among PreWrite segments (nil: each
	// segment fdatasyncs itself; see devflush.go).
	dev *devFlush
	// capLead (Options.JournalEnds): a new segment's zero-fill stops at
	// segment.bytes (segment.Options.CapLead; createSegment passes it as
	// the prealloc), where the segment rolls. Set by Open before any log.
	capLead bool
	// metaFlush: dev's flush is a syncfs and its segments are not
	// zero-filled (log.io.zero.fill=false): they share it with
	// segment.Options.SharedMeta, and active indexes are mapped private
	// (index.Options.Private) so that syncfs does not write their pages
	// back with every flush.
	metaFlush bool
	// fs holds the segments' index and transaction-index files (the
	// Engine's file system, Options.fs): indexes are mapped when it is
	// vfs.OS, heap-backed on it otherwise (index.Options.FS).
	fs vfs.FS

	// zeros is the zero-fill buffer of PreWrite segments: the one chunk of
	// zeroPool, registered with the ring, handed out until shutdown.
	zeroPool *uring.Pool
	zeros    []byte

	mu     sync.Mutex
	groups []*poolGroup
	refs   int // the Engine's + one per open ring segment
}

// poolGroup is one shared chunk pool and the segments using it.
type poolGroup struct {
	pool  *uring.Pool
	users int
	big   bool // bigPoolChunkBytes chunks, for logs with write caching
}

// newIOBackend sets up the backend named by choice ("" = auto) for dir.
func newIOBackend(choice string, dir string, files fileLayer, shared, zeroFill bool, logger *slog.Logger) (*ioBackend, error) {
	b := &ioBackend{logger: logger, refs: 1, cache: segment.NewFileCache(sealedFilesOpen)}
	if files != nil {
		b.name, b.files = "test files", files
		if sf, ok := files.(sharedFiles); ok && shared && zeroFill {
			// The layer's device flush, instead of an anchor file's
			// fdatasync (openDevFlush): no descriptor to close.
			b.shared, b.dev = sf, newDevFlush(nil, 0, sf.Flush)
		}
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
	if err := b.startRing(dir); err != nil {
		if choice == IOBackendUring {
			return nil, fmt.Errorf("engine: log.io.backend=uring: %w", err)
		}
		b.name = "pwrite"
		logger.Warn("log I/O backend", "backend", b.name, "reason", "log.io.backend=auto: io_uring O_DIRECT unusable here", "err", err)
		return b, nil
	}
	b.name = "io_uring O_DIRECT"
	logger.Info("log I/O backend", "backend", b.name, "reason", "log.io.backend="+choice, "ring", b.ring.String())
	fs, ok := sharedFlushFS(dir)
	switch {
	case !shared:
		logger.Info("segment syncs", "mode", "fdatasync per segment", "reason", "log.io.flush.shared=false")
	case !ok:
		logger.Info("segment syncs", "mode", "fdatasync per segment", "reason", "filesystem "+fs+" may allocate on overwrite")
	default:
		d, err := openDevFlush(dir, !zeroFill)
		if err != nil {
			logger.Warn("segment syncs", "mode", "fdatasync per segment", "reason", "no flush anchor", "err", err)
			break
		}
		b.dev, b.metaFlush = d, !zeroFill
		if zeroFill {
			logger.Info("segment syncs", "mode", "shared device flush (zero-filled segments)", "filesystem", fs)
		} else {
			logger.Info("segment syncs", "mode", "shared filesystem sync (segments on unwritten extents, written once)", "filesystem", fs, "reason", "log.io.zero.fill=false")
		}
	}
	return b, nil
}

// flushEpoch is segment.Options.FlushEpoch: the shared device flushes
// started so far (nil without shared flushes).
func (b *ioBackend) flushEpoch() func() uint64 {
	if b.dev == nil {
		return nil
	}
	return b.dev.epoch
}

// prewrite reports whether a new or reopened active segment in dir is
// zero-filled ahead of its appends (segment.Options.PreWrite) so that its
// syncs can share device flushes: only with a devFlush on dir's device.
func (b *ioBackend) prewrite(dir string) bool {
	if b.dev == nil || b.metaFlush {
		return false
	}
	dev, err := segment.DeviceOf(dir)
	return err == nil && dev == b.dev.dev
}

// sharedMeta reports whether a new or reopened active segment in dir
// shares the data directory's syncfs flushes without zero-fill
// (segment.Options.SharedMeta).
func (b *ioBackend) sharedMeta(dir string) bool {
	if b.dev == nil || !b.metaFlush {
		return false
	}
	dev, err := segment.DeviceOf(dir)
	return err == nil && dev == b.dev.dev
}

// startShared, waitWritten, writtenEpoch, markDurable and durable are
// segment.Segment's StartShared, WaitWritten, WrittenEpoch, MarkDurable
// and Durable, answered by the file layer when it shares device flushes
// (sharedFiles): its writes are done when Append returns (target: the
// size), and carry no flush epoch (a flush that starts afterwards covers
// them).
func (b *ioBackend) startShared(s *segment.Segment) (target int64, shared bool, err error) {
	if b.shared == nil {
		return s.StartShared()
	}
	size := s.Size()
	return size, b.shared.Shareable(s.Path(), size), nil
}

func (b *ioBackend) waitWritten(s *segment.Segment, target int64) error {
	if b.shared == nil {
		return s.WaitWritten(target)
	}
	return nil
}

func (b *ioBackend) writtenEpoch(s *segment.Segment) (uint64, bool) {
	if b.shared == nil {
		return s.WrittenEpoch()
	}
	return 0, false
}

func (b *ioBackend) markDurable(s *segment.Segment, target int64) error {
	if b.shared == nil {
		return s.MarkDurable(target)
	}
	b.shared.MarkDurable(s.Path(), target)
	return nil
}

func (b *ioBackend) durable(s *segment.Segment) int64 {
	if b.shared == nil {
		return s.Durable()
	}
	return b.shared.Durable(s.Path())
}

// segOptions are the Options of a ring-backed active segment in dir.
func (b *ioBackend) segOptions(dir string, pool *uring.Pool) segment.Options {
	return segment.Options{Ring: b.ring, Direct: true, Pool: pool, PreWrite: b.prewrite(dir), SharedMeta: b.sharedMeta(dir), CapLead: b.capLead,
		Zeros: b.zeros, FlushEpoch: b.flushEpoch()}
}

// startRing sets up the ring, the first chunk pool and the probe segment.
func (b *ioBackend) startRing(dir string) error {
	first, err := b.newGroupPool(false, true)
	if err != nil {
		return fmt.Errorf("chunk pool: %w", err)
	}
	// Two chunks: a 2 MiB mapping, which mapAnon backs with a huge page
	// when it can (the first chunk's write is then one device segment).
	zp, err := uring.NewPool(zeroFillBytes, 2)
	if err != nil {
		first.Close()
		return fmt.Errorf("zero-fill buffer: %w", err)
	}
	ring, err := uring.New(uring.Config{Backend: uring.BackendUring, Entries: 256, FileSlots: fileSlots(),
		Pools: []*uring.Pool{first, zp}, Logger: b.logger, BackgroundDepth: segmentBackgroundDepth})
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
		zp.Close()
		return err
	}
	zeros := zp.Get() // mapped zeroed, never written
	devSegs := segment.MaxWriteSegments(dir)
	segs, huge := devSegs, zp.HugePages()
	if huge {
		segs = 0 // physically contiguous: one segment, whatever its length
	}
	b.zeroPool, b.zeros = zp, zeros[:zeroWriteBytes(len(zeros), segs)]
	// Huge pages are best effort (THP off, or memory too fragmented): say
	// which the device gets, one segment per write or one per 4 KiB page.
	b.logger.Info("zero-fill writes", "bytes", len(b.zeros), "huge_page", huge,
		"chunk_pool_huge_pages", first.HugePages(), "device_max_segments", devSegs)
	return nil
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

// fileSlots sizes the ring's fixed-file table: one slot per open Direct
// segment lets it drop its O_DIRECT descriptor (segment.Options.Direct),
// so a partition costs one descriptor. The kernel refuses a table larger
// than RLIMIT_NOFILE's soft limit (strata serve raises it to the hard
// limit first); package uring caps it at 32,768.
func fileSlots() int {
	n, err := vfs.OpenFileLimit()
	if err != nil || n < 64 {
		return 64
	}
	return int(min(n, 1<<15))
}

// direct reports whether segments are written with O_DIRECT through the ring.
func (b *ioBackend) direct() bool { return b.ring != nil }

// acquireGroup picks a pool with room for one more segment (mapping a new
// group if none has) and takes a backend reference. With big (a log with
// write caching) the pool has big chunks, unless bigChunkGroups of those
// are mapped and full: then an ordinary one.
func (b *ioBackend) acquireGroup(big bool) (*poolGroup, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refs == 0 {
		return nil, ErrClosed
	}
	g, n := b.roomIn(big)
	if g == nil && big && n >= bigChunkGroups {
		g, _ = b.roomIn(false)
		big = false
	}
	if g == nil {
		var err error
		if g, err = b.mapGroup(big); err != nil {
			return nil, err
		}
	}
	g.users++
	b.refs++
	return g, nil
}

// roomIn returns a group of the big or ordinary kind with room for one
// more segment (nil if none) and how many groups of that kind there are.
// Caller holds mu.
func (b *ioBackend) roomIn(big bool) (room *poolGroup, n int) {
	for _, c := range b.groups {
		if c.big != big {
			continue
		}
		n++
		if room == nil && c.users < segsPerPool {
			room = c
		}
	}
	return room, n
}

// mapGroup maps, registers and adds a pool group. Caller holds mu.
func (b *ioBackend) mapGroup(big bool) (*poolGroup, error) {
	_, n := b.roomIn(false)
	p, err := b.newGroupPool(big, !big && n < richGroups)
	if err != nil {
		return nil, err
	}
	if err := b.ring.RegisterPool(p); err != nil {
		p.Close()
		return nil, err
	}
	g := &poolGroup{pool: p, big: big}
	b.groups = append(b.groups, g)
	return g, nil
}

// sealedGroup gives back a sealed segment's share of its pool (it holds
// no chunk; it keeps its backend reference until closed). A sealed segment
// made active again by a truncation appends without a share: a pool of
// segsPerPool+poolSpareChunks chunks stays live with up to that many users.
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
	st := b.ring.Stats()
	b.logger.Info("io_uring totals", "ops", st.Submitted, "sqes", st.SQEs, "enters", st.Enters,
		"wakeups", st.Wakeups, "fixed_buffers", st.FixedBufs, "fixed_files", st.FixedFile, "yields", st.Yields)
	if err := b.ring.Close(); err != nil {
		b.logger.Warn("closing io_uring", "err", err)
	}
	if d := b.dev; d != nil {
		b.logger.Info("shared device flushes", "flushes", d.flushes.Load(), "segment_syncs", d.waits.Load(), "mean_flush_ms", float64(d.nanos.Load())/1e6/float64(max(d.flushes.Load(), 1)))
		if err := d.close(); err != nil {
			b.logger.Warn("closing flush anchor", "err", err)
		}
	}
	for _, g := range b.groups {
		if err := g.pool.Close(); err != nil {
			b.logger.Warn("unmapping chunk pool", "err", err)
		}
	}
	if b.zeroPool != nil {
		b.zeroPool.Put(b.zeros)
		if err := b.zeroPool.Close(); err != nil {
			b.logger.Warn("unmapping zero-fill buffer", "err", err)
		}
	}
}

// create makes a new segment file for appending, ring-backed ones in a
// pool of big chunks if big (a log with write caching, acquireGroup), and
// fsyncs its directory whatever the backend, so the new entry, and those
// made in the directory before it, survive a crash (a roll relies on it).
// The returned group (nil unless ring-backed) must be released after the
// segment is closed.
func (b *ioBackend) create(path string, prealloc int64, big bool) (*segment.Segment, *poolGroup, error) {
	switch {
	case b.files != nil:
		f, err := b.files.Create(path)
		if err != nil {
			return nil, nil, err
		}
		s, err := segment.New(path, f)
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		// The directory as segment.CreateWith syncs it: the new file's
		// entry (and the index files' made before it) is durable.
		fsys := b.fs
		if fsys == nil {
			fsys = vfs.OS
		}
		if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
			s.Close()
			return nil, nil, err
		}
		return s, nil, nil
	case b.ring == nil:
		s, err := segment.CreateWith(path, prealloc, segment.Options{})
		return s, nil, err
	}
	g, err := b.acquireGroup(big)
	if err != nil {
		return nil, nil, err
	}
	s, err := segment.CreateWith(path, prealloc, b.segOptions(filepath.Dir(path), g.pool))
	if err != nil {
		b.releaseGroup(g, true)
		return nil, nil, err
	}
	return s, g, nil
}

// open opens an existing segment file; active ones (that will take
// appends) are ring-backed (big as for create), the others plain (they
// are only read).
func (b *ioBackend) open(path string, active, big bool) (*segment.Segment, *poolGroup, error) {
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
		if err == nil && !active {
			err = s.SetFileCache(b.cache)
			if err != nil {
				s.Close()
				s = nil
			}
		}
		return s, nil, err
	}
	g, err := b.acquireGroup(big)
	if err != nil {
		return nil, nil, err
	}
	s, err := segment.OpenWith(path, b.segOptions(filepath.Dir(path), g.pool))
	if err != nil {
		b.releaseGroup(g, true)
		return nil, nil, err
	}
	return s, g, nil
}
