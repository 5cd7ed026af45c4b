package sasl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/stratalog/strata/internal/kframe"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrNotSASL is Serve's error for a peer that does not open with a
// SaslHandshake v1 request (or breaks the exchange's framing): it was not
// answered.
var ErrNotSASL = errors.New("sasl: not a SASL handshake")

// maxServeSteps bounds the SaslAuthenticate round trips of one Serve
// (SCRAM takes two, PLAIN one).
const maxServeSteps = 4

// Serve runs the server side of an authentication on rw, a fresh
// connection whose peer must authenticate before anything else (the
// controller port, controller/sasl.go): SaslHandshake v1 naming a mechanism
// cfg enables, then SaslAuthenticate v0 or v1 until the exchange ends, the
// frames exactly as Authenticate (client.go) writes them and a Kafka
// broker's SASL listener reads them (KIP-152: request header v1, response
// header v0). It returns the authenticated principal ("User:name").
//
// Refusals: a first frame that is not a SaslHandshake v1, a frame larger
// than MaxTokenBytes, any other request, or more than a few round trips
// return an error wrapping ErrNotSASL without an answer; a mechanism cfg
// does not enable is answered UNSUPPORTED_SASL_MECHANISM with the enabled
// list, and a failed exchange SASL_AUTHENTICATION_FAILED with the
// exchange's message (never a password), both then returned as an
// *AuthError. The caller closes the connection after any error, and sets
// the deadlines: Serve reads and writes without one. Re-authentication
// (KIP-368) and session lifetimes are not offered (session_lifetime_ms
// 0); cfg.ReauthMs and cfg.FailedAuthDelayMs are not consulted.
func Serve(rw io.ReadWriter, cfg *Config) (string, error) {
	frame, err := kframe.ReadFrame(rw, MaxTokenBytes, nil)
	if err != nil {
		return "", notSASL(err.Error())
	}
	hdr, body, err := splitRequestHeader(frame)
	if err != nil {
		return "", err
	}
	if hdr.key != 17 || hdr.version != 1 {
		return "", notSASL("first request is " + kmsg.NameForKey(hdr.key) + " v" + strconv.Itoa(int(hdr.version)) + ", not SaslHandshake v1")
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	if err := hs.ReadFrom(body); err != nil {
		return "", notSASL("SaslHandshake: " + err.Error())
	}
	hresp := kmsg.NewPtrSASLHandshakeResponse()
	hresp.Version = 1
	hresp.SupportedMechanisms = cfg.Mechanisms
	ex, err := cfg.Start(hs.Mechanism)
	if err != nil {
		hresp.ErrorCode = 33 // UNSUPPORTED_SASL_MECHANISM
		_ = writeResponse(rw, hdr.corr, hresp)
		return "", err
	}
	if err := writeResponse(rw, hdr.corr, hresp); err != nil {
		return "", err
	}
	for step := 0; step < maxServeSteps; step++ {
		frame, err := kframe.ReadFrame(rw, MaxTokenBytes, nil) // an exchange may keep its token
		if err != nil {
			return "", notSASL(err.Error())
		}
		hdr, body, err := splitRequestHeader(frame)
		if err != nil {
			return "", err
		}
		if hdr.key != 36 || hdr.version > 1 {
			return "", notSASL(kmsg.NameForKey(hdr.key) + " v" + strconv.Itoa(int(hdr.version)) + " during the exchange, not SaslAuthenticate v0-v1")
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = hdr.version
		if err := req.ReadFrom(body); err != nil {
			return "", notSASL("SaslAuthenticate: " + err.Error())
		}
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.Version = hdr.version
		out, done, err := ex.Step(req.SASLAuthBytes)
		if err != nil {
			msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + hs.Mechanism
			var ae *AuthError
			if errors.As(err, &ae) {
				msg = ae.Msg
			} else {
				err = &AuthError{Msg: msg}
			}
			resp.ErrorCode = 58 // SASL_AUTHENTICATION_FAILED
			resp.ErrorMessage = &msg
			_ = writeResponse(rw, hdr.corr, resp)
			return "", err
		}
		resp.SASLAuthBytes = out
		if err := writeResponse(rw, hdr.corr, resp); err != nil {
			return "", err
		}
		if done {
			return ex.Principal(), nil
		}
	}
	return "", notSASL("the exchange did not end in " + strconv.Itoa(maxServeSteps) + " round trips")
}

func notSASL(why string) error { return fmt.Errorf("%w: %s", ErrNotSASL, why) }

type requestHeader struct {
	key, version int16
	corr         int32
}

// splitRequestHeader parses request header v1 (api key, version,
// correlation id, nullable client id), which both requests Serve reads use.
func splitRequestHeader(b []byte) (requestHeader, []byte, error) {
	if len(b) < 10 {
		return requestHeader{}, nil, notSASL("short request header")
	}
	h := requestHeader{
		key:     int16(binary.BigEndian.Uint16(b)),
		version: int16(binary.BigEndian.Uint16(b[2:])),
		corr:    int32(binary.BigEndian.Uint32(b[4:])),
	}
	n := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if n > 0 {
		if int(n) > len(b) {
			return requestHeader{}, nil, notSASL("request header: client id past the frame")
		}
		b = b[n:]
	} else if n < -1 {
		return requestHeader{}, nil, notSASL("request header: client id length " + strconv.Itoa(int(n)))
	}
	return h, b, nil
}

// writeResponse writes one response frame: size, correlation id (response
// header v0), body at resp's version.
func writeResponse(w io.Writer, corr int32, resp kmsg.Response) error {
	b := make([]byte, 8, 64)
	binary.BigEndian.PutUint32(b[4:], uint32(corr))
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_, err := w.Write(b)
	return err
}
