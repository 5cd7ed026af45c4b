package server

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stillServes asserts a new connection to addr gets an ApiVersions answer.
func stillServes(t *testing.T, addr string) {
	t.Helper()
	c := dialRaw(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "after", "1"
	resp := kmsg.NewPtrApiVersionsResponse()
	c.roundTrip(req, 1, resp)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("broker answers a new connection with error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

// TestBadFramesCloseTheConnection sends one malformed request per
// connection: each connection is closed without an answer, the reason is
// logged with the remote address, and the broker keeps serving.
func TestBadFramesCloseTheConnection(t *testing.T) {
	const maxRequest = 4096
	addr, s, _ := startBroker(t, func(c *Config, _ *engine.Options) { c.MaxRequestBytes = maxRequest })

	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("some-topic")}}
	good := encodeRequest(meta, 3, "bad-client")

	withKey := func(k int16) []byte {
		b := append([]byte(nil), good...)
		binary.BigEndian.PutUint16(b, uint16(k))
		return b
	}
	withVersion := func(v int16) []byte {
		b := append([]byte(nil), good...)
		binary.BigEndian.PutUint16(b[2:], uint16(v))
		return b
	}
	for _, tc := range []struct {
		name  string
		frame []byte // sent with its size prefix
		raw   []byte // sent as is (no prefix added)
		log   string // expected in the broker's log line
	}{
		{name: "unknown api key", frame: withKey(1234), log: "key=1234"},
		{name: "api key not served", frame: withKey(11), log: "JoinGroup"},
		{name: "version above range", frame: withVersion(13), log: "unsupported api version"},
		{name: "negative version", frame: withVersion(-3), log: "unsupported api version"},
		{name: "truncated body", frame: good[:len(good)-5], log: "malformed request body"},
		{name: "truncated header", frame: good[:7], log: "header truncated"},
		{name: "client id length -2", frame: header(3, 9, 1, -2, ""), log: "invalid client id length"},
		{name: "client id length past the frame", frame: header(3, 9, 1, 300, "abc"), log: "header truncated"},
		{name: "empty frame", frame: []byte{}}, // netpoll may refuse it before we see it
		{name: "oversize frame", raw: binary.BigEndian.AppendUint32(nil, maxRequest+1)},
		{name: "negative frame size", raw: []byte{0x80, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr)
			if tc.raw != nil {
				if _, err := c.Write(tc.raw); err != nil {
					t.Fatal(err)
				}
			} else {
				c.writeFrame(tc.frame)
			}
			c.expectClosed()
			if tc.log != "" {
				waitLog(t, s, tc.log)
				local := c.LocalAddr().String()
				if !strings.Contains(logsOf(s), local) {
					t.Fatalf("log does not name the remote address %s:\n%s", local, logsOf(s))
				}
			}
			stillServes(t, addr)
		})
	}
}

// TestResponsesFollowRequestOrder pipelines requests of different APIs on
// one connection and reads the answers back in order, each with its
// correlation id and the right header form (tags only for flexible versions).
func TestResponsesFollowRequestOrder(t *testing.T) {
	addr, _, _ := startBroker(t)
	c := dialRaw(t, addr)
	type exchange struct {
		req  kmsg.Request
		resp kmsg.Response
	}
	var ex []exchange
	for i := 0; i < 20; i++ {
		switch i % 4 {
		case 0:
			r := kmsg.NewPtrApiVersionsRequest()
			r.SetVersion(int16(i % 5))
			r.ClientSoftwareName, r.ClientSoftwareVersion = "p", "1"
			ex = append(ex, exchange{r, kmsg.NewPtrApiVersionsResponse()})
		case 1:
			r := kmsg.NewPtrMetadataRequest()
			r.SetVersion(int16(i % 13))
			ex = append(ex, exchange{r, kmsg.NewPtrMetadataResponse()})
		case 2:
			r := kmsg.NewPtrDescribeClusterRequest()
			r.SetVersion(int16(i % 2))
			ex = append(ex, exchange{r, kmsg.NewPtrDescribeClusterResponse()})
		case 3:
			r := kmsg.NewPtrDescribeConfigsRequest()
			r.SetVersion(int16(i % 5))
			r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0"}}
			ex = append(ex, exchange{r, kmsg.NewPtrDescribeConfigsResponse()})
		}
	}
	var all []byte
	for i, e := range ex {
		f := encodeRequest(e.req, int32(1000+i), "pipeline")
		all = binary.BigEndian.AppendUint32(all, uint32(len(f)))
		all = append(all, f...)
	}
	if _, err := c.Write(all); err != nil {
		t.Fatal(err)
	}
	for i, e := range ex {
		b, err := c.readFrame()
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		e.resp.SetVersion(e.req.GetVersion())
		decodeResponse(t, b, int32(1000+i), e.resp)
	}
}

func TestNewFillsDefaults(t *testing.T) {
	s := New(Config{}, nil)
	c := s.Config()
	if c.NumPartitions != 1 || c.DefaultReplication != 1 || c.MaxRequestBytes != 104857600 ||
		c.FetchMaxBytes != 57671680 || c.Logger == nil || len(c.ClusterID) != 22 ||
		c.LogDefaults != engine.DefaultLogConfig() {
		t.Fatalf("defaults not filled: %+v", c)
	}
	if other := New(Config{}, nil).Config().ClusterID; other == c.ClusterID {
		t.Fatalf("two servers generated the same cluster id %s", other)
	}
	kept := New(Config{NumPartitions: 3, ClusterID: "x", MaxRequestBytes: 10}, nil).Config()
	if kept.NumPartitions != 3 || kept.ClusterID != "x" || kept.MaxRequestBytes != 10 {
		t.Fatalf("explicit settings overwritten: %+v", kept)
	}
}

// TestAdvertisedFromListener: with no advertised address configured, the
// broker tells clients the address it listens on.
func TestAdvertisedFromListener(t *testing.T) {
	addr, s, _ := startBroker(t)
	c := dialRaw(t, addr)
	resp := metadata(t, c, 12, nil, false) // answered after Serve began
	b := resp.Brokers[0]
	if got := fmt.Sprintf("%s:%d", b.Host, b.Port); got != addr {
		t.Fatalf("Metadata advertises %s, broker listens on %s", got, addr)
	}
	if host, port := s.Advertised(); fmt.Sprintf("%s:%d", host, port) != addr {
		t.Fatalf("Advertised() = %s:%d", host, port)
	}
}
