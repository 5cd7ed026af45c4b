package engine

import (
	"fmt"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/partitioner"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/record"
)

// Topic is a named set of partitions with a stable 16-byte topic id (persisted
// in each partition directory's partition.metadata, as Kafka does).
//
// The topic-level overrides and the effective config change at runtime
// (Engine.AlterTopicConfig): both are immutable values replaced whole, so
// readers load them without locks; Engine.adminMu serializes the writers.
type Topic struct {
	e         *Engine
	name      string
	id        [16]byte
	overrides atomic.Pointer[map[string]string] // never mutated; replaced whole
	cfg       atomic.Pointer[LogConfig]         // effective config; replaced whole
	parts     atomic.Pointer[[]*Log]            // replaced whole by CreatePartitions
	rr        atomic.Uint32                     // round-robin cursor for nil keys
	deleted   atomic.Bool
	// replicasOnly: partitions not hosted here have nil logs (cluster.go).
	replicasOnly atomic.Bool
}

func newTopic(e *Engine, name string, id [16]byte, overrides map[string]string, cfg LogConfig) *Topic {
	t := &Topic{e: e, name: name, id: id}
	if overrides == nil {
		overrides = map[string]string{}
	}
	t.overrides.Store(&overrides)
	t.cfg.Store(&cfg)
	empty := []*Log{}
	t.parts.Store(&empty)
	return t
}

func (t *Topic) logs() []*Log { return *t.parts.Load() }

func (t *Topic) Name() string      { return t.name }
func (t *Topic) ID() [16]byte      { return t.id }
func (t *Topic) Partitions() int32 { return int32(len(t.logs())) }
func (t *Topic) Config() LogConfig { return *t.cfg.Load() }
func (t *Topic) Deleted() bool     { return t.deleted.Load() }
func (t *Topic) String() string    { return t.name }

// Overrides returns a copy of the topic-level overrides (given at create,
// changed by Engine.AlterTopicConfig).
func (t *Topic) Overrides() map[string]string { return maps.Clone(*t.overrides.Load()) }

// Partition returns partition p's log, nil if out of range.
func (t *Topic) Partition(p int32) *Log {
	logs := t.logs()
	if p < 0 || int(p) >= len(logs) {
		return nil
	}
	return logs[p]
}

func (t *Topic) partition(p int32) (*Log, error) {
	if l := t.Partition(p); l != nil {
		return l, nil
	}
	return nil, fmt.Errorf("%w: %s-%d", ErrUnknownTopic, t.name, p)
}

// Record is one decoded record from Consume.
type Record struct {
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []RecordHeader
}

// RecordHeader is one record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

var (
	builderPool = sync.Pool{New: func() any { return new(record.Builder) }}
	bufPool     = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
)

// Produce appends one record and returns once it is durable (HW past it).
// It picks the partition with Kafka's murmur2 partitioner for non-nil keys
// (same as franz-go / the Java client) and round-robin for nil keys.
func (t *Topic) Produce(key, value []byte) (partition int32, offset int64, err error) {
	logs := t.logs()
	n := int32(len(logs))
	if n == 0 || t.deleted.Load() {
		return -1, -1, fmt.Errorf("%w: %s", ErrUnknownTopic, t.name)
	}
	if key != nil {
		partition = partitioner.KeyPartition(key, n)
	} else {
		partition = int32((t.rr.Add(1) - 1) % uint32(n))
	}
	if partition < 0 || partition >= n {
		return -1, -1, fmt.Errorf("engine: partitioner returned %d of %d", partition, n)
	}
	l := logs[partition]
	if l == nil {
		return partition, -1, fmt.Errorf("%w: %s-%d", ErrNotHosted, t.name, partition)
	}

	b := builderPool.Get().(*record.Builder)
	bp := bufPool.Get().(*[]byte)
	defer func() {
		builderPool.Put(b)
		*bp = (*bp)[:0]
		bufPool.Put(bp)
	}()
	now := t.e.nowMs()
	b.Reset(record.CodecNone, now)
	b.Add(now, key, value, nil)
	batch, err := b.AppendTo((*bp)[:0])
	if err != nil {
		return partition, -1, fmt.Errorf("engine: encoding record: %w", err)
	}
	*bp = batch
	info, err := l.Append(batch, l.LeaderEpoch())
	if err != nil {
		return partition, -1, err
	}
	done := make(chan error, 1)
	l.WhenDurable(info.LastOffset, func(err error) { done <- err })
	if err := <-done; err != nil {
		return partition, -1, err
	}
	return partition, info.BaseOffset, nil
}

// consumeReadBytes is how much Consume asks Read for per round.
const consumeReadBytes = 1 << 20

// Consume returns up to maxRecords records at offsets >= from, below the HW.
// from == HW returns none; from outside [logStart, logEnd] is
// ErrOffsetOutOfRange. Keys, values and headers are copies.
func (t *Topic) Consume(partition int32, from int64, maxRecords int) ([]Record, error) {
	return t.consume(partition, from, maxRecords, false)
}

// consume is Consume; dataOnly leaves out control records (transaction
// markers), as the embedded share groups need.
func (t *Topic) consume(partition int32, from int64, maxRecords int, dataOnly bool) ([]Record, error) {
	out, _, err := t.consumeAt(partition, from, maxRecords, dataOnly)
	return out, err
}

// consumeAt is consume that also returns the position after what it took:
// past the last record returned, and past the control records it left out
// behind it (dataOnly), as a Kafka consumer's position moves past
// transaction markers it never hands to the application. from when it
// took nothing.
func (t *Topic) consumeAt(partition int32, from int64, maxRecords int, dataOnly bool) ([]Record, int64, error) {
	pos := from
	l, err := t.partition(partition)
	if err != nil {
		return nil, pos, err
	}
	var out []Record
	// Each round consumes at least one batch, so rounds are bounded by maxRecords
	// plus the batches skipped below from; stop at the HW regardless.
	for len(out) < maxRecords {
		res, err := l.Read(from, consumeReadBytes, true)
		if err != nil {
			return out, pos, err
		}
		if len(res.Chunks) == 0 {
			res.Release()
			return out, pos, nil
		}
		c := res.Chunks[0]
		buf := make([]byte, c.Len)
		var rerr error
		if c.File != nil {
			_, rerr = c.File.ReadAt(buf, c.Pos)
		} else { // a segment on another file system (Options.fs): no *os.File
			_, rerr = res.seg.seg.ReadAt(buf, c.Pos)
		}
		res.Release()
		if rerr != nil {
			return out, pos, fmt.Errorf("engine: reading %s: %w", l, rerr)
		}
		next := from
		for rest := buf; len(rest) > 0 && len(out) < maxRecords; {
			batch, r, h, err := record.Next(rest)
			if err != nil {
				return out, pos, fmt.Errorf("engine: %s at %d: %w", l, from, err)
			}
			rest = r
			err = record.Iterate(batch, func(h *record.Header, r *record.Record) error {
				off := h.BaseOffset + int64(r.OffsetDelta)
				if off < from || off >= res.HighWatermark || len(out) >= maxRecords {
					return nil
				}
				if dataOnly && h.Control() {
					pos = off + 1 // a marker: passed, not returned
					return nil
				}
				pos = off + 1
				ts := h.BaseTimestamp + r.TimestampDelta
				if h.LogAppendTime() {
					ts = h.MaxTimestamp
				}
				rec := Record{Partition: partition, Offset: off, Timestamp: time.UnixMilli(ts),
					Key: cloneBytes(r.Key), Value: cloneBytes(r.Value)}
				if len(r.Headers) > 0 {
					rec.Headers = make([]RecordHeader, len(r.Headers))
					for i, hd := range r.Headers {
						rec.Headers[i] = RecordHeader{Key: hd.Key, Value: cloneBytes(hd.Value)}
					}
				}
				out = append(out, rec)
				return nil
			})
			if err != nil {
				return out, pos, fmt.Errorf("engine: decoding %s at %d: %w", l, h.BaseOffset, err)
			}
			next = max(next, h.LastOffset()+1)
		}
		if next <= from || next >= res.HighWatermark {
			return out, pos, nil
		}
		from = next
	}
	return out, pos, nil
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// HighWatermark returns partition's high watermark.
func (t *Topic) HighWatermark(partition int32) (int64, error) {
	l, err := t.partition(partition)
	if err != nil {
		return -1, err
	}
	return l.HighWatermark(), nil
}

// Truncate deletes partition's records below before (= Log.DeleteRecords).
func (t *Topic) Truncate(partition int32, before int64) error {
	l, err := t.partition(partition)
	if err != nil {
		return err
	}
	_, err = l.DeleteRecords(before)
	return err
}

// SetTopicConfig replaces the topic-level overrides of topic name with
// overrides (keys not listed return to the broker defaults) and applies them
// without a restart: the topic file is rewritten first (the commit point),
// then the new effective config is published to the topic and each of its
// logs (one atomic store each; an append in progress finishes under the
// config it loaded). segment.*, index.*, preallocate take effect at the next
// roll, except that a changed segment.index.bytes rolls each non-empty
// active segment now (its indexes were sized by the old value); retention
// and cleaner changes take effect at their next pass (both are woken).
// Unknown keys or bad values: ErrInvalidConfig; unknown topic:
// ErrUnknownTopic.
func (e *Engine) SetTopicConfig(name string, overrides map[string]string) error {
	next := maps.Clone(overrides)
	if next == nil {
		next = map[string]string{}
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	cfg, err := e.defaults.Apply(overrides) // defaults: under adminMu (SetLogDefaults)
	if err != nil {
		return err
	}
	if err := e.adminUsable(); err != nil {
		return err
	}
	t := e.Topic(name)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	old := t.cfg.Load()
	if err := vfs.WriteFileAtomicFS(e.fs, e.topicFile(name), formatTopicMetaOf(t, t.Partitions(), next)); err != nil {
		return e.ioFailure("writing topic "+name, err)
	}
	t.overrides.Store(&next)
	t.cfg.Store(&cfg)
	for _, l := range t.hostedLogs() {
		if err := l.setConfig(&cfg, old.SegmentIndexBytes != cfg.SegmentIndexBytes); err != nil {
			return err
		}
	}
	e.kickRetention()
	e.kickCleaner()
	return nil
}

// setConfig publishes cfg to the log. With resizeIndexes the active
// segment's indexes no longer match segment.index.bytes: a non-empty active
// segment is rolled, an empty one gets its indexes reopened at the new size.
// An I/O failure takes the engine offline (outside Log.mu).
func (l *Log) setConfig(cfg *LogConfig, resizeIndexes bool) error {
	l.mu.Lock()
	l.cfg.Store(cfg)
	if !resizeIndexes || l.closed || l.active == nil {
		l.mu.Unlock()
		return nil
	}
	var err error
	if l.active.end.Load() > 0 {
		err = l.roll()
	} else {
		s := l.active
		l.idxMu.Lock()
		if err = s.closeIndexes(); err == nil {
			err = s.openActiveIndexes(cfg)
		}
		l.idxMu.Unlock()
	}
	l.mu.Unlock()
	if err != nil {
		return l.e.ioFailure(fmt.Sprintf("resizing the indexes of %s", l), err)
	}
	return nil
}
