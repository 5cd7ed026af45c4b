package engine

// The aborted transaction index (Kafka's TransactionIndex): one
// "<base>.txnindex" file per segment that holds an ABORT marker.
//
// When an ABORT marker of producer P is appended at offset M for a
// transaction whose first offset is F, the entry {P, F, M, LSO} goes to the
// index of the segment holding M, where LSO is the partition's first
// unstable offset once this transaction ended (the first offset of the
// oldest transaction still open, or M+1 when none). Layout, Kafka's,
// big-endian, 34 bytes per entry, in marker offset order:
//
//	int16 version (0)
//	int64 producer id
//	int64 first offset
//	int64 last offset (the marker's)
//	int64 last stable offset
//
// A segment's file is created at its first entry (most segments have none).
// An entry is written and fsynced before the marker that produced it can
// become durable (the directory is synced by the flush that makes the
// marker durable, after a roll or the file's creation), so a segment
// below the recovery point always has its complete index. A crash can leave
// entries for markers that did not survive: when the log is opened or
// truncated, entries whose marker is at or past the log end are cut off
// (the file is truncated to whole entries, a torn last entry too), and the
// producer-state replay (producers.go) appends the entries of the markers
// it replays that the index does not hold yet (the index's last marker
// offset tells). The cleaner carries a group's entries into the segment it
// writes (cleaner.go); the file is renamed and removed with its segment.
//
// In memory every segment keeps its entries (aborted, guarded by Log.idxMu;
// loaded once, at Open or when the segment is created): a read_committed
// Fetch (AbortedTransactions) collects, over the segments from the one
// holding the fetch offset on, every entry whose range overlaps the fetched
// range, stopping after a segment holding an entry whose LSO is at or past
// the range's end (no transaction open at that point started before it).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/record"
)

const (
	txnIndexSuffix     = ".txnindex"
	txnIndexEntryBytes = 2 + 8 + 8 + 8 + 8
	txnIndexVersion    = 0
	// maxTxnIndexBytes bounds what Open reads of one index (about 31
	// million entries; a segment holds far fewer markers).
	maxTxnIndexBytes = 1 << 30
)

// abortedTxn is one entry of an aborted transaction index.
type abortedTxn struct {
	pid         int64
	firstOffset int64
	lastOffset  int64 // offset of the ABORT marker
	lso         int64 // first unstable offset once the transaction ended
}

// AbortedTxn is an aborted transaction a read_committed fetch reports: the
// consumer drops the producer's batches from FirstOffset up to its ABORT
// marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

var errBadTxnIndex = errors.New("engine: bad transaction index")

func appendTxnIndexEntry(dst []byte, a abortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, txnIndexVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.pid))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.firstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.lastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(a.lso))
}

// decodeTxnIndex parses an index file's bytes. A partial entry at the end
// (a torn write) is ignored: whole reports how many bytes were whole
// entries. An entry with another version, negative offsets, first > last or
// a last offset not above the previous entry's is an error (the file is
// not an index this engine wrote).
func decodeTxnIndex(b []byte) (entries []abortedTxn, whole int, err error) {
	n := len(b) / txnIndexEntryBytes
	if n == 0 {
		return nil, 0, nil
	}
	entries = make([]abortedTxn, 0, n)
	prev := int64(-1)
	for i := 0; i < n; i++ {
		e := b[i*txnIndexEntryBytes:]
		if v := int16(binary.BigEndian.Uint16(e)); v != txnIndexVersion {
			return nil, 0, fmt.Errorf("%w: entry %d has version %d", errBadTxnIndex, i, v)
		}
		a := abortedTxn{
			pid:         int64(binary.BigEndian.Uint64(e[2:])),
			firstOffset: int64(binary.BigEndian.Uint64(e[10:])),
			lastOffset:  int64(binary.BigEndian.Uint64(e[18:])),
			lso:         int64(binary.BigEndian.Uint64(e[26:])),
		}
		if a.pid < 0 || a.firstOffset < 0 || a.lastOffset < a.firstOffset || a.lastOffset <= prev || a.lso < 0 {
			return nil, 0, fmt.Errorf("%w: entry %d {pid %d, first %d, last %d, lso %d}", errBadTxnIndex, i, a.pid, a.firstOffset, a.lastOffset, a.lso)
		}
		prev = a.lastOffset
		entries = append(entries, a)
	}
	return entries, n * txnIndexEntryBytes, nil
}

// txnPathOf returns the segment's current index path.
func (s *logSegment) txnPathOf() string {
	s.pathMu.Lock()
	defer s.pathMu.Unlock()
	return s.txnPath
}

// loadTxnIndex reads s's index file once (missing: no entries), keeping the
// entries whose marker lies below end. A last whole entry that does not
// decode after entries that do, or that this engine cannot have written
// (writtenEntry), is a torn write (its new size reached the disk before
// its bytes, which read as zeros) and is cut off like a partial one; a
// file that does not decode otherwise is logged and replaced by what the
// replay rebuilds; a file that cannot be read takes the engine offline.
// Caller holds Log.mu (or has the log to itself) and not idxMu.
func (l *Log) loadTxnIndex(s *logSegment, end int64) {
	if s.txnLoaded {
		return
	}
	path := s.txnPathOf()
	data, err := readTxnIndexFile(l.e.fs, path)
	var entries []abortedTxn
	whole := 0
	if err == nil {
		entries, whole, err = decodeTxnIndex(data)
	}
	if n := len(data) / txnIndexEntryBytes; errors.Is(err, errBadTxnIndex) && n > 0 {
		if e, w, perr := decodeTxnIndex(data[:(n-1)*txnIndexEntryBytes]); perr == nil {
			l.e.logger.Warn("cutting a torn last entry off the aborted transaction index", "path", path, "err", err)
			entries, whole, err = e, w, nil
		}
	} else if n := len(entries); n > 0 && !writtenEntry(entries[n-1]) {
		l.e.logger.Warn("cutting a torn last entry off the aborted transaction index", "path", path, "entry", entries[n-1])
		entries, whole = entries[:n-1], (n-1)*txnIndexEntryBytes
	}
	var cutErr error
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil && !errors.Is(err, errBadTxnIndex):
		// Unreadable, not bad: the file may be whole; leave it alone.
		entries = nil
		l.e.ioFailure("reading "+path, err)
	case err != nil:
		l.e.logger.Warn("discarding aborted transaction index", "path", path, "err", err)
		entries = nil
		cutErr = l.e.fs.Truncate(path, 0)
	case whole != len(data):
		cutErr = l.e.fs.Truncate(path, int64(whole))
	}
	if cutErr != nil {
		l.e.ioFailure("trimming "+path, cutErr)
	}
	l.idxMu.Lock()
	s.aborted, s.txnLoaded = entries, true
	l.idxMu.Unlock()
	if len(entries) > 0 {
		l.producers.txn.anyAborted.Store(true)
	}
	l.cutTxnIndex(s, end)
}

// writtenEntry reports whether a could have been written by this engine:
// its transaction has data before its marker (first < last: applyMarker
// indexes no transaction without a first offset) and its LSO, the first
// offset of a transaction still open or the marker's offset + 1, is not
// the marker's own offset. A torn write whose bytes read as zeros from
// the producer id on fails this (first = last = 0, or lso = last = 0).
func writtenEntry(a abortedTxn) bool { return a.firstOffset < a.lastOffset && a.lso != a.lastOffset }

func readTxnIndexFile(fsys vfs.FS, path string) ([]byte, error) {
	data, err := vfs.ReadFileLimit(fsys, path, maxTxnIndexBytes)
	if errors.Is(err, vfs.ErrTooLarge) {
		return nil, fmt.Errorf("%w: larger than %d bytes", errBadTxnIndex, maxTxnIndexBytes)
	}
	return data, err
}

// cutTxnIndex removes s's entries whose marker is at or past end (a
// truncated or recovered log), durably; a failure takes the engine
// offline. Caller holds Log.mu, not idxMu.
func (l *Log) cutTxnIndex(s *logSegment, end int64) {
	l.idxMu.RLock()
	k := len(s.aborted)
	for k > 0 && s.aborted[k-1].lastOffset >= end {
		k--
	}
	cut := k < len(s.aborted)
	l.idxMu.RUnlock()
	if !cut {
		return
	}
	path := s.txnPathOf()
	err := l.e.fs.Truncate(path, int64(k*txnIndexEntryBytes))
	if err == nil {
		err = vfs.SyncPathFS(l.e.fs, path)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// The entries past end may come back after a crash, under
		// markers appended later: stop writing (Kafka: the log directory
		// fails).
		l.e.ioFailure("truncating "+path, err)
	}
	l.idxMu.Lock()
	clear(s.aborted[k:])
	s.aborted = s.aborted[:k]
	l.idxMu.Unlock()
}

// addAbortedTxn appends a to the index of the segment holding its marker,
// unless that index already holds the marker (a replay over entries
// written before a restart). The entry is fsynced before returning; a
// failure takes the engine offline. Caller holds Log.mu.
func (l *Log) addAbortedTxn(a abortedTxn) error {
	segs := *l.segs.Load()
	i := floorSegment(segs, a.lastOffset)
	if i < 0 {
		return nil // below the log: nothing to index
	}
	s := segs[i]
	l.loadTxnIndex(s, l.logEnd.Load())
	l.idxMu.RLock()
	n := len(s.aborted)
	dup := n > 0 && s.aborted[n-1].lastOffset >= a.lastOffset
	l.idxMu.RUnlock()
	if dup {
		return nil
	}
	path := s.txnPathOf()
	f, err := l.e.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return l.e.ioFailure("opening "+path, err)
	}
	var buf [txnIndexEntryBytes]byte
	_, err = f.WriteAt(appendTxnIndexEntry(buf[:0], a), int64(n*txnIndexEntryBytes))
	if err == nil {
		err = l.e.syncFile(path, f.Sync)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return l.e.ioFailure("writing "+path, err)
	}
	if n == 0 {
		l.dirDirty = true // a new file: the flush that makes the marker durable syncs the directory
	}
	l.producers.txn.anyAborted.Store(true)
	l.idxMu.Lock()
	s.aborted = append(s.aborted, a)
	l.idxMu.Unlock()
	return nil
}

// AbortedTransactions appends to dst the aborted transactions that overlap
// the offsets [from, to): those whose marker is at or after from and whose
// first offset is below to (what a read_committed Fetch of that range
// returns). Safe for concurrent use; it takes no lock but idxMu (read).
func (l *Log) AbortedTransactions(dst []AbortedTxn, from, to int64) []AbortedTxn {
	return appendAborted(l, dst, from, to, func(a abortedTxn) AbortedTxn {
		return AbortedTxn{ProducerID: a.pid, FirstOffset: a.firstOffset}
	})
}

// abortedRange is AbortedTransactions with each transaction's ABORT marker
// offset (abortedTxn): for readers that skip aborted batches themselves.
func (l *Log) abortedRange(dst []abortedTxn, from, to int64) []abortedTxn {
	return appendAborted(l, dst, from, to, func(a abortedTxn) abortedTxn { return a })
}

// appendAborted appends conv of each aborted transaction of l overlapping
// [from, to) to dst (AbortedTransactions). conv captures nothing, so the
// walk allocates nothing beyond dst's growth.
func appendAborted[T any](l *Log, dst []T, from, to int64, conv func(abortedTxn) T) []T {
	if from >= to || !l.producers.txn.anyAborted.Load() {
		return dst
	}
	segs := *l.segs.Load()
	i := max(floorSegment(segs, from), 0)
	l.idxMu.RLock()
	defer l.idxMu.RUnlock()
	for ; i < len(segs); i++ {
		complete := false
		for _, a := range segs[i].aborted {
			if a.lastOffset >= from && a.firstOffset < to {
				dst = append(dst, conv(a))
			}
			if a.lso >= to {
				complete = true
			}
		}
		if complete {
			break
		}
	}
	return dst
}

// abortedSet is every aborted transaction of a log by producer, for the
// cleaner: records of aborted transactions must neither supersede older
// records of their keys nor survive cleaning.
type abortedSet map[int64][]abortedTxn

// abortedSet collects the aborted transactions of every segment.
func (l *Log) abortedSet() abortedSet {
	segs := *l.segs.Load()
	l.idxMu.RLock()
	defer l.idxMu.RUnlock()
	var set abortedSet
	for _, s := range segs {
		for _, a := range s.aborted {
			if set == nil {
				set = make(abortedSet)
			}
			set[a.pid] = append(set[a.pid], a)
		}
	}
	return set
}

// batchAborted reports whether h is a data batch of an aborted transaction.
func (set abortedSet) batchAborted(h *record.Header) bool {
	if len(set) == 0 || !h.Transactional() || h.Control() {
		return false
	}
	for _, a := range set[h.ProducerID] {
		if a.firstOffset <= h.BaseOffset && h.BaseOffset <= a.lastOffset {
			return true
		}
	}
	return false
}

// carryTxnIndex gives ns, the segment the cleaner writes for group, the
// aborted transactions of the group's segments, written (and fsynced) to
// <txnindex>.cleaned when there are any; swap renames it with the others.
func (w *segmentRewriter) carryTxnIndex(group []*logSegment, ns *logSegment) error {
	var all []abortedTxn
	w.l.idxMu.RLock()
	for _, s := range group {
		all = append(all, s.aborted...)
	}
	w.l.idxMu.RUnlock()
	ns.aborted, ns.txnLoaded = all, true
	if len(all) == 0 {
		return nil
	}
	buf := make([]byte, 0, len(all)*txnIndexEntryBytes)
	for _, a := range all {
		buf = appendTxnIndexEntry(buf, a)
	}
	path := ns.txnPath + cleanedSuffix
	f, err := w.e.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(buf)
	if err == nil {
		err = w.e.syncFile(path, f.Sync)
	}
	return errors.Join(err, f.Close())
}
