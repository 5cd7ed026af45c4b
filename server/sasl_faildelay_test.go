package server

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSaslFailedAuthenticationDelayed: with
// connection.failed.authentication.delay.ms (KIP-306) a failed
// SaslAuthenticate is answered, and the connection closed, only once the
// delay has passed (the test holds the server's timer); a good password is
// answered at once.
func TestSaslFailedAuthenticationDelayed(t *testing.T) {
	var mu sync.Mutex
	var delays []time.Duration
	var held []func()
	_, s, _ := startBroker(t, func(c *Config, _ *engine.Options) {
		c.AfterFunc = func(d time.Duration, f func()) {
			mu.Lock()
			defer mu.Unlock()
			delays, held = append(delays, d), append(held, f)
		}
	})
	l := Listener{Name: "SASL", SASL: &sasl.Config{Mechanisms: []string{sasl.Plain},
		PlainUsers: map[string]string{"alice": "alice-secret"}, FailedAuthDelayMs: 250}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(ln, l) }()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})

	good := dialRaw(t, ln.Addr().String())
	if ar := plainAuth(good, "alice", "alice-secret", 1, 1); ar.ErrorCode != 0 {
		t.Fatalf("good password: error %d", ar.ErrorCode)
	}

	bad := dialRaw(t, ln.Addr().String())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sasl.Plain
	bad.roundTrip(hs, 1, kmsg.NewPtrSASLHandshakeResponse())
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00alice\x00guess")
	bad.writeFrame(encodeRequest(au, 2, "raw"))
	waitFor(t, func() string { return "the failed authentication's timer" }, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(held) == 1
	})
	mu.Lock()
	d := delays[0]
	mu.Unlock()
	if d != 250*time.Millisecond {
		t.Fatalf("failed authentication delayed by %v, want 250ms", d)
	}
	// Held: nothing comes back yet (a late answer would fail this check
	// only on a machine too slow to send it within 300 ms).
	_ = bad.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if b, err := bad.readFrame(); err == nil {
		t.Fatalf("a %d-byte answer before the delay ended", len(b))
	} else if ne := (net.Error)(nil); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("connection closed before the delay ended: %v", err)
	}
	mu.Lock()
	f := held[0]
	mu.Unlock()
	f() // the delay ends
	_ = bad.SetReadDeadline(time.Now().Add(testTimeout))
	b, err := bad.readFrame()
	if err != nil {
		t.Fatalf("no answer after the delay: %v", err)
	}
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	ar.SetVersion(1)
	decodeResponse(t, b, 2, ar)
	if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("error %d, want SASL_AUTHENTICATION_FAILED", ar.ErrorCode)
	}
	bad.expectClosed()
}
