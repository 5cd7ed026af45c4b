package rlm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/clocks"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/remote/objstore"
)

// Options configure a Manager.
type Options struct {
	Engine *engine.Engine
	Store  objstore.ObjectStore
	// Dir holds the remote-log metadata, one file per partition
	// (required; docs/tiered-storage.md says where the broker keeps it).
	Dir string
	// FS is the file system of Dir (nil: the operating system's).
	FS vfs.FS
	// Now is the clock of state changes and remote retention (nil:
	// clocks.Wall).
	Now clocks.Clock
	// Interval is how often the manager looks for rolled segments to
	// copy and remote segments to delete (0: 1 s; < 0: never on a timer,
	// RunOnce and Kick drive it).
	Interval time.Duration
	// CacheBytes bounds the memory of fetched remote data (0: 128 MiB).
	CacheBytes int64
	// MaxCachedSegmentBytes: segments up to this size are fetched whole
	// (checked against their checksums) and cached; larger ones are read
	// by ranges, each batch checked by its CRC (0: 32 MiB; never above
	// CacheBytes).
	MaxCachedSegmentBytes int64
	// ChunkBytes: segments read by ranges are fetched and cached in
	// chunks of this many bytes (0: 4 MiB; never above CacheBytes/4).
	ChunkBytes int64
	// ReadAheadBytes: after a sequential read, the chunks and segments
	// starting within this many bytes past what it returned are fetched
	// into the cache in the background (readahead.go; 0: 16 MiB; < 0:
	// off; never above CacheBytes/4, so what is fetched ahead is not
	// evicted before it is read).
	ReadAheadBytes int64
	// BackoffMin and BackoffMax bound the wait between retries of a
	// failed store call, doubling from the one to the other (0: 100 ms
	// and 30 s).
	BackoffMin, BackoffMax time.Duration
	// OpTimeout bounds each store call (0: 60 s).
	OpTimeout time.Duration
	// CopyMaxBytesPerSecond throttles copies: each read of a copied
	// object first waits until the bytes read before it fit the rate (0
	// or math.MaxInt64: unbounded). The wait is measured with Now.
	CopyMaxBytesPerSecond int64
	// CopySpread paces copies by their backlog: each read goes at the
	// backlog's bytes over CopySpread a second, at least 16 MiB/s, and
	// never faster than CopyMaxBytesPerSecond (pace.go, copySpreadRate;
	// 0: off, copies go at full speed up to CopyMaxBytesPerSecond).
	CopySpread time.Duration
	// FetchMaxBytesPerSecond throttles remote reads: a Read first waits
	// until the bytes earlier Reads returned fit the rate (0 or
	// math.MaxInt64: unbounded). The wait is measured with Now and
	// bounded by the Read's context.
	FetchMaxBytesPerSecond int64
	// Sleep waits d or until ctx is done (nil: a timer). Tests pass one
	// that does not wait.
	Sleep  func(ctx context.Context, d time.Duration) error
	Logger *slog.Logger
	// Metadata, when set, replicates the remote-log metadata through the
	// cluster's __remote_log_metadata topic (cluster.go): only a
	// partition's leader copies and deletes, every broker applies the
	// events, and Dir's files are not used. nil: a single broker, the
	// metadata in Dir's files.
	Metadata MetadataTopic
}

// Stats are the manager's counters since Open.
type Stats struct {
	SegmentsCopied  int64         // reached COPY_SEGMENT_FINISHED
	BytesCopied     int64         // of every object of those segments
	CopyFailures    int64         // copies given up (their objects cleaned up later)
	Retries         int64         // store calls retried after a failure
	SegmentsDeleted int64         // reached DELETE_SEGMENT_FINISHED
	FetchedBytes    int64         // read from the store for fetches
	CacheHits       int64         // object and chunk loads served without a store call of their own (cache, or a read-ahead in flight)
	CacheMisses     int64         // loads that called the store
	ReadAheads      int64         // chunks and objects fetched ahead of a sequential reader
	Reads           int64         // Read calls that returned data or an error
	ReadTime        time.Duration // their total time (throttle waits excluded)
	ReadBytes       int64         // the bytes those Reads returned
	// CopyTime is the time the store took to take the copied objects
	// (their puts, retries included; throttle waits and metadata
	// updates not): BytesCopied / CopyTime is the upload rate.
	CopyTime time.Duration
	// CopyThrottleTime and FetchThrottleTime are the waits of the copy
	// and fetch throttles (Kafka's remote-copy-throttle-time and
	// remote-fetch-throttle-time).
	CopyThrottleTime, FetchThrottleTime time.Duration
	// ReadLatency is the histogram of those Reads' times (Kafka's
	// RemoteLogReaderFetchRateAndTimeMs), in seconds.
	ReadLatency engine.Histogram
}

// Manager is the remote log manager of one broker (see the package doc).
type Manager struct {
	o     Options
	log   *slog.Logger
	cache *segCache

	// mu guards parts: each partition's metadata, immutable once
	// published (the manager's goroutine replaces them whole). Never
	// held while calling into the engine or the store.
	mu    sync.Mutex
	parts map[tp]*partitionMeta

	// run serializes passes (the goroutine, RunOnce, Close).
	run sync.Mutex
	// metaMu serializes metadata updates (a pass's, DeleteRecords').
	metaMu sync.Mutex
	// el is the single broker's metadata log (eventlog.go; nil in a
	// cluster), under metaMu.
	el *eventLog
	// pending are the changes appended to el without a sync
	// (updateDeferred), oldest first, under metaMu: published into parts
	// by the next sync (update, syncPending), not before.
	pending []pendingMeta

	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{}
	done   chan struct{}

	// copyPace and fetchPace are the throttles (pace.go; nil: none).
	copyPace, fetchPace *pacer

	// fmu guards flights (store fetches of cache units in progress,
	// foreground and read-ahead) and readAheadsRunning; readAheadWG
	// counts the read-ahead goroutines (Close waits for them).
	fmu               sync.Mutex
	flights           map[string]*flight
	readAheadsRunning int
	readAheadWG       sync.WaitGroup
	streams           streams

	// cl is the cluster mode's state (cluster.go; nil on a single broker).
	cl *clusterMeta

	copied, bytesCopied, copyFailures, retries, deleted atomic.Int64
	fetched, hits, misses, reads, readNanos, readAheads atomic.Int64
	copyThrottleNanos, fetchThrottleNanos               atomic.Int64
	copyNanos, readBytes                                atomic.Int64
	// copyBacklog is the copy backlog's bytes (Lag) when the current
	// segment's copy started, less the .log bytes read since: the spread
	// pace's input (copyRate).
	copyBacklog atomic.Int64
	// lagAt is when copyBacklog was last set from Lag (the pass's
	// goroutine only, under run).
	lagAt       time.Time
	readLatency engine.LatencyHist // readLatencyBounds
}

// Open loads the metadata in o.Dir, installs the manager as the engine's
// remote hook (engine.RemoteHook: local retention waits for copies) and
// starts its goroutine. Interrupted copies and deletions found in the
// metadata (COPY_SEGMENT_STARTED, DELETE_SEGMENT_STARTED) are cleaned up
// by the first pass (run at once when Interval > 0): their objects
// deleted, never read.
func Open(o Options) (*Manager, error) {
	if o.Engine == nil || o.Store == nil || o.Dir == "" {
		return nil, errors.New("rlm: Engine, Store and Dir are required")
	}
	if o.FS == nil {
		o.FS = vfs.OS
	}
	o.Now = clocks.Or(o.Now)
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 128 << 20
	}
	if o.MaxCachedSegmentBytes <= 0 {
		o.MaxCachedSegmentBytes = 32 << 20
	}
	o.MaxCachedSegmentBytes = min(o.MaxCachedSegmentBytes, o.CacheBytes)
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 4 << 20
	}
	o.ChunkBytes = max(min(o.ChunkBytes, o.CacheBytes/4), 1)
	if o.ReadAheadBytes == 0 {
		o.ReadAheadBytes = 16 << 20
	}
	o.ReadAheadBytes = min(o.ReadAheadBytes, o.CacheBytes/4)
	if o.BackoffMin <= 0 {
		o.BackoffMin = 100 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 30 * time.Second
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = 60 * time.Second
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := ensureDir(o.FS, o.Dir); err != nil {
		return nil, fmt.Errorf("rlm: %w", err)
	}
	parts := map[tp]*partitionMeta{}
	var mat *materializer
	var el *eventLog
	if o.Metadata == nil {
		var err error
		if el, parts, err = openEventLog(o.FS, o.Dir); err != nil {
			return nil, err
		}
	} else {
		var err error
		if mat, err = loadClusterSnapshot(o.FS, o.Dir); err != nil {
			return nil, err
		}
	}
	m := &Manager{
		o: o, log: o.Logger.With("component", "remote-log-manager"), cache: newSegCache(o.CacheBytes),
		parts: parts, el: el, kick: make(chan struct{}, 1), done: make(chan struct{}), flights: map[string]*flight{},
		copyPace: newPacer(o.CopyMaxBytesPerSecond), fetchPace: newPacer(o.FetchMaxBytesPerSecond),
	}
	if m.copyPace == nil && o.CopySpread > 0 {
		m.copyPace = &pacer{} // the spread's pace alone (copyRate)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if o.Metadata != nil {
		m.startCluster(mat)
	}
	o.Engine.SetRemoteHook(m)
	go m.loop()
	return m, nil
}

// Close stops the goroutine (an upload in flight is abandoned; its
// COPY_SEGMENT_STARTED entry is cleaned up by the next Open's first pass)
// and the read-ahead fetches, and removes the engine's hook (local retention of remote-storage logs
// then stops). Close it before the engine.
func (m *Manager) Close() error {
	m.cancel()
	<-m.done
	if m.cl != nil {
		m.cl.wg.Wait() // the metadata consumer
		if c, ok := m.o.Metadata.(interface{ Close() }); ok {
			c.Close()
		}
	}
	m.fmu.Lock() // no read-ahead starts after this (prefetch checks ctx under fmu)
	m.fmu.Unlock()
	m.readAheadWG.Wait()
	m.run.Lock() // a RunOnce of a test finishes first
	m.run.Unlock()
	m.o.Engine.ClearRemoteHook(m) // only ours: a newer manager may have replaced it
	err := m.syncPending()        // (every pass ends with it; none is left)
	m.metaMu.Lock()               // a DeleteRecords' update finishes first
	err = errors.Join(err, m.el.close())
	m.metaMu.Unlock()
	return err
}

// Kick asks for a pass now.
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *Manager) loop() {
	defer close(m.done)
	var tick <-chan time.Time
	if m.o.Interval > 0 {
		t := time.NewTicker(m.o.Interval)
		defer t.Stop()
		tick = t.C
		m.Kick() // a pass at start: interrupted copies are cleaned up first
	}
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-tick:
		case <-m.kick:
		}
		if err := m.RunOnce(m.ctx); err != nil && m.ctx.Err() == nil {
			m.log.Warn("pass failed; retried at the next", "err", err)
		}
	}
}

// Stats returns the counters.
func (m *Manager) Stats() Stats {
	return Stats{
		SegmentsCopied: m.copied.Load(), BytesCopied: m.bytesCopied.Load(), CopyFailures: m.copyFailures.Load(),
		Retries: m.retries.Load(), SegmentsDeleted: m.deleted.Load(), FetchedBytes: m.fetched.Load(),
		CacheHits: m.hits.Load(), CacheMisses: m.misses.Load(), ReadAheads: m.readAheads.Load(),
		Reads: m.reads.Load(), ReadTime: time.Duration(m.readNanos.Load()), ReadLatency: m.readLatency.Snapshot(readLatencyBounds),
		CopyThrottleTime: time.Duration(m.copyThrottleNanos.Load()), FetchThrottleTime: time.Duration(m.fetchThrottleNanos.Load()),
		ReadBytes: m.readBytes.Load(), CopyTime: time.Duration(m.copyNanos.Load()),
	}
}

// Lag is the copy backlog: the sealed segments of remote-storage logs
// not copied yet, and their bytes. In a cluster only the partitions this
// broker leads count (their leader copies them), so the brokers' sums
// add up to the cluster's backlog.
func (m *Manager) Lag() (segments int, bytes int64) {
	for _, t := range m.o.Engine.Topics() {
		if t.Deleted() {
			continue
		}
		for p := range t.Partitions() {
			l := t.Partition(p)
			if l == nil || !l.Config().RemoteStorageEnable {
				continue
			}
			if m.cl != nil {
				if _, lead := m.cl.t.Leadership(l.Topic(), l.TopicID(), p); !lead {
					continue
				}
			}
			copied := m.CopiedEnd(l.TopicID(), l.Topic(), p)
			for _, s := range l.SealedSegments() {
				if s.End > copied {
					segments++
					bytes += s.Size
				}
			}
		}
	}
	return segments, bytes
}

// Segments returns the partition's remote segments (every state), by
// base offset.
func (m *Manager) Segments(topicID [16]byte, partition int32) []Segment {
	pm := m.get(tp{topicID, partition})
	if pm == nil {
		return nil
	}
	return slices.Clone(pm.Segments)
}

// CopiedEnd implements engine.RemoteHook: local retention may delete the
// partition's segments below it.
func (m *Manager) CopiedEnd(topicID [16]byte, _ string, partition int32) int64 {
	if pm := m.get(tp{topicID, partition}); pm != nil {
		return pm.CopiedEnd
	}
	return -1
}

// LogStart is the partition's first offset in remote storage (the oldest
// COPY_SEGMENT_FINISHED segment's base); ok false when none.
func (m *Manager) LogStart(topicID [16]byte, partition int32) (int64, bool) {
	pm := m.get(tp{topicID, partition})
	if pm == nil {
		return -1, false
	}
	for _, s := range pm.Segments {
		if s.State == CopyFinished && s.End > pm.LogStart {
			return max(s.Base, pm.LogStart), true
		}
	}
	return -1, false
}

// DeleteRecords moves the partition's remote log start to before
// (Kafka's DeleteRecords): reads below it fail at once, and the next pass
// deletes the remote segments wholly below it. The floor is persisted; it
// never moves back.
func (m *Manager) DeleteRecords(topicID [16]byte, topic string, partition int32, before int64) error {
	k := tp{topicID, partition}
	if pm := m.get(k); pm == nil || before <= pm.LogStart {
		return nil
	}
	epoch, err := m.leaderEpochNow(k, topic)
	if err != nil {
		return err
	}
	err = m.update(k, topic, Event{Type: EventLogStart, LeaderEpoch: epoch, LogStart: before})
	m.Kick()
	return err
}

// RemoteSize is the bytes of the partition's remote log: the .log
// objects of its COPY_SEGMENT_FINISHED segments not wholly below the
// remote log start (Kafka's RemoteLogSizeBytes); ok false when the
// manager has no metadata for the partition.
func (m *Manager) RemoteSize(topicID [16]byte, partition int32) (int64, bool) {
	pm := m.get(tp{topicID, partition})
	if pm == nil {
		return 0, false
	}
	var n int64
	for _, s := range pm.Segments {
		if s.State == CopyFinished && s.End > pm.LogStart {
			n += s.Size
		}
	}
	return n, true
}

// HighestTieredOffset is the last offset copied to remote storage
// (KIP-1005's latest-tiered timestamp, -5); ok false when none.
func (m *Manager) HighestTieredOffset(topicID [16]byte, partition int32) (int64, bool) {
	pm := m.get(tp{topicID, partition})
	if pm == nil {
		return -1, false
	}
	end := int64(-1)
	for _, s := range pm.Segments {
		if s.State == CopyFinished {
			end = max(end, s.End-1)
		}
	}
	return end, end >= 0
}

func (m *Manager) get(k tp) *partitionMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[k]
}

// update applies ev to the partition's metadata: on a single broker it
// applies it to a copy of the newest metadata, persists and publishes
// it; in a cluster it publishes ev to the metadata topic and waits until
// this broker has applied it (errFenced when a newer leader epoch had
// published first). Updates are serialized.
func (m *Manager) update(k tp, topic string, ev Event) error {
	return m.updateSync(k, topic, ev, true)
}

// updateDeferred is update for a change that may become durable, and
// visible, later (single broker): its record is appended without a sync
// and published with the next one that syncs (the next update, or
// syncPending, which every pass ends with). A copy's
// COPY_SEGMENT_FINISHED and a deletion's DELETE_SEGMENT_FINISHED are
// such changes: until published, the segment reads as still being copied
// or deleted (local retention keeps the local copy, reads go to the
// local log), and if a crash loses the record the next start-up cleans
// the segment up as interrupted. A pass copying segment after segment
// thus syncs the metadata log once per segment (each COPY_SEGMENT_STARTED
// carries the previous segment's COPY_SEGMENT_FINISHED), not twice: in a
// keyed 100,000 records/s run with 4 MiB segments the two were ~1,360 of
// the tiered broker's device flushes in 20 s (docs/tiered-storage.md).
// In a cluster it is update.
func (m *Manager) updateDeferred(k tp, topic string, ev Event) error {
	return m.updateSync(k, topic, ev, false)
}

// pendingMeta is a change appended without a sync: the partition's
// metadata after it (nil: the partition is dropped).
type pendingMeta struct {
	k    tp
	next *partitionMeta
}

func (m *Manager) updateSync(k tp, topic string, ev Event, sync bool) error {
	ev.TopicID, ev.Topic, ev.Partition = fmt.Sprintf("%x", k.id[:]), topic, k.p
	if ev.EventMs == 0 {
		ev.EventMs = m.o.Now().UnixMilli()
	}
	if m.cl != nil {
		return m.publish(k, ev)
	}
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	next := cloneMeta(m.latest(k), k, topic)
	drop := applyEvent(next, ev)
	seq, err := m.el.append(k, ev, m.partsLatest, sync)
	if err != nil {
		return fmt.Errorf("rlm: saving metadata of %s-%d: %w", topic, k.p, err)
	}
	next.Seq = seq
	if drop {
		next = nil
	}
	m.pending = append(m.pending, pendingMeta{k, next})
	if sync {
		m.publishPending()
	}
	return nil
}

// syncPending makes the changes appended without a sync durable and
// publishes them (single broker; nothing when there are none).
func (m *Manager) syncPending() error {
	if m.cl != nil {
		return nil
	}
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	if len(m.pending) == 0 {
		return nil
	}
	if err := m.el.syncUnsynced(); err != nil {
		return err
	}
	m.publishPending()
	return nil
}

// publishPending publishes the pending changes, oldest first; the caller
// holds metaMu and has synced their records.
func (m *Manager) publishPending() {
	m.mu.Lock()
	m.applyPending(m.parts)
	m.mu.Unlock()
	clear(m.pending)
	m.pending = m.pending[:0]
}

// latest is k's metadata with the pending changes applied (the caller
// holds metaMu).
func (m *Manager) latest(k tp) *partitionMeta {
	for i := len(m.pending) - 1; i >= 0; i-- {
		if m.pending[i].k == k {
			return m.pending[i].next
		}
	}
	return m.get(k)
}

// current is k's metadata with the changes not yet published applied
// (the pass's view of its own deferred updates).
func (m *Manager) current(k tp) *partitionMeta {
	if m.cl != nil {
		return m.get(k)
	}
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	return m.latest(k)
}

// partsLatest is a copy of the partitions' metadata map with the pending
// changes applied (each value is immutable once made): what a compaction
// of the metadata log snapshots. The caller holds metaMu.
func (m *Manager) partsLatest() map[tp]*partitionMeta {
	m.mu.Lock()
	parts := maps.Clone(m.parts)
	m.mu.Unlock()
	m.applyPending(parts)
	return parts
}

// applyPending applies the pending changes to parts, oldest first (the
// caller holds metaMu).
func (m *Manager) applyPending(parts map[tp]*partitionMeta) {
	for _, p := range m.pending {
		if p.next == nil {
			delete(parts, p.k)
		} else {
			parts[p.k] = p.next
		}
	}
}

// RunOnce runs one pass: cleans up interrupted copies and deletions and
// the data of deleted topics, copies every rolled segment not yet copied
// of the logs with remote.storage.enable, and applies retention.ms and
// retention.bytes to their remote segments. Passes never overlap.
func (m *Manager) RunOnce(ctx context.Context) (err error) {
	m.run.Lock()
	defer m.run.Unlock()
	// What the pass appended without a sync is durable and published
	// before it ends (updateDeferred).
	defer func() { err = errors.Join(err, m.syncPending()) }()
	var errs []error
	if m.cl != nil {
		defer func() {
			if err := m.saveClusterSnapshot(); err != nil {
				m.log.Warn("remote-log metadata snapshot not saved", "err", err)
			}
		}()
		errs = append(errs, m.cleanupGone(ctx))
	} else {
		errs = append(errs, m.cleanup(ctx))
	}
	for _, t := range m.o.Engine.Topics() {
		if t.Deleted() {
			continue
		}
		for p := range t.Partitions() {
			l := t.Partition(p)
			if l == nil {
				continue
			}
			cfg := l.Config()
			if !cfg.RemoteStorageEnable {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if strings.Contains(cfg.CleanupPolicy, "compact") {
				continue // Kafka refuses tiered storage on compacted topics; nothing is copied
			}
			if m.cl != nil {
				// Only the partition's leader copies and deletes, once it
				// has applied the metadata up to the topic's end; it
				// first cleans up what older leaders left started.
				ready, err := m.leaderReady(ctx, l)
				if err != nil || !ready {
					errs = append(errs, err)
					continue
				}
				errs = append(errs, m.cleanupPartition(ctx, tp{l.TopicID(), p}))
			}
			errs = append(errs, m.copyLog(ctx, l))
			errs = append(errs, m.remoteRetention(ctx, l, cfg))
		}
	}
	return errors.Join(errs...)
}

// cleanup deletes the objects of segments left COPY_SEGMENT_STARTED or
// DELETE_SEGMENT_STARTED (a crash or a failed copy) and every segment of
// topics no longer in the engine.
func (m *Manager) cleanup(ctx context.Context) error {
	m.mu.Lock()
	parts := make(map[tp]*partitionMeta, len(m.parts))
	for k, v := range m.parts {
		parts[k] = v
	}
	m.mu.Unlock()
	var errs []error
	for k, pm := range parts {
		gone := m.o.Engine.TopicByID(k.id) == nil
		for _, s := range pm.Segments {
			if gone || s.State == CopyStarted || s.State == DeleteStarted {
				if err := m.deleteSegment(ctx, k, pm.Topic, s, 0); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if cur := m.current(k); gone && cur != nil && len(cur.Segments) == 0 {
			if err := m.update(k, pm.Topic, Event{Type: EventPartitionDeleted}); err != nil {
				errs = append(errs, err)
				continue
			}
			m.streams.forget(k)
		}
	}
	return errors.Join(errs...)
}

// copyLog copies the log's rolled segments past its CopiedEnd, oldest
// first; it stops at the first that fails.
func (m *Manager) copyLog(ctx context.Context, l *engine.Log) error {
	k := tp{l.TopicID(), l.Partition()}
	for _, s := range l.SealedSegments() {
		copied := int64(-1)
		if pm := m.get(k); pm != nil {
			copied = pm.CopiedEnd
		}
		if s.End <= copied || (s.Base < copied && m.cl == nil) {
			// In a cluster a new leader's segments need not end where
			// the old leader's did: one straddling the copied end is
			// copied whole (remote segments may overlap; reads take
			// either, their batches are the same).
			continue
		}
		if err := m.copySegment(ctx, l, k, s); err != nil {
			m.copyFailures.Add(1)
			return fmt.Errorf("rlm: copying %s-%d segment %d: %w", l.Topic(), l.Partition(), s.Base, err)
		}
	}
	return nil
}

// upload is one object of a segment being copied.
type upload struct {
	kind string
	size int64
	open func() io.Reader
}

// copySegment copies one sealed segment: COPY_SEGMENT_STARTED is
// persisted before the first object is written and
// COPY_SEGMENT_FINISHED (with each object's size and checksum) after the
// last is, so a segment is never referenced half-written.
func (m *Manager) copySegment(ctx context.Context, l *engine.Log, k tp, s engine.SealedSegment) error {
	f, err := l.OpenSealedSegment(s.Base)
	if errors.Is(err, engine.ErrSegmentGone) {
		return nil // retention or truncation took it first
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if f.ProducerSnapshot == nil {
		// Kafka's copy requires the segment's producer snapshot too: a
		// replica restored from a segment without one would take its
		// producers' retries as new records. The engine rebuilds a
		// missing one, so this is not expected.
		return fmt.Errorf("no producer snapshot at %d", s.End)
	}
	if now := m.o.Now(); m.o.CopySpread > 0 && (now.Sub(m.lagAt) >= lagRefresh || m.copyBacklog.Load() <= 0) {
		// The spread's pace is set by the backlog as this copy starts
		// (segments sealed since the pass began included), at most once
		// a lagRefresh: Lag walks every tiered partition's sealed
		// segments, and at a copy's start with 96 partitions that was
		// 2.8 % of a keyed 100,000 records/s broker's CPU, growing with
		// the local segments waiting to be copied.
		_, backlog := m.Lag()
		m.copyBacklog.Store(backlog)
		m.lagAt = now
	}
	seg := Segment{
		ID: newSegmentID(), Base: s.Base, End: s.End, MaxTimestamp: s.MaxTimestamp, Size: s.Size,
		LeaderEpoch: s.LeaderEpoch, State: CopyStarted, EventMs: m.o.Now().UnixMilli(),
	}
	epoch := m.epochOf(k)
	if err := m.update(k, l.Topic(), Event{Type: string(CopyStarted), LeaderEpoch: epoch, EventMs: seg.EventMs, Segment: &seg}); err != nil {
		return err
	}
	ups := []upload{{KindLog, s.Size, func() io.Reader { return io.NewSectionReader(f.Log, 0, s.Size) }}}
	for _, x := range []struct {
		kind string
		b    []byte
	}{
		{KindOffsetIndex, f.OffsetIndex}, {KindTimeIndex, f.TimeIndex}, {KindTxnIndex, f.TxnIndex},
		{KindSnapshot, f.ProducerSnapshot}, {KindEpochs, f.LeaderEpochCheckpoint},
	} {
		if x.b != nil {
			b := x.b
			ups = append(ups, upload{x.kind, int64(len(b)), func() io.Reader { return bytes.NewReader(b) }})
		}
	}
	files := map[string]FileMeta{}
	var total int64
	sp, oneRead := m.o.Store.(objstore.SumPutter)
	for _, u := range ups {
		key := ObjectKey(l.Topic(), l.Partition(), s.Base, seg.ID, u.kind)
		var sum objstore.Sum
		if !oneRead || u.kind != KindLog {
			var n int64
			var err error
			if sum, n, err = objstore.SumReader(u.open(), make([]byte, min(1<<20, max(u.size, 1)))); err != nil || n != u.size {
				return fmt.Errorf("reading %s: %d of %d bytes: %v", u.kind, n, u.size, err)
			}
		}
		putStart := m.o.Now()
		err := m.retry(ctx, "put "+key, func(ctx context.Context) error {
			if oneRead && u.kind == KindLog {
				// The segment is read once, with O_DIRECT (its bytes
				// are not in the page cache, and a copy should not put
				// them there), and hashed once, where a sum first and
				// a put after read and hash it twice: CPU the produce
				// path competes with.
				r := f.LogReader()
				defer r.Close()
				info, err := sp.PutSum(ctx, key, m.pacedReader(ctx, r, true), u.size)
				sum = info.Sum
				return err
			}
			_, err := m.o.Store.Put(ctx, key, m.pacedReader(ctx, u.open(), u.kind == KindLog), u.size, sum)
			return err
		})
		m.copyNanos.Add(int64(m.o.Now().Sub(putStart)))
		if err != nil {
			return err
		}
		files[u.kind] = FileMeta{Size: u.size, Checksum: sum.String()}
		total += u.size
	}
	err = m.updateDeferred(k, l.Topic(), Event{Type: string(CopyFinished), LeaderEpoch: epoch,
		Segment: &Segment{ID: seg.ID, Base: seg.Base, End: seg.End, Files: files}})
	if errors.Is(err, errFenced) {
		// Deposed while copying (cluster mode): no metadata will name
		// these objects (the new leader may have cleaned up the
		// COPY_SEGMENT_STARTED entry already), so they go now.
		for _, u := range ups {
			key := ObjectKey(l.Topic(), l.Partition(), s.Base, seg.ID, u.kind)
			if derr := m.retry(ctx, "delete "+key, func(ctx context.Context) error { return m.o.Store.Delete(ctx, key) }); derr != nil {
				m.log.Warn("deleting a fenced copy's object", "key", key, "err", derr)
			}
		}
	}
	if err != nil {
		return err
	}
	m.copied.Add(1)
	m.bytesCopied.Add(total)
	m.log.Debug("segment copied", "log", fmt.Sprintf("%s-%d", l.Topic(), l.Partition()), "base", s.Base, "end", s.End, "id", seg.ID, "bytes", total)
	return nil
}

// remoteRetention deletes the remote segments retention.ms or
// retention.bytes let go: oldest first, only segments no longer local
// (local retention, never longer than the whole log's, deletes the local
// copy first), counting the partition's bytes as the local log's plus
// the remote-only segments'.
func (m *Manager) remoteRetention(ctx context.Context, l *engine.Log, cfg engine.LogConfig) error {
	k := tp{l.TopicID(), l.Partition()}
	pm := m.current(k) // this pass's copies of the partition included
	if pm == nil || !strings.Contains(cfg.CleanupPolicy, "delete") {
		return nil
	}
	if cfg.RetentionMs < 0 && cfg.RetentionBytes < 0 && pm.LogStart == 0 {
		return nil
	}
	localStart := l.LogStartOffset()
	total := l.SizeBytes()
	var finished []Segment
	for _, s := range pm.Segments {
		if s.State == CopyFinished {
			finished = append(finished, s)
			if s.End <= localStart {
				total += s.Size
			}
		}
	}
	nowMs := m.o.Now().UnixMilli()
	var errs []error
	for _, s := range finished {
		if s.End > localStart {
			break
		}
		ts := s.MaxTimestamp
		if ts < 0 {
			ts = s.EventMs // no record timestamp: judged by its copy time
		}
		expired := cfg.RetentionMs >= 0 && nowMs-ts > cfg.RetentionMs
		over := cfg.RetentionBytes >= 0 && total-s.Size >= cfg.RetentionBytes
		if !expired && !over && s.End > pm.LogStart {
			break
		}
		total -= s.Size
		if err := m.deleteSegment(ctx, k, l.Topic(), s, m.epochOf(k)); err != nil {
			errs = append(errs, err)
			break
		}
	}
	return errors.Join(errs...)
}

// deleteSegment persists DELETE_SEGMENT_STARTED, deletes every object the
// segment may have, then drops it from the metadata
// (DELETE_SEGMENT_FINISHED).
func (m *Manager) deleteSegment(ctx context.Context, k tp, topic string, s Segment, epoch int32) error {
	ref := &Segment{ID: s.ID, Base: s.Base, End: s.End}
	if s.State != DeleteStarted {
		if err := m.update(k, topic, Event{Type: string(DeleteStarted), LeaderEpoch: epoch, Segment: ref}); err != nil {
			return err
		}
	}
	m.dropSegment(s.ID)
	for _, kind := range allKinds {
		key := ObjectKey(topic, k.p, s.Base, s.ID, kind)
		if err := m.retry(ctx, "delete "+key, func(ctx context.Context) error { return m.o.Store.Delete(ctx, key) }); err != nil {
			return err
		}
	}
	if err := m.updateDeferred(k, topic, Event{Type: string(DeleteFinished), LeaderEpoch: epoch, Segment: ref}); err != nil {
		return err
	}
	m.deleted.Add(1)
	return nil
}

// retry runs fn, each call bounded by OpTimeout, until it succeeds: after
// a failure it waits (BackoffMin doubling to BackoffMax) and tries again.
// A permanent error is given up after three tries; any error once ctx is
// done.
func (m *Manager) retry(ctx context.Context, op string, fn func(context.Context) error) error {
	d := m.o.BackoffMin
	for attempt := 1; ; attempt++ {
		octx, cancel := context.WithTimeout(ctx, m.o.OpTimeout)
		err := fn(octx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		if objstore.IsPermanent(err) && attempt >= 3 {
			return err
		}
		m.retries.Add(1)
		m.log.Warn("object store call failed; retrying", "op", op, "attempt", attempt, "backoff", d, "err", err)
		if serr := m.o.Sleep(ctx, d); serr != nil {
			return err
		}
		d = min(2*d, m.o.BackoffMax)
	}
}

// pacedReader is r read at the copy pace (copyRate): each Read first
// waits until the bytes earlier Reads returned fit the pace, and its own
// bytes are counted from when it started (pace.go), so a copy's device
// reads and hashing are spread evenly instead of arriving in bursts. An
// attempt that fails and is retried counts its bytes again: they were
// read again. A segment's .log bytes (log) also come off the backlog the
// spread pace is computed from.
func (m *Manager) pacedReader(ctx context.Context, r io.Reader, log bool) io.Reader {
	if m.copyPace == nil {
		return r
	}
	return &pacedReader{ctx: ctx, r: r, m: m, log: log}
}

type pacedReader struct {
	ctx context.Context
	r   io.Reader
	m   *Manager
	log bool
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if d := p.m.copyPace.delay(p.m.o.Now()); d > 0 {
		p.m.copyThrottleNanos.Add(int64(d))
		if err := p.m.o.Sleep(p.ctx, d); err != nil {
			return 0, err
		}
	}
	start := p.m.o.Now()
	n, err := p.r.Read(b)
	if n > 0 {
		backlog := p.m.copyBacklog.Load()
		if p.log {
			backlog = p.m.copyBacklog.Add(-int64(n))
		}
		if rate := p.m.copyRate(backlog); rate > 0 {
			p.m.copyPace.chargeAt(start, int64(n), rate)
		}
	}
	return n, err
}

// copyRate is the copy pace for a backlog of that many bytes: the
// smaller of CopyMaxBytesPerSecond and the spread's pace (pace.go,
// copySpreadRate); 0 when neither is set.
func (m *Manager) copyRate(backlog int64) int64 {
	rate := m.copyPace.rate
	if s := copySpreadRate(max(backlog, 0), m.o.CopySpread); s > 0 && (rate == 0 || s < rate) {
		rate = s
	}
	return rate
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
