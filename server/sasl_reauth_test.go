package server

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// manualClock is a server clock that moves only when the test says.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// startReauthBroker serves a SASL listener with connections.max.reauth.ms
// = reauthMs on a broker whose clock is clk: PLAIN users alice and carol,
// SCRAM user bob, OAUTHBEARER with unsecured tokens on clk.
func startReauthBroker(t *testing.T, clk *manualClock, reauthMs int64) (string, *Server) {
	t.Helper()
	store := sasl.NewStore()
	_, s, _ := startBroker(t, func(c *Config, _ *engine.Options) { c.Scram, c.Now = store, clk.now })
	for _, m := range []string{sasl.ScramSHA256, sasl.ScramSHA512} {
		c, err := sasl.NewCredential(m, "bob-secret", sasl.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Set("bob", m, c); err != nil {
			t.Fatal(err)
		}
	}
	l := Listener{Name: "SASL", SASL: &sasl.Config{
		Mechanisms: []string{sasl.Plain, sasl.ScramSHA256, sasl.ScramSHA512, sasl.OAuthBearer},
		PlainUsers: map[string]string{"alice": "alice-secret", "carol": "carol-secret"},
		Scram:      store,
		OAuth:      &sasl.OAuth{Unsecured: true, Now: clk.now},
		ReauthMs:   reauthMs,
	}}
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
	return ln.Addr().String(), s
}

// plainAuth runs a v1 handshake and one SaslAuthenticate (version v) of
// PLAIN user:pass on c and returns the answer.
func plainAuth(c *rawConn, user, pass string, v int16, corr int32) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sasl.Plain
	hr := kmsg.NewPtrSASLHandshakeResponse()
	c.roundTrip(hs, corr, hr)
	if hr.ErrorCode != 0 {
		c.t.Fatalf("handshake: error %d", hr.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = v, []byte("\x00"+user+"\x00"+pass)
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	c.roundTrip(au, corr+1, ar)
	return ar
}

// metadataServed sends a Metadata request on c and fails unless it is
// answered.
func metadataServed(c *rawConn, corr int32) {
	c.t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	mr := kmsg.NewPtrMetadataResponse()
	c.roundTrip(md, corr, mr)
	if len(mr.Brokers) != 1 {
		c.t.Fatalf("Metadata: %d brokers", len(mr.Brokers))
	}
}

// KIP-368 with a client that does not re-authenticate: SaslAuthenticate
// v1 and v2 answer session_lifetime_ms = connections.max.reauth.ms (v0
// cannot say it, and its session ends all the same); requests are served
// until the session's end on the broker's clock, and the first one after
// it closes the connection, with one log line.
func TestSaslReauthExpiredSessionCloses(t *testing.T) {
	clk := &manualClock{t: time.Unix(1_700_000_000, 0)}
	addr, s := startReauthBroker(t, clk, 1000)
	for _, v := range []int16{0, 1, 2} {
		c := dialRaw(t, addr)
		ar := plainAuth(c, "alice", "alice-secret", v, 1)
		want := int64(1000)
		if v == 0 {
			want = 0
		}
		if ar.ErrorCode != 0 || ar.SessionLifetimeMillis != want {
			t.Fatalf("SaslAuthenticate v%d: error %d, lifetime %d, want %d", v, ar.ErrorCode, ar.SessionLifetimeMillis, want)
		}
		metadataServed(c, 3)
		clk.advance(1000 * time.Millisecond) // the session's last instant
		metadataServed(c, 4)
		clk.advance(time.Millisecond)
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 4
		c.writeFrame(encodeRequest(md, 5, "raw"))
		c.expectClosed()
		waitLogCount(t, s, "SASL session expired without re-authentication", int(v)+1)
	}
	if n := strings.Count(logsOf(s), "SASL session expired"); n != 3 {
		t.Fatalf("%d expiry log lines for 3 expired connections", n)
	}
}

// A raw client that re-authenticates (SaslHandshake v1 and
// SaslAuthenticate on its authenticated connection) gets a new session
// each time and is served across several lifetimes; a handshake after
// the end still re-authenticates (as in Kafka). Re-authenticating as
// another principal, or with another mechanism, fails with
// SASL_AUTHENTICATION_FAILED and closes the connection. Without
// connections.max.reauth.ms a handshake after authentication stays
// ILLEGAL_SASL_STATE.
func TestSaslReauthRawClient(t *testing.T) {
	clk := &manualClock{t: time.Unix(1_700_000_000, 0)}
	addr, s := startReauthBroker(t, clk, 1000)
	c := dialRaw(t, addr)
	if ar := plainAuth(c, "alice", "alice-secret", 2, 1); ar.ErrorCode != 0 || ar.SessionLifetimeMillis != 1000 {
		t.Fatalf("authenticate: error %d, lifetime %d", ar.ErrorCode, ar.SessionLifetimeMillis)
	}
	corr := int32(10)
	for i := 0; i < 5; i++ { // 5 × 800 ms: four lifetimes
		clk.advance(800 * time.Millisecond)
		if ar := plainAuth(c, "alice", "alice-secret", 2, corr); ar.ErrorCode != 0 || ar.SessionLifetimeMillis != 1000 {
			t.Fatalf("re-authentication %d: error %d, lifetime %d", i, ar.ErrorCode, ar.SessionLifetimeMillis)
		}
		metadataServed(c, corr+2)
		corr += 3
	}
	clk.advance(1500 * time.Millisecond) // past the end: a handshake still re-authenticates
	if ar := plainAuth(c, "alice", "alice-secret", 1, corr); ar.ErrorCode != 0 || ar.SessionLifetimeMillis != 1000 {
		t.Fatalf("re-authentication after the end: error %d, lifetime %d", ar.ErrorCode, ar.SessionLifetimeMillis)
	}
	metadataServed(c, corr+2)
	if n := strings.Count(logsOf(s), "SASL re-authenticated"); n != 6 {
		t.Fatalf("%d re-authentications logged, want 6", n)
	}

	// Another principal.
	if ar := plainAuth(c, "carol", "carol-secret", 2, 100); ar.ErrorCode != kerr.SaslAuthenticationFailed.Code ||
		ar.ErrorMessage == nil || !strings.Contains(*ar.ErrorMessage, "Cannot change principals") {
		t.Fatalf("re-authentication as carol: error %d %v, want SASL_AUTHENTICATION_FAILED", ar.ErrorCode, ar.ErrorMessage)
	}
	c.expectClosed()

	// Another mechanism.
	c = dialRaw(t, addr)
	if ar := plainAuth(c, "alice", "alice-secret", 2, 1); ar.ErrorCode != 0 {
		t.Fatalf("authenticate: error %d", ar.ErrorCode)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sasl.ScramSHA512
	hr := kmsg.NewPtrSASLHandshakeResponse()
	c.roundTrip(hs, 3, hr)
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 2, []byte("n,,n=alice,r=abcdefgh")
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	c.roundTrip(au, 4, ar)
	if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil || !strings.Contains(*ar.ErrorMessage, "re-authentication of mechanism 'PLAIN'") {
		t.Fatalf("re-authentication with SCRAM: error %d %v, want SASL_AUTHENTICATION_FAILED", ar.ErrorCode, ar.ErrorMessage)
	}
	c.expectClosed()

	// Sessions that do not end: no lifetime, no re-authentication.
	addr0, _ := startReauthBroker(t, clk, 0)
	c = dialRaw(t, addr0)
	if ar := plainAuth(c, "alice", "alice-secret", 2, 1); ar.ErrorCode != 0 || ar.SessionLifetimeMillis != 0 {
		t.Fatalf("without reauth: error %d, lifetime %d", ar.ErrorCode, ar.SessionLifetimeMillis)
	}
	c.roundTrip(hs, 3, hr)
	if hr.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake after authentication without reauth: error %d, want ILLEGAL_SASL_STATE", hr.ErrorCode)
	}
	clk.advance(time.Hour)
	metadataServed(c, 4)
}

// reauthHook counts a franz-go client's connections and SaslAuthenticate
// requests.
type reauthHook struct{ connects, authenticates atomic.Int64 }

func (h *reauthHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		h.connects.Add(1)
	}
}

func (h *reauthHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 36 && err == nil {
		h.authenticates.Add(1)
	}
}

// franz-go re-authenticates by itself when SaslAuthenticate tells it the
// session's lifetime (KIP-368): with connections.max.reauth.ms = 1000 it
// re-authenticates before each request (its margin is at least 1 s), so
// while the broker's clock moves 600 ms between produces, ten produces
// (six lifetimes) all succeed on the connections it opened first, with
// SCRAM-SHA-512: more SaslAuthenticate requests than its logins needed,
// and the broker logs the re-authentications and no expired session.
func TestSaslReauthFranzGoKeepsProducing(t *testing.T) {
	clk := &manualClock{t: time.Unix(1_700_000_000, 0)}
	addr, s := startReauthBroker(t, clk, 1000)
	h := &reauthHook{}
	cl := newClient(t, addr, kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()),
		kgo.AllowAutoTopicCreation(), kgo.WithHooks(h))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte("0")}).FirstErr(); err != nil {
		t.Fatalf("first produce: %v", err)
	}
	connects, auths := h.connects.Load(), h.authenticates.Load()
	for i := 1; i <= 10; i++ {
		clk.advance(600 * time.Millisecond)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte{byte('0' + i%10)}}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v\n%s", i, err, logsOf(s))
		}
	}
	if got := h.connects.Load(); got != connects {
		t.Fatalf("the client connected %d times during the produces (it had %d connections): sessions were not renewed in place\n%s", got-connects, connects, logsOf(s))
	}
	// SCRAM: two SaslAuthenticate per authentication; at least one
	// re-authentication per produce.
	if got := h.authenticates.Load() - auths; got < 2*10 {
		t.Fatalf("%d SaslAuthenticate requests during 10 produces, want at least 20 (re-authentications)", got)
	}
	logs := logsOf(s)
	if n := strings.Count(logs, "SASL re-authenticated"); n < 10 {
		t.Fatalf("%d re-authentications logged, want at least 10\n%s", n, logs)
	}
	if strings.Contains(logs, "SASL session expired") {
		t.Fatalf("a session expired:\n%s", logs)
	}
}

// An OAUTHBEARER session ends no later than its token (Kafka's rule): with
// connections.max.reauth.ms = 60 s, a token expiring in 30 s gets a 30 s
// lifetime and its connection is closed at the first request after it;
// a token valid for an hour gets the 60 s.
func TestSaslReauthOAuthBearerTokenExpiry(t *testing.T) {
	clk := &manualClock{t: time.Unix(1_700_000_000, 0)}
	addr, s := startReauthBroker(t, clk, 60_000)
	for _, c := range []struct {
		expIn time.Duration
		want  int64
	}{{30 * time.Second, 30_000}, {time.Hour, 60_000}} {
		conn := dialRaw(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, sasl.OAuthBearer
		hr := kmsg.NewPtrSASLHandshakeResponse()
		conn.roundTrip(hs, 1, hr)
		tok := jwtPart(map[string]string{"alg": "none"}) + "." + jwtPart(map[string]any{"sub": "erin", "exp": clk.now().Add(c.expIn).Unix()}) + "."
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 2, []byte("n,,\x01auth=Bearer "+tok+"\x01\x01")
		ar := kmsg.NewPtrSASLAuthenticateResponse()
		conn.roundTrip(au, 2, ar)
		if ar.ErrorCode != 0 || ar.SessionLifetimeMillis != c.want {
			t.Fatalf("token expiring in %v: error %d %v, lifetime %d, want %d", c.expIn, ar.ErrorCode, ar.ErrorMessage, ar.SessionLifetimeMillis, c.want)
		}
		clk.advance(time.Duration(c.want) * time.Millisecond)
		metadataServed(conn, 3)
		clk.advance(time.Millisecond)
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 4
		conn.writeFrame(encodeRequest(md, 4, "raw"))
		conn.expectClosed()
	}
	waitLogCount(t, s, "SASL session expired without re-authentication", 2)
}

// TestSaslAuthenticateSessionReauthenticates: the broker-side client's
// connection (sasl.AuthenticateSession, the inter-broker dial) keeps its
// session alive by re-authenticating before the request that follows 85 %
// of the lifetime, so the broker serves it across several lifetimes
// instead of closing it; a plain Authenticate connection is closed at the
// first expiry.
func TestSaslAuthenticateSessionReauthenticates(t *testing.T) {
	clk := &manualClock{t: time.Unix(1_700_000_000, 0)}
	addr, s := startReauthBroker(t, clk, 1000)
	creds := sasl.ClientCredentials{Mechanism: sasl.ScramSHA512, User: "bob", Password: "bob-secret"}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	raw := dialRaw(t, addr)
	conn, err := sasl.AuthenticateSession(ctx, raw.Conn, creds, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	c := &rawConn{t: t, Conn: conn}
	corr := int32(100)
	for i := 0; i < 8; i++ { // 8 x 400 ms: over three lifetimes
		metadataServed(c, corr)
		corr++
		clk.advance(400 * time.Millisecond)
	}
	metadataServed(c, corr)
	// Requests at 0, 400, ... 3,200 ms: the ones at 1,200 (due at 850)
	// and 2,400 (due at 2,050) re-authenticate first.
	if n := sasl.Reauthentications(conn); n != 2 {
		t.Fatalf("%d re-authentications over 3.2 lifetimes, want 2", n)
	}
	if strings.Contains(logsOf(s), "SASL session expired") {
		t.Fatalf("the broker saw an expired session:\n%s", logsOf(s))
	}

	// The same without the session wrapper: closed once the lifetime ends.
	plain := dialRaw(t, addr)
	if err := sasl.Authenticate(ctx, plain.Conn, creds); err != nil {
		t.Fatal(err)
	}
	metadataServed(plain, 1)
	clk.advance(1001 * time.Millisecond)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	plain.writeFrame(encodeRequest(md, 2, "raw"))
	plain.expectClosed()
}
