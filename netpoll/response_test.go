package netpoll

import (
	"bytes"
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
