package netpoll

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// A muted connection's next request is not read until the mute ends by
// the server's clock (a throttled client, KIP-219); a connection closed
// while muted ends its reader.
func TestMuteFor(t *testing.T) {
	var nowNs atomic.Int64
	nowNs.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	_, addr := startServer(t, Config{Now: func() time.Time { return time.Unix(0, nowNs.Load()) }},
		handlerFunc(func(c *Conn, frame []byte, r *Reply) {
			if string(frame) == "mute" {
				c.MuteFor(time.Hour)
			}
			r.Send(frame)
		}))
	c := dial(t, addr)
	writeFrame(t, c, []byte("mute"))
	if got := readFrame(t, c); string(got) != "mute" {
		t.Fatalf("got %q", got)
	}
	writeFrame(t, c, []byte("next"))
	// Not answered while muted (the clock stands still).
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var b [1]byte
	if _, err := c.Read(b[:]); err == nil {
		t.Fatal("a muted connection's next request was answered")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("read: %v", err)
	}
	nowNs.Add(int64(2 * time.Hour)) // the mute is over
	c.SetReadDeadline(time.Time{})
	if got := readFrame(t, c); string(got) != "next" {
		t.Fatalf("after the mute: %q", got)
	}

	// Closed while muted: the reader stops (startServer's cleanup checks
	// the server closes cleanly).
	c2 := dial(t, addr)
	writeFrame(t, c2, []byte("mute"))
	readFrame(t, c2)
	c2.Close()
}
