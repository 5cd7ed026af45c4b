package rlm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/stratalog/strata/internal/vfs"
)

// The single broker's metadata log (see doc.go, "Metadata"). Every state
// change is one record appended to eventLogName and made durable by an
// fdatasync of that file (zero-filled at its creation, so the append is
// an overwrite of written blocks: the data and a device cache flush, no
// file-system metadata): its own, or for a change the manager may publish
// late (a copy's COPY_SEGMENT_FINISHED, a deletion's
// DELETE_SEGMENT_FINISHED: Manager.updateDeferred) the next record's; the
// partitions' JSON files are snapshots, written
// only when the log is compacted (it is full, or at Open after a replay),
// each holding the sequence number of the last record it includes.
//
// Layout: a 4 KiB header block, then records back to back.
//
//	header  two slots, at 0 and 512 (in different sectors), each:
//	        magic "STRATARL" | version u32 = 1 | crc u32 (CRC-32C of base) | base u64
//	record  length u32 (of value) | crc u32 (CRC-32C of seq and value) | seq u64 | value (EncodeEvent)
//
// A compaction writes the new base into the slot that does not hold the
// current one, so a torn header write leaves the other slot, and the
// valid slot with the higher base is the log's.
// Records carry consecutive sequence numbers from the header's base; a
// replay applies them in order from the base and stops at the first
// record that is torn, fails its CRC or does not carry the next number:
// what a crash cut before its fdatasync returned (never acknowledged), or
// the records of an older generation behind a compaction's new ones
// (their numbers are below the base). A record is skipped for a partition
// whose snapshot already holds its number (a crash between a compaction's
// snapshots and its new header replays records the snapshots include).

const (
	eventLogName   = "remote-log-metadata.log"
	eventLogHeader = 4096
	eventRecHeader = 16
	eventSlotBytes = 512
	eventLogMagic  = "STRATARL"
)

// eventLogBytes is the log file's size (a variable for tests): at about
// 300 bytes a record, some 28,000 state changes between compactions.
var eventLogBytes int64 = 8 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// eventLog is the open metadata log. Its methods are called with the
// manager's metaMu held (updates are serialized).
type eventLog struct {
	fsys  vfs.FS
	dir   string
	f     vfs.File
	size  int64
	off   int64  // where the next record goes
	next  uint64 // the next record's sequence number
	slot  int    // the header slot holding the current base
	dirty map[tp]bool
	buf   []byte
	// unsynced: records were appended since the last fdatasync.
	unsynced bool
}

// replayed is the metadata loadState found: the partitions, those the
// log's records changed (dirty), and, when the log exists (found), the
// offset after its last valid record (end), the next sequence number and
// the header slot holding its base.
type replayed struct {
	parts map[tp]*partitionMeta
	dirty map[tp]bool
	end   int64
	next  uint64
	slot  int
	found bool
}

// loadState reads the metadata in dir: the partitions' snapshots, then
// the log's records past them. It changes nothing on disk.
func loadState(fsys vfs.FS, dir string) (replayed, error) {
	parts, err := loadMetas(fsys, dir)
	if err != nil {
		return replayed{}, err
	}
	r := replayed{parts: parts, dirty: map[tp]bool{}}
	b, err := vfs.ReadFileLimit(fsys, filepath.Join(dir, eventLogName), 1<<30)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return replayed{}, fmt.Errorf("rlm: %s: %w", eventLogName, err)
	}
	base, slot, err := parseEventLogHeader(b)
	if err != nil {
		return replayed{}, err
	}
	r.found, r.slot, r.next, r.end = true, slot, base, eventLogHeader
	for {
		seq, value, n := nextEventRecord(b, r.end, r.next)
		if n == 0 {
			return r, nil
		}
		ev, err := DecodeEvent(value)
		if err != nil {
			return replayed{}, fmt.Errorf("rlm: %s record %d: %w", eventLogName, seq, err)
		}
		id, err := parseTopicID(ev.TopicID)
		if err != nil {
			return replayed{}, fmt.Errorf("rlm: %s record %d: %w", eventLogName, seq, err)
		}
		k := tp{id, ev.Partition}
		if pm := parts[k]; pm == nil || pm.Seq < seq {
			pm = cloneMeta(pm, k, ev.Topic)
			if applyEvent(pm, ev) {
				delete(parts, k)
			} else {
				pm.Seq = seq
				parts[k] = pm
			}
			r.dirty[k] = true
		}
		r.end += n
		r.next++
	}
}

// parseEventLogHeader returns the log's base sequence number and the
// slot holding it: the valid slot with the higher base.
func parseEventLogHeader(b []byte) (base uint64, slot int, err error) {
	if len(b) < eventLogHeader {
		return 0, 0, fmt.Errorf("rlm: %s: not a metadata log", eventLogName)
	}
	found := false
	for i := range 2 {
		h := b[i*eventSlotBytes:]
		if string(h[:8]) != eventLogMagic || binary.BigEndian.Uint32(h[8:]) != 1 ||
			crc32.Checksum(h[16:24], castagnoli) != binary.BigEndian.Uint32(h[12:]) {
			continue
		}
		if v := binary.BigEndian.Uint64(h[16:]); !found || v > base {
			base, slot, found = v, i, true
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("rlm: %s: no valid header (not a metadata log, or a version this broker does not read)", eventLogName)
	}
	return base, slot, nil
}

// nextEventRecord parses the record at off of log b if it is whole, its
// CRC matches and it carries seq; n is its length (0: the log ends here).
func nextEventRecord(b []byte, off int64, seq uint64) (got uint64, value []byte, n int64) {
	if off+eventRecHeader > int64(len(b)) {
		return 0, nil, 0
	}
	h := b[off : off+eventRecHeader]
	l := int64(binary.BigEndian.Uint32(h))
	if l == 0 || off+eventRecHeader+l > int64(len(b)) || binary.BigEndian.Uint64(h[8:]) != seq {
		return 0, nil, 0
	}
	if crc32.Checksum(b[off+8:off+eventRecHeader+l], castagnoli) != binary.BigEndian.Uint32(h[4:]) {
		return 0, nil, 0
	}
	return seq, b[off+eventRecHeader : off+eventRecHeader+l], eventRecHeader + l
}

// openEventLog loads the metadata in dir and opens its log for appends,
// creating it (after the snapshots' newest sequence number) when there is
// none, and compacting it when a replay found records.
func openEventLog(fsys vfs.FS, dir string) (*eventLog, map[tp]*partitionMeta, error) {
	r, err := loadState(fsys, dir)
	if err != nil {
		return nil, nil, err
	}
	parts := r.parts
	el := &eventLog{fsys: fsys, dir: dir, dirty: r.dirty, size: eventLogBytes}
	path := filepath.Join(dir, eventLogName)
	if !r.found {
		// No log: the snapshots are the whole state (as a broker that kept
		// one JSON file per partition and no log left them).
		next := uint64(1)
		for _, pm := range parts {
			next = max(next, pm.Seq+1)
		}
		if err := el.create(path, next); err != nil {
			return nil, nil, err
		}
		return el, parts, nil
	}
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("rlm: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("rlm: %w", err)
	}
	el.f, el.size, el.off, el.next, el.slot = f, st.Size(), r.end, r.next, r.slot
	if len(r.dirty) > 0 {
		if err := el.compact(parts); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	return el, parts, nil
}

// create makes a zero-filled log file of el.size bytes whose header
// starts at base, durable with its directory entry before it has its
// name.
func (el *eventLog) create(path string, base uint64) error {
	tmp := vfs.TmpPath(path)
	f, err := el.fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("rlm: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		el.fsys.Remove(tmp)
		return fmt.Errorf("rlm: creating %s: %w", eventLogName, err)
	}
	zeros := make([]byte, min(el.size, 1<<20))
	for off := int64(0); off < el.size; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), el.size-off)], off); err != nil {
			return fail(err)
		}
	}
	if _, err := f.WriteAt(headerSlot(base), 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := el.fsys.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := el.fsys.SyncDir(el.dir); err != nil {
		f.Close()
		return fmt.Errorf("rlm: creating %s: %w", eventLogName, err)
	}
	el.f, el.off, el.next, el.slot = f, eventLogHeader, base, 0
	return nil
}

// headerSlot is a header slot holding base.
func headerSlot(base uint64) []byte {
	h := make([]byte, 24)
	copy(h[:8], eventLogMagic)
	binary.BigEndian.PutUint32(h[8:], 1)
	binary.BigEndian.PutUint64(h[16:], base)
	binary.BigEndian.PutUint32(h[12:], crc32.Checksum(h[16:24], castagnoli))
	return h
}

// writeHeader starts a generation at el.next, in the other header slot:
// records follow the header from its end.
func (el *eventLog) writeHeader() error {
	slot := 1 - el.slot
	if _, err := el.f.WriteAt(headerSlot(el.next), int64(slot*eventSlotBytes)); err != nil {
		return fmt.Errorf("rlm: writing %s: %w", eventLogName, err)
	}
	if err := vfs.Datasync(el.f); err != nil {
		return fmt.Errorf("rlm: syncing %s: %w", eventLogName, err)
	}
	el.slot, el.off = slot, eventLogHeader
	el.unsynced = false // the sync covered every record before the header
	return nil
}

// append adds ev (of partition k) to the log and returns its sequence
// number: it writes the record and, when sync is set, fdatasyncs the file,
// which makes this record and every one appended before it without a
// sync durable; without sync the record is durable only after the next
// append with sync or syncUnsynced. parts gives the state to snapshot if
// the log must be compacted first (every record appended so far applied,
// those not synced yet included).
func (el *eventLog) append(k tp, ev Event, parts func() map[tp]*partitionMeta, sync bool) (uint64, error) {
	if el.f == nil {
		return 0, errors.New("rlm: the remote log manager is closed")
	}
	value := EncodeEvent(ev)
	n := int64(eventRecHeader + len(value))
	if eventLogHeader+n > el.size {
		return 0, fmt.Errorf("rlm: a metadata event of %d bytes does not fit %s", len(value), eventLogName)
	}
	if el.off+n > el.size {
		if err := el.compact(parts()); err != nil {
			return 0, err
		}
	}
	var h [eventRecHeader]byte
	b := append(append(el.buf[:0], h[:]...), value...)
	binary.BigEndian.PutUint32(b, uint32(len(value)))
	binary.BigEndian.PutUint64(b[8:], el.next)
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(b[8:], castagnoli))
	el.buf = b
	if _, err := el.f.WriteAt(b, el.off); err != nil {
		return 0, fmt.Errorf("rlm: writing %s: %w", eventLogName, err)
	}
	seq := el.next
	el.off += n
	el.next++
	el.dirty[k] = true
	el.unsynced = true
	if sync {
		if err := el.syncUnsynced(); err != nil {
			return 0, err
		}
	}
	return seq, nil
}

// syncUnsynced makes the records appended without a sync durable (one
// fdatasync; nothing when there are none).
func (el *eventLog) syncUnsynced() error {
	if !el.unsynced {
		return nil
	}
	if el.f == nil {
		return errors.New("rlm: the remote log manager is closed")
	}
	if err := vfs.Datasync(el.f); err != nil {
		return fmt.Errorf("rlm: syncing %s: %w", eventLogName, err)
	}
	el.unsynced = false
	return nil
}

// compact writes the snapshot of every partition changed since the last
// compaction (removing the files of partitions dropped), then starts a
// new generation of the log at the next sequence number. A crash at any
// point leaves snapshots and records that replay to the same state.
func (el *eventLog) compact(parts map[tp]*partitionMeta) error {
	// The records not synced yet first: a crash then leaves the old
	// generation whole behind any snapshot written from parts (which
	// include them), not one partition's snapshot ahead of another's
	// replay cut short.
	if err := el.syncUnsynced(); err != nil {
		return err
	}
	keys := make([]tp, 0, len(el.dirty))
	for k := range el.dirty {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return string(keys[i].id[:]) < string(keys[j].id[:]) || keys[i].id == keys[j].id && keys[i].p < keys[j].p
	})
	for _, k := range keys {
		path := filepath.Join(el.dir, metaFileName(k.id, k.p))
		pm := parts[k]
		if pm == nil {
			if err := el.fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("rlm: %w", err)
			}
			continue
		}
		b, err := json.MarshalIndent(pm, "", " ")
		if err != nil {
			return err
		}
		if err := vfs.WriteFileSyncFS(el.fsys, vfs.TmpPath(path), append(b, '\n')); err != nil {
			return fmt.Errorf("rlm: saving metadata of %s-%d: %w", pm.Topic, pm.Partition, err)
		}
		if err := el.fsys.Rename(vfs.TmpPath(path), path); err != nil {
			return fmt.Errorf("rlm: %w", err)
		}
	}
	if len(keys) > 0 {
		if err := el.fsys.SyncDir(el.dir); err != nil {
			return fmt.Errorf("rlm: %w", err)
		}
	}
	if err := el.writeHeader(); err != nil {
		return err
	}
	clear(el.dirty)
	return nil
}

func (el *eventLog) close() error {
	if el == nil || el.f == nil {
		return nil
	}
	err := el.f.Close()
	el.f = nil
	return err
}
