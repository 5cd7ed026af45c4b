package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReadFrameRefusesOversizedLength: the length is checked before any
// allocation, and a short stream is an error, not a panic.
func TestReadFrameRefusesOversizedLength(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 1<<30)
	if _, err := readFrame(bytes.NewReader(hdr[:]), nil, 1<<20); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("oversized frame: %v", err)
	}
	binary.BigEndian.PutUint32(hdr[:], 100)
	if _, err := readFrame(bytes.NewReader(append(hdr[:], 1, 2, 3)), nil, 1<<20); err == nil {
		t.Fatal("short frame accepted")
	}
	binary.BigEndian.PutUint32(hdr[:], 6)
	body, err := readFrame(bytes.NewReader(append(hdr[:], 1, 2, 3, 4, 5, 6)), nil, 1<<20)
	if err != nil || !bytes.Equal(body, []byte{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("frame: %v %v", body, err)
	}
}

// TestParseResponseHeaderRoundTrip decodes a flexible response kmsg encoded.
func TestParseResponseHeaderRoundTrip(t *testing.T) {
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	resp.SetVersion(4)
	rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	rp.LeaderEpoch, rp.EndOffset = 3, 42
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	body := binary.BigEndian.AppendUint32(nil, 7)
	body = append(body, 0) // no header tags
	body = resp.AppendTo(body)
	rest, corr, err := parseResponseHeader(body, true)
	if err != nil || corr != 7 {
		t.Fatalf("header: corr %d, %v", corr, err)
	}
	got := kmsg.NewPtrOffsetForLeaderEpochResponse()
	got.SetVersion(4)
	if err := got.ReadFrom(rest); err != nil || got.Topics[0].Partitions[0].EndOffset != 42 {
		t.Fatalf("body: %+v, %v", got, err)
	}
}

// FuzzParseResponse: response frames come off the network; the header
// parser and the kmsg decoders the fetcher uses must not panic.
func FuzzParseResponse(f *testing.F) {
	f.Add([]byte{0, 0, 0, 7, 0}, true)
	f.Add([]byte{0, 0, 0, 7, 2, 1, 200, 3}, true)
	f.Add([]byte{0, 0, 0, 1}, false)
	f.Fuzz(func(t *testing.T, b []byte, flexible bool) {
		rest, _, err := parseResponseHeader(b, flexible)
		if err != nil {
			return
		}
		if len(rest) > len(b) {
			t.Fatalf("rest %d longer than input %d", len(rest), len(b))
		}
		fr := kmsg.NewPtrFetchResponse()
		fr.SetVersion(fetchVersion)
		_ = fr.ReadFrom(rest)
		er := kmsg.NewPtrOffsetForLeaderEpochResponse()
		er.SetVersion(epochQueryVersion)
		_ = er.ReadFrom(rest)
	})
}
