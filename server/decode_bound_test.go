package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fillValue sets v (a kmsg request field) to random contents: up to 3
// elements per array, short strings, nil or set nullables.
func fillValue(rng *rand.Rand, v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(rng.IntN(200)) - 100)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(rng.IntN(200)))
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Float64:
		v.SetFloat(rng.Float64())
	case reflect.String:
		b := make([]byte, rng.IntN(6))
		for i := range b {
			b[i] = 'a' + byte(rng.IntN(26))
		}
		v.SetString(string(b))
	case reflect.Array:
		for i := range v.Len() {
			fillValue(rng, v.Index(i), depth)
		}
	case reflect.Pointer:
		if rng.IntN(3) == 0 || depth > 4 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fillValue(rng, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // bytes
			if rng.IntN(3) == 0 {
				return
			}
			v.SetBytes(make([]byte, rng.IntN(8)))
			return
		}
		if depth > 4 {
			return
		}
		n := rng.IntN(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fillValue(rng, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && f.Name != "Version" {
				fillValue(rng, v.Field(i), depth)
			}
		}
	}
}

// bodyOf encodes req at version and returns its body (kmsg's AppendTo
// writes the body only).
func bodyOf(req kmsg.Request) []byte { return req.AppendTo(nil) }

// allocated returns the heap bytes one call of f allocates (the least of a
// few tries, so another goroutine's allocations do not count); setup runs
// before each try, unmeasured.
func allocated(setup, f func()) int64 {
	best := int64(-1)
	var ms runtime.MemStats
	for range 3 {
		setup()
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		f()
		runtime.ReadMemStats(&ms)
		if d := int64(ms.TotalAlloc - before); best < 0 || d < best {
			best = d
		}
	}
	return best
}

// TestDecodeBoundCoversKmsg checks the walker against kmsg itself, for every
// served API and version: on random requests (encoded by kmsg) the walk
// accepts and its heap bound is at least what kmsg's decode allocates; on
// the same bodies cut short or with a byte changed, whenever kmsg decodes
// the body the walk accepts it too (the walk never refuses a valid request)
// and still bounds the allocation.
func TestDecodeBoundCoversKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	const perVersion = 12
	cases, mutated := 0, 0
	for key := range apis {
		if apis[key].fn == nil {
			continue
		}
		for v := apis[key].minVersion; v <= apis[key].maxVersion; v++ {
			for i := range perVersion {
				req := kmsg.RequestForKey(int16(key))
				if i > 0 {
					fillValue(rng, reflect.ValueOf(req).Elem(), 0)
				}
				req.SetVersion(v)
				body := bodyOf(req)
				check := func(body []byte, mustAccept bool) {
					heap, known, werr := walkBody(int16(key), v, req.IsFlexible(), body)
					if !known {
						t.Fatalf("%s: no decode layout", kmsg.NameForKey(int16(key)))
					}
					var dst kmsg.Request
					var kerr error
					got := allocated(func() {
						dst = kmsg.RequestForKey(int16(key))
						dst.SetVersion(v)
					}, func() { kerr = dst.ReadFrom(body) })
					if kerr == nil && werr != nil {
						t.Fatalf("%s v%d: kmsg decodes %x, the walk refuses it: %v", kmsg.NameForKey(int16(key)), v, body, werr)
					}
					if mustAccept && werr != nil {
						t.Fatalf("%s v%d: the walk refuses kmsg's own encoding %x: %v", kmsg.NameForKey(int16(key)), v, body, werr)
					}
					if werr == nil && got > heap && !raceDetector {
						t.Fatalf("%s v%d: kmsg allocated %d bytes decoding %x, the bound says %d",
							kmsg.NameForKey(int16(key)), v, got, body, heap)
					}
				}
				check(body, true)
				cases++
				if len(body) > 0 {
					cut := body[:rng.IntN(len(body))]
					check(cut, false)
					flip := append([]byte(nil), body...)
					flip[rng.IntN(len(flip))] ^= byte(1 + rng.IntN(255))
					check(flip, false)
					mutated += 2
				}
			}
		}
	}
	t.Logf("%d encoded requests, %d mutated bodies", cases, mutated)
}

// adversarial frames: the shapes of issue 21's first target. Each is a
// body of n bytes: a few header fields, then a count as large as the bytes
// could hold and zero bytes after it, so every element is present and
// minimal.
type shape struct {
	name    string
	key     int16
	version int16
	body    func(n int) []byte
}

var adversarialShapes = []shape{
	{"produce v3: empty topics", 0, 3, func(n int) []byte {
		b := make([]byte, n)
		binary.BigEndian.PutUint16(b[0:], 0xffff) // null transactional id
		binary.BigEndian.PutUint16(b[2:], 1)      // acks
		binary.BigEndian.PutUint32(b[4:], 1000)   // timeout
		binary.BigEndian.PutUint32(b[8:], uint32((n-12)/6))
		return b
	}},
	{"produce v3: one topic, empty partitions", 0, 3, func(n int) []byte {
		b := make([]byte, n)
		binary.BigEndian.PutUint16(b[0:], 0xffff)
		binary.BigEndian.PutUint16(b[2:], 1)
		binary.BigEndian.PutUint32(b[4:], 1000)
		binary.BigEndian.PutUint32(b[8:], 1)
		binary.BigEndian.PutUint16(b[12:], 0) // topic ""
		binary.BigEndian.PutUint32(b[14:], uint32((n-18)/8))
		for i := 18; i+8 <= n; i += 8 { // partition 0, records null
			binary.BigEndian.PutUint32(b[i+4:], 0xffffffff)
		}
		return b
	}},
	{"metadata v4: empty topic names", 3, 4, func(n int) []byte {
		b := make([]byte, n)
		binary.BigEndian.PutUint32(b[0:], uint32((n-5)/2))
		return b
	}},
	{"produce v9 (flexible): unknown tags", 0, 9, func(n int) []byte {
		// null txn id, acks, timeout, 0 topics, then the request's tag
		// section: as many distinct empty unknown tags as fit (tag numbers
		// from 1000: 2-3 bytes each, then a 0 length).
		b := []byte{0, 0, 1, 0, 0, 3, 232, 1}
		tags := (n - len(b) - 5) / 4
		b = binary.AppendUvarint(b, uint64(tags))
		for i := range tags {
			b = binary.AppendUvarint(b, uint64(1000+i))
			b = append(b, 0)
		}
		return b
	}},
}

// TestDecodeBoundAmplification measures, for each adversarial shape, the
// heap bound per body byte and what kmsg really allocates, and checks that
// decodeRequest refuses a shape above maxDecodeRatio before decoding it and
// reserves the bound of one below it. The figures are in
// docs/reliability.md.
func TestDecodeBoundAmplification(t *testing.T) {
	const n = 1 << 20
	for _, sh := range adversarialShapes {
		body := sh.body(n)
		req := kmsg.RequestForKey(sh.key)
		req.SetVersion(sh.version)
		heap, _, err := walkBody(sh.key, sh.version, req.IsFlexible(), body)
		if err != nil {
			t.Fatalf("%s: the walk refuses it: %v", sh.name, err)
		}
		var kerr error
		got := allocated(func() {
			req = kmsg.RequestForKey(sh.key)
			req.SetVersion(sh.version)
		}, func() { kerr = req.ReadFrom(body) })
		if kerr != nil {
			t.Fatalf("%s: kmsg refuses it: %v", sh.name, kerr)
		}
		if got > heap && !raceDetector {
			t.Fatalf("%s: kmsg allocated %d, bound %d", sh.name, got, heap)
		}
		t.Logf("%-40s %d bytes: kmsg allocates %.1fx, bound %.1fx", sh.name, len(body),
			float64(got)/float64(len(body)), float64(heap)/float64(len(body)))

		frame := requestFrame(sh.key, sh.version, body)
		reserved := int64(-1)
		_, dreq, derr := decodeRequest(frame, func(n int64) bool { reserved = n; return true })
		switch {
		case heap > int64(len(body))*maxDecodeRatio+decodeSlackBytes:
			if !errors.Is(derr, errDecodeTooLarge) || dreq != nil || reserved != -1 {
				t.Fatalf("%s: above the decode bound, decodeRequest = %T, %v, reserved %d; want errDecodeTooLarge, nothing reserved",
					sh.name, dreq, derr, reserved)
			}
		case derr != nil || reserved != decodeReserveFactor*heap:
			t.Fatalf("%s: decodeRequest = %v, reserved %d; want %d x the bound %d reserved", sh.name, derr, reserved, decodeReserveFactor, heap)
		}
	}
}

// requestFrame is a request header (client id "adv"), flexible header tags
// when the version is flexible, and body.
func requestFrame(key, version int16, body []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, 3)
	b = append(b, "adv"...)
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return append(b, body...)
}

// TestDecodeRequestReservesTheBound: a valid request reserves its walk's
// bound before decoding; when the reservation is refused the request is not
// decoded.
func TestDecodeRequestReservesTheBound(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(4)
	for i := range 100 {
		name := fmt.Sprintf("topic-%d", i)
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: &name})
	}
	body := bodyOf(req)
	frame := requestFrame(3, 4, body)
	want, _, _ := walkBody(3, 4, false, body)
	var reserved int64
	_, got, err := decodeRequest(frame, func(n int64) bool { reserved = n; return true })
	if err != nil || got == nil {
		t.Fatal(err)
	}
	if reserved != decodeReserveFactor*want || want == 0 {
		t.Fatalf("reserved %d, want %d x the bound %d", reserved, decodeReserveFactor, want)
	}
	if _, got, err := decodeRequest(frame, func(int64) bool { return false }); !errors.Is(err, errDecodeTooLarge) || got != nil {
		t.Fatalf("refused reservation: %v, %v; want errDecodeTooLarge", got, err)
	}
	// A count the bytes cannot hold is refused by the walk (kmsg would make
	// the slice first).
	lie := binary.BigEndian.AppendUint32(nil, 1000)
	lie = append(lie, 0, 1, 'x', 1)
	if _, got, err := decodeRequest(requestFrame(3, 4, lie), nil); !errors.Is(err, errBadBody) || got != nil {
		t.Fatalf("lying count: %v, %v; want errBadBody", got, err)
	}
}
