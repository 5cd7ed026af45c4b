package engine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/internal/vfs"
)

// Tiered storage (KIP-405): the engine's side is narrow. A remote log
// manager (package remote/rlm) installs a RemoteHook with SetRemoteHook,
// lists each log's sealed segments (SealedSegments), reads one segment's
// files to copy them (OpenSealedSegment), and answers CopiedEnd, which
// gates local retention:
//
//   - A log whose remote.storage.enable is false is retained as before.
//   - With it true, local retention applies local.retention.ms/bytes
//     (LocalRetention: -2 takes retention.ms/bytes, and never more than
//     them) and deletes a sealed segment only when it lies wholly below
//     the hook's CopiedEnd for the log: a segment not copied to the
//     object store (COPY_FINISHED) is never deleted locally, whatever its
//     age or the partition's size. Without a hook installed nothing is
//     copied, so nothing of such a log is deleted by retention.
//
// Retention of the remote copies (retention.ms/bytes over local plus
// remote data) and reads below the local log start belong to the remote
// log manager: Log.LogStartOffset stays the local log start offset.

// RemoteMetadataDirName is the data directory's entry where `strata
// serve` keeps the remote log manager's metadata; Open leaves it alone.
const RemoteMetadataDirName = "__strata_remote_log_metadata"

// RemoteHook is what local retention asks the remote log manager.
type RemoteHook interface {
	// CopiedEnd is the offset below which the log's segments are all
	// copied to the object store (the end offset, exclusive, of the
	// newest segment in COPY_FINISHED state); -1 when none is.
	CopiedEnd(topicID [16]byte, topic string, partition int32) int64
}

// remoteHooks holds each Engine's hook, keyed by the Engine: a side
// table, so that tiered storage adds no state to the Engine itself. A
// map replaced whole under remoteHooksMu; readers load it without locks.
var (
	remoteHooksMu sync.Mutex
	remoteHooks   atomic.Pointer[map[*Engine]RemoteHook]
)

// SetRemoteHook installs the remote log manager's hook, replacing any
// (nil removes it; a stopping manager removes only its own hook with
// ClearRemoteHook).
func (e *Engine) SetRemoteHook(h RemoteHook) {
	remoteHooksMu.Lock()
	defer remoteHooksMu.Unlock()
	next := map[*Engine]RemoteHook{}
	if old := remoteHooks.Load(); old != nil {
		maps.Copy(next, *old)
	}
	if h == nil {
		delete(next, e)
	} else {
		next[e] = h
	}
	remoteHooks.Store(&next)
}

// ClearRemoteHook removes h if it is still e's hook: a manager stopping
// after another one replaced it (tests open several on one engine) leaves
// the newer hook in place.
func (e *Engine) ClearRemoteHook(h RemoteHook) {
	remoteHooksMu.Lock()
	defer remoteHooksMu.Unlock()
	old := remoteHooks.Load()
	if old == nil || (*old)[e] != h {
		return
	}
	next := maps.Clone(*old)
	delete(next, e)
	remoteHooks.Store(&next)
}

// remoteCopiedEnd is the hook's CopiedEnd for l, -1 without a hook.
func (e *Engine) remoteCopiedEnd(l *Log) int64 {
	m := remoteHooks.Load()
	if m == nil {
		return -1
	}
	h := (*m)[e]
	if h == nil {
		return -1
	}
	return h.CopiedEnd(l.topicID, l.topic, l.part)
}

// LocalRetention is the local retention of a log with remote storage:
// local.retention.ms and local.retention.bytes, where -2 takes
// retention.ms / retention.bytes and a local value above the whole
// log's (or -1, forever, under a bounded whole) is cut to it, since data
// past the log's retention is deleted everywhere (Kafka refuses such a
// config; this keeps the stricter bound).
func (c LogConfig) LocalRetention() (ms, bytes int64) {
	return localBound(c.LocalRetentionMs, c.RetentionMs), localBound(c.LocalRetentionBytes, c.RetentionBytes)
}

func localBound(local, whole int64) int64 {
	switch {
	case local == -2:
		return whole
	case whole >= 0 && (local < 0 || local > whole):
		return whole
	}
	return local
}

// TopicID returns the id of the log's topic.
func (l *Log) TopicID() [16]byte { return l.topicID }

// Topic returns the name of the log's topic.
func (l *Log) Topic() string { return l.topic }

// Partition returns the log's partition number.
func (l *Log) Partition() int32 { return l.part }

// Config returns the log's current config.
func (l *Log) Config() LogConfig { return *l.config() }

// EpochEntry is one leader-epoch cache entry: Epoch led from StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// SealedSegment describes a sealed segment wholly below the high
// watermark, as the remote log manager copies it.
type SealedSegment struct {
	Base         int64 // first offset
	End          int64 // the next segment's base: the segment holds [Base, End)
	Size         int64 // bytes of the .log file
	MaxTimestamp int64 // largest record timestamp, -1 if none
	// LeaderEpoch is the epoch of the segment's last batch (the newest
	// entry of the leader-epoch cache starting below End), -1 if unknown.
	LeaderEpoch int32
}

// SealedSegments lists the log's sealed segments wholly below the high
// watermark whose bytes are all written to their file, oldest first.
func (l *Log) SealedSegments() []SealedSegment {
	segs := *l.segs.Load()
	hw := l.hw.Load()
	l.epochMu.Lock()
	epochs := l.epochs.snapshot()
	l.epochMu.Unlock()
	var out []SealedSegment
	l.idxMu.RLock()
	defer l.idxMu.RUnlock()
	for i := 0; i+1 < len(segs); i++ {
		s, next := segs[i], segs[i+1]
		if !s.sealed || next.base > hw || s.readEnd() != s.end.Load() {
			break
		}
		ep := int32(-1)
		for _, e := range epochs {
			if e.StartOffset < next.base {
				ep = e.Epoch
			}
		}
		out = append(out, SealedSegment{Base: s.base, End: next.base, Size: s.end.Load(), MaxTimestamp: s.maxTs, LeaderEpoch: ep})
	}
	return out
}

// SegmentFiles is a sealed segment opened for copying: its .log bytes
// (Log, Size bytes) and whatever of its other files the engine has (nil
// when absent). Close releases the segment; its files stay valid until
// then even if retention deletes the segment meanwhile.
type SegmentFiles struct {
	Segment SealedSegment
	Log     io.ReaderAt
	// OffsetIndex and TimeIndex are the sealed indexes' bytes (Kafka's
	// formats: 8-byte relative offset/position and 12-byte
	// timestamp/relative offset entries).
	OffsetIndex, TimeIndex []byte
	// TxnIndex is the aborted-transaction index (.txnindex), nil if the
	// segment has none.
	TxnIndex []byte
	// ProducerSnapshot is the producer-state snapshot at End: the one the
	// roll that sealed the segment wrote, or, if the engine no longer
	// keeps it, one rebuilt from the log (remote_snapshot.go). Never nil.
	ProducerSnapshot []byte
	// LeaderEpochCheckpoint is the leader-epoch checkpoint's text with
	// the entries starting below End.
	LeaderEpochCheckpoint []byte

	s   *logSegment
	mem *copyMem // the segment's bytes in memory (copycache.go), nil to read the file
}

// LogReader returns a reader of the .log's Size bytes for a one-pass
// copy: the copy cache's memory when the roll left the segment's bytes
// there (copycache.go), else O_DIRECT reads into a buffer of its own on
// a real file (segment.SequentialReader), so an upload neither fills the
// page cache nor pays for it. Close it before f.
func (f *SegmentFiles) LogReader() io.ReadCloser {
	if f.mem != nil {
		return &copyMemReader{m: f.mem}
	}
	return f.s.seg.SequentialReader(f.Segment.Size)
}

// Close releases the segment.
func (f *SegmentFiles) Close() {
	if f.mem != nil {
		f.mem.release()
		f.mem = nil
	}
	if f.s != nil {
		f.s.seg.Unpin()
		f.s.release()
		f.s = nil
	}
}

// ErrSegmentGone is OpenSealedSegment's answer for a segment no longer
// in the log (deleted, truncated or compacted away).
var ErrSegmentGone = errors.New("engine: segment no longer in the log")

// OpenSealedSegment opens the sealed segment based at base for copying.
func (l *Log) OpenSealedSegment(base int64) (*SegmentFiles, error) {
	var seg SealedSegment
	found := false
	for _, s := range l.SealedSegments() {
		if s.Base == base {
			seg, found = s, true
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %s base %d", ErrSegmentGone, l, base)
	}
	segs := *l.segs.Load()
	i := floorSegment(segs, base)
	if i < 0 || segs[i].base != base || !segs[i].acquire() {
		return nil, fmt.Errorf("%w: %s base %d", ErrSegmentGone, l, base)
	}
	s := segs[i]
	s.seg.Pin()
	f := &SegmentFiles{Segment: seg, Log: s.seg, s: s}
	if m := s.copyMem.Swap(nil); m != nil && m.n == seg.Size {
		f.mem, f.Log = m, m // copycache.go: the copy reads memory
		m.pool.hits.Add(1)
	} else {
		if m != nil {
			m.release()
		}
		if p := l.e.copies; p != nil && l.config().RemoteStorageEnable {
			p.misses.Add(1)
		}
	}
	_, offPath, timPath := s.paths()
	fsys := s.fsys()
	var err error
	if f.OffsetIndex, err = readOptional(fsys, offPath); err != nil {
		f.Close()
		return nil, err
	}
	if f.TimeIndex, err = readOptional(fsys, timPath); err != nil {
		f.Close()
		return nil, err
	}
	if f.TxnIndex, err = readOptional(fsys, s.txnPathOf()); err != nil {
		f.Close()
		return nil, err
	}
	if f.ProducerSnapshot, err = l.segmentSnapshot(seg); err != nil { // remote_snapshot.go
		f.Close()
		return nil, err
	}
	l.epochMu.Lock()
	var entries []epochEntry
	for _, e := range l.epochs.snapshot() {
		if e.StartOffset < seg.End {
			entries = append(entries, e)
		}
	}
	l.epochMu.Unlock()
	f.LeaderEpochCheckpoint = formatEpochCheckpoint(entries)
	return f, nil
}

// readOptional reads a whole file, nil when it does not exist.
func readOptional(fsys vfs.FS, path string) ([]byte, error) {
	fh, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("engine: %s: %w", filepath.Base(path), err)
	}
	defer fh.Close()
	b, err := io.ReadAll(fh)
	if err != nil {
		return nil, fmt.Errorf("engine: %s: %w", filepath.Base(path), err)
	}
	return b, nil
}
