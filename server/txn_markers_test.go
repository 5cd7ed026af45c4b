package server

import (
	"bytes"
	"github.com/stratalog/strata/netpoll"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzSplitResponseHeader: the coordinator's response parsing never panics
// and never returns a body outside its input.
func FuzzSplitResponseHeader(f *testing.F) {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	resp.Version = writeTxnMarkersVersion
	f.Add(append([]byte{0, 0, 0, 7, 0}, resp.AppendTo(nil)...), true)
	f.Add([]byte{0, 0, 0, 7, 2, 1, 200, 1}, true)
	f.Add([]byte{0, 0, 0, 7}, false)
	f.Fuzz(func(t *testing.T, b []byte, flexible bool) {
		body, corr, err := netpoll.SplitResponseHeader(b, flexible)
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

// TestBrokerClientRetriesStalePooledConn: a pooled connection the peer
// closed while it was idle costs no failed request.
func TestBrokerClientRetriesStalePooledConn(t *testing.T) {
	addr, _, _ := startBroker(t)
	var b brokerClient
	b.init("test")
	defer b.close()
	ctx := testCtx(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-test", "1"
	if err := b.roundTrip(ctx, addr, req, req.ResponseKind()); err != nil {
		t.Fatal(err)
	}
	// The pooled connection dies while idle (here: closed under the pool).
	b.mu.Lock()
	if len(b.idle[addr]) != 1 {
		b.mu.Unlock()
		t.Fatalf("%d pooled connections, want 1", len(b.idle[addr]))
	}
	b.idle[addr][0].Close()
	b.mu.Unlock()
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if err := b.roundTrip(ctx, addr, req, resp); err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("after the pooled connection died: %v %+v", err, resp)
	}
}
