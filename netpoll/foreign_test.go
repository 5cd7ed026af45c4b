package netpoll

import (
	"crypto/tls"
	"io"
	"strings"
	"testing"
	"time"
)

// TestForeignProtocolsAreNamed: a TLS client (crypto/tls, as kcat or
// franz-go set up for SSL would send) and an HTTP client on the plaintext
// Kafka port are each closed with one line that says what they are,
// instead of "refusing frame size 369295616" (issue 20).
func TestForeignProtocolsAreNamed(t *testing.T) {
	logger, logs := newLogger(t)
	s, addr := startServer(t, Config{Logger: logger}, handlerFunc(func(_ *Conn, _ []byte, r *Reply) {
		t.Error("a foreign frame was served")
	}))
	tc, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"})
	if err == nil {
		tc.Close()
		t.Fatal("TLS handshake with a plaintext listener succeeded")
	}
	eventually(t, "the TLS line", func() bool { return strings.Contains(logs.String(), "TLS handshake") })

	c := dial(t, addr)
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // hang guard, not a timing assertion
	if rest := expectClosed(t, c); len(rest) != 0 {
		t.Fatalf("bytes sent to an HTTP client: %q", rest)
	}
	eventually(t, "the HTTP line", func() bool { return strings.Contains(logs.String(), "HTTP request") })
	eventually(t, "connections removed", func() bool { return s.NumConns() == 0 })
	if n := strings.Count(logs.String(), "refusing frame"); n != 0 {
		t.Fatalf("foreign protocols logged as refused frames:\n%s", logs.String())
	}
}
