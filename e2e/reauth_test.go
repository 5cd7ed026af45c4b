package e2e

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// reauthCounts counts a franz-go client's connections and
// SaslAuthenticate requests.
type reauthCounts struct{ connects, authenticates atomic.Int64 }

func (h *reauthCounts) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		h.connects.Add(1)
	}
}

func (h *reauthCounts) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 36 && err == nil {
		h.authenticates.Add(1)
	}
}

// TestSASLReauthWithTheBinary (KIP-368): `strata serve` with
// connections.max.reauth.ms=1000 in its properties file tells franz-go
// its session lifetime, and franz-go re-authenticates on its connections
// (before each request: its margin is at least 1 s): six produces spread
// over more than two lifetimes succeed without a new connection, with
// more SaslAuthenticate requests than its logins needed, and the broker
// logs no expired session.
func TestSASLReauthWithTheBinary(t *testing.T) {
	addr := freeAddr(t)
	b := startBrokerProps(t, addr, saslProps("SASL_PLAINTEXT", addr)+"connections.max.reauth.ms=1000\n")
	ctx := testCtx(t, 2*time.Minute)
	h := &reauthCounts{}
	cl := b.client(kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()), kgo.AllowAutoTopicCreation(), kgo.WithHooks(h))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte("0")}).FirstErr(); err != nil {
		t.Fatalf("first produce: %v", err)
	}
	connects, auths := h.connects.Load(), h.authenticates.Load()
	for i := 1; i <= 5; i++ {
		time.Sleep(500 * time.Millisecond) // let sessions age: 2.5 s, two and a half lifetimes
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v\n%s", i, err, b.logs)
		}
	}
	if got := h.connects.Load(); got != connects {
		t.Fatalf("%d new connections during the produces: sessions were not renewed in place\n%s", got-connects, b.logs)
	}
	if got := h.authenticates.Load() - auths; got < 2*5 {
		t.Fatalf("%d SaslAuthenticate requests during 5 produces, want at least 10 (SCRAM re-authentications)", got)
	}
	if strings.Contains(b.logs.String(), "SASL session expired") {
		t.Fatalf("a session expired:\n%s", b.logs)
	}
}
