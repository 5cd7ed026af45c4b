package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/segment"
)

// openForReplay opens a segment file for the replay's writes: through the
// test file layer when the engine has one, else the OS file.
func openForReplay(e *Engine, path string) (segment.File, error) {
	if e.io.files != nil {
		if _, err := e.fs.Stat(path); err != nil {
			return nil, err
		}
		return e.io.files.Open(path)
	}
	f, err := e.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return segmentFileOf(f), nil
}

// journalGroupRef locates one valid group found by the replay scan.
type journalGroupRef struct {
	file     int
	off      int64
	length   int
	count    uint32
	firstSeq uint64
	startSeq uint64
	area     int // where the payload area starts (ref groups), else 0
}

// recEnd is where g's records end: its payload area, or its end.
func (g journalGroupRef) recEnd() int {
	if g.area > 0 {
		return g.area
	}
	return g.length
}

// replayStats is what replayJournal found and did.
type replayStats struct {
	next     uint64 // the next record number (past every record found)
	lastFile int    // the file holding the newest group
	fileLast [journalFiles]uint64
	records  int   // records at or past the start
	written  int   // write records written into their segments
	skipped  int   // write records not written (gone, barrier, other topic)
	bytes    int64 // payload bytes written
	// ends (Options.JournalEnds): each segment's durable end as the end
	// records at or past the start vouch for it (trustEnds), by path.
	ends map[string]int64
}

// endRec is an end record's span of its segment (journalRecEnd). flushed:
// a later group follows the record's, so its group's fdatasync completed
// (the writer writes a group only after the one before it is durable,
// except groups written ahead, which never hold end records: journal.go,
// "Writing ahead").
type endRec struct {
	from, end, endOffset int64
	flushed              bool
}

// scanJournalFile returns file i's valid groups, in order, up to the first
// that is torn, corrupt or breaks the numbering (a group of an earlier lap).
func scanJournalFile(f vfs.File, i int, size int64) ([]journalGroupRef, error) {
	var out []journalGroupRef
	hdr := make([]byte, journalGroupHdr)
	var buf []byte
	for off := int64(0); off+journalGroupHdr <= size; {
		if _, err := f.ReadAt(hdr, off); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		magic := binary.BigEndian.Uint32(hdr[0:])
		if magic != journalMagic && magic != journalMagicV1 && magic != journalMagicRef {
			break
		}
		n := int(binary.BigEndian.Uint32(hdr[8:]))
		if n < journalGroupHdr || off+int64(n) > size {
			break
		}
		g := journalGroupRef{file: i, off: off, length: n, count: binary.BigEndian.Uint32(hdr[12:]),
			firstSeq: binary.BigEndian.Uint64(hdr[16:]), startSeq: binary.BigEndian.Uint64(hdr[24:])}
		if magic == journalMagicRef {
			g.area = int(binary.BigEndian.Uint32(hdr[32:]))
			if g.area < journalGroupHdr || g.area > n || g.area%journalAlign != 0 {
				break
			}
		}
		if k := len(out); k > 0 && out[k-1].firstSeq+uint64(out[k-1].count) != g.firstSeq {
			break // an older lap's group
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if !validGroup(buf, g, magic) {
			break // torn (or a batch's CRC fails): never acknowledged
		}
		out = append(out, g)
		off += int64((n + journalAlign - 1) &^ (journalAlign - 1))
	}
	return out, nil
}

// validGroup reports whether the group g in buf (its bytes, header
// first; magic from its header) passes its checks: the checksum, every
// batch's CRC, and a ref record's spans inside the payload area with
// their prefix checksum.
func validGroup(buf []byte, g journalGroupRef, magic uint32) bool {
	want := binary.BigEndian.Uint32(buf[4:])
	if magic == journalMagicV1 {
		return crc32.Checksum(buf[8:g.length], journalCRC) == want
	}
	if sum, ok := groupChecksum(buf[:g.recEnd()], g.count, true); !ok || sum != want {
		return false
	}
	return g.area == 0 || forEachRecord(buf, g, func(uint64, journalRecord) error { return nil }) == nil
}

// journalRecord is one decoded record.
type journalRecord struct {
	typ     byte
	topicID [16]byte
	part    int32
	topic   string
	base    int64
	pos     int64
	payload []byte
}

// forEachRecord decodes group g's records (seq order) from buf.
func forEachRecord(buf []byte, g journalGroupRef, fn func(seq uint64, r journalRecord) error) error {
	p := journalGroupHdr
	for k := uint32(0); k < g.count; k++ {
		if p+journalRecHdr > len(buf) {
			return fmt.Errorf("journal: group at %d of file %d: record %d runs past the group", g.off, g.file, k)
		}
		n := int(binary.BigEndian.Uint32(buf[p:]))
		nameLen := int(binary.BigEndian.Uint16(buf[p+28:]))
		if n < journalRecHdr+nameLen || p+n > len(buf) {
			return fmt.Errorf("journal: group at %d of file %d: record %d has a bad length %d", g.off, g.file, k, n)
		}
		r := journalRecord{typ: buf[p+4], part: int32(binary.BigEndian.Uint32(buf[p+24:])),
			base: int64(binary.BigEndian.Uint64(buf[p+32:])), pos: int64(binary.BigEndian.Uint64(buf[p+40:]))}
		copy(r.topicID[:], buf[p+8:p+24])
		r.topic = string(buf[p+journalRecHdr : p+journalRecHdr+nameLen])
		r.payload = buf[p+journalRecHdr+nameLen : p+n]
		if buf[p+5]&journalFlagRef != 0 {
			payload, err := refPayload(buf, g, r.payload)
			if err != nil {
				return fmt.Errorf("journal: group at %d of file %d: record %d: %w", g.off, g.file, k, err)
			}
			r.payload = payload
		}
		if err := fn(g.firstSeq+uint64(k), r); err != nil {
			return err
		}
		p += n
	}
	return nil
}

// refPayload assembles a ref record's batches from its group's payload
// area (fields: the record's bytes after its topic name) and checks them:
// whole batches, each with a valid CRC, whose prefixes match the record's
// prefix checksum (the part of the group's checksum a write record's
// payload carries).
func refPayload(buf []byte, g journalGroupRef, fields []byte) ([]byte, error) {
	if g.area == 0 || len(fields) < journalRefHdr {
		return nil, fmt.Errorf("a ref record outside a ref group")
	}
	spans := int(binary.BigEndian.Uint16(fields[4:]))
	if len(fields) != journalRefHdr+journalRefSpan*spans || spans == 0 {
		return nil, fmt.Errorf("a ref record of %d bytes for %d spans", len(fields), spans)
	}
	area := buf[g.area:g.length]
	var out []byte
	for i := 0; i < spans; i++ {
		e := fields[journalRefHdr+journalRefSpan*i:]
		at := int64(binary.BigEndian.Uint32(e[0:])) + int64(binary.BigEndian.Uint32(e[4:]))
		n := int64(binary.BigEndian.Uint32(e[8:]))
		if at+n > int64(len(area)) {
			return nil, fmt.Errorf("a span of %d bytes at %d past the payload area's %d", n, at, len(area))
		}
		out = append(out, area[at:at+n]...)
	}
	for b := out; len(b) > 0; {
		if len(b) < 12 {
			return nil, fmt.Errorf("a partial batch")
		}
		size := 12 + int(int32(binary.BigEndian.Uint32(b[8:])))
		if size < record.HeaderSize || size > len(b) {
			return nil, fmt.Errorf("a batch of %d bytes in %d", size, len(b))
		}
		if !record.CheckCRC(b[:size]) {
			return nil, fmt.Errorf("a batch's CRC fails")
		}
		b = b[size:]
	}
	if batchPrefixSum(out) != binary.BigEndian.Uint32(fields[0:]) {
		return nil, fmt.Errorf("the batches' prefix checksum fails")
	}
	return out, nil
}

type journalKey struct {
	id   [16]byte
	part int32
}

// replayJournal writes the journal's records at or past its start into
// their segment files (see journal.go) and fsyncs what it wrote. It runs
// before any log is opened, so the normal recovery then finds the bytes.
func replayJournal(e *Engine, files []vfs.File, sizes []int64) (replayStats, error) {
	var rs replayStats
	var groups []journalGroupRef
	for i, f := range files {
		gs, err := scanJournalFile(f, i, sizes[i])
		if err != nil {
			return rs, fmt.Errorf("engine: journal: reading %s: %w", f.Name(), err)
		}
		for _, g := range gs {
			if g.count > 0 {
				rs.fileLast[i] = g.firstSeq + uint64(g.count) - 1
			}
		}
		groups = append(groups, gs...)
	}
	rs.next = 1
	if len(groups) == 0 {
		return rs, nil
	}
	sort.Slice(groups, func(a, b int) bool {
		if groups[a].firstSeq != groups[b].firstSeq {
			return groups[a].firstSeq < groups[b].firstSeq
		}
		return groups[a].count < groups[b].count // an empty group before the one that follows it
	})
	newest := groups[len(groups)-1]
	rs.lastFile = newest.file
	rs.next = max(newest.firstSeq+uint64(newest.count), 1)
	start := newest.startSeq
	// The groups holding records at or past start, which must follow one
	// another without a gap.
	var use []journalGroupRef
	for _, g := range groups {
		if g.firstSeq+uint64(g.count) <= start || g.count == 0 {
			continue
		}
		if len(use) == 0 && g.firstSeq > start {
			return rs, fmt.Errorf("engine: journal: records %d..%d are missing (the newest group says replay starts at %d)", start, g.firstSeq-1, start)
		}
		if k := len(use); k > 0 && use[k-1].firstSeq+uint64(use[k-1].count) != g.firstSeq {
			return rs, fmt.Errorf("engine: journal: records %d..%d are missing", use[k-1].firstSeq+uint64(use[k-1].count), g.firstSeq-1)
		}
		use = append(use, g)
	}
	read := func(g journalGroupRef) ([]byte, error) {
		buf := make([]byte, g.length)
		if _, err := files[g.file].ReadAt(buf, g.off); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return buf, nil
	}
	// Pass 1: each partition's last barrier.
	barriers := map[journalKey]uint64{}
	for _, g := range use {
		buf, err := read(g)
		if err != nil {
			return rs, err
		}
		if err := forEachRecord(buf, g, func(seq uint64, r journalRecord) error {
			if seq >= start && r.typ == journalRecBarrier {
				barriers[journalKey{r.topicID, r.part}] = seq
			}
			return nil
		}); err != nil {
			return rs, err
		}
	}
	// Pass 2: the write records no barrier cancels (and the end records).
	endsOf := map[string][]endRec{}
	owner := map[string]bool{} // partition directory -> holds that topic id
	mine := func(pdir string, id [16]byte) bool {
		m, ok := owner[pdir+string(id[:])]
		if !ok {
			data, err := readSmallFileFS(e.fs, filepath.Join(pdir, partitionMetaFile))
			if err == nil {
				got, perr := parsePartitionMetadata(data)
				m = perr == nil && got == id
			}
			owner[pdir+string(id[:])] = m
		}
		return m
	}
	touched := map[string]segment.File{}
	defer func() {
		if e.io.files != nil {
			return // the test layer hands out the file the segment will use
		}
		for _, f := range touched {
			f.Close()
		}
	}()
	for _, g := range use {
		buf, err := read(g)
		if err != nil {
			return rs, err
		}
		if err := forEachRecord(buf, g, func(seq uint64, r journalRecord) error {
			if seq < start {
				return nil
			}
			rs.records++
			if r.typ == journalRecEnd {
				if b, ok := barriers[journalKey{r.topicID, r.part}]; (ok && seq < b) || len(r.payload) < 16 {
					return nil // cut or replaced after it (a barrier): its end says nothing
				}
				pdir := filepath.Join(e.dir, partitionDirName(r.topic, r.part))
				if !mine(pdir, r.topicID) {
					return nil // deleted topic, or recreated under another id
				}
				path := segmentFileName(pdir, r.base, logSuffix)
				endsOf[path] = append(endsOf[path], endRec{from: int64(binary.BigEndian.Uint64(r.payload)),
					end: r.pos, endOffset: int64(binary.BigEndian.Uint64(r.payload[8:])),
					flushed: newest.count == 0 || seq < newest.firstSeq})
				return nil
			}
			if r.typ != journalRecWrite {
				return nil
			}
			if b, ok := barriers[journalKey{r.topicID, r.part}]; ok && seq < b {
				rs.skipped++
				return nil
			}
			pdir := filepath.Join(e.dir, partitionDirName(r.topic, r.part))
			if !mine(pdir, r.topicID) {
				rs.skipped++ // deleted topic, or recreated under another id
				return nil
			}
			path := segmentFileName(pdir, r.base, logSuffix)
			f := touched[path]
			if f == nil {
				f, err = openForReplay(e, path)
				if errors.Is(err, fs.ErrNotExist) {
					rs.skipped++ // deleted on purpose (retention, DeleteRecords, truncation)
					return nil
				}
				if err != nil {
					return err
				}
				touched[path] = f
			}
			if _, err := f.WriteAt(r.payload, r.pos); err != nil {
				return fmt.Errorf("replaying into %s: %w", path, err)
			}
			rs.written++
			rs.bytes += int64(len(r.payload))
			return nil
		}); err != nil {
			return rs, fmt.Errorf("engine: journal: %w", err)
		}
	}
	for path, f := range touched {
		if err := e.syncFile(path, f.Sync); err != nil {
			return rs, fmt.Errorf("engine: journal: syncing %s: %w", path, err)
		}
	}
	for path, recs := range endsOf {
		end, err := trustEnds(e, path, recs)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted on purpose (retention, DeleteRecords, truncation, the topic)
		}
		if err != nil {
			return rs, fmt.Errorf("engine: journal: checking the ends of %s: %w", path, err)
		}
		if rs.ends == nil {
			rs.ends = map[string]int64{}
		}
		rs.ends[path] = end
	}
	return rs, nil
}

// trustEnds returns the durable end of the segment file at path that its
// end records (recs, in journal order) vouch for: from the first record's
// from (made durable by an earlier round's flush, or below the journal's
// start), a record in a group a later group follows (flushed: its flush
// completed, its round was acknowledged) moves it to its end whatever the
// bytes hold — bad bytes below it are damage, for recovery to report —
// and a record of the newest group does so only when the bytes between
// are whole batches with valid CRCs, offsets at or above the segment's
// base and rising, the last ending at or past the record's log end
// offset. A crash before that group's flush completed keeps the end
// record or the round's writes or both, in any combination; the first
// newest-group record that fails stops it (nothing after it was
// acknowledged). Damage to the newest round's bytes after its flush looks
// the same and is cut as a torn tail, as Kafka cuts what follows its
// recovery point.
func trustEnds(e *Engine, path string, recs []endRec) (int64, error) {
	f, err := openForReplay(e, path)
	if err != nil {
		return 0, err
	}
	if e.io.files == nil {
		defer f.Close()
	}
	base, _ := parseSegmentFileName(filepath.Base(path), logSuffix)
	// A round whose segment was truncated and not synced since records
	// from -1 (segment.Segment.Durable: unknown): nothing below the round
	// is vouched for, so its bytes are checked from the segment's start.
	trusted := max(recs[0].from, 0)
	next := base // the least offset the next batch may have
	var buf []byte
	for _, r := range recs {
		if r.end <= trusted {
			continue
		}
		if r.flushed {
			trusted, next = r.end, base
			continue
		}
		// A record may start past the trusted end (a journal checkpoint's
		// device flush raised the segment's durable end between two
		// rounds, records before it may be gone): the bytes from the
		// trusted end on are checked, the gap included.
		n := r.end - trusted
		if n > 1<<30 {
			break
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		b := buf[:n]
		if _, err := f.ReadAt(b, trusted); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		last, ok := wholeBatchesFrom(b, next)
		if !ok || last+1 < r.endOffset {
			break
		}
		trusted, next = r.end, last+1
	}
	return trusted, nil
}

// wholeBatchesFrom reports whether b is whole batches with valid CRCs
// whose base offsets rise from min, and the last offset of the last.
func wholeBatchesFrom(b []byte, min int64) (last int64, ok bool) {
	last = -1
	for len(b) > 0 {
		if len(b) < record.HeaderSize {
			return 0, false
		}
		size := 12 + int(int32(binary.BigEndian.Uint32(b[8:])))
		if size < record.HeaderSize || size > len(b) || !record.CheckCRC(b[:size]) {
			return 0, false
		}
		h, err := record.ParseHeader(b[:record.HeaderSize])
		if err != nil || h.BaseOffset < min {
			return 0, false
		}
		last, min = h.LastOffset(), h.LastOffset()+1
		b = b[size:]
	}
	return last, last >= 0
}
