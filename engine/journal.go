package engine

// The journal (Options.JournalBytes, log.io.journal.bytes): acks=all appends
// made durable by one write and one device flush per group commit, whatever
// the number of partitions they touch.
//
// Without it, making a produce request durable costs one device write per
// partition it touches (each partition's bytes go to its own segment file)
// plus a cache flush; on a disk that serves one request at a time (~45 us
// each on the development VM) a keyed request touching 96 partitions spends
// ~5 ms in device overhead before its flush, whatever its size. With the
// journal, an append still goes into its segment's chunk in memory (and the
// tail cache), but the chunk is written only when full (128 KiB), and the
// append's bytes are also copied into the journal's staging buffer. One
// writer goroutine writes whatever is staged as one group (one write at the
// journal's next 4 KiB boundary) and fdatasyncs the journal file; the
// journal's files are zero-filled once when created and then overwritten in
// a ring, so that fdatasync carries no metadata: it is the device cache
// flush. Then every log in the group is durable up to the end it had when
// its last record was staged (Log.flushedTo: the HW, or the replica
// manager). Appends staged while a group is being written go into the next
// one (group commit).
//
// A segment's chunk writes need no fdatasync of their own: segments are
// zero-filled ahead (segment.Options.PreWrite), so a completed write into
// them is durable once any later device cache flush completes, and the
// journal's fdatasyncs are such flushes. A checkpoint makes every staged
// record redundant: for each log journaled since the last checkpoint it
// submits the segment's partial chunk and waits for its writes
// (segment.StartShared, WaitWritten; a segment that cannot share is synced
// with its own fdatasync), a slice of segments at a time so that the
// journal's groups do not queue behind all of them (ckptSliceSegments),
// then waits for one device flush (devFlush) and moves the journal's start
// past every record staged before it began. The
// writer runs a checkpoint (on its own goroutine) each time it moves into
// the next file, and waits for one before it overwrites a file that still
// holds records at or past the start.
//
// On disk: <dir>/__strata_journal/journal-<i> (i < journalFiles), each
// JournalBytes/journalFiles bytes. A group starts at a 4 KiB boundary:
//
//	group  magic u32 | crc32c u32 (see below) | length u32 | count u32 |
//	       firstSeq u64 | startSeq u64 | 32 reserved bytes | count records
//	record length u32 | type u8 (1 write, 2 barrier, 3 end) | flags u8 | 2 zero |
//	       topic id [16] | partition i32 | name length u16 | 2 zero |
//	       segment base i64 | position i64 | topic name |
//	       payload (write: the batches as appended)
//
// A group with ref records (magic "SJN3") has, in the header's first
// reserved word, where its payload area starts (the records padded to a
// 4 KiB boundary); its length covers the area. A ref record (a write
// record with flag 2) carries no batches: its payload is
//
//	ref    prefix crc u32 | span count u16 | 2 zero |
//	       per span: area offset u32 | skip u32 | length u32
//
// and its batches are the spans' bytes (area[offset+skip:][:length]), in
// order. The area is the segments' own chunk memory, written with the
// records in one pwritev (segment.AppendSpans, journalSpanAlign): an
// append of journalSpanMin bytes or more to an O_DIRECT segment is copied
// once, into its chunk, and the journal writes it from there, each span
// widened to whole 512-byte blocks (the bytes around it, other appends of
// that chunk, are not covered and not replayed). The prefix checksum
// covers each batch's first 21 bytes, as below for write records, and is
// itself covered by the group's checksum; replay assembles the batches and
// checks both and every batch's CRC.
//
// The group's checksum (groupChecksum) covers its header from byte 8, each
// record's header and topic name, and of a write record's payload only the
// first 21 bytes of each batch (base offset, length, leader epoch, magic
// and the batch's own CRC), because each batch's CRC already covers the
// rest of it: replay checks every batch's CRC as well, so a torn or
// corrupt byte anywhere fails one or the other. This spares the writer a
// second checksum pass over every journaled byte (~7 % of the broker's CPU
// in a keyed closed-loop run). A payload that is not a sequence of whole
// batches (a batch larger than a quarter of a staging buffer, split over
// records) has flag 1 and is covered in full. Groups with the magic of the
// first format (journalMagicV1, "SJNL") are covered in full from byte 8.
//
// Records are numbered (seq) in staging order; a group holds firstSeq ..
// firstSeq+count-1 and names the journal's start when it was written (every
// record before it is durable in its segment). Replay (Open, before any log
// is opened: journal_replay.go) reads every file's groups up to the first
// bad CRC or break in numbering, takes the start of the newest group, and
// writes each write record at or past it into its segment file at its
// position, unless the partition's directory is gone, belongs to another
// topic id, has no such segment file, or a later barrier record of the
// same partition says its bytes must not come back. A barrier is staged by
// the operations that cut or replace segment bytes (TruncateTo,
// TruncateFullyAndStartAt, the cleaner's swap) after the log's segments
// were synced and before they cut anything, and they wait for it to be
// durable. Rolls sync the directory at once (rare: once per
// segment.bytes), so a record never names a segment whose file could be
// missing after a crash unless it was deleted on purpose; the sealed
// segment's bytes are synced by the flush the roll queues, or by a
// checkpoint that comes first (checkpoint takes every sealed segment the
// flusher has not synced), not by the roll, which holds the partition.
//
// With Options.JournalEnds (log.io.journal.ends=true; doc.go, "The ends
// log: not the default yet") the
// journal holds no record bytes: appends take the write-once path (each
// byte written once, into its zero-filled segment, by the flush round
// that makes it durable: flusher.go, flushBatch), and the round's one
// device flush is the journal's instead of a shared one: once the round's
// segment writes completed, shareFlush stages an end record per segment
// (ends: the segment's base, its durable end before the round and after
// it as positions, and the log end offset the round covers) and waits for
// the group holding them, whose fdatasync flushes the device cache after
// the group's write, so after the segments' writes too. Replay gives each
// segment the durable end its end records vouch for (journal_replay.go,
// trustEnds: a record whose group a later group follows was flushed; one
// of the newest group only if its round's bytes are there), and recovery
// (walkSegment) cuts a bad batch at or past that end as a lost write,
// whatever bytes it left, and reports one below it as corruption even
// with nothing valid after it. That is what segment files recycled
// instead of zero-filled need, where a lost write leaves a deleted
// segment's bytes, not a zeroed header (docs/performance.md, "Session
// 23"); the pool of recycled files (recycle.go) is built on it. Measured beside the write-once
// mode in the same minutes it costs about the same (148,308 against
// 149,145 rec/s keyed closed loop on a loaded machine, 2.29 against 2.22
// us of broker CPU per record).
//
// A round hands its logs back to the flush pipeline as soon as its end
// records are staged (flusher.go, releaseRound), not when their group is
// durable: the writer writes one group at a time (a write and an
// fdatasync, ~3 ms apart under keyed load), and with several produce
// requests in flight, each touching nearly every partition, an append
// used to find its log's round waiting for a group and wait for that
// round and then its own. A keyed closed-loop trace (docs/performance.md,
// session 26) put a request's wait for durability at 10.0-10.6 ms before
// and 7.5-8.1 ms after.
//
// Costs and limits: two staging buffers of up to 16 MiB (a quarter of a
// journal file at most); a second copy of journaled bytes for appends
// below journalSpanMin or to segments that are not O_DIRECT (segment
// chunk and staging buffer; a third, the tail cache, only for partitions
// read at the head: tailcache.go), about 0.1 us per 1 KiB record each on
// the development VM (a keyed closed-loop profile spent 1.64 s of 10.75 s
// of broker CPU in that copy before ref records); chunks a group's spans
// pin stay out of their pool until the group is written (before the
// writer waits for a checkpoint it copies them out: shedPins); the
// journal's files, zero-filled when first created.
// One journal serves every partition of the data directory, so a slow
// journal flush holds back every acks=all acknowledgement (without it, a
// slow segment flush held back that partition's); a failed write or flush
// takes the directory offline, as a failed segment fsync does.
//
// A large append is staged as several records (none takes more than a
// quarter of a staging buffer). Write-caching logs, and any append once
// the journal failed (the engine is then offline), take the segment-sync
// path as without the journal.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/internal/uring"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/segment"
)

const (
	journalDirName    = "__strata_journal"
	journalFiles      = 4
	journalAlign      = 4096
	journalMagic      = 0x534a4e32 // "SJN2": groupChecksum
	journalMagicV1    = 0x534a4e4c // "SJNL": checksum of bytes 8..length
	journalMagicRef   = 0x534a4e33 // "SJN3": groupChecksum, and a payload area for ref records
	journalFlagFull   = 1          // record flag: the checksum covers the payload in full
	journalFlagRef    = 2          // record flag: the payload lies in the group's payload area
	journalBatchPre   = 21         // a batch's bytes before its CRC's coverage
	journalGroupHdr   = 64
	journalRecHdr     = 48
	journalRecWrite   = 1
	journalRecBarrier = 2
	// journalRecEnd (Options.JournalEnds): a segment's durable end after a
	// flush round; position is the end, the payload endPayload.
	journalRecEnd = 3
	// journalEndPayload: from position i64 | log end offset i64 | 8
	// reserved bytes (the fold of the batches' CRCs, written as zero until
	// replay checks ends).
	journalEndPayload = 24
	journalRefHdr     = 8  // ref record: prefix crc u32 | span count u16 | 2 zero
	journalRefSpan    = 12 // ref record, per span: area offset u32 | skip u32 | length u32
	// journalSpanAlign is the alignment of the chunk memory a ref record's
	// spans cover (AppendSpans): the device's logical block, the O_DIRECT
	// minimum on the development VM; a filesystem asking for more gets
	// copies instead.
	journalSpanAlign = 512
	// journalSpanMin is the smallest append whose batches the journal
	// writes from the segment's chunks (ref record) rather than copying:
	// each span costs up to two partial blocks of padding on the device.
	journalSpanMin = 8 << 10
	// journalMaxPins bounds the pins the journal's spans hold in one
	// chunk pool (see uring.Pool.TryPin; shedPins for why the journal
	// never waits for a segment while they hold chunks).
	journalMaxPins = 512

	// journalStageMax bounds one staging buffer (two exist).
	journalStageMax = 16 << 20
	// JournalMinBytes is the smallest journal (four files of 4 MiB).
	JournalMinBytes = journalFiles * (4 << 20)
)

// journalMinBytes is JournalMinBytes; crash tests lower it to go round
// the ring within a few hundred appends.
var journalMinBytes int64 = JournalMinBytes

var journalCRC = crc32.MakeTable(crc32.Castagnoli)

// journalDurable is a log a group makes durable, up to end.
type journalDurable struct {
	l   *Log
	end int64
}

// journalStage is one group being filled (or written).
type journalStage struct {
	buf         []byte         // group header space, then records
	spans       []segment.Span // chunk memory the ref records point into, pinned
	refBytes    int            // bytes of spans' memory (the payload area)
	packed      int            // the first packedBytes of the payload area, copied to buf[packed:] (shedPins)
	packedBytes int
	firstSeq    uint64
	count       uint32
	logs        []journalDurable
	waiters     []chan error // barriers waiting for this group
	staged      time.Time    // when its first record was staged (JournalStats)
}

// fits reports whether a record of rec bytes whose spans cover ref bytes
// fits in the group (its header area padded, the payload area after it).
func (g *journalStage) fits(rec, ref int) bool {
	n := len(g.buf) + rec
	if g.refBytes+ref > 0 {
		n = (n+journalAlign-1)&^(journalAlign-1) + g.refBytes + ref
	}
	return n <= cap(g.buf)
}

func (g *journalStage) reset() {
	g.buf = g.buf[:journalGroupHdr]
	clear(g.buf)
	for _, sp := range g.spans {
		sp.Release()
	}
	clear(g.spans)
	g.spans, g.refBytes, g.packed, g.packedBytes = g.spans[:0], 0, 0, 0
	g.count = 0
	clear(g.logs)
	g.logs = g.logs[:0]
	g.waiters = g.waiters[:0]
}

// journal is the Engine's journal (nil when off).
type journal struct {
	e         *Engine
	fs        vfs.FS // the journal's files (Options.journalFS, else the engine's)
	dir       string
	files     [journalFiles]vfs.File
	fileBytes int64
	pool      *uring.Pool // the two staging buffers

	mu       sync.Mutex
	cond     sync.Cond // the writer waits for records; stagers for room
	stage    *journalStage
	spare    *journalStage // nil while the writer holds it
	nextSeq  uint64
	startSeq uint64
	err      error // sticky: the journal failed (the engine is offline)
	closing  bool
	dirty    map[*Log]struct{} // logs staged since the last checkpoint began

	// Writer-goroutine state.
	cur      int
	off      int64
	fileLast [journalFiles]uint64 // last seq in each file, 0 = none

	ckptMu   sync.Mutex // serializes checkpoints
	ckptKick chan struct{}
	// ckptHurry: the writer is past a quarter of its file (or waits for
	// a checkpoint): a checkpoint running submits its remaining partial
	// writes at once instead of a slice at a time (ckptSliceSegments).
	// Set by the writer, cleared when it enters the next file.
	ckptHurry atomic.Bool
	stop      chan struct{}
	wg        sync.WaitGroup

	// holds counts HoldJournal calls not yet released: while any is held
	// the writer leaves a small stage to grow (see hold). starved is set
	// by unhold (a chunk pool ran dry) and cleared when a group is taken.
	holds   int
	starved bool
	// ahead: the logs of groups written ahead of their flush (a held
	// stage past journalAheadMin), in order, completed by the next
	// group's fdatasync; aheadStaged their groups' staging times. Changed
	// by the writer with j.mu held.
	ahead       []journalDurable
	aheadStaged []time.Time
	aheadBytes  int // their bytes: they count against the hold's bound
	// unflushed: the files the writer wrote ahead into since their last
	// fdatasync (writer goroutine).
	unflushed [journalFiles]bool

	pauseBG  bool        // hold segment write-behind while a group is written
	iov      [][]byte    // writer: a ref group's buffers
	noPins   bool        // j.mu: stage copies, takes no spans (shedPins)
	ckpts    uint64      // checkpoints done (tests)
	endRecs  uint64      // end records staged (Options.JournalEnds; tests)
	replayed replayStats // what Open replayed
	stats    journalStats
}

// journalFSShare is the largest share of the data directory's filesystem
// the journal takes: log.io.journal.bytes beyond it is cut down to it (at
// least JournalMinBytes), so a broker on a small volume starts and leaves
// the rest to the logs instead of failing with ENOSPC while zero-filling.
const journalFSShare = 8 // one eighth

// journalBytes is want (log.io.journal.bytes) within journalFSShare of the
// data directory's filesystem, logged when cut; want when the filesystem's
// size is unknown (statfs failed, a memory file system).
func (e *Engine) journalBytes(want int64) int64 {
	_, total, err := vfs.FreeSpace(e.dir)
	if err != nil || total <= 0 || want <= total/journalFSShare {
		return want
	}
	got := max((total/journalFSShare)&^(journalFiles<<20-1), journalMinBytes) // whole MiB per file
	if got < want {
		e.logger.Info("journal cut to an eighth of the data directory's filesystem", "log.io.journal.bytes", want, "bytes", got, "filesystem_bytes", total)
		return got
	}
	return want
}

// openJournal replays what the files hold into the segments
// (journal_replay.go), then makes the journal ready for appends: files
// created and zero-filled when missing, writing resumes in the file after
// the newest group's with the start past everything replayed.
func openJournal(e *Engine, total int64) (*journal, error) {
	if total < journalMinBytes {
		return nil, fmt.Errorf("engine: log.io.journal.bytes %d is below the minimum %d", total, journalMinBytes)
	}
	j := &journal{e: e, dir: filepath.Join(e.dir, journalDirName), fileBytes: (total / journalFiles) &^ (2*journalAlign - 1), // a stage is half a file, block-aligned
		dirty: make(map[*Log]struct{}), ckptKick: make(chan struct{}, 1), stop: make(chan struct{})}
	j.cond.L = &j.mu
	j.pauseBG = segmentBackgroundDepth > 0
	j.fs = e.fs
	if e.journalFS != nil {
		j.fs = e.journalFS
	}
	if err := j.fs.MkdirAll(j.dir, 0o755); err != nil {
		return nil, fmt.Errorf("engine: journal: %w", err)
	}
	// Replay reads the files as they are; only then may a file of
	// another size (log.io.journal.bytes changed) be cut and zero-filled.
	var sizes [journalFiles]int64
	for i := range j.files {
		f, size, err := j.openFile(i)
		if err != nil {
			j.closeFiles()
			return nil, err
		}
		j.files[i], sizes[i] = f, size
	}
	rs, err := replayJournal(e, j.files[:], sizes[:])
	if err != nil {
		j.closeFiles()
		return nil, err
	}
	created := false
	for i, f := range j.files {
		if sizes[i] == j.fileBytes {
			continue
		}
		if err := j.zeroFill(f); err != nil {
			j.closeFiles()
			return nil, err
		}
		created = true
	}
	if created {
		if err := j.fs.SyncDir(e.dir); err != nil { // the journal directory's entry
			j.closeFiles()
			return nil, fmt.Errorf("engine: journal: %w", err)
		}
		if err := j.fs.SyncDir(j.dir); err != nil {
			j.closeFiles()
			return nil, fmt.Errorf("engine: journal: %w", err)
		}
	}
	j.replayed = rs
	j.nextSeq, j.startSeq = rs.next, rs.next
	j.fileLast = rs.fileLast
	j.cur, j.off = rs.lastFile, j.fileBytes // the first group moves on to the next file
	// The mode (log.io.journal.ends).
	holds := "records"
	if e.jnlEnds {
		holds = "segment ends"
	}
	e.logger.Info("journal", "holds", holds, "dir", j.dir, "bytes", j.fileBytes*journalFiles, "files", journalFiles, "created", created,
		"replayed_records", rs.records, "replayed_writes", rs.written, "replay_skipped", rs.skipped, "replayed_bytes", rs.bytes)
	// The two staging buffers are aligned (a chunk pool), so that on the
	// OS file system groups go to the files with O_DIRECT: no copy into
	// the page cache and no writeback inside the fdatasync.
	size := int(min(int64(journalStageMax), j.fileBytes/2))
	pool, err := uring.NewPool(size, 2)
	if err != nil {
		j.closeFiles()
		return nil, fmt.Errorf("engine: journal: %w", err)
	}
	j.pool = pool
	j.stage = &journalStage{buf: pool.Get()[:journalGroupHdr]}
	j.spare = &journalStage{buf: pool.Get()[:journalGroupHdr]}
	if j.fs == vfs.OS {
		for i, f := range j.files {
			df, err := vfs.OpenDirect(f.Name())
			if err != nil {
				j.closeFiles()
				j.releasePool()
				return nil, fmt.Errorf("engine: journal: %w", err)
			}
			f.Close()
			j.files[i] = df
		}
	}
	// An empty group naming the new start, so that nothing replayed above
	// is replayed again after a crash that comes before the first append.
	j.stage.firstSeq = j.nextSeq
	if err := j.writeGroup(j.stage, j.startSeq, true); err != nil {
		j.closeFiles()
		j.releasePool()
		return nil, err
	}
	j.stage.reset()
	j.wg.Add(2)
	go j.run()
	go j.runCheckpoints()
	return j, nil
}

// openFile opens journal file i, creating it (empty) when missing, and
// returns its size.
func (j *journal) openFile(i int) (vfs.File, int64, error) {
	path := filepath.Join(j.dir, fmt.Sprintf("journal-%d", i))
	f, err := j.fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("engine: journal: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("engine: journal: %w", err)
	}
	return f, st.Size(), nil
}

// zeroFill makes f fileBytes of zeros, synced, so that later overwrites
// change no metadata and an fdatasync of the file is a device cache flush.
// On the OS file system with the ring backend the zeros go through a
// second, O_DIRECT descriptor from the backend's zero-fill buffer (aligned,
// never written), and leave no 256 MiB of dirty page cache behind: written
// through the page cache they took 0.75-0.97 s of the CPU of brokers the
// load generator spawned after earlier runs, and a fresh broker on a quiet
// machine took 292-347 ms to open against 226-282 ms
// (docs/performance.md, session 48). Otherwise, or where O_DIRECT is
// refused, they are written plainly.
func (j *journal) zeroFill(f vfs.File) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("engine: journal: %w", err)
	}
	var w vfs.File = f
	var zeros []byte
	if j.fs == vfs.OS && j.e.io != nil && len(j.e.io.zeros) > 0 {
		if df, err := vfs.OpenDirect(f.Name()); err == nil {
			defer df.Close()
			w, zeros = df, j.e.io.zeros // a whole number of pages
		}
	}
	if zeros == nil {
		zeros = make([]byte, 1<<20)
	}
	for off := int64(0); off < j.fileBytes; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), j.fileBytes-off) // fileBytes is block-aligned
		if _, err := w.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("engine: journal: zero-filling %s: %w", f.Name(), err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("engine: journal: %w", err)
	}
	return nil
}

func (j *journal) closeFiles() {
	for i, f := range j.files {
		if f != nil {
			f.Close()
			j.files[i] = nil
		}
	}
}

// journaled moves l's durable offset to end once a journal group holding
// its records up to end is durable, as a flush worker's complete does: the
// HW (or the replica manager) and the recovery-point checkpoint follow.
// The recovery point may pass bytes that are only in the journal: replay
// puts them into the segment files before recovery reads them.
func (l *Log) journaled(end int64) {
	l.e.noteDurable(l, end)
	l.flushedTo(end)
}

// recordBytes is the journal size of a record of topic name and n payload
// bytes.
func recordBytes(topic string, n int) int { return journalRecHdr + len(topic) + n }

// stageAppend stages write records of l's batches (appended at pos of the
// segment at base; end is the log end after them), split so that no
// record takes more than a quarter of a staging buffer, and reports
// whether the journal took them: false only when it failed or is closing
// (the caller then syncs the segment as without a journal). Caller holds
// l.mu, which keeps one log's records in append order; it may wait here
// for room while the writer writes the other buffer.
//
// spans, when the segment gave them (Segment.AppendSpans), hold batches in
// its chunks: the journal takes them over (it releases every one) and
// stages one ref record pointing at them instead of a copy of the batches;
// the group is then written from the chunks themselves.
func (j *journal) stageAppend(l *Log, base, pos int64, batches []byte, end int64, spans []segment.Span) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	limit := (cap(j.stage.buf) - journalGroupHdr) / 4
	if len(spans) > 0 && j.noPins {
		releaseSpans(spans) // copied below (shedPins)
		spans = nil
	}
	if len(spans) > 0 {
		rec := recordBytes(l.topic, journalRefHdr+journalRefSpan*len(spans))
		ref := 0
		for _, sp := range spans {
			ref += len(sp.Mem)
		}
		if rec+ref+journalAlign <= limit {
			for j.err == nil && !j.closing && !j.noPins && !j.stage.fits(rec, ref) {
				j.cond.Wait()
			}
			if j.err != nil || j.closing {
				releaseSpans(spans)
				return false
			}
			if !j.noPins { // (shedPins may have come while this waited)
				j.putRef(l, base, pos, batches, spans, rec, ref)
				j.durableWith(l, end)
				return true
			}
		}
		releaseSpans(spans) // too large for one record, or shedPins: copied below
	}
	maxPayload := limit - recordBytes(l.topic, 0)
	for len(batches) > 0 {
		part := batches[:min(len(batches), maxPayload)]
		n := recordBytes(l.topic, len(part))
		for j.err == nil && !j.closing && !j.stage.fits(n, 0) {
			j.cond.Wait()
		}
		if j.err != nil || j.closing {
			return false
		}
		j.putRecord(l, journalRecWrite, base, pos, part)
		pos += int64(len(part))
		batches = batches[len(part):]
		if len(batches) > 0 {
			continue // the end is durable with the group of the last part
		}
		j.durableWith(l, end)
	}
	return true
}

func releaseSpans(spans []segment.Span) {
	for _, sp := range spans {
		sp.Release()
	}
}

// durableWith notes that the stage makes l durable up to end. Caller holds
// j.mu.
func (j *journal) durableWith(l *Log, end int64) {
	g := j.stage
	if k := len(g.logs); k > 0 && g.logs[k-1].l == l {
		g.logs[k-1].end = end
	} else {
		g.logs = append(g.logs, journalDurable{l: l, end: end})
	}
	j.dirty[l] = struct{}{}
	if j.holds > 0 && (!j.held() || g.size() >= journalAheadMin) {
		j.cond.Broadcast() // the held stage outgrew the hold, or is written ahead: the writer takes it
	}
}

// putRef stages a ref record of l's batches, held by spans (rec is its
// size, ref its spans' bytes). Its prefix checksum covers each batch's
// first journalBatchPre bytes, as a write record's share of the group
// checksum does. Caller holds j.mu and made room.
func (j *journal) putRef(l *Log, base, pos int64, batches []byte, spans []segment.Span, rec, ref int) {
	r := j.putHeader(l, journalRecWrite, base, pos, rec)
	r[5] = journalFlagRef
	f := r[journalRecHdr+len(l.topic):]
	binary.BigEndian.PutUint32(f[0:], batchPrefixSum(batches))
	binary.BigEndian.PutUint16(f[4:], uint16(len(spans)))
	f[6], f[7] = 0, 0
	g := j.stage
	for i, sp := range spans {
		e := f[journalRefHdr+journalRefSpan*i:]
		binary.BigEndian.PutUint32(e[0:], uint32(g.refBytes))
		binary.BigEndian.PutUint32(e[4:], uint32(sp.Skip))
		binary.BigEndian.PutUint32(e[8:], uint32(sp.Len))
		g.refBytes += len(sp.Mem)
		g.spans = append(g.spans, sp)
	}
}

// batchPrefixSum is the checksum of each batch's first journalBatchPre
// bytes in b (whole batches; a short tail ends the walk).
func batchPrefixSum(b []byte) uint32 {
	var sum uint32
	for len(b) >= 12 {
		size := 12 + int(int32(binary.BigEndian.Uint32(b[8:])))
		if size < record.HeaderSize || size > len(b) {
			break
		}
		sum = crc32.Update(sum, journalCRC, b[:journalBatchPre])
		b = b[size:]
	}
	return sum
}

// putRecord appends one record to the stage. Caller holds j.mu and made
// room.
func (j *journal) putRecord(l *Log, typ byte, base, pos int64, payload []byte) {
	r := j.putHeader(l, typ, base, pos, recordBytes(l.topic, len(payload)))
	copy(r[journalRecHdr+len(l.topic):], payload)
}

// putHeader appends a record of n bytes to the stage, fills its header and
// topic name, and returns it. Caller holds j.mu and made room.
func (j *journal) putHeader(l *Log, typ byte, base, pos int64, n int) []byte {
	g := j.stage
	if g.count == 0 {
		g.firstSeq = j.nextSeq
		g.staged = j.e.now()
		j.cond.Broadcast() // the writer may wait for a first record
	}
	at := len(g.buf)
	g.buf = g.buf[:at+n]
	r := g.buf[at : at+n]
	binary.BigEndian.PutUint32(r[0:], uint32(n))
	r[4], r[5], r[6], r[7] = typ, 0, 0, 0
	copy(r[8:24], l.topicID[:])
	binary.BigEndian.PutUint32(r[24:], uint32(l.part))
	binary.BigEndian.PutUint16(r[28:], uint16(len(l.topic)))
	r[30], r[31] = 0, 0
	binary.BigEndian.PutUint64(r[32:], uint64(base))
	binary.BigEndian.PutUint64(r[40:], uint64(pos))
	copy(r[journalRecHdr:], l.topic)
	g.count++
	j.nextSeq++
	return r
}

// barrier makes sure no record of l staged so far is ever replayed: when
// keep, it syncs l's segments (so every byte those records carry is
// durable where it is; without keep the caller drops them all), stages a
// barrier record and waits until it is durable. Called by the operations
// that cut or replace l's segment bytes, before they cut, with l.mu held.
func (j *journal) barrier(l *Log, keep bool) error {
	for _, s := range append(append([]*logSegment(nil), l.pending...), l.active) {
		if !keep || s == nil || s.seg == nil {
			continue
		}
		path, _, _ := s.paths()
		if err := j.e.syncFile(path, s.seg.Sync); err != nil {
			return err
		}
	}
	j.mu.Lock()
	if err := j.room(recordBytes(l.topic, 0)); err != nil {
		return err
	}
	j.putRecord(l, journalRecBarrier, 0, 0, nil)
	l.lastEnd = stagedEnd{}
	return j.waitStage()
}

// room waits until the stage has room for a record of n bytes (no spans)
// and returns nil with j.mu held, or the journal's error (ErrClosed once it
// closes) with j.mu released. Caller holds j.mu.
func (j *journal) room(n int) error {
	for j.err == nil && !j.closing && !j.stage.fits(n, 0) {
		j.cond.Wait()
	}
	if j.err != nil {
		err := j.err
		j.mu.Unlock()
		return err
	}
	if j.closing {
		j.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// waitStage waits until the stage being filled is written and durable and
// returns the writer's error. Caller holds j.mu, which waitStage releases.
func (j *journal) waitStage() error {
	done := make(chan error, 1)
	j.stage.waiters = append(j.stage.waiters, done)
	if j.holds > 0 {
		j.cond.Broadcast() // a held stage: the writer takes it now (held)
	}
	j.mu.Unlock()
	return <-done
}

// stagedEnd is a log's last staged end record (Log.lastEnd). An end
// record's from is the segment's durable end before its round, which with
// released rounds (flusher.go, releaseRound) may lag: the previous round
// of the log staged its end record but has not seen its group durable, so
// the segment's durable end is not yet raised. If that record's group was
// taken by the writer before this record's stage (an earlier group), this
// record's group can reach the disk only after that group's fdatasync, so
// its end is durable whenever this record is read: stageEnds raises from
// to it. Without that, a journal checkpoint that moved the start past the
// earlier record left replay trusting only the lagging from (trustEnds),
// and a crash that lost this round's writes had recovery cut the earlier,
// acknowledged round's batches as never acknowledged. A barrier (the
// log's bytes cut or replaced) forgets it. Guarded by the journal's mu.
type stagedEnd struct {
	ok        bool
	base, end int64
	seq       uint64
}

// endRecord is one segment's end for ends (a shared flush round's share).
type endRecord struct {
	l         *Log
	base      int64 // the segment's base offset
	from, end int64 // positions: the durable end before the round, after it
	endOffset int64 // the log end offset the round makes durable
}

// stageEnds stages one end record per entry of rs (Options.JournalEnds)
// and returns a channel that gets the outcome of the group holding them:
// nil once it is durable, or its error; or it returns the journal's error
// if it could not stage them. The caller waited for every segment write
// the records describe to complete, so the writer's fdatasync, a device
// cache flush issued after the group's write, makes those writes durable
// too: the ends mode's one flush per round.
func (j *journal) stageEnds(rs []endRecord) (<-chan error, error) {
	done := make(chan error, 1)
	if len(rs) == 0 {
		done <- nil
		return done, nil
	}
	j.mu.Lock()
	for _, r := range rs {
		n := recordBytes(r.l.topic, journalEndPayload)
		if err := j.room(n); err != nil {
			return nil, err
		}
		from := r.from
		if le := r.l.lastEnd; le.ok && le.base == r.base && (j.stage.count == 0 || le.seq < j.stage.firstSeq) {
			from = max(from, min(le.end, r.end)) // see stagedEnd
		}
		rec := j.putHeader(r.l, journalRecEnd, r.base, r.end, n)
		r.l.lastEnd = stagedEnd{ok: true, base: r.base, end: r.end, seq: j.nextSeq - 1}
		pl := rec[journalRecHdr+len(r.l.topic):]
		binary.BigEndian.PutUint64(pl[0:], uint64(from))
		binary.BigEndian.PutUint64(pl[8:], uint64(r.endOffset))
		clear(pl[16:journalEndPayload])
		j.endRecs++
	}
	j.stage.waiters = append(j.stage.waiters, done)
	if j.holds > 0 {
		j.cond.Broadcast() // a held stage: the writer takes it now (held)
	}
	j.mu.Unlock()
	return done, nil
}

// run is the writer goroutine: it writes each staged group, fdatasyncs the
// file, and completes the group's logs and barriers.
func (j *journal) run() {
	defer j.wg.Done()
	for {
		j.mu.Lock()
		for !j.due() && !j.closing && j.err == nil {
			j.cond.Wait()
		}
		if (j.stage.count == 0 && len(j.ahead) == 0) || j.err != nil {
			// A failed journal writes nothing more: what waits for the
			// stage (the ends of a flush round, a barrier) staged before
			// the failure and gets its error, or it would wait forever
			// (stagers after it see j.err in room).
			for _, w := range j.stage.waiters {
				w <- j.err
			}
			clear(j.stage.waiters)
			j.stage.waiters = j.stage.waiters[:0]
			j.mu.Unlock()
			return
		}
		flush := j.closing || !j.held()
		if flush && j.stage.count == 0 {
			// Only groups written ahead wait: their flush.
			ahead, staged := j.ahead, j.aheadStaged
			j.ahead, j.aheadStaged, j.aheadBytes = nil, nil, 0
			j.mu.Unlock()
			err := j.flushAhead()
			if err != nil {
				err = j.e.ioFailure("writing the journal", err)
			}
			j.completeAhead(ahead, staged, err)
			if err != nil {
				j.fail(err)
			}
			continue
		}
		g := j.stage
		j.stage, j.spare = j.spare, nil
		j.starved = false
		start := j.startSeq
		var ahead []journalDurable
		var staged []time.Time
		if flush {
			ahead, staged = j.ahead, j.aheadStaged
			j.ahead, j.aheadStaged, j.aheadBytes = nil, nil, 0
		}
		j.cond.Broadcast() // stagers waiting for room
		j.mu.Unlock()

		err := j.writeGroup(g, start, flush)
		if err != nil {
			err = j.e.ioFailure("writing the journal", err)
		}
		if !flush && err == nil {
			// Written ahead: its logs are durable with the next flush.
			j.mu.Lock()
			j.ahead = append(j.ahead, g.logs...)
			j.aheadStaged = append(j.aheadStaged, g.staged)
			j.aheadBytes += g.size()
			j.stats.ahead.Add(1)
			g.reset()
			j.spare = g
			j.cond.Broadcast()
			j.mu.Unlock()
			continue
		}
		if flush {
			j.completeAhead(ahead, staged, err)
		}
		if err == nil {
			j.stats.commitWait.Observe(latencyBounds, j.e.now().Sub(g.staged))
			for _, d := range g.logs {
				d.l.journaled(d.end)
			}
		}
		for _, w := range g.waiters {
			w <- err
		}
		j.mu.Lock()
		g.reset()
		j.spare = g
		if err != nil && j.err == nil {
			j.err = err
		}
		j.cond.Broadcast()
		j.mu.Unlock()
	}
}

// due reports whether the writer has work: a stage to write (not held, or
// held but past journalAheadMin: written ahead), or groups written ahead
// whose flush nothing holds back any longer (see "Writing ahead"). Caller
// holds j.mu.
func (j *journal) due() bool {
	if j.stage.count > 0 {
		return !j.held() || j.stage.size() >= journalAheadMin
	}
	return len(j.ahead) > 0 && !j.held()
}

// size is the bytes the stage would write (records and payload area).
func (g *journalStage) size() int { return len(g.buf) + g.refBytes }

// completeAhead completes the logs of groups written ahead once the flush
// after them returned err (they are durable when it is nil).
func (j *journal) completeAhead(ahead []journalDurable, staged []time.Time, err error) {
	if err != nil {
		return
	}
	now := j.e.now()
	for _, t := range staged {
		j.stats.commitWait.Observe(latencyBounds, now.Sub(t))
	}
	for _, d := range ahead {
		d.l.journaled(d.end)
	}
}

// fail records the writer's error (the first one sticks) and wakes every
// waiter.
func (j *journal) fail(err error) {
	j.mu.Lock()
	if j.err == nil {
		j.err = err
	}
	j.cond.Broadcast()
	j.mu.Unlock()
}

// flushAhead fdatasyncs the files written ahead into since their last
// flush. Writer goroutine.
func (j *journal) flushAhead() error {
	for i, dirty := range j.unflushed {
		if !dirty {
			continue
		}
		f := j.files[i]
		began := j.e.now()
		if err := j.e.syncFile(f.Name(), func() error { return vfs.Datasync(f) }); err != nil {
			return err
		}
		j.stats.flush.Observe(latencyBounds, j.e.now().Sub(began))
		j.unflushed[i] = false
	}
	return nil
}

// Holding the next group open (Engine.HoldJournal). A keyed produce
// request appends to most partitions of a topic one after the other, and
// the writer used to take the stage as soon as its first record was
// staged: a request's acknowledgement then waited for two or more groups,
// each a write and a device flush, although it needs all of its records
// durable anyway. While an appender holds the journal the writer leaves a
// stage smaller than journalHoldFrac of its buffer to grow; the hold ends
// with the request's last append (ReleaseJournal), and never blocks
// anything that waits for the writer: a barrier's waiter, a stager short of
// room (the stage is then past the fraction), or an appender that finds its
// chunk pool empty (the held group's spans may pin the chunks it waits
// for: the pools' starve hook calls unhold).

// journalHoldFrac is the share of a staging buffer a held stage may fill
// before the writer takes it anyway (1/journalHoldFrac).
const journalHoldFrac = 2

// Writing ahead. While a request holds the journal, a held stage that
// reaches journalAheadMin is written at once, without its fdatasync: the
// writer then writes the request's first partitions while its appender
// stages the rest, and the one device flush after the request's last
// group (taken when the hold ends, or by a barrier, a starving pool, the
// half-buffer bound, which counts the bytes written ahead since the last
// flush: concurrent requests holding in turn cannot put a flush off for
// ever) makes every group written ahead durable with it.
// Their logs are completed (Log.journaled) only after that flush, in
// staging order, before the flushed group's. A group written ahead is
// never one with waiters (a barrier's or a round's end records: a stage
// with waiters is not held), so a group that follows one with end records
// on disk still means that group's flush completed (journal_replay.go).
// Replay needs nothing new: after a crash, groups written ahead and not
// flushed are torn or whole like any unflushed group, and the scan stops
// at the first torn one. A file the writer leaves is flushed first, so
// the flush after a group covers its own file only.
//
// journalAheadMin is a variable for the crash rounds, which write ahead
// at a few KiB.
var journalAheadMin = 1 << 20

// held reports whether the writer should leave the stage to grow. Caller
// holds j.mu.
func (j *journal) held() bool {
	g := j.stage
	return j.holds > 0 && !j.starved && len(g.waiters) == 0 &&
		j.aheadBytes+len(g.buf)+journalAlign+g.refBytes < cap(g.buf)/journalHoldFrac
}

// hold and release bracket an appender's appends (Engine.HoldJournal).
func (j *journal) hold() {
	j.mu.Lock()
	j.holds++
	j.mu.Unlock()
}

func (j *journal) release() {
	j.mu.Lock()
	j.holds--
	if j.holds == 0 && (j.stage.count > 0 || len(j.ahead) > 0) {
		j.cond.Broadcast() // the writer
	}
	j.mu.Unlock()
}

// unhold makes the writer take the stage now, holds or not: a chunk pool
// ran dry (the pools' starve hook).
func (j *journal) unhold() {
	j.mu.Lock()
	if j.holds > 0 && (j.stage.count > 0 || len(j.ahead) > 0) && !j.starved {
		j.starved = true
		j.cond.Broadcast()
	}
	j.mu.Unlock()
}

// HoldJournal keeps the journal's next group open for the caller's appends
// until ReleaseJournal (see journal.go, "Holding the next group open"): a
// request appending to many partitions gets them made durable by one group
// write and one device flush. Every HoldJournal needs its ReleaseJournal;
// without a journal both do nothing.
func (e *Engine) HoldJournal() {
	if e.jnl != nil {
		e.jnl.hold()
	}
}

// ReleaseJournal ends a HoldJournal.
func (e *Engine) ReleaseJournal() {
	if e.jnl != nil {
		e.jnl.release()
	}
}

// writeGroup fills g's header (start is the journal's start), writes g at
// the next 4 KiB boundary (moving to the next file when it does not fit)
// and fdatasyncs the file. Writer goroutine (or openJournal before it
// starts).
func (j *journal) writeGroup(g *journalStage, start uint64, flush bool) error {
	recEnd := len(g.buf)
	n, area := recEnd, 0
	if g.refBytes > 0 {
		// Records, padded to a 4 KiB boundary, then the payload area: the
		// spans' chunk memory, in staging order.
		area = (recEnd + journalAlign - 1) &^ (journalAlign - 1)
		n = area + g.refBytes
	}
	padded := (n + journalAlign - 1) &^ (journalAlign - 1)
	if int64(padded) > j.fileBytes {
		return fmt.Errorf("journal group of %d bytes exceeds a file of %d", padded, j.fileBytes)
	}
	if j.off+int64(padded) > j.fileBytes/4 {
		j.ckptHurry.Store(true)
	}
	if j.off+int64(padded) > j.fileBytes {
		// Groups written ahead into the file left are flushed first: the
		// flush after this group covers its own file.
		if err := j.flushAhead(); err != nil {
			return err
		}
		next := (j.cur + 1) % journalFiles
		// The file to overwrite may hold only records the start has
		// passed; a checkpoint moves the start to now.
		waited := false
		if last := j.fileLast[next]; last != 0 && last >= start {
			j.shedPins(g)
			waited = true
		}
		began := j.e.now()
		for last := j.fileLast[next]; last != 0 && last >= start; {
			if err := j.checkpoint(); err != nil {
				j.takePins()
				return err
			}
			j.mu.Lock()
			start = j.startSeq
			j.mu.Unlock()
		}
		j.takePins()
		if waited {
			j.stats.ckptWait.Observe(latencyBounds, j.e.now().Sub(began))
		}
		j.cur, j.off = next, 0
		j.fileLast[next] = 0
		j.ckptHurry.Store(false)
		select { // the next file's turn comes: a checkpoint now, off the ack path
		case j.ckptKick <- struct{}{}:
		default:
		}
	}
	h := g.buf[:journalGroupHdr]
	magic := uint32(journalMagic)
	if area > 0 {
		magic = journalMagicRef
	}
	binary.BigEndian.PutUint32(h[0:], magic)
	binary.BigEndian.PutUint32(h[8:], uint32(n))
	binary.BigEndian.PutUint32(h[12:], g.count)
	binary.BigEndian.PutUint64(h[16:], g.firstSeq)
	binary.BigEndian.PutUint64(h[24:], start)
	binary.BigEndian.PutUint32(h[32:], uint32(area))
	sum, _ := groupChecksum(g.buf[:recEnd], g.count, false)
	binary.BigEndian.PutUint32(h[4:], sum)
	f := j.files[j.cur]
	began := j.e.now()
	ring := j.e.io.ring
	if ring != nil && j.pauseBG {
		// Segment chunk writes submitted from here on wait in the ring
		// until the group is durable: the device serves requests in
		// order, and every acknowledgement in the group waits for it.
		ring.PauseBackground()
		defer ring.ResumeBackground()
	}
	if area == 0 {
		buf := g.buf[:padded]
		clear(buf[n:])
		if _, err := f.WriteAt(buf, j.off); err != nil {
			return err
		}
	} else {
		// The records' padding and the group's tail padding are zeros of
		// the staging buffer (room for both: fits).
		clear(g.buf[recEnd:area])
		iov := append(j.iov[:0], g.buf[:area])
		if g.packedBytes > 0 {
			iov = append(iov, g.buf[g.packed:g.packed+g.packedBytes])
		}
		for _, sp := range g.spans {
			iov = append(iov, sp.Mem)
		}
		if pad := padded - n; pad > 0 {
			iov = append(iov, clear0(g.buf[area:area+pad]))
		}
		j.iov = iov
		_, err := vfs.WriteVAt(f, iov, j.off)
		clear(iov)
		if err != nil {
			return err
		}
		j.stats.refGroups.Add(1)
	}
	written := j.e.now()
	j.unflushed[j.cur] = true
	j.off += int64(padded)
	if g.count > 0 {
		j.fileLast[j.cur] = g.firstSeq + uint64(g.count) - 1
	}
	j.stats.groups.Add(1)
	j.stats.records.Add(uint64(g.count))
	j.stats.bytes.Add(uint64(padded))
	j.stats.write.Observe(latencyBounds, written.Sub(began))
	if flush {
		return j.flushAhead()
	}
	return nil
}

// shedPins copies the span memory of the writer's group g and of the
// stage into their own buffers and releases the chunks, and makes the
// stage copy from now on (until takePins). The writer calls it before it
// waits for a checkpoint: a checkpoint needs each journaled segment's
// lock, which an appender may hold while it waits in Pool.Get for a chunk
// — possibly one only the journal's spans keep out of the pool.
func (j *journal) shedPins(g *journalStage) {
	g.pack()
	j.mu.Lock()
	j.noPins = true
	j.stage.pack()
	j.cond.Broadcast() // stagers waiting for room with spans copy instead
	j.mu.Unlock()
}

// takePins ends shedPins.
func (j *journal) takePins() {
	j.mu.Lock()
	j.noPins = false
	j.mu.Unlock()
}

// pack copies g's payload area (what an earlier pack copied, then its
// spans) to the end of its buffer (room: fits counts their bytes) and
// releases the spans. Spans staged later follow it in the area.
func (g *journalStage) pack() {
	if len(g.spans) == 0 {
		return
	}
	full := g.buf[:cap(g.buf)]
	start := cap(g.buf) - g.refBytes
	at := start + copy(full[start:], full[g.packed:g.packed+g.packedBytes])
	for _, sp := range g.spans {
		at += copy(full[at:], sp.Mem)
		sp.Release()
	}
	clear(g.spans)
	g.spans = g.spans[:0]
	g.packed, g.packedBytes = start, g.refBytes
}

// clear0 zeroes b and returns it.
func clear0(b []byte) []byte {
	clear(b)
	return b
}

// groupChecksum returns the checksum of the group in buf (header first,
// count records) as the file-format comment above defines it. The writer
// (verify false) sets a write record's flag to journalFlagFull when its
// payload is not whole batches; replay (verify true) also checks each
// batch's own CRC and reports false when one fails or the records do not
// parse.
func groupChecksum(buf []byte, count uint32, verify bool) (uint32, bool) {
	sum := crc32.Update(0, journalCRC, buf[8:journalGroupHdr])
	p := journalGroupHdr
	for k := uint32(0); k < count; k++ {
		if p+journalRecHdr > len(buf) {
			return sum, false
		}
		r := buf[p:]
		n := int(binary.BigEndian.Uint32(r))
		nameLen := int(binary.BigEndian.Uint16(r[28:]))
		if n < journalRecHdr+nameLen || n > len(r) {
			return sum, false
		}
		hdr, payload := r[:journalRecHdr+nameLen], r[journalRecHdr+nameLen:n]
		if r[4] == journalRecWrite && !verify && r[5]&journalFlagRef == 0 {
			if wholeBatches(payload) {
				r[5] = 0
			} else {
				r[5] = journalFlagFull
			}
		}
		sum = crc32.Update(sum, journalCRC, hdr)
		switch {
		case r[4] != journalRecWrite || r[5]&(journalFlagFull|journalFlagRef) != 0:
			sum = crc32.Update(sum, journalCRC, payload)
		default:
			for len(payload) > 0 {
				if len(payload) < 12 {
					return sum, false
				}
				size := 12 + int(int32(binary.BigEndian.Uint32(payload[8:])))
				if size < record.HeaderSize || size > len(payload) {
					return sum, false
				}
				if verify && !record.CheckCRC(payload[:size]) {
					return sum, false
				}
				sum = crc32.Update(sum, journalCRC, payload[:journalBatchPre])
				payload = payload[size:]
			}
		}
		p += n
	}
	return sum, true
}

// wholeBatches reports whether b is a sequence of whole batches by their
// length fields (nothing checked but the lengths).
func wholeBatches(b []byte) bool {
	for len(b) > 0 {
		if len(b) < 12 {
			return false
		}
		size := 12 + int(int32(binary.BigEndian.Uint32(b[8:])))
		if size < record.HeaderSize || size > len(b) {
			return false
		}
		b = b[size:]
	}
	return true
}

// ckptSliceSegments is how many segments' partial chunks a checkpoint
// submits at once; it waits for their writes before it submits the next
// slice's. The device serves requests in order, so a journal group written
// while a checkpoint runs waits for the checkpoint's writes already queued
// in front of it: all of them (one or two per segment the journal touched
// since the last checkpoint, 96-192 with keyed traffic over 96 partitions,
// ~10 ms on the development VM's disk) when they were submitted at once,
// one slice's now. A checkpoint started when the writer entered its file
// must end before the writer leaves it (the next file holds the records
// it moves the start past); once the writer is past a quarter of the file
// (ckptHurry) the rest goes at once. Slicing trades the median for the
// tail: each device flush costs more the more was written since the last
// one, and slices spread the checkpoint's bytes over more of the
// journal's flushes. Where the journal moves fast that cost throughput:
// never hurried, a keyed closed loop's writer waited for checkpoints 26
// times in 20 s (1.65 s in all; a 64 MiB file lasts ~170 ms there);
// hurried at half a file it never waited, but the lean producer's peak
// fell to 87.9 % (85.7-92.2 %) of the build without slicing, journal flush
// p50 2.72 against 2.12 ms; at a quarter, 105.6 % (101.0-107.7 %), and
// keyed at 100,000 records/s (a file lasts ~640 ms, a checkpoint ~25 ms)
// the broker's produce p99 still fell (docs/performance.md, "Session 45").
const ckptSliceSegments = 8

// runCheckpoints runs a checkpoint each time the writer asks (it entered
// the next file) until the journal closes.
func (j *journal) runCheckpoints() {
	defer j.wg.Done()
	for {
		select {
		case <-j.stop:
			return
		case <-j.ckptKick:
			if err := j.checkpoint(); err != nil {
				j.mu.Lock()
				if j.err == nil {
					j.err = j.e.ioFailure("journal checkpoint", err)
				}
				j.cond.Broadcast()
				j.mu.Unlock()
				return
			}
		}
	}
}

// checkpoint moves the journal's start past every record staged before it
// began: the segments of every log staged since the last checkpoint get
// their bytes written (and synced where they cannot share a flush), then
// one device cache flush makes the written ones durable.
func (j *journal) checkpoint() error {
	j.ckptMu.Lock()
	defer j.ckptMu.Unlock()
	j.mu.Lock()
	upTo := j.nextSeq
	logs := j.dirty
	j.dirty = make(map[*Log]struct{}, len(logs))
	j.mu.Unlock()

	type shared struct {
		s      *logSegment
		target int64
	}
	var waits []shared
	var held []*logSegment
	defer func() {
		for _, s := range held {
			s.release()
		}
	}()
	// Without l.mu (a stager may hold it while it waits for the writer,
	// which may wait for this checkpoint): the segment list snapshot. The
	// active segment and the sealed ones the flusher has not synced yet
	// (idxUnsynced; a roll does not sync the segment it seals, log.go)
	// can hold journaled bytes not yet durable. The flusher syncs a log's
	// sealed segments oldest first, so the walk back from the newest
	// stops at the first sealed one it finds synced; the one before the
	// active segment is always taken (it may be sealing right now).
	for l := range logs {
		segs := *l.segs.Load()
		for i := len(segs) - 1; i >= 0; i-- {
			s := segs[i]
			if i < len(segs)-2 && !s.idxUnsynced.Load() {
				break
			}
			if s.acquire() {
				held = append(held, s)
			}
		}
	}
	// The partial chunks go out ckptSliceSegments segments at a time,
	// each slice written before the next is submitted (see
	// ckptSliceSegments).
	for rest := held; len(rest) > 0; {
		n := ckptSliceSegments
		if j.ckptHurry.Load() {
			n = len(rest)
		}
		slice := rest[:min(len(rest), n)]
		rest = rest[len(slice):]
		first := len(waits)
		for _, s := range slice {
			path, _, _ := s.paths()
			target, ok, err := j.e.io.startShared(s.seg)
			if err == nil && !ok {
				err = j.e.syncFile(path, s.seg.Sync)
			}
			if err != nil {
				if s.deleting.Load() {
					continue // deleted meanwhile: nothing to keep
				}
				return err
			}
			if ok {
				waits = append(waits, shared{s: s, target: target})
			}
		}
		for _, w := range waits[first:] {
			if err := j.e.io.waitWritten(w.s.seg, w.target); err != nil && !w.s.deleting.Load() {
				return err
			}
		}
	}
	if len(waits) > 0 {
		if err := j.e.io.dev.wait(); err != nil {
			return err
		}
		for _, w := range waits {
			_ = j.e.io.markDurable(w.s.seg, w.target)
		}
	}
	j.mu.Lock()
	if upTo > j.startSeq {
		j.startSeq = upTo
	}
	j.ckpts++
	j.stats.checkpoints.Add(1)
	j.mu.Unlock()
	return nil
}

// close stops the writer once every staged group is written, and, when
// the logs were all synced by the flusher's last pass (clean is true),
// writes a last group whose start is past every record, so the next Open
// replays nothing.
func (j *journal) close(clean bool) error {
	j.mu.Lock()
	j.closing = true
	j.cond.Broadcast()
	j.mu.Unlock()
	close(j.stop)
	j.wg.Wait()
	var err error
	if clean && j.err == nil {
		j.stage.reset()
		j.stage.firstSeq = j.nextSeq
		err = j.writeGroup(j.stage, j.nextSeq, true)
	}
	j.closeFiles()
	if perr := j.releasePool(); err == nil {
		err = perr // the writer has stopped: both buffers are back
	}
	return err
}

// releasePool gives both staging buffers back and unmaps them.
func (j *journal) releasePool() error {
	j.stage.reset() // and the spans it still holds (a failed journal)
	j.spare.reset()
	j.pool.Put(j.stage.buf)
	j.pool.Put(j.spare.buf)
	return j.pool.Close()
}
