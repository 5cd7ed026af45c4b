package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/netpoll"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakePeer stands in for a *netpoll.Conn in tests that call dispatch directly.
type fakePeer struct {
	done   chan struct{}
	once   sync.Once
	closed atomic.Bool
}

func newFakePeer() *fakePeer { return &fakePeer{done: make(chan struct{})} }

func (p *fakePeer) ID() uint64            { return 1 }
func (p *fakePeer) RemoteAddr() net.Addr  { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (p *fakePeer) Done() <-chan struct{} { return p.done }
func (p *fakePeer) Close() {
	p.closed.Store(true)
	p.once.Do(func() { close(p.done) })
}

// completion is how a request was completed.
type completion struct {
	kind string // "send", "skip" or "close"
	resp []byte // "send": the response bytes (file parts read back)
	err  error  // reading a file part failed
}

// fakeReply stands in for a *netpoll.Reply; every completion is queued so a
// test can tell "exactly once" from "twice".
type fakeReply struct{ c chan completion }

func newFakeReply() *fakeReply { return &fakeReply{c: make(chan completion, 4)} }

func (r *fakeReply) Send(resp []byte) { r.c <- completion{kind: "send", resp: bytes.Clone(resp)} }
func (r *fakeReply) Skip()            { r.c <- completion{kind: "skip"} }
func (r *fakeReply) Close()           { r.c <- completion{kind: "close"} }
func (r *fakeReply) SendParts(parts []netpoll.Part, done func()) {
	var b []byte
	var err error
	for _, p := range parts {
		if p.File == nil {
			b = append(b, p.Buf...)
			continue
		}
		buf := make([]byte, p.Len)
		if _, e := p.File.ReadAt(buf, p.Off); e != nil && err == nil {
			err = fmt.Errorf("reading file part: %w", e)
		}
		b = append(b, buf...)
	}
	if done != nil {
		done()
	}
	r.c <- completion{kind: "send", resp: b, err: err}
}

// wait returns the first completion, failing if there is none within
// testTimeout (a handler that never completes its request is a bug).
func (r *fakeReply) wait(t testing.TB) completion {
	t.Helper()
	select {
	case c := <-r.c:
		return c
	case <-time.After(testTimeout):
		t.Fatal("request never completed")
		return completion{}
	}
}

// withHandler swaps the handler of key for the duration of the test. Only
// for sequential tests: the table is otherwise read without locks.
func withHandler(t *testing.T, key int16, min, max int16, fn handler) {
	t.Helper()
	apiKeys() // built from the real table before the swap
	old := apis[key]
	apis[key] = apiEntry{minVersion: min, maxVersion: max, fn: fn}
	t.Cleanup(func() { apis[key] = old })
}

// TestDispatchRecoversHandlerPanic: a panicking handler closes the
// connection (through the reply if it had not completed it, directly if it
// had) and is logged; the broker goroutine survives.
func TestDispatchRecoversHandlerPanic(t *testing.T) {
	var logs logBuffer
	s := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, nil)
	const key = 11 // JoinGroup: not served by Strata
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(0)
	frame := encodeRequest(req, 7, "panicky")

	withHandler(t, key, 0, 0, func(*Server, *reqCtx) { panic("boom") })
	p, r := newFakePeer(), newFakeReply()
	s.dispatch(p, frame, r)
	if c := r.wait(t); c.kind != "close" {
		t.Fatalf("completed with %q, want close", c.kind)
	}
	if s.panics.Load() != 1 || !strings.Contains(logs.String(), "boom") || !strings.Contains(logs.String(), "JoinGroup") {
		t.Fatalf("panic not logged with the api name: %s", logs.String())
	}

	withHandler(t, key, 0, 0, func(_ *Server, rc *reqCtx) {
		rc.respond(kmsg.NewPtrJoinGroupResponse())
		panic("after responding")
	})
	p, r = newFakePeer(), newFakeReply()
	s.dispatch(p, frame, r)
	if c := r.wait(t); c.kind != "send" {
		t.Fatalf("completed with %q, want the response", c.kind)
	}
	if !p.closed.Load() {
		t.Fatal("connection not closed after a panic that followed the response")
	}
	select {
	case c := <-r.c:
		t.Fatalf("request completed twice (%q)", c.kind)
	default:
	}
}

// TestCompleteTwiceIsRefused: a second completion never reaches netpoll.
func TestCompleteTwiceIsRefused(t *testing.T) {
	var logs logBuffer
	r := newFakeReply()
	rc := &reqCtx{reply: r, key: 3, log: slog.New(slog.NewTextHandler(&logs, nil))}
	rc.skip()
	rc.respond(kmsg.NewPtrMetadataResponse())
	rc.close(errors.New("x"))
	if c := r.wait(t); c.kind != "skip" {
		t.Fatalf("first completion %q", c.kind)
	}
	select {
	case c := <-r.c:
		t.Fatalf("second completion %q reached the reply", c.kind)
	default:
	}
	if !strings.Contains(logs.String(), "completed twice") {
		t.Fatalf("double completion not logged: %s", logs.String())
	}
}

// tooCostly keeps FuzzDispatch from creating large topics on disk: a fuzz
// worker runs for minutes against one engine.
func tooCostly(eng *engine.Engine, req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		if len(eng.Topics()) > 32 || len(r.Topics) > 4 {
			return true
		}
		for _, t := range r.Topics {
			if t.NumPartitions > 4 || len(t.ReplicaAssignment) > 4 || len(t.Configs) > 0 {
				return true
			}
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			if t.Count > 8 {
				return true
			}
		}
	}
	return false
}

// FuzzDispatch runs arbitrary frames through the whole request path (decode,
// dispatch, every handler, encode) on an in-process Server over a real
// engine, with fake connection and reply. Invariants: no panic (the recover
// in dispatch would hide one, so a logged panic fails the fuzz), every
// request completes exactly once, a frame that does not decode closes the
// connection, and every response carries the correlation id and decodes with
// kmsg at the request's version.
func FuzzDispatch(f *testing.F) {
	var logs logBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lc := engine.DefaultLogConfig()
	lc.SegmentBytes = 1 << 20
	lc.SegmentIndexBytes = 1 << 12
	lc.Preallocate = false
	eng, err := engine.Open(engine.Options{Dir: f.TempDir(), Log: lc, Logger: logger})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { eng.Close() })
	topic, err := eng.CreateTopic("fz", 2, nil)
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if _, _, err := topic.Produce([]byte{byte(i)}, []byte("value")); err != nil {
			f.Fatal(err)
		}
	}
	s := New(Config{NodeID: 1, AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092, LogDefaults: lc, Logger: logger}, eng)

	seeds := []kmsg.Request{
		&kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("fz")}, {TopicID: topic.ID()}}},
		&kmsg.MetadataRequest{Version: 0},
		&kmsg.ApiVersionsRequest{Version: 4, ClientSoftwareName: "a", ClientSoftwareVersion: "1"},
		&kmsg.CreateTopicsRequest{Version: 7, Topics: []kmsg.CreateTopicsRequestTopic{{Topic: "new", NumPartitions: 1, ReplicationFactor: 1}}},
		&kmsg.DeleteTopicsRequest{Version: 6, Topics: []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("nope")}}},
		&kmsg.CreatePartitionsRequest{Version: 3, Topics: []kmsg.CreatePartitionsRequestTopic{{Topic: "fz", Count: 3}}, ValidateOnly: true},
		&kmsg.DescribeConfigsRequest{Version: 4, Resources: []kmsg.DescribeConfigsRequestResource{
			{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fz"},
			{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"},
		}, IncludeSynonyms: true},
		&kmsg.DescribeClusterRequest{Version: 1, EndpointType: 1},
		&kmsg.FetchRequest{Version: 11, MaxBytes: 1 << 20, Topics: []kmsg.FetchRequestTopic{{Topic: "fz", Partitions: []kmsg.FetchRequestTopicPartition{
			{Partition: 0, PartitionMaxBytes: 1 << 20}, {Partition: 1, PartitionMaxBytes: 1 << 20},
		}}}},
		&kmsg.ListOffsetsRequest{Version: 4, Topics: []kmsg.ListOffsetsRequestTopic{{Topic: "fz", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1}}}}},
	}
	for i, req := range seeds {
		f.Add(encodeRequest(req, int32(i), "fuzz"))
	}
	f.Add(header(apiVersionsKey, 99, 5, -1, ""))
	f.Add(header(3, 12, 1, -7, ""))

	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, decErr := decodeRequest(frame, nil)
		if decErr == nil && req != nil && tooCostly(eng, req) {
			return
		}
		p, r := newFakePeer(), newFakeReply()
		s.dispatch(p, frame, r)
		p.Close()
		s.endPolls(p) // long polls give up now, as on a real connection's close (ConnClosed)
		c := r.wait(t)
		if s.panics.Load() != 0 {
			t.Fatalf("handler panicked:\n%s", logs.String())
		}
		if decErr != nil {
			if c.kind != "close" {
				t.Fatalf("undecodable frame (%v) completed with %q", decErr, c.kind)
			}
			return
		}
		if c.kind != "send" {
			return // skip (acks=0) and close are legitimate answers for some requests
		}
		if c.err != nil {
			t.Fatal(c.err)
		}
		if len(c.resp) < 4 || int32(binary.BigEndian.Uint32(c.resp)) != h.corrID {
			t.Fatalf("response does not start with correlation id %d: %x", h.corrID, c.resp[:min(len(c.resp), 8)])
		}
		resp := kmsg.ResponseForKey(h.key)
		if req == nil {
			resp.SetVersion(0) // ApiVersions above our range
		} else {
			resp.SetVersion(h.version)
		}
		body := c.resp[4:]
		if resp.IsFlexible() && h.key != apiVersionsKey {
			if len(body) == 0 || body[0] != 0 {
				t.Fatalf("flexible response without an empty header tag section")
			}
			body = body[1:]
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("%s v%d response does not decode: %v", kmsg.NameForKey(h.key), resp.GetVersion(), err)
		}
	})
}

// A panic inside request decoding costs the connection, not the process:
// it is counted with the handler panics and logged as a bad request; bad
// requests in a loop log at most badFrameLogBurst lines per window, and
// the next window's first line says how many were held back.
func TestDispatchRecoversDecoderPanicAndLimitsLogs(t *testing.T) {
	var logs logBuffer
	s := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, nil)
	now := time.Unix(5000, 0)
	s.now = func() time.Time { return now }
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(1)
	frame := encodeRequest(req, 3, "fuzzer")

	old := decodeFrame
	t.Cleanup(func() { decodeFrame = old })
	decodeFrame = func([]byte, func(int64) bool) (requestHeader, kmsg.Request, error) { panic("decoder bug") }
	p, r := newFakePeer(), newFakeReply()
	s.dispatch(p, frame, r)
	if c := r.wait(t); c.kind != "close" {
		t.Fatalf("completed with %q, want close", c.kind)
	}
	if s.panics.Load() != 1 || !strings.Contains(logs.String(), "panic decoding the request: decoder bug") {
		t.Fatalf("panics %d, log %s", s.panics.Load(), logs.String())
	}

	decodeFrame = old
	bad := []byte{0, 3} // too short for a request header
	for range badFrameLogBurst + 10 {
		p, r := newFakePeer(), newFakeReply()
		s.dispatch(p, bad, r)
		r.wait(t)
	}
	if n := strings.Count(logs.String(), "closing connection: bad request"); n != badFrameLogBurst {
		t.Fatalf("%d bad-request lines for %d bad frames in one window, want %d", n, badFrameLogBurst+11, badFrameLogBurst)
	}
	now = now.Add(badFrameLogWindow)
	p, r = newFakePeer(), newFakeReply()
	s.dispatch(p, bad, r)
	r.wait(t)
	if !strings.Contains(logs.String(), "similar_lines_suppressed=11") {
		t.Fatalf("the next window's line does not count the 11 held back:\n%s", logs.String())
	}
}
