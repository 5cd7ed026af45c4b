package server

import (
	"encoding/binary"
	"errors"
	"reflect"
)

// The decode bound: before kmsg decodes a request body, walkBody reads the
// body the way kmsg's generated readFrom would, without allocating, and
// returns an upper bound of the heap bytes the decode will allocate (the
// decoded structs, slices, copied strings, string boxes and unknown-tag
// maps). A body whose claimed counts or lengths run past its bytes is
// refused here, before kmsg makes a slice for them. dispatch then reserves
// the bound from netpoll's broker-wide request budget (Reply.Reserve), so a
// frame and its decoded form are both counted while the request is in
// flight, and a request whose decoded form could never fit the budget is
// refused instead of decoded.
//
// The walk is a small interpreter over decodeOps (decode_ops.go), one op
// list per served API key, generated from kmsg's own readFrom functions by
// TestDecodeOpsAreCurrent (go test ./server -run DecodeOps -update), which
// also fails when kmsg is upgraded and the table no longer matches.
// TestDecodeBoundCoversKmsg checks the bound against the bytes kmsg really
// allocates, and TestDecodeBoundAmplification measures the largest
// bound/frame ratio adversarial frames reach (docs/reliability.md, "Memory").

// dKind is a decode op.
type dKind uint8

const (
	dFixed      dKind = iota + 1 // n bytes (int8..int64, bool, uuid, float64)
	dString                      // string: int16 or compact length, then bytes (copied)
	dNullString                  // nullable string: as dString, -1 = null; boxed (*string)
	dBoxString                   // string read into a new(string) box
	dBytes                       // bytes: int32 or compact length (-1 = empty), aliased
	dNullBytes                   // nullable bytes, aliased
	dArray                       // int32 or compact count, then count × body; n = Go element size
	dTags                        // tagged fields; tags = the known ones
	dIf                          // body if the version is in [min, max] (and flex matches), else els
	dNullStruct                  // int8 presence (-1 = null), then body; n = Go struct size
)

// dop is one op of a request layout.
type dop struct {
	k      dKind
	n      int32 // dFixed: bytes; dArray, dNullStruct: Go size of one element
	noFlex bool  // a length that is never compact, even in flexible versions
	min    int16 // dIf: lowest version (inclusive)
	max    int16 // dIf: highest version (inclusive); -1 = no upper bound
	flex   int8  // dIf: 1 = flexible versions only, -1 = non-flexible only, 0 = any
	body   []dop
	els    []dop
	tags   []dtag
}

// dtag is a known tagged field: its tag number and the layout of its value.
type dtag struct {
	tag  uint32
	body []dop
}

// sizeOf is the Go size of one T (a kmsg element type).
func sizeOf[T any]() int32 { return int32(reflect.TypeFor[T]().Size()) }

// Heap costs the bound charges beyond slices and strings (Go 1.26 on
// 64-bit; TestDecodeBoundCoversKmsg checks them against real allocations).
const (
	boxBytes      = 16  // a *string's box
	tagMapBytes   = 512 // an unknown-tag map's first allocation
	tagEntryBytes = 192 // each unknown tag (map growth included; 160 measured)
)

var errBodyOverrun = errors.New("server: request body claims more than its bytes hold")

// dwalk is the walker's state: the bytes left, the request's version and
// encoding, and the heap bound so far. Once bad, every read fails.
type dwalk struct {
	src     []byte
	version int16
	flex    bool
	heap    int64
	bad     bool
}

// walkBody walks body (the request after its header) for the API key at
// version and returns the heap bound of decoding it with kmsg.
// known reports whether a layout exists for key; err is errBodyOverrun when
// a length or count claims more bytes than the body has.
func walkBody(key, version int16, flexible bool, body []byte) (heap int64, known bool, err error) {
	ops, ok := decodeOps[key]
	if !ok {
		return 0, false, nil
	}
	w := dwalk{src: body, version: version, flex: flexible}
	w.run(ops)
	if w.bad {
		return w.heap, true, errBodyOverrun
	}
	return w.heap, true, nil
}

func (w *dwalk) fail() { w.bad, w.src = true, nil }

func (w *dwalk) skip(n int) {
	if n < 0 || len(w.src) < n {
		w.fail()
		return
	}
	w.src = w.src[n:]
}

func (w *dwalk) int8() int8 {
	if len(w.src) < 1 {
		w.fail()
		return 0
	}
	v := int8(w.src[0])
	w.src = w.src[1:]
	return v
}

func (w *dwalk) int16() int16 {
	if len(w.src) < 2 {
		w.fail()
		return 0
	}
	v := int16(binary.BigEndian.Uint16(w.src))
	w.src = w.src[2:]
	return v
}

func (w *dwalk) int32() int32 {
	if len(w.src) < 4 {
		w.fail()
		return 0
	}
	v := int32(binary.BigEndian.Uint32(w.src))
	w.src = w.src[4:]
	return v
}

// uvarint is kbin's 32-bit uvarint: at most 5 bytes.
func (w *dwalk) uvarint() uint32 {
	var v uint32
	for i := 0; i < 5; i++ {
		if i >= len(w.src) {
			break
		}
		c := w.src[i]
		if i == 4 && c > 0x0f {
			break
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			w.src = w.src[i+1:]
			return v
		}
	}
	w.fail()
	return 0
}

// strLen reads a string or bytes length: compact (uvarint - 1) in flexible
// versions, else int16 for strings and int32 for bytes.
func (w *dwalk) strLen(noFlex, bytes bool) int {
	switch {
	case w.flex && !noFlex:
		return int(w.uvarint()) - 1
	case bytes:
		return int(w.int32())
	default:
		return int(w.int16())
	}
}

// arrayLen is kmsg's readArrayLen: the count may not exceed the bytes left.
func (w *dwalk) arrayLen(noFlex bool) int32 {
	var l int32
	if w.flex && !noFlex {
		l = int32(w.uvarint()) - 1
	} else {
		l = w.int32()
	}
	if w.bad || int64(l) > int64(len(w.src)) {
		w.fail()
		return 0
	}
	return l
}

// allocBytes bounds the heap one allocation of n bytes takes (Go's size
// classes waste at most 1/8 above 16 bytes; large objects round to pages).
func allocBytes(n int64) int64 {
	switch {
	case n <= 0:
		return 0
	case n <= 16:
		return 16
	case n <= 32<<10:
		return n + n/8 + 16
	default:
		return (n + 8191) &^ 8191
	}
}

func (w *dwalk) run(ops []dop) {
	for i := range ops {
		if w.bad {
			return
		}
		op := &ops[i]
		switch op.k {
		case dFixed:
			w.skip(int(op.n))
		case dString, dBoxString:
			if op.k == dBoxString {
				w.heap += boxBytes
			}
			l := w.strLen(op.noFlex, false)
			w.skip(l)
			w.heap += allocBytes(int64(l))
		case dNullString:
			if l := w.strLen(op.noFlex, false); l >= 0 && !w.bad {
				w.skip(l)
				w.heap += boxBytes + allocBytes(int64(l))
			}
		case dBytes:
			if l := w.strLen(op.noFlex, true); l != -1 {
				w.skip(l)
			}
		case dNullBytes:
			if l := w.strLen(op.noFlex, true); l >= 0 {
				w.skip(l)
			}
		case dArray:
			l := w.arrayLen(op.noFlex)
			if l > 0 {
				w.heap += allocBytes(int64(l) * int64(op.n))
			}
			for j := int32(0); j < l && !w.bad; j++ {
				w.run(op.body)
			}
		case dTags:
			w.tags(op.tags)
		case dIf:
			in := w.version >= op.min && (op.max < 0 || w.version <= op.max) &&
				(op.flex == 0 || (op.flex > 0) == w.flex)
			if in {
				w.run(op.body)
			} else {
				w.run(op.els)
			}
		case dNullStruct:
			if present := w.int8(); present != -1 && !w.bad {
				w.heap += allocBytes(int64(op.n))
				w.run(op.body)
			}
		}
	}
}

// tags walks a tagged-field section: known tags by their layout (on their
// own bytes, as kmsg does), unknown ones as map entries.
func (w *dwalk) tags(known []dtag) {
	n := w.uvarint()
	unknown := 0
	for ; n > 0 && !w.bad; n-- {
		key := w.uvarint()
		size := w.uvarint()
		if w.bad || int64(size) > int64(len(w.src)) {
			w.fail()
			return
		}
		val := w.src[:size]
		w.src = w.src[size:]
		var layout []dop
		found := false
		for i := range known {
			if known[i].tag == key {
				layout, found = known[i].body, true
				break
			}
		}
		if !found {
			unknown++
			w.heap += tagEntryBytes
			continue
		}
		sub := dwalk{src: val, version: w.version, flex: w.flex}
		sub.run(layout)
		w.heap += sub.heap
		if sub.bad {
			w.fail()
			return
		}
	}
	if unknown > 0 {
		w.heap += tagMapBytes
	}
}
