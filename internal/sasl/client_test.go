package sasl

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/kframe"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker answers each request frame on c with answer(corr, key),
// until answer says there is no more or the client goes away; it closes c
// when done.
func fakeBroker(t *testing.T, c net.Conn, answer func(corr int32, key int16) (out []byte, more bool)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.Close()
		for {
			req, err := kframe.ReadFrame(c, 1<<20, nil)
			if err != nil {
				return
			}
			if len(req) < 10+len(clientID) || int(binary.BigEndian.Uint16(req[8:])) != len(clientID) ||
				string(req[10:10+len(clientID)]) != clientID {
				t.Errorf("request frame %x: not a v1 header with client id %q", req, clientID)
				return
			}
			out, more := answer(int32(binary.BigEndian.Uint32(req[4:])), int16(binary.BigEndian.Uint16(req)))
			if _, err := c.Write(out); err != nil || !more {
				return
			}
		}
	}()
	return done
}

func authenticateWith(t *testing.T, answer func(corr int32, key int16) ([]byte, bool)) error {
	t.Helper()
	client, broker := net.Pipe()
	done := fakeBroker(t, broker, answer)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := Authenticate(ctx, client, ClientCredentials{Mechanism: Plain, User: "u", Password: "p"})
	client.Close()
	<-done
	return err
}

// goodAnswer is a broker that accepts PLAIN.
func goodAnswer(corr int32, key int16) ([]byte, bool) {
	var resp kmsg.Response
	switch key {
	case 17:
		r := kmsg.NewPtrSASLHandshakeResponse()
		r.SupportedMechanisms = []string{Plain}
		resp = r
	case 36:
		resp = kmsg.NewPtrSASLAuthenticateResponse()
	default:
		return nil, false
	}
	resp.SetVersion(1)
	payload := binary.BigEndian.AppendUint32(nil, uint32(corr))
	return kframe.AppendFrame(nil, resp.AppendTo(payload)), true
}

// TestAuthenticateReadsFrames: the client's responses go through the
// module's frame reader: a good exchange authenticates, and bad frames
// (oversize, negative, truncated, too short for a header, another
// correlation id) fail with what was wrong instead of a panic or a hang.
func TestAuthenticateReadsFrames(t *testing.T) {
	if err := authenticateWith(t, goodAnswer); err != nil {
		t.Fatalf("good broker: %v", err)
	}
	for _, c := range []struct {
		name string
		raw  func(corr int32) []byte
		want string
	}{
		{"oversize", func(int32) []byte { return binary.BigEndian.AppendUint32(nil, MaxTokenBytes+1) }, "larger than the maximum"},
		{"negative", func(int32) []byte { return []byte{0xff, 0, 0, 0} }, "negative frame size"},
		{"truncated", func(int32) []byte { return []byte{0, 0, 0, 10, 0, 0, 0} }, "unexpected EOF"},
		{"short", func(int32) []byte { return kframe.AppendFrame(nil, []byte{0, 1}) }, "bad SASLHandshake response"},
		{"corr", func(corr int32) []byte { b, _ := goodAnswer(corr+1, 17); return b }, "correlation id mismatch"},
	} {
		err := authenticateWith(t, func(corr int32, key int16) ([]byte, bool) {
			if key == 17 {
				return c.raw(corr), false // then close: a truncated frame ends
			}
			return goodAnswer(corr, key)
		})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
