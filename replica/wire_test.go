package replica

import (
	"encoding/binary"
	"github.com/stratalog/strata/internal/kframe"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

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
	rest, corr, err := kframe.SplitResponseHeader(body, true)
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
		rest, _, err := kframe.SplitResponseHeader(b, flexible)
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
