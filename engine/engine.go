package engine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/stratalog/strata/index"
	"github.com/stratalog/strata/internal/clocks"
	"github.com/stratalog/strata/internal/vfs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Sentinel errors; server maps them to Kafka error codes.
var (
	ErrUnknownTopic      = errors.New("engine: unknown topic or partition")   // UNKNOWN_TOPIC_OR_PARTITION (3)
	ErrTopicExists       = errors.New("engine: topic already exists")         // TOPIC_ALREADY_EXISTS (36)
	ErrInvalidTopic      = errors.New("engine: invalid topic name")           // INVALID_TOPIC_EXCEPTION (17)
	ErrInvalidPartitions = errors.New("engine: invalid number of partitions") // INVALID_PARTITIONS (37)
	ErrInvalidConfig     = errors.New("engine: invalid config")               // INVALID_CONFIG (40)
	ErrCorruptMessage    = errors.New("engine: corrupt record batch")         // CORRUPT_MESSAGE (2)
	ErrInvalidRecord     = errors.New("engine: invalid record batch")         // INVALID_RECORD (87)
	ErrMessageTooLarge   = errors.New("engine: record batch too large")       // MESSAGE_TOO_LARGE (10)
	ErrOffsetOutOfRange  = errors.New("engine: offset out of range")          // OFFSET_OUT_OF_RANGE (1)
	ErrOffline           = errors.New("engine: log directory offline")        // KAFKA_STORAGE_ERROR (56)
	ErrClosed            = errors.New("engine: closed")
)

// Options opens an Engine.
type Options struct {
	Dir    string       // data directory; created if missing
	Log    LogConfig    // broker-wide defaults for every topic (zero value = DefaultLogConfig())
	Now    clocks.Clock // clock; nil = clocks.Wall
	Logger *slog.Logger // nil = slog.Default()

	// ProducerIDExpirationMs is producer.id.expiration.ms: a producer not
	// seen this long is forgotten (producers.go). 0 = one day.
	ProducerIDExpirationMs int64

	// RetentionCheckInterval is log.retention.check.interval.ms: how often
	// retention runs (retention.go). 0 = 5 minutes; < 0 = never on a timer.
	RetentionCheckInterval time.Duration
	// Cleaner configures compaction (cleaner.go).
	Cleaner CleanerOptions

	// IOBackend is log.io.backend: how segments write: "auto" (or ""),
	// "uring" or "pwrite" (backend.go).
	IOBackend string
	// DisableSharedFlush is log.io.flush.shared=false: every O_DIRECT
	// segment fdatasyncs itself instead of sharing device cache flushes
	// (devflush.go, "Shared device flushes" in doc.go).
	DisableSharedFlush bool
	// NoZeroFill is log.io.zero.fill=false: with shared flushes, segments
	// are not zero-filled ahead of their appends; appends land in
	// unwritten extents (each byte written once) and the shared flush is
	// a syncfs of the data directory's filesystem, which writes their
	// extent conversions (devflush.go, "Shared device flushes" in doc.go).
	NoZeroFill bool
	// TailCacheBytes bounds the memory of the tail cache (recent batches
	// served to consumers from memory, tailcache.go): 0 = default
	// (256 MiB with the O_DIRECT backend, off with pwrite, whose page cache
	// sendfile reads without a copy), < 0 = off.
	TailCacheBytes int64
	// PrefaultTailCache maps each log's share of the tail cache
	// (tailBufsPerLog buffers, within TailCacheBytes) as the log is
	// created or opened, on a goroutine of its own, instead of as the
	// first consumers read at the head (slab.go, "Mapping ahead"). The
	// broker sets it.
	PrefaultTailCache bool
	// CopyCacheBytes bounds the memory holding remote-enabled partitions'
	// newest segments for their copies to the object store
	// (copycache.go): 0 = default (1 GiB, allocated as used, with the
	// O_DIRECT backend; off with pwrite, whose copies read the page
	// cache), < 0 = off.
	CopyCacheBytes int64
	// MinFreeBytes and MinFreePercent are log.dir.min.free.bytes and
	// log.dir.min.free.percent: below the smaller of the two (bytes usable
	// on the data directory's filesystem), produce and topic creation fail
	// with ErrNoSpace (diskfloor.go). 0 = the default (4 GiB, 5%); < 0 =
	// off.
	MinFreeBytes   int64
	MinFreePercent float64
	// JournalBytes is log.io.journal.bytes: with > 0, acks=all appends are
	// made durable by one journal write and flush per group commit
	// (journal.go) in that many bytes of journal files; 0 = off.
	JournalBytes int64
	// JournalEnds is log.io.journal.ends=true: the journal holds no record
	// bytes, only each flush round's segment ends; every byte is written
	// once, into its segment (fresh files zero-filled, whatever NoZeroFill
	// says; recycled ones not at all, recycle.go), and a round's one
	// device flush is the journal's fdatasync of those ends (journal.go,
	// ends). It takes effect with the journal (JournalBytes > 0) and
	// shared device flushes (the O_DIRECT backend on ext4 or XFS, not
	// DisableSharedFlush); elsewhere the journal holds the records.
	JournalEnds bool
	// RollAhead is log.roll.ahead.bytes: an append that leaves its active
	// segment with less than the smaller of this and an eighth of
	// segment.bytes free queues the partition for a roll by a background
	// goroutine, outside produce requests (rollahead.go); 0: off, every
	// roll happens in the append that does not fit.
	RollAhead int64
	// VerifyRecovery is log.recovery.verify: Open checks the CRC of every
	// batch of every log, not only of what follows the recovery point;
	// a corrupt log is marked (corrupt.go) and the others open.
	VerifyRecovery bool
	// RefetchCorrupt is set in a cluster (a controller quorum): a log found
	// corrupt at Open is cut at its last good offset instead of going
	// offline, the cut bytes kept aside as *.corrupt files, and marked
	// damaged, so its replica re-fetches the rest from the leader and is
	// not eligible to lead until then (corrupt.go).
	RefetchCorrupt bool
	// ScrubBytesPerSecond is log.scrub.bytes.per.second: the background
	// scrubber checks the CRCs of every sealed segment at most this many
	// bytes a second (scrub.go). <= 0 = off (the broker key's default,
	// DefaultScrubBytesPerSecond, is passed by strata serve).
	ScrubBytesPerSecond int64

	// scrubManual (tests): no scrubber goroutine; tests call scrubStep.
	scrubManual bool
	// scrubTicks (tests): the scrubber goroutine's steps, instead of a
	// ticker.
	scrubTicks <-chan time.Time

	// files, when set (tests), replaces real segment files.
	files fileLayer
	// journalFS, when set (crash tests), holds the journal's files.
	journalFS vfs.FS
	// fs, when set (crash tests), is the file system of every file and
	// directory of the engine (internal/vfs; engine/doc.go, "The
	// file-system seam"); nil = vfs.OS. Segment data goes there too
	// (fsFiles) unless files is set.
	fs vfs.FS

	// syncHook, when set (tests), runs before every fsync/fdatasync with
	// the file's path; an error replaces the sync's result.
	syncHook func(path string) error
	// SyncFault is syncHook for fault tests outside this package (a
	// failed fsync, e.g. syscall.EIO, takes the directory offline); it is
	// not a setting. syncHook, when set, wins.
	SyncFault func(path string) error
	// flushWorkers sizes the flush worker pool (tests); 0 = default.
	flushWorkers int
}

// Engine is a broker's set of partition logs in one data directory, plus the
// group-commit flusher that makes appends durable and advances high watermarks.
type Engine struct {
	dir       string
	defaults  LogConfig
	now       func() time.Time
	logger    *slog.Logger
	syncHook  func(path string) error
	fs        vfs.FS // checkpoints, snapshots, transaction indexes (Options.fs)
	journalFS vfs.FS // Options.journalFS

	adminMu sync.Mutex // serializes topic create/delete/grow and Close

	roller roller // rollahead.go

	mu     sync.RWMutex
	topics map[string]*Topic
	byID   map[[16]byte]*Topic
	closed bool

	offline atomic.Pointer[error]
	floor   diskFloor // the free-space floor (diskfloor.go)

	groups sync.Map // embedded consumer groups by id (consumergroup.go)

	fl flushPipeline // the flush workers and the coordinator (flusher.go)

	io  *ioBackend // segment writes: io_uring O_DIRECT or pwrite (backend.go)
	jnl *journal   // nil unless Options.JournalBytes (journal.go)
	// jnlEnds: Options.JournalEnds, the journal holds segment ends only.
	jnlEnds bool
	tails   *tailPool // buffers of the partitions' tail caches (tailcache.go)
	copies  *copyPool // blocks of remote-enabled segments' bytes for their copies (copycache.go)
	// prefaultTails: each log hosted maps its share of the tail cache
	// ahead (Options.PrefaultTailCache; Log.install).
	prefaultTails bool

	maint maintenance // retention goroutine and delayed file deletion (retention.go)
	cl    cleaner     // the log cleaner goroutine (cleaner.go)
	scrub scrubber    // the background CRC scrubber (scrub.go)

	producerExpiryMs int64 // Options.ProducerIDExpirationMs
	verify           bool  // Options.VerifyRecovery
	refetchCorrupt   bool  // Options.RefetchCorrupt

	ckptMu sync.Mutex // serializes checkpoint file writes
	// logStartPending: the last log-start checkpoint ran out of a resource
	// (writeLogStartCheckpoint); the flush coordinator writes it again.
	logStartPending atomic.Bool
	syncs           atomic.Int64 // fdatasyncs of segment data (tests, benchmarks)
	// ownSyncs counts active segments' own fdatasyncs (not shared: tests)
	ownSyncs atomic.Int64
	// recycledSegs counts segments made over pooled files (recycle.go).
	recycledSegs atomic.Int64
}

// cmpOrHook returns the first non-nil hook.
func cmpOrHook(a, b func(string) error) func(string) error {
	if a != nil {
		return a
	}
	return b
}

// Open opens (creating if needed) the data directory, recovers every
// partition log and starts the flush workers and their coordinator.
func Open(opts Options) (*Engine, error) {
	if opts.Dir == "" {
		return nil, errors.New("engine: Options.Dir is empty")
	}
	e := &Engine{
		dir:       opts.Dir,
		defaults:  opts.Log,
		now:       opts.Now,
		logger:    opts.Logger,
		syncHook:  cmpOrHook(opts.syncHook, opts.SyncFault),
		fs:        opts.fs,
		journalFS: opts.journalFS,
		topics:    make(map[string]*Topic),
		byID:      make(map[[16]byte]*Topic),
	}
	e.fl.workers = opts.flushWorkers
	e.producerExpiryMs = opts.ProducerIDExpirationMs
	e.verify = opts.VerifyRecovery
	e.refetchCorrupt = opts.RefetchCorrupt
	if e.defaults == (LogConfig{}) {
		e.defaults = DefaultLogConfig()
	}
	if err := validateConfig(e.defaults); err != nil {
		return nil, err
	}
	e.now = clocks.Or(e.now)
	if e.fs == nil {
		e.fs = vfs.OS
	}
	if e.logger == nil {
		e.logger = slog.Default()
	}
	if err := e.fs.MkdirAll(filepath.Join(e.dir, topicsDirName), 0o755); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	files := opts.files
	if files == nil && e.fs != vfs.OS {
		files = fsFiles{e.fs} // segfile.go: segment data on the engine's file system
	}
	// The ends mode runs where the journal and shared device flushes do;
	// it zero-fills fresh segment files whatever log.io.zero.fill says
	// (that key is for the other modes).
	ends := opts.JournalEnds && opts.JournalBytes > 0 && !opts.DisableSharedFlush
	io, err := newIOBackend(opts.IOBackend, e.dir, files, !opts.DisableSharedFlush, !opts.NoZeroFill || ends, e.logger)
	if err != nil {
		return nil, err
	}
	e.io = io
	io.fs = e.fs // indexes (logsegment.go)
	if io.dev != nil {
		io.dev.now = e.now // times the shared device flushes (devflush.go)
	}
	tailBytes := opts.TailCacheBytes
	if tailBytes == 0 && !io.direct() {
		// pwrite leaves every batch in the page cache, where sendfile
		// serves it without a copy; the tail cache would only add one.
		tailBytes = -1
	}
	e.tails = newTailPool(tailBytes)
	if copyBytes := opts.CopyCacheBytes; io.direct() || copyBytes > 0 {
		e.copies = newCopyPool(copyBytes)
	}
	e.prefaultTails = e.tails != nil && opts.PrefaultTailCache
	if e.tails != nil {
		e.logger.Info("tail cache", "bytes", int64(e.tails.max)*tailBufBytes, "per_partition_max", tailBufsPerLog*tailBufBytes)
	}
	if opts.JournalEnds && (!ends || io.dev == nil) {
		// Without the journal, or without a device flush that every
		// segment's completed writes share (pwrite, another filesystem,
		// log.io.flush.shared=false), the journal holds the records.
		reason := "no shared device flush for the data directory (log.io.flush.shared, the backend or the filesystem)"
		if opts.JournalBytes <= 0 {
			reason = "no journal (log.io.journal.bytes=0)"
		}
		e.logger.Info("journal ends off", "reason", reason)
		ends = false
	}
	e.jnlEnds = ends
	e.io.capLead = ends // zeros up to segment.bytes, not a step past it (recycle.go)
	if opts.JournalBytes > 0 {
		// Before any log opens: replay puts the journal's records into
		// their segment files, and the recovery below finds them.
		j, err := openJournal(e, e.journalBytes(opts.JournalBytes))
		if err != nil {
			e.io.close()
			return nil, err
		}
		e.jnl = j
		unhold := j.unhold
		e.io.onStarve.Store(&unhold)
	}
	if err := e.load(); err != nil {
		for _, l := range e.allLogs() {
			l.shutdown(ErrClosed, false)
		}
		if e.jnl != nil {
			e.jnl.close(false)
		}
		e.io.close()
		return nil, err
	}
	e.floor.set(opts.MinFreeBytes, opts.MinFreePercent)
	e.checkFloor(e.nowMs())
	e.startFlusher()
	e.kickFlusher() // the coordinator's first pass schedules the floor's checks
	e.startMaintenance(opts)
	e.startScrubber(opts)
	e.startRoller(opts.RollAhead)
	return e, nil
}

// validateConfig checks every field of c by formatting and re-parsing it.
func validateConfig(c LogConfig) error {
	for _, k := range sortedKeys {
		v, _ := c.Value(k)
		if _, err := c.Apply(map[string]string{k: v}); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) nowMs() int64 { return e.now().UnixMilli() }

// Dir returns the data directory.
func (e *Engine) Dir() string { return e.dir }

// load reads the topic files, recovers their logs, tidies the directory and
// writes fresh checkpoints. Called by Open before the flusher starts.
func (e *Engine) load() error {
	cleanPath := filepath.Join(e.dir, cleanShutdownFile)
	_, err := e.fs.Stat(cleanPath)
	clean := err == nil
	rps, err := e.readCheckpoint(recoveryPointFile)
	if err != nil {
		e.logger.Warn("ignoring recovery point checkpoint: every segment will be checked", "err", err)
		rps, clean = map[topicPartition]int64{}, false
	}
	starts, err := e.readCheckpoint(logStartFile)
	if err != nil {
		e.logger.Warn("ignoring log start offset checkpoint", "err", err)
		starts = map[topicPartition]int64{}
	}
	metas, err := e.readTopicFiles()
	if err != nil {
		return err
	}
	if err := e.tidyDataDir(metas); err != nil {
		return err
	}
	for _, m := range metas {
		cfg, err := e.defaults.Apply(m.meta.Configs)
		if err != nil {
			return fmt.Errorf("engine: topic %s: %w", m.meta.Name, err)
		}
		t := newTopic(e, m.meta.Name, m.id, m.meta.Configs, cfg)
		t.replicasOnly.Store(m.meta.ReplicasOnly)
		logs := make([]*Log, 0, m.meta.Partitions)
		for p := int32(0); p < m.meta.Partitions; p++ {
			tp := topicPartition{m.meta.Name, p}
			if m.meta.ReplicasOnly && !e.partitionHosted(m.meta.Name, p) {
				logs = append(logs, nil) // not a replica here (cluster.go)
				continue
			}
			rp, ok := rps[tp]
			if !ok {
				rp = 0
			}
			l, err := e.openLog(t, p, rp, starts[tp], clean)
			if err != nil {
				for _, l := range logs {
					l.shutdown(ErrClosed, false)
				}
				e.shutdownAll()
				return fmt.Errorf("engine: opening %s: %w", partitionDirName(m.meta.Name, p), err)
			}
			logs = append(logs, l)
		}
		t.parts.Store(&logs)
		e.topics[t.name] = t
		e.byID[t.id] = t
	}
	// The marker must be gone (durably) before anything is appended, or a
	// crash would make the next Open trust an unchecked tail.
	if clean {
		if err := e.fs.Remove(cleanPath); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}
	if err := e.syncDir(e.dir); err != nil { // the marker's removal
		return fmt.Errorf("engine: %w", err)
	}
	if err := e.writeRecoveryCheckpoint(); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if err := e.writeLogStartCheckpoint(); err != nil {
		return err
	}
	return nil
}

func (e *Engine) shutdownAll() {
	for _, t := range e.topics {
		for _, l := range t.hostedLogs() {
			l.shutdown(ErrClosed, false)
		}
	}
	clear(e.topics)
	clear(e.byID)
}

type loadedTopic struct {
	meta topicMeta
	id   [16]byte
}

// readTopicFiles reads __strata_topics/*.json. A file that does not parse is
// an error: guessing would risk serving a topic with the wrong id.
func (e *Engine) readTopicFiles() ([]loadedTopic, error) {
	dir := filepath.Join(e.dir, topicsDirName)
	ents, err := e.fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	var out []loadedTopic
	for _, ent := range ents {
		name := ent.Name()
		if strings.HasSuffix(name, tmpSuffix) {
			e.fs.Remove(filepath.Join(dir, name))
			continue
		}
		if !strings.HasSuffix(name, ".json") || ent.IsDir() {
			e.logger.Warn("ignoring stray file", "path", filepath.Join(dir, name))
			continue
		}
		data, err := readSmallFileFS(e.fs, filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		m, id, err := parseTopicMeta(data)
		if err != nil {
			return nil, fmt.Errorf("engine: %s: %w", name, err)
		}
		if m.Name+".json" != name {
			return nil, fmt.Errorf("engine: %s holds topic %q", name, m.Name)
		}
		out = append(out, loadedTopic{m, id})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].meta.Name < out[j].meta.Name })
	return out, nil
}

// tidyDataDir removes leftovers of interrupted deletes and renames partition
// directories that belong to no known topic (or carry another topic id) to
// "<dir>.<n>-stray", as Kafka does with stray logs.
func (e *Engine) tidyDataDir(metas []loadedTopic) error {
	known := make(map[string]loadedTopic, len(metas))
	for _, m := range metas {
		known[m.meta.Name] = m
	}
	ents, err := e.fs.ReadDir(e.dir)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	for _, ent := range ents {
		name := ent.Name()
		path := filepath.Join(e.dir, name)
		switch {
		case name == topicsDirName || name == recoveryPointFile || name == logStartFile ||
			name == cleanShutdownFile || name == metaPropsFile || name == ControllerDirName || name == cleanerCheckpointFile ||
			name == ProducerIDBlockFile || name == devFlushAnchor || name == journalDirName || name == ScramCredentialsFile || name == AclsFile || name == QuotasFile || name == scrubPositionFile ||
			name == RemoteMetadataDirName:
			continue
		case strings.HasSuffix(name, tmpSuffix):
			e.fs.Remove(path)
			continue
		case ent.IsDir() && strings.HasSuffix(name, deleteDirSuffix):
			if err := e.fs.RemoveAll(path); err != nil {
				e.logger.Warn("removing deleted partition", "path", path, "err", err)
			}
			continue
		case ent.IsDir() && strings.HasSuffix(name, strayDirSuffix):
			continue
		}
		topic, p, ok := parsePartitionDirName(name)
		if !ent.IsDir() || !ok {
			e.logger.Warn("ignoring stray entry in data directory", "path", path)
			continue
		}
		m, isKnown := known[topic]
		if isKnown && p < m.meta.Partitions {
			data, err := readSmallFileFS(e.fs, filepath.Join(path, partitionMetaFile))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("engine: %w", err)
			}
			if err != nil {
				continue // openLog writes it
			}
			if id, perr := parsePartitionMetadata(data); perr == nil && id == m.id {
				continue
			}
		}
		if err := e.renameStray(path); err != nil {
			return err
		}
	}
	return nil
}

// renameStray moves a partition directory we cannot account for out of the
// way without deleting it.
func (e *Engine) renameStray(path string) error {
	var r [8]byte
	_, _ = rand.Read(r[:])
	to := sideName(filepath.Dir(path), filepath.Base(path), hex.EncodeToString(r[:]), strayDirSuffix)
	e.logger.Warn("partition directory belongs to no known topic; renamed", "from", path, "to", to)
	if err := e.fs.Rename(path, to); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	return nil
}

// allLogs returns every open log.
func (e *Engine) allLogs() []*Log {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var out []*Log
	for _, t := range e.topics {
		out = append(out, t.hostedLogs()...)
	}
	return out
}

// writeBackIndexes writes the whole pages of entries the active segments'
// private index mappings filled since the last write-back to their files
// (the last page's entries wait until it fills, or for the seal; with shared
// syncfs flushes; a no-op otherwise), so that the next flush persists them
// and recovery after a crash resumes near the recovery point instead of
// walking the whole active segment. A failure is logged: the indexes of
// the segments recovery walks are rebuilt from the log.
//
// Each file's pages are written out before the next file's are
// (index.OffsetIndex.WriteOut), one device write at a time: left to the
// next shared flush's syncfs, the write-back of every index at once (two
// per busy partition, ~190 writes with keyed traffic over 96 partitions)
// queued in one burst in front of the journal's groups, and the syncfs
// that carried them took 13.1 ms against 7.5 ms for one without them
// (journal checkpoints in a keyed run at 200,000 records/s, the
// development VM, docs/performance.md, "Session 45"). Whole pages only:
// a busy partition's index fills a page in seconds, and writing its last
// page every second made the pass 192 opens, writes and write-outs a
// second with 96 busy partitions (a median of 64 ms of the coordinator's
// time a pass in a keyed run at 100,000 records/s, 32 ms with whole
// pages); now a file is opened when a page filled ("Session 46").
func (e *Engine) writeBackIndexes() {
	if !e.io.metaFlush {
		return
	}
	for _, l := range e.allLogs() {
		l.mu.Lock()
		s := l.active
		l.mu.Unlock()
		if s == nil {
			continue
		}
		l.idxMu.RLock()
		off, tim := s.off, s.tim
		l.idxMu.RUnlock()
		var err error
		if off != nil {
			err = off.WriteOut()
		}
		if tim != nil {
			err = errors.Join(err, tim.WriteOut())
		}
		if err != nil && !errors.Is(err, index.ErrClosed) {
			path, _, _ := s.paths()
			e.logger.Warn("writing back an index", "segment", path, "err", err)
		}
	}
}

// writeRecoveryCheckpoint writes every log's recovery point, after the
// leader-epoch checkpoints appends left to it (Log.epochsAssigned): those
// are written after the points are read and before the file, so no point
// it writes passes an epoch entry missing from its file. An entry assigned
// after that write started begins at or past the log end of that moment,
// and so at or past the point read before it, from where recovery
// rebuilds the cache from the batches (walkSegment). A failure writes no
// recovery point.
func (e *Engine) writeRecoveryCheckpoint() error {
	e.ckptMu.Lock()
	defer e.ckptMu.Unlock()
	logs := e.allLogs()
	m := make(map[topicPartition]int64, len(logs))
	for _, l := range logs {
		m[topicPartition{l.topic, l.part}] = l.recoveryPoint()
	}
	for _, l := range logs {
		if err := l.saveDirtyEpochs(); err != nil {
			return err
		}
	}
	return e.writeCheckpoint(recoveryPointFile, m)
}

// recoveryPoint is what the recovery-point checkpoint says of l: its
// durable offset, but no further than the end of the first segment sealed
// since the last flush, whose index files are not synced yet. Recovery
// trusts the bytes and the indexes of the segments that end below the
// recovery point (recoverSegments); a flush makes a segment's bytes
// durable as the active one, and its indexes only once it is sealed, at
// the next flush. The durable offset is read before the segments: a
// segment sealed after that read ends at or past it.
func (l *Log) recoveryPoint() int64 {
	rp := l.durable.Load()
	p := l.segs.Load()
	if p == nil {
		return rp
	}
	segs := *p
	for i, s := range segs[:max(len(segs)-1, 0)] {
		if s.idxUnsynced.Load() {
			return min(rp, segs[i+1].base)
		}
	}
	return rp
}

// writeLogStartCheckpoint writes every log's start offset. Running out of
// space or descriptors fails the call with ErrResource and leaves the
// directory online: the old file stays whole (an older start only shows
// records DeleteRecords removed again after a crash, never loses any), and
// the flush coordinator writes it again at its next checkpoint. Any other
// failure takes the engine offline.
func (e *Engine) writeLogStartCheckpoint() error {
	e.ckptMu.Lock()
	defer e.ckptMu.Unlock()
	m := make(map[topicPartition]int64)
	for _, l := range e.allLogs() {
		m[topicPartition{l.topic, l.part}] = l.logStart.Load()
	}
	err := e.writeCheckpoint(logStartFile, m)
	switch {
	case err == nil:
		if e.logStartPending.Swap(false) {
			e.logger.Info("log-start checkpoint written again", "dir", e.dir)
		}
		return nil
	case isResourceErr(err):
		if !e.logStartPending.Swap(true) {
			e.logger.Warn("log-start checkpoint not written: out of a resource; retrying, the log directory stays online", "dir", e.dir, "err", err)
		}
		e.fl.ckptDirty.Store(true) // the coordinator's next checkpoint retries it
		return fmt.Errorf("%w: writing %s: %v", ErrResource, logStartFile, err)
	}
	return e.ioFailure("writing "+logStartFile, err)
}

// Close flushes every log, writes the checkpoints and the clean-shutdown
// marker, and closes the files (a file still pinned by a ReadResult closes
// when it is released). Idempotent.
func (e *Engine) Close() error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	defer e.io.close() // after every log let go of its segments
	// No retention, cleaning, scrubbing or rolling ahead once logs start
	// closing.
	e.stopRoller()
	e.stopScrubber()
	e.stopMaintenance()
	if e.tails != nil {
		e.tails.stop() // no more cache memory mapped ahead (slab.go)
	}
	if e.copies != nil {
		e.copies.stop()
	}
	logs := e.allLogs()
	for _, l := range logs {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
	}
	e.stopFlusher() // every log is durable now (unless offline)
	if n := e.recycledSegs.Load(); n > 0 {
		e.logger.Info("segments made over recycled files", "segments", n) // recycle.go
	}
	if e.jnl != nil {
		// Its last group says nothing is left to replay (unless offline).
		if err := e.jnl.close(e.Offline() == nil); err != nil {
			e.ioFailure("closing the journal", err)
		}
	}

	var errs []error
	if err := e.Offline(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if err := e.writeRecoveryCheckpoint(); err != nil {
			errs = append(errs, err)
		}
		if err := e.writeLogStartCheckpoint(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, e.closeLogs(logs, len(errs) == 0)...)
	if len(errs) == 0 {
		for _, l := range logs {
			if l.active != nil && l.active.refs.Load() != 0 {
				errs = append(errs, fmt.Errorf("engine: %s: active segment still read at Close; next Open checks it", l))
			}
		}
		if len(errs) == 0 {
			errs = append(errs, vfs.WriteFileAtomicFS(e.fs, filepath.Join(e.dir, cleanShutdownFile), nil))
		} else {
			e.logger.Warn("not writing the clean shutdown marker", "err", errors.Join(errs...))
			errs = nil
		}
	}
	return errors.Join(errs...)
}

// closeWorkers bounds the logs Close shuts down at once. Each one ends in
// fsyncs (its segment's trimmed tail, two index files), which the device
// serves together: one after another, 10,000 partitions took 21 s to stop
// on the development VM (spawned brokers are given 30 s).
const closeWorkers = 32

// closeLogs shuts every log down (Log.shutdown) and, when syncIdx, makes
// the trimmed index files of each active segment durable (closed now
// unless a reader still pins it) before the clean-shutdown marker says they
// can be trusted. Logs are independent: closeWorkers of them at a time.
func (e *Engine) closeLogs(logs []*Log, syncIdx bool) []error {
	var (
		next atomic.Int64
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for range min(closeWorkers, len(logs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(logs)) {
					return
				}
				l := logs[i]
				active := l.active
				l.shutdown(ErrClosed, false)
				if active == nil || !syncIdx || active.refs.Load() != 0 {
					continue
				}
				for _, p := range []string{active.offPath, active.timPath} {
					if err := e.syncFile(p, func() error { return vfs.SyncPathFS(e.fs, p) }); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	return errs
}

// CreateTopic creates a topic with partitions empty logs and the given
// topic-level config overrides.
func (e *Engine) CreateTopic(name string, partitions int32, configs map[string]string) (*Topic, error) {
	return e.createTopic(name, [16]byte{}, partitions, configs, nil)
}

// createTopic is CreateTopic with a given topic id (zero: a random one); see
// CreateTopicWithID (cluster.go).
// createTopic creates a topic with every partition's log, or, with hosted
// non-nil, a replicas-only topic with logs for the partitions in hosted
// only (CreateReplicaTopic). A zero id gets a random one.
func (e *Engine) createTopic(name string, id [16]byte, partitions int32, configs map[string]string, hosted []int32) (*Topic, error) {
	if err := validateTopicName(name); err != nil {
		return nil, err
	}
	if partitions < 1 || partitions > maxPartitions {
		return nil, fmt.Errorf("%w: %d (must be 1..%d)", ErrInvalidPartitions, partitions, maxPartitions)
	}
	for _, p := range hosted {
		if p < 0 || p >= partitions {
			return nil, fmt.Errorf("%w: hosted partition %d of %d", ErrInvalidPartitions, p, partitions)
		}
	}
	if _, err := DefaultLogConfig().Apply(configs); err != nil {
		return nil, err
	}
	if err := e.noSpace(name); err != nil && hosted == nil {
		return nil, err // replicas the controller assigns are not refused (diskfloor.go)
	}
	overrides := maps.Clone(configs)
	if overrides == nil {
		overrides = map[string]string{}
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	cfg, err := e.defaults.Apply(configs) // defaults: under adminMu (SetLogDefaults)
	if err != nil {
		return nil, err
	}
	if err := e.adminUsable(); err != nil {
		return nil, err
	}
	e.mu.RLock()
	_, exists := e.topics[name]
	collides := ""
	for other := range e.topics {
		if other != name && collisionName(other) == collisionName(name) {
			collides = other
		}
	}
	e.mu.RUnlock()
	if exists {
		return nil, fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	if collides != "" {
		return nil, fmt.Errorf("%w: %q collides with existing topic %q", ErrInvalidTopic, name, collides)
	}
	if e.TopicByID(id) != nil {
		return nil, fmt.Errorf("%w: topic id of %s is in use", ErrTopicExists, name)
	}
	for id == ([16]byte{}) {
		if _, err := rand.Read(id[:]); err != nil {
			return nil, fmt.Errorf("engine: topic id: %w", err)
		}
	}
	t := newTopic(e, name, id, overrides, cfg)
	var logs, created []*Log
	if hosted == nil {
		logs, err = e.createLogs(t, 0, partitions)
		created = logs
	} else {
		t.replicasOnly.Store(true)
		logs = make([]*Log, partitions)
		created, err = e.createHostedLogs(t, hosted, logs)
	}
	if err != nil {
		return nil, err
	}
	if err := vfs.WriteFileAtomicFS(e.fs, e.topicFile(name), formatTopicMetaOf(t, partitions, overrides)); err != nil {
		e.discardLogs(created)
		return nil, e.createFailure("writing topic "+name, err)
	}
	t.parts.Store(&logs)
	e.mu.Lock()
	e.topics[name] = t
	e.byID[id] = t
	e.mu.Unlock()
	if err := e.writeRecoveryCheckpoint(); err != nil {
		return nil, e.ioFailure("writing "+recoveryPointFile, err)
	}
	return t, nil
}

func (e *Engine) topicFile(name string) string {
	return filepath.Join(e.dir, topicsDirName, name+".json")
}

// adminUsable is the error admin calls fail with. Caller holds adminMu.
func (e *Engine) adminUsable() error {
	if err := e.Offline(); err != nil {
		return err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	return nil
}

// createLogs creates the directories of partitions [from, to) of t.
func (e *Engine) createLogs(t *Topic, from, to int32) ([]*Log, error) {
	logs := make([]*Log, 0, to-from)
	for p := from; p < to; p++ {
		l, err := e.createLog(t, p)
		if err != nil {
			e.discardLogs(logs)
			return nil, e.createFailure("creating "+partitionDirName(t.name, p), err)
		}
		logs = append(logs, l)
	}
	if err := e.fs.SyncDir(e.dir); err != nil {
		e.discardLogs(logs)
		return nil, e.createFailure("syncing "+e.dir, err)
	}
	return logs, nil
}

// discardLogs closes and removes logs whose creation did not commit.
func (e *Engine) discardLogs(logs []*Log) {
	for _, l := range logs {
		l.shutdown(ErrClosed, true)
		if err := e.fs.RemoveAll(l.dir); err != nil {
			e.logger.Warn("removing partition directory", "path", l.dir, "err", err)
		}
	}
}

// DeleteTopic deletes a topic and its data. Readers holding chunks keep
// their files open until they release them.
func (e *Engine) DeleteTopic(name string) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if err := e.adminUsable(); err != nil {
		return err
	}
	t := e.Topic(name)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	if err := e.fs.Remove(e.topicFile(name)); err != nil {
		return e.ioFailure("deleting topic "+name, err)
	}
	if err := e.fs.SyncDir(filepath.Join(e.dir, topicsDirName)); err != nil {
		return e.ioFailure("deleting topic "+name, err)
	}
	e.mu.Lock()
	delete(e.topics, name)
	delete(e.byID, t.id)
	e.mu.Unlock()
	t.deleted.Store(true)
	e.forgetCleanPoints(name) // a topic re-created with this name starts dirty
	gone := fmt.Errorf("%w: %s was deleted", ErrUnknownTopic, name)
	var dirs []string
	for _, l := range t.hostedLogs() {
		l.shutdown(gone, true)
		to := sideName(e.dir, filepath.Base(l.dir), hex.EncodeToString(t.id[:]), deleteDirSuffix)
		if err := e.fs.Rename(l.dir, to); err != nil {
			e.logger.Warn("renaming deleted partition", "path", l.dir, "err", err)
			to = l.dir
		}
		dirs = append(dirs, to)
	}
	if err := e.fs.SyncDir(e.dir); err != nil {
		e.logger.Warn("syncing data directory", "err", err)
	}
	for _, d := range dirs {
		if err := e.fs.RemoveAll(d); err != nil {
			e.logger.Warn("removing deleted partition", "path", d, "err", err)
		}
	}
	if err := e.writeRecoveryCheckpoint(); err != nil {
		return e.ioFailure("writing "+recoveryPointFile, err)
	}
	return e.writeLogStartCheckpoint()
}

// growableTopic returns the topic name and its partition count when it can
// grow to total partitions (ErrUnknownTopic, ErrInvalidPartitions for
// keeping or shrinking the count). Caller holds adminMu.
func (e *Engine) growableTopic(name string, total int32) (*Topic, int32, error) {
	if err := e.adminUsable(); err != nil {
		return nil, 0, err
	}
	t := e.Topic(name)
	if t == nil {
		return nil, 0, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	cur := t.Partitions()
	if total <= cur || total > maxPartitions {
		return nil, 0, fmt.Errorf("%w: topic %s has %d partitions, asked for %d", ErrInvalidPartitions, name, cur, total)
	}
	return t, cur, nil
}

// CreatePartitions grows a topic to total partitions; shrinking or keeping
// the count is ErrInvalidPartitions.
func (e *Engine) CreatePartitions(name string, total int32) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	t, cur, err := e.growableTopic(name, total)
	if err != nil {
		return err
	}
	if err := e.noSpace(name); err != nil {
		return err
	}
	added, err := e.createLogs(t, cur, total)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomicFS(e.fs, e.topicFile(name), formatTopicMetaOf(t, total, *t.overrides.Load())); err != nil {
		e.discardLogs(added)
		return e.ioFailure("writing topic "+name, err)
	}
	logs := append(append(make([]*Log, 0, total), t.logs()...), added...)
	t.parts.Store(&logs)
	if err := e.writeRecoveryCheckpoint(); err != nil {
		return e.ioFailure("writing "+recoveryPointFile, err)
	}
	return nil
}

// Topic returns the named topic, nil if unknown.
func (e *Engine) Topic(name string) *Topic {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.topics[name]
}

// TopicByID returns the topic with this id, nil if unknown.
func (e *Engine) TopicByID(id [16]byte) *Topic {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.byID[id]
}

// Topics returns every topic sorted by name.
func (e *Engine) Topics() []*Topic {
	e.mu.RLock()
	out := make([]*Topic, 0, len(e.topics))
	for _, t := range e.topics {
		out = append(out, t)
	}
	e.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}
