package kframe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// SplitResponseHeader takes the correlation id, skips a flexible header's
// tagged fields, and refuses what does not parse.
func TestSplitResponseHeader(t *testing.T) {
	rest, corr, err := SplitResponseHeader([]byte{0, 0, 1, 2, 9, 9}, false)
	if err != nil || corr != 258 || !bytes.Equal(rest, []byte{9, 9}) {
		t.Fatalf("v0 header: %v %d %v", rest, corr, err)
	}
	// One tag (key 1, two bytes), then the body.
	rest, corr, err = SplitResponseHeader([]byte{0, 0, 0, 7, 1, 1, 2, 0xaa, 0xbb, 5}, true)
	if err != nil || corr != 7 || !bytes.Equal(rest, []byte{5}) {
		t.Fatalf("v1 header: %v %d %v", rest, corr, err)
	}
	for _, b := range [][]byte{{0, 0, 7}, {0, 0, 0, 7}, {0, 0, 0, 7, 1, 1, 9}} {
		if _, _, err := SplitResponseHeader(b, true); !errors.Is(err, ErrResponseHeader) {
			t.Fatalf("%x: %v", b, err)
		}
	}
}

// FuzzSplitResponseHeader: never panics, takes the correlation id from the
// first four bytes and returns a body that is a suffix of its input.
func FuzzSplitResponseHeader(f *testing.F) {
	f.Add([]byte{0, 0, 0, 7, 0, 1, 2}, true)
	f.Add([]byte{0, 0, 0, 7, 2, 1, 200, 1}, true)
	f.Add([]byte{0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff, 0x0f}, true)
	f.Add([]byte{0, 0, 0, 7}, false)
	f.Add([]byte{0, 0}, false)
	f.Fuzz(func(t *testing.T, b []byte, flexible bool) {
		rest, corr, err := SplitResponseHeader(b, flexible)
		if err != nil {
			if !errors.Is(err, ErrResponseHeader) {
				t.Fatalf("error %v is not ErrResponseHeader", err)
			}
			return
		}
		if len(b) < 4 || corr != int32(binary.BigEndian.Uint32(b)) {
			t.Fatalf("correlation id %d from %x", corr, b)
		}
		if !bytes.HasSuffix(b, rest) || (!flexible && len(rest) != len(b)-4) || (flexible && len(rest) > len(b)-5) {
			t.Fatalf("body %x of %x (flexible %v)", rest, b, flexible)
		}
	})
}
