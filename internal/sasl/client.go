package sasl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/stratalog/strata/internal/kframe"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ClientCredentials are what a broker presents to another broker's SASL
// listener: sasl.mechanism.inter.broker.protocol and the username and
// password options of that mechanism's login module.
type ClientCredentials struct {
	Mechanism string
	User      string
	Password  string
}

// clientID is the client id of a broker's authentication requests.
const clientID = "strata-broker"

// Authenticate runs SaslHandshake v1 and SaslAuthenticate v1 on conn, a
// fresh connection to a SASL listener, with the deadline of ctx (or 30
// seconds); afterwards conn carries Kafka requests as that principal.
func Authenticate(ctx context.Context, conn net.Conn, cc ClientCredentials) error {
	_, err := authenticate(ctx, conn, cc)
	return err
}

// authenticate is Authenticate; it also returns the session lifetime the
// broker answered (KIP-368's session_lifetime_ms, 0: none).
func authenticate(ctx context.Context, conn net.Conn, cc ClientCredentials) (int64, error) {
	var mech kgosasl.Mechanism
	switch cc.Mechanism {
	case Plain:
		mech = plain.Auth{User: cc.User, Pass: cc.Password}.AsMechanism()
	case ScramSHA256:
		mech = scram.Auth{User: cc.User, Pass: cc.Password}.AsSha256Mechanism()
	case ScramSHA512:
		mech = scram.Auth{User: cc.User, Pass: cc.Password}.AsSha512Mechanism()
	default:
		return 0, errors.New("sasl: cannot authenticate with mechanism " + cc.Mechanism)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		// The caller's context is the clock here: a socket deadline is
		// a wall-clock instant, and context.WithTimeout gives the one 30
		// seconds from now without a time.Now in this package.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		deadline, _ = ctx.Deadline()
	}
	conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})

	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = cc.Mechanism
	hresp := kmsg.NewPtrSASLHandshakeResponse()
	hresp.Version = 1
	if err := roundTrip(conn, 1, hs, hresp); err != nil {
		return 0, err
	}
	if err := kerrOf(hresp.ErrorCode, nil); err != nil {
		return 0, errors.New("sasl: handshake for " + cc.Mechanism + ": " + err.Error())
	}
	sess, msg, err := mech.Authenticate(ctx, conn.RemoteAddr().String())
	if err != nil {
		return 0, err
	}
	for corr := int32(2); ; corr++ {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = 1
		req.SASLAuthBytes = msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.Version = 1
		if err := roundTrip(conn, corr, req, resp); err != nil {
			return 0, err
		}
		if err := kerrOf(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return 0, errors.New("sasl: " + cc.Mechanism + " as " + cc.User + ": " + err.Error())
		}
		done, next, err := sess.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return 0, err
		}
		if done {
			return resp.SessionLifetimeMillis, nil
		}
		msg = next
		if corr > 10 {
			return 0, errors.New("sasl: " + cc.Mechanism + ": exchange did not end")
		}
	}
}

// AuthenticateSession is Authenticate for a connection that lives longer
// than its session: when the broker answers with a session lifetime
// (KIP-368, connections.max.reauth.ms), the connection it returns
// re-authenticates on the same socket (SaslHandshake and SaslAuthenticate
// again, as Kafka's clients do) before the first request written once
// reauthShare of the lifetime has passed by now, so the broker never
// closes it for an expired session. Without a lifetime it returns conn.
// The returned connection must carry one request at a time, each frame in
// one Write, its response read before the next Write (the replica
// fetcher's and the marker client's use): the re-authentication's
// responses are read in between.
func AuthenticateSession(ctx context.Context, conn net.Conn, cc ClientCredentials, now func() time.Time) (net.Conn, error) {
	life, err := authenticate(ctx, conn, cc)
	if err != nil || life <= 0 {
		return conn, err
	}
	return &sessionConn{Conn: conn, cc: cc, now: now, due: dueAfter(now(), life)}, nil
}

// reauthShare is the share of a session's lifetime after which the next
// request re-authenticates first (Kafka's clients pick 85-95 %).
const reauthShare = 0.85

func dueAfter(t time.Time, lifeMs int64) time.Time {
	return t.Add(time.Duration(float64(lifeMs)*reauthShare) * time.Millisecond)
}

// sessionConn re-authenticates before a Write once its session is due.
type sessionConn struct {
	net.Conn
	cc  ClientCredentials
	now func() time.Time

	mu      sync.Mutex
	due     time.Time
	rd, wd  time.Time // the caller's deadlines, put back after a re-authentication
	reauths int
}

func (c *sessionConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); !c.due.IsZero() && !now.Before(c.due) {
		life, err := authenticate(context.Background(), c.Conn, c.cc)
		c.Conn.SetReadDeadline(c.rd)
		c.Conn.SetWriteDeadline(c.wd)
		if err != nil {
			return 0, fmt.Errorf("sasl: re-authenticating: %w", err)
		}
		c.reauths++
		c.due = time.Time{} // no lifetime any more: never again
		if life > 0 {
			c.due = dueAfter(now, life)
		}
	}
	return c.Conn.Write(p)
}

func (c *sessionConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.rd, c.wd = t, t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *sessionConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rd = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *sessionConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wd = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

// Reauthentications is how many times conn, returned by
// AuthenticateSession, re-authenticated (0 for any other connection).
func Reauthentications(conn net.Conn) int {
	if c, ok := conn.(*sessionConn); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.reauths
	}
	return 0
}

func kerrOf(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	s := "error code " + strconv.Itoa(int(code))
	switch code {
	case 33:
		s = "UNSUPPORTED_SASL_MECHANISM"
	case 34:
		s = "ILLEGAL_SASL_STATE"
	case 58:
		s = "SASL_AUTHENTICATION_FAILED"
	}
	if msg != nil && *msg != "" {
		s += ": " + *msg
	}
	return errors.New(s)
}

// requests frames the client's requests (size, request header, body), as
// the broker's other clients do.
var requests = kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))

// roundTrip writes req (request header v1: both requests here are
// non-flexible at v1) and reads resp (response header v0).
func roundTrip(conn net.Conn, corr int32, req kmsg.Request, resp kmsg.Response) error {
	if _, err := conn.Write(requests.AppendRequest(make([]byte, 0, 64), req, corr)); err != nil {
		return err
	}
	frame, err := kframe.ReadFrame(conn, MaxTokenBytes, nil)
	if err != nil {
		return errors.New("sasl: reading the " + kmsg.NameForKey(req.Key()) + " response: " + err.Error())
	}
	body, got, err := kframe.SplitResponseHeader(frame, false)
	if err != nil {
		return errors.New("sasl: bad " + kmsg.NameForKey(req.Key()) + " response: " + err.Error())
	}
	if got != corr {
		return errors.New("sasl: response correlation id mismatch")
	}
	return resp.ReadFrom(body)
}
