package sasl

import (
	"context"
	"errors"
	"net"
	"strconv"
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
	var mech kgosasl.Mechanism
	switch cc.Mechanism {
	case Plain:
		mech = plain.Auth{User: cc.User, Pass: cc.Password}.AsMechanism()
	case ScramSHA256:
		mech = scram.Auth{User: cc.User, Pass: cc.Password}.AsSha256Mechanism()
	case ScramSHA512:
		mech = scram.Auth{User: cc.User, Pass: cc.Password}.AsSha512Mechanism()
	default:
		return errors.New("sasl: cannot authenticate with mechanism " + cc.Mechanism)
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
		return err
	}
	if err := kerrOf(hresp.ErrorCode, nil); err != nil {
		return errors.New("sasl: handshake for " + cc.Mechanism + ": " + err.Error())
	}
	sess, msg, err := mech.Authenticate(ctx, conn.RemoteAddr().String())
	if err != nil {
		return err
	}
	for corr := int32(2); ; corr++ {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = 1
		req.SASLAuthBytes = msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.Version = 1
		if err := roundTrip(conn, corr, req, resp); err != nil {
			return err
		}
		if err := kerrOf(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return errors.New("sasl: " + cc.Mechanism + " as " + cc.User + ": " + err.Error())
		}
		done, next, err := sess.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		msg = next
		if corr > 10 {
			return errors.New("sasl: " + cc.Mechanism + ": exchange did not end")
		}
	}
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
