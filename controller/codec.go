package controller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
)

// ErrCorrupt is returned by every decoder in this package for bytes that are
// not a valid encoding (truncated, overlong, out of range, trailing bytes).
var ErrCorrupt = errors.New("controller: corrupt encoding")

// Primitive encoders append to the caller's buffer; the reader keeps a sticky
// error and checks every length against the bytes left before allocating.
//
//	int      zigzag varint (encoding/binary.AppendVarint)
//	count    unsigned varint; a "nullable" count is a zigzag varint with -1 for nil
//	string   count + bytes
//	bool     one byte, 0 or 1
//	uuid     16 raw bytes

func appendInt(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }
func appendCount(b []byte, n int) []byte { return binary.AppendUvarint(b, uint64(n)) }
func appendString(b []byte, s string) []byte {
	b = appendCount(b, len(s))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendStrings writes a count and the strings; readStrings reads it back
// (nil for none).
func appendStrings(b []byte, ss []string) []byte {
	b = appendCount(b, len(ss))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

func appendInt32s(b []byte, vs []int32) []byte {
	b = appendCount(b, len(vs))
	for _, v := range vs {
		b = appendInt(b, int64(v))
	}
	return b
}

// appendNullableInt32s writes -1 for a nil slice, so nil and empty differ.
func appendNullableInt32s(b []byte, vs []int32) []byte {
	if vs == nil {
		return appendInt(b, -1)
	}
	b = appendInt(b, int64(len(vs)))
	for _, v := range vs {
		b = appendInt(b, int64(v))
	}
	return b
}

// appendStringMap writes a map sorted by key, so equal maps encode equally.
func appendStringMap(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = appendCount(b, len(keys))
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, m[k])
	}
	return b
}

// reader decodes primitives with a sticky error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
}

func (r *reader) u8() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 1 {
		r.fail("truncated")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) int64() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int32() int32 {
	v := r.int64()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail("int32 out of range")
		return 0
	}
	return int32(v)
}

func (r *reader) int16() int16 {
	v := r.int64()
	if v < math.MinInt16 || v > math.MaxInt16 {
		r.fail("int16 out of range")
		return 0
	}
	return int16(v)
}

// count reads an element count and checks that at least minSize bytes per
// element remain, so a corrupt count cannot cause a large allocation.
func (r *reader) count(minSize int) int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad count")
		return 0
	}
	r.b = r.b[n:]
	if minSize < 1 {
		minSize = 1
	}
	if v > uint64(len(r.b)/minSize) {
		r.fail("count exceeds remaining bytes")
		return 0
	}
	return int(v)
}

// nullableCount reads a zigzag count where -1 means nil.
func (r *reader) nullableCount(minSize int) (n int, isNil bool) {
	v := r.int64()
	if r.err != nil {
		return 0, false
	}
	if v == -1 {
		return 0, true
	}
	if v < 0 || v > int64(len(r.b)/max(minSize, 1)) {
		r.fail("bad nullable count")
		return 0, false
	}
	return int(v), false
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("truncated")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.count(1)
	return string(r.bytes(n))
}

func (r *reader) bool() bool {
	switch r.u8() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("bad bool")
	return false
}

func (r *reader) uuid() (id TopicID) {
	copy(id[:], r.bytes(16))
	return id
}

func (r *reader) strings() []string {
	n := r.count(1)
	if r.err != nil || n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = r.string()
	}
	return ss
}

func (r *reader) int32s() []int32 {
	n := r.count(1)
	if r.err != nil {
		return nil
	}
	vs := make([]int32, n)
	for i := range vs {
		vs[i] = r.int32()
	}
	return vs
}

func (r *reader) nullableInt32s() []int32 {
	n, isNil := r.nullableCount(1)
	if r.err != nil || isNil {
		return nil
	}
	vs := make([]int32, n)
	for i := range vs {
		vs[i] = r.int32()
	}
	return vs
}

// stringMap reads a map written by appendStringMap; keys must be strictly
// ascending (the canonical form), which also rules out duplicates.
func (r *reader) stringMap() map[string]string {
	n := r.count(2)
	if r.err != nil {
		return nil
	}
	m := make(map[string]string, n)
	prev := ""
	for i := 0; i < n && r.err == nil; i++ {
		k := r.string()
		v := r.string()
		if i > 0 && k <= prev {
			r.fail("map keys not ascending")
			return nil
		}
		prev = k
		m[k] = v
	}
	return m
}

// done reports the sticky error, or ErrCorrupt if bytes are left over.
func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return r.err
}
