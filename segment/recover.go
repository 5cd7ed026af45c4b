package segment

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math"
	"sync"

	"github.com/stratalog/strata/record"
)

// recoverChunkBytes is the read size of Recover: the tail is read in chunks
// of this many bytes (or the whole tail, if smaller). Tests lower it to cross
// chunk boundaries with small files; production never changes it.
var recoverChunkBytes int64 = 1 << 20

// scanBufBytes is the read size of Scan: one pread usually covers the headers
// of several batches following an index entry (index.interval.bytes = 4096).
const scanBufBytes = 4096

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var scanBufs = sync.Pool{New: func() any { return new([scanBufBytes]byte) }}

// BatchInfo describes one batch found by a walk.
type BatchInfo struct {
	Pos          int64 // position in the file
	Size         int32 // whole batch bytes
	BaseOffset   int64
	LastOffset   int64
	MaxTimestamp int64
	LeaderEpoch  int32
}

func infoOf(pos int64, h *record.Header) BatchInfo {
	return BatchInfo{
		Pos:          pos,
		Size:         int32(h.Size()),
		BaseOffset:   h.BaseOffset,
		LastOffset:   h.LastOffset(),
		MaxTimestamp: h.MaxTimestamp,
		LeaderEpoch:  h.PartitionLeaderEpoch,
	}
}

// saneHeader reports whether a parsed header can describe a batch in a
// segment: the size fits BatchInfo.Size and the offsets do not run backwards
// or overflow.
func saneHeader(h *record.Header) bool {
	return int64(h.BatchLength) <= math.MaxInt32-record.LogOverhead &&
		h.LastOffsetDelta >= 0 &&
		h.BaseOffset >= 0 &&
		h.BaseOffset <= math.MaxInt64-int64(h.LastOffsetDelta)
}

// CorruptError is Scan's error for a batch header that does not parse: it
// matches ErrCorrupt (errors.Is) and says where.
type CorruptError struct {
	Path string
	Pos  int64 // position of the header in the file
	Err  error // what is wrong with it
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v at position %d of %s: %v", ErrCorrupt, e.Pos, e.Path, e.Err)
}

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// SaneHeader reports whether the batch header hb (record.HeaderSize bytes)
// parses and describes a batch a segment can hold (the check Scan makes).
func SaneHeader(hb []byte) bool {
	h, err := record.ParseHeader(hb)
	return err == nil && saneHeader(&h)
}

// Recover walks batches from position from (a batch boundary) to the end of
// the file, reading headers (ParseHeader) and checking each batch's CRC; it
// stops at the first short, torn, zeroed or bad-CRC batch or at a batch whose
// baseOffset is not greater than the previous batch's last offset, truncates
// the file there, and returns the valid end. visit is called for each valid
// batch in order (to rebuild indexes); it may be nil. Reads in 1 MiB chunks;
// batches larger than a chunk are CRC-checked in a stream. An I/O error
// stops the walk without truncating.
func (s *Segment) Recover(from int64, visit func(BatchInfo)) (validEnd int64, err error) {
	return s.walk(from, -1, visit, true)
}

// Verify is Recover without the truncation: it walks batches from position
// from with the same checks, calls visit for each valid one and returns the
// end of the valid run; the file and Size() are left as they are. validEnd
// < Size() means the batch at validEnd is torn, zeroed or corrupt (see
// NextValidBatch to tell a torn tail from corruption in the middle).
func (s *Segment) Verify(from int64, visit func(BatchInfo)) (validEnd int64, err error) {
	return s.walk(from, -1, visit, false)
}

// VerifyRange is Verify over the bytes [from, to) only, for a reader of
// bytes already written (to <= Written()): nothing is drained, truncated
// or changed, and it is safe concurrently with Append. It returns to when
// the range is whole batches that pass every check, else the position of
// the first bad one (a batch running past to counts as bad).
func (s *Segment) VerifyRange(from, to int64, visit func(BatchInfo)) (validEnd int64, err error) {
	if to < 0 {
		return 0, fmt.Errorf("%w: verify to %d", ErrRange, to)
	}
	return s.walk(from, to, visit, false)
}

// walk is Recover (truncate) and Verify (to < 0: to the end of the file,
// after draining the writer) and VerifyRange (to >= 0).
func (s *Segment) walk(from, to int64, visit func(BatchInfo), truncate bool) (validEnd int64, err error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if s.w != nil && to < 0 {
		if err := s.w.drain(); err != nil {
			return 0, err
		}
	}
	end, err := s.walkEnd()
	if err != nil {
		return 0, err
	}
	if to >= 0 {
		end = min(end, to)
	}
	if from < 0 || from > end {
		return 0, fmt.Errorf("%w: recover from %d, file size %d", ErrRange, from, end)
	}
	w := walker{f: s.file, end: end}
	if rem := end - from; rem >= record.HeaderSize {
		w.buf = make([]byte, min(rem, recoverChunkBytes))
	}
	pos := from
	prevLast := int64(-1)
	for end-pos >= record.HeaderSize {
		hb, err := w.load(pos, record.HeaderSize)
		if err != nil {
			return 0, err
		}
		h, err := record.ParseHeader(hb)
		if err != nil || !saneHeader(&h) || h.BaseOffset <= prevLast {
			break // zeroed, garbage, or offsets running backwards
		}
		size := int64(h.Size())
		if size > end-pos {
			break // torn: the batch runs past the end of the file
		}
		ok, err := w.checkCRC(pos, size, h.CRC)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		if visit != nil {
			visit(infoOf(pos, &h))
		}
		prevLast = h.LastOffset()
		pos += size
	}
	if !truncate {
		return pos, nil
	}
	if pos < end {
		if s.w != nil {
			s.w.settlePrewrite()
		}
		// Publish the smaller size before the bytes go (readers clamp to it).
		s.size.Store(pos)
		s.cuts.Add(1)
		if err := s.file.Truncate(pos); err != nil {
			return 0, err
		}
	}
	s.size.Store(pos)
	if s.w != nil {
		s.w.truncated(pos)
	}
	return pos, nil
}

// NextValidBatch looks for a whole, CRC-valid batch starting after the bad
// position pos and before the end of the file, whose base offset is at
// least minBase: any byte position is tried (the header of the batch at pos
// may be garbage, so its length cannot be trusted), candidates filtered by
// the magic byte. found reports whether one exists; b describes the first.
// A torn tail (zeros, a partial batch, garbage up to the end) has none; a
// batch damaged in place (a flipped bit, a bad sector) with valid batches
// after it does. It reads the rest of the file once (in 1 MiB chunks) plus
// each plausible candidate's bytes; meant for the recovery of a bad batch,
// not for a hot path. An I/O error is returned as is.
func (s *Segment) NextValidBatch(pos, minBase int64) (b BatchInfo, found bool, err error) {
	if s.closed.Load() {
		return BatchInfo{}, false, ErrClosed
	}
	if s.w != nil {
		if err := s.w.drain(); err != nil {
			return BatchInfo{}, false, err
		}
	}
	end, err := s.walkEnd()
	if err != nil {
		return BatchInfo{}, false, err
	}
	if pos < 0 || pos >= end {
		return BatchInfo{}, false, nil
	}
	chunk := min(end-pos, recoverChunkBytes+record.HeaderSize)
	if chunk < record.HeaderSize {
		return BatchInfo{}, false, nil
	}
	buf := make([]byte, chunk)
	var crcw walker
	const magicAt = 16 // baseOffset(8) batchLength(4) partitionLeaderEpoch(4)
	for start := pos + 1; end-start >= record.HeaderSize; {
		n := min(int64(len(buf)), end-start)
		if err := readFull(s.file, buf[:n], start); err != nil {
			return BatchInfo{}, false, err
		}
		// Headers that start in [start, start+n-HeaderSize] lie wholly in buf.
		last := int(n) - record.HeaderSize
		for i := 0; i <= last; {
			j := bytes.IndexByte(buf[i+magicAt:last+magicAt+1], 2)
			if j < 0 {
				break
			}
			i += j
			h, err := record.ParseHeader(buf[i : i+record.HeaderSize])
			p := start + int64(i)
			if err == nil && saneHeader(&h) && h.BaseOffset >= minBase && int64(h.Size()) <= end-p {
				if crcw.buf == nil {
					crcw = walker{f: s.file, end: end, buf: make([]byte, min(end-p, recoverChunkBytes))}
				}
				crcw.n = 0
				ok, err := crcw.checkCRC(p, int64(h.Size()), h.CRC)
				if err != nil {
					return BatchInfo{}, false, err
				}
				if ok {
					return infoOf(p, &h), true, nil
				}
			}
			i++
		}
		start += int64(last) + 1
	}
	return BatchInfo{}, false, nil
}

// walker is a read-ahead window over [0, end) of a file for Recover.
type walker struct {
	f     File
	buf   []byte
	start int64 // file position of buf[0]
	n     int   // valid bytes in buf
	end   int64
}

// load returns the file bytes [pos, pos+k); k must be <= len(w.buf) and
// pos+k <= w.end. Bytes already in the window are kept; the rest of the
// window is filled with one read.
func (w *walker) load(pos int64, k int) ([]byte, error) {
	if pos >= w.start && pos+int64(k) <= w.start+int64(w.n) {
		i := int(pos - w.start)
		return w.buf[i : i+k], nil
	}
	keep := 0
	if pos >= w.start && pos < w.start+int64(w.n) {
		keep = copy(w.buf, w.buf[pos-w.start:w.n])
	}
	want := int(min(int64(len(w.buf)), w.end-pos))
	w.start, w.n = pos, 0
	if err := readFull(w.f, w.buf[keep:want], pos+int64(keep)); err != nil {
		return nil, err
	}
	w.n = want
	return w.buf[:k], nil
}

// checkCRC verifies the CRC of the batch [pos, pos+size): in the window if it
// fits (record.CheckCRC), else streamed through the window in chunks.
func (w *walker) checkCRC(pos, size int64, want uint32) (bool, error) {
	if size <= int64(len(w.buf)) {
		b, err := w.load(pos, int(size))
		if err != nil {
			return false, err
		}
		return record.CheckCRC(b), nil
	}
	crc := uint32(0)
	for off := pos + record.OffsetAttrs; off < pos+size; {
		chunk := w.buf[:min(int64(len(w.buf)), pos+size-off)]
		if err := readFull(w.f, chunk, off); err != nil {
			w.n = 0
			return false, err
		}
		crc = crc32.Update(crc, castagnoli, chunk)
		off += int64(len(chunk))
	}
	w.n = 0 // the window now holds the batch tail, not [start, start+n)
	return crc == want, nil
}

// readFull reads exactly len(p) bytes at off.
func readFull(f File, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("%w: short read at %d", ErrRange, off)
	}
	return err
}

// Scan walks batch headers from pos without CRC checks (for index lookups):
// calls fn for each whole batch until fn returns false or the end (limit,
// capped at Size()) is reached. A partial batch at the end is not reported.
// A header that does not parse returns an error wrapping ErrCorrupt. Scan
// reads up to 4 KiB per pread into a pooled buffer and allocates nothing in
// steady state; it is safe concurrently with Append and other readers.
func (s *Segment) Scan(pos, limit int64, fn func(BatchInfo) bool) error {
	if s.closed.Load() {
		return ErrClosed
	}
	limit = min(limit, s.readable())
	if pos < 0 {
		return fmt.Errorf("%w: scan from %d", ErrRange, pos)
	}
	bp := scanBufs.Get().(*[scanBufBytes]byte)
	defer scanBufs.Put(bp)
	buf := bp[:]
	bstart, bn := int64(0), 0 // buf holds file bytes [bstart, bstart+bn)
	for limit-pos >= record.HeaderSize {
		if pos < bstart || pos+record.HeaderSize > bstart+int64(bn) {
			n := int(min(int64(len(buf)), limit-pos))
			if err := readFull(s.file, buf[:n], pos); err != nil {
				return err
			}
			bstart, bn = pos, n
		}
		i := int(pos - bstart)
		h, err := record.ParseHeader(buf[i : i+record.HeaderSize])
		if err == nil && !saneHeader(&h) {
			err = fmt.Errorf("invalid lengths or offsets")
		}
		if err != nil {
			return &CorruptError{Path: s.Path(), Pos: pos, Err: err}
		}
		size := int64(h.Size())
		if size > limit-pos {
			return nil // partial batch at the limit
		}
		if !fn(infoOf(pos, &h)) {
			return nil
		}
		pos += size
	}
	return nil
}
