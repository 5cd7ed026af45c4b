package record

import "fmt"

// Record is one record of a batch; Key/Value alias the (decompressed) batch
// bytes. Key nil means null key; Value nil means null (tombstone).
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte
	Value          []byte
	Headers        []RecordHeader
}

// RecordHeader is one record header. Value nil means a null value.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Iterate decodes each record of one whole batch (decompressing if needed)
// and calls fn; r is reused between calls. Malformed varints/lengths: ErrInvalid.
//
// batch must be exactly one batch (len(batch) == Size()) and its CRC must
// match (ErrCorrupt); ParseHeader's errors are returned as is. Every record
// must fill exactly its declared length, the batch must hold exactly
// NumRecords records with no trailing bytes, and keys, values and header
// counts must fit in the bytes left: otherwise ErrInvalid (wrapped). The
// records before a malformed one have already been passed to fn.
//
// r, r.Headers and h are reused between calls: copy what must outlive one
// call. Key, Value and header values alias batch (uncompressed) or a buffer
// Iterate allocated for this call (compressed), and stay valid after Iterate
// returns. offsetDelta is not checked for contiguity: compaction leaves gaps.
// A non-nil error from fn stops the iteration and is returned as is.
func Iterate(batch []byte, fn func(h *Header, r *Record) error) error {
	h, err := ParseHeader(batch)
	if err != nil {
		return err
	}
	switch size := h.Size(); {
	case len(batch) < size:
		return ErrShort
	case len(batch) > size:
		return fmt.Errorf("%w: %d bytes for a batch of %d", ErrInvalid, len(batch), size)
	}
	if !checkCRC(batch) {
		return ErrCorrupt
	}
	if h.NumRecords < 0 {
		return fmt.Errorf("%w: record count %d", ErrInvalid, h.NumRecords)
	}
	data := batch[HeaderSize:]
	if c := h.Codec(); c != CodecNone {
		if data, err = Decompress(c, nil, data); err != nil {
			return err
		}
	}
	if int64(h.NumRecords)*minRecordBytes > int64(len(data)) {
		return fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrInvalid, h.NumRecords, len(data))
	}
	// One allocation for both: fn receives pointers to them.
	st := &struct {
		h Header
		r Record
	}{h: h}
	for i := int32(0); i < h.NumRecords; i++ {
		var ok bool
		if data, ok = decodeRecord(data, &st.r); !ok {
			return fmt.Errorf("%w: record %d of %d is malformed", ErrInvalid, i, h.NumRecords)
		}
		st.h = h // fn may have scribbled on it
		if err := fn(&st.h, &st.r); err != nil {
			return err
		}
	}
	if len(data) != 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrInvalid, len(data), h.NumRecords)
	}
	return nil
}

// decodeRecord decodes the record at the start of data into rec and returns
// the bytes after it; ok is false if the record is malformed. Header keys are
// reused from rec's previous headers when equal, so a batch whose records
// share header names decodes without allocating.
func decodeRecord(data []byte, rec *Record) (rest []byte, ok bool) {
	in := reader{b: data}
	length := in.varint()
	if in.bad || length < 0 || int(length) > len(in.b) {
		return data, false
	}
	rest = in.b[length:]
	body := reader{b: in.b[:length]}
	rec.Attributes = int8(body.byte())
	rec.TimestampDelta = body.varlong()
	rec.OffsetDelta = body.varint()
	rec.Key = body.bytes(true)
	rec.Value = body.bytes(true)
	count := body.varint()
	// Each header takes at least two bytes (two one-byte lengths): bound
	// the count by the bytes left before growing anything.
	if body.bad || count < 0 || int(count) > len(body.b)/2 {
		return data, false
	}
	hs := rec.Headers[:cap(rec.Headers)]
	for i := range int(count) {
		k := body.bytes(false)
		v := body.bytes(true)
		if i < len(hs) {
			key := hs[i].Key
			if key != string(k) {
				key = string(k)
			}
			hs[i] = RecordHeader{Key: key, Value: v}
		} else {
			hs = append(hs, RecordHeader{Key: string(k), Value: v})
		}
	}
	rec.Headers = hs[:count]
	if body.bad || len(body.b) != 0 {
		return data, false
	}
	return rest, true
}

// reader is a cursor over record bytes with a sticky error: after the first
// failure every read returns a zero value and bad stays true.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) byte() byte {
	if r.bad || len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// varint reads a zigzag varint of at most 5 bytes whose value fits 32 bits.
func (r *reader) varint() int32 {
	var x uint32
	for i := 0; i < 5 && !r.bad && i < len(r.b); i++ {
		c := r.b[i]
		if i == 4 && c > 0x0f {
			break
		}
		x |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			r.b = r.b[i+1:]
			return int32(x>>1) ^ -int32(x&1)
		}
	}
	r.bad = true
	return 0
}

// varlong reads a zigzag varint of at most 10 bytes whose value fits 64 bits.
func (r *reader) varlong() int64 {
	var x uint64
	for i := 0; i < 10 && !r.bad && i < len(r.b); i++ {
		c := r.b[i]
		if i == 9 && c > 0x01 {
			break
		}
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			r.b = r.b[i+1:]
			return int64(x>>1) ^ -int64(x&1)
		}
	}
	r.bad = true
	return 0
}

// bytes reads a varint length and that many bytes; -1 yields nil when
// nullable. The result's capacity is its length, so appending to it cannot
// overwrite the bytes after it.
func (r *reader) bytes(nullable bool) []byte {
	n := r.varint()
	switch {
	case r.bad:
		return nil
	case n == -1 && nullable:
		return nil
	case n < 0 || int(n) > len(r.b):
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}
