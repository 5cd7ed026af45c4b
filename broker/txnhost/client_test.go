package txnhost

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/kframe"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzSplitResponseHeader: the client's response parsing never panics
// and never returns a body outside its input.
func FuzzSplitResponseHeader(f *testing.F) {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	resp.Version = writeTxnMarkersVersion
	f.Add(append([]byte{0, 0, 0, 7, 0}, resp.AppendTo(nil)...), true)
	f.Add([]byte{0, 0, 0, 7, 2, 1, 200, 1}, true)
	f.Add([]byte{0, 0, 0, 7}, false)
	f.Fuzz(func(t *testing.T, b []byte, flexible bool) {
		body, corr, err := kframe.SplitResponseHeader(b, flexible)
		if err != nil {
			return
		}
		if len(b) < 4 || corr != int32(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])) {
			t.Fatalf("correlation id %d from %x", corr, b)
		}
		if !bytes.HasSuffix(b, body) {
			t.Fatalf("body %x is not a suffix of %x", body, b)
		}
		if flexible {
			r := kmsg.NewPtrWriteTxnMarkersResponse()
			r.Version = writeTxnMarkersVersion
			_ = r.ReadFrom(body) // must not panic
		}
	})
}

// realClock is the wall clock (tests only).
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) Tick(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}
func (realClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// fakeBroker answers every request on 127.0.0.1 with handle's response
// (header v0 for ApiVersions, v1 otherwise when flexible) until the test
// ends; it counts accepted connections.
type fakeBroker struct {
	ln    net.Listener
	mu    sync.Mutex
	conns int
	wg    sync.WaitGroup
}

func startFakeBroker(t *testing.T, handle func(key, version int16, body []byte) kmsg.Response) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBroker{ln: ln}
	var open []net.Conn
	fb.wg.Add(1)
	go func() {
		defer fb.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fb.mu.Lock()
			fb.conns++
			open = append(open, c)
			fb.mu.Unlock()
			fb.wg.Add(1)
			go func() {
				defer fb.wg.Done()
				defer c.Close()
				for {
					frame, err := kframe.ReadFrame(c, 1<<20, nil)
					if err != nil || len(frame) < 10 {
						return
					}
					key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
					corr := binary.BigEndian.Uint32(frame[4:])
					resp := handle(key, version, frame)
					resp.SetVersion(version)
					out := binary.BigEndian.AppendUint32(make([]byte, 4), corr)
					if resp.IsFlexible() && key != apiVersionsKey {
						out = append(out, 0)
					}
					out = resp.AppendTo(out)
					binary.BigEndian.PutUint32(out, uint32(len(out)-4))
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		fb.mu.Lock()
		for _, c := range open {
			c.Close()
		}
		fb.mu.Unlock()
		fb.wg.Wait()
	})
	return fb
}

func (fb *fakeBroker) accepted() int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.conns
}

// TestClientRetriesStalePooledConn: a pooled connection the peer closed
// while it was idle costs no failed request; a healthy one is reused.
func TestClientRetriesStalePooledConn(t *testing.T) {
	fb := startFakeBroker(t, func(key, version int16, _ []byte) kmsg.Response {
		r := kmsg.NewPtrApiVersionsResponse()
		r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MaxVersion: 4}}
		return r
	})
	addr := fb.ln.Addr().String()
	b := NewClient("test", nil, realClock{})
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-test", "1"
	for range 2 {
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		if err := b.RoundTrip(ctx, addr, req, resp); err != nil || len(resp.ApiKeys) != 1 {
			t.Fatalf("round trip: %v %+v", err, resp)
		}
	}
	if n := fb.accepted(); n != 1 {
		t.Fatalf("%d connections for two requests, want 1 (pooled)", n)
	}
	// The pooled connection dies while idle (here: closed under the pool).
	idle := b.idleConns(addr)
	if len(idle) != 1 {
		t.Fatalf("%d pooled connections, want 1", len(idle))
	}
	idle[0].Close()
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if err := b.RoundTrip(ctx, addr, req, resp); err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("after the pooled connection died: %v %+v", err, resp)
	}
	if n := fb.accepted(); n != 2 {
		t.Fatalf("%d connections, want 2 (one new after the dead one)", n)
	}
	b.Close()
	if err := b.RoundTrip(ctx, addr, req, resp); err == nil {
		t.Fatal("round trip on a closed client succeeded")
	}
}
