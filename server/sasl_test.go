package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/stratalog/strata/internal/tlstest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saslListener adds a SASL listener (SASL_SSL when withTLS) to a broker
// started by startBroker: PLAIN user alice, SCRAM-SHA-256 and -512 user
// bob. It returns the listener's address, the server, and the client TLS
// configuration (nil without TLS).
func saslListener(t *testing.T, withTLS bool) (string, *Server, *tls.Config) {
	t.Helper()
	sb := startSaslBroker(t, withTLS)
	return sb.addr, sb.s, sb.clientTLS
}

// saslBroker is a broker with a PLAINTEXT and a SASL listener.
type saslBroker struct {
	addr, plain string // the SASL and the PLAINTEXT listener
	s           *Server
	clientTLS   *tls.Config
	store       *sasl.Store
}

func startSaslBroker(t *testing.T, withTLS bool) saslBroker {
	t.Helper()
	store := sasl.NewStore()
	plainAddr, s, _ := startBroker(t, func(c *Config, _ *engine.Options) { c.Scram = store })
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
		Mechanisms: []string{sasl.Plain, sasl.ScramSHA256, sasl.ScramSHA512},
		PlainUsers: map[string]string{"alice": "alice-secret"},
		Scram:      store,
	}}
	var clientTLS *tls.Config
	if withTLS {
		dir := t.TempDir()
		ca := tlstest.NewCA(t, dir, "ca")
		srv := ca.Server(t, dir, "broker")
		l.Name = "SASL_SSL"
		l.TLS = &tls.Config{Certificates: []tls.Certificate{srv.TLS}}
		clientTLS = tlstest.ClientConfig(ca, nil)
	}
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
	return saslBroker{addr: ln.Addr().String(), plain: plainAddr, s: s, clientTLS: clientTLS, store: store}
}

func mechanisms() map[string]kgosasl.Mechanism {
	return map[string]kgosasl.Mechanism{
		sasl.Plain:       plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
		sasl.ScramSHA256: scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism(),
		sasl.ScramSHA512: scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism(),
	}
}

// produceConsume produces three records to topic and reads them back.
func produceConsume(t *testing.T, addr, topic string, opts ...kgo.Opt) {
	t.Helper()
	ctx := testCtx(t)
	p := newClient(t, addr, append(opts, kgo.AllowAutoTopicCreation())...)
	want := []string{"one", "two", "three"}
	for _, v := range want {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	c := newClient(t, addr, append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	var got []string
	for len(got) < len(want) {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %v: %v", got, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %v, want %v", got, want)
	}
}

// franz-go authenticates with each mechanism, then produces and consumes,
// over SASL_PLAINTEXT and SASL_SSL.
func TestSaslClientsProduceConsume(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		addr, s, clientTLS := saslListener(t, withTLS)
		for name, mech := range mechanisms() {
			t.Run(name+map[bool]string{false: "/SASL_PLAINTEXT", true: "/SASL_SSL"}[withTLS], func(t *testing.T) {
				opts := []kgo.Opt{kgo.SASL(mech)}
				if clientTLS != nil {
					opts = append(opts, kgo.DialTLSConfig(clientTLS))
				}
				produceConsume(t, addr, "sasl-"+strings.ToLower(name), opts...)
				user := map[bool]string{true: "alice", false: "bob"}[name == sasl.Plain]
				waitLog(t, s, "mechanism="+name+" principal=User:"+user)
			})
		}
	}
}

// A wrong password fails with SASL_AUTHENTICATION_FAILED and Kafka's
// message; the broker logs the failure without the password.
func TestSaslWrongPasswordFails(t *testing.T) {
	addr, s, _ := saslListener(t, false)
	for name, mech := range map[string]kgosasl.Mechanism{
		sasl.Plain:       plain.Auth{User: "alice", Pass: "wrong-pw-1"}.AsMechanism(),
		sasl.ScramSHA256: scram.Auth{User: "bob", Pass: "wrong-pw-2"}.AsSha256Mechanism(),
		sasl.ScramSHA512: scram.Auth{User: "nobody", Pass: "wrong-pw-3"}.AsSha512Mechanism(),
	} {
		t.Run(name, func(t *testing.T) {
			cl := newClient(t, addr, kgo.SASL(mech), kgo.RequestRetries(0))
			_, err := cl.Request(testCtx(t), kmsg.NewPtrMetadataRequest())
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("Metadata with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
			if !strings.Contains(err.Error(), "Authentication failed") {
				t.Fatalf("error %q lacks Kafka's message", err)
			}
		})
	}
	waitLog(t, s, "SASL authentication failed")
	if logs := logsOf(s); strings.Contains(logs, "wrong-pw") {
		t.Fatalf("a password reached the logs:\n%s", logs)
	}
}

// Before authentication only ApiVersions and SaslHandshake are served:
// Metadata closes the connection, and so does a request after a v1
// handshake that is not SaslAuthenticate.
func TestSaslRequestBeforeAuthClosesConnection(t *testing.T) {
	addr, _, _ := saslListener(t, false)

	c := dialRaw(t, addr)
	av := kmsg.NewPtrApiVersionsRequest()
	avr := kmsg.NewPtrApiVersionsResponse()
	c.roundTrip(av, 1, avr)
	if avr.ErrorCode != 0 || !slices.ContainsFunc(avr.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == 36 && k.MaxVersion == 2 }) {
		t.Fatalf("ApiVersions before authentication: error %d, keys %v", avr.ErrorCode, avr.ApiKeys)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	c.writeFrame(encodeRequest(md, 2, "raw"))
	c.expectClosed()

	c = dialRaw(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sasl.Plain
	hr := kmsg.NewPtrSASLHandshakeResponse()
	c.roundTrip(hs, 1, hr)
	if hr.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", hr.ErrorCode)
	}
	c.writeFrame(encodeRequest(av, 2, "raw"))
	c.expectClosed()
}

// An unsupported mechanism answers UNSUPPORTED_SASL_MECHANISM with the
// enabled list, then closes.
func TestSaslUnsupportedMechanism(t *testing.T) {
	addr, _, _ := saslListener(t, false)
	c := dialRaw(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	hr := kmsg.NewPtrSASLHandshakeResponse()
	c.roundTrip(hs, 1, hr)
	if hr.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
		t.Fatalf("error %d, want UNSUPPORTED_SASL_MECHANISM", hr.ErrorCode)
	}
	if want := []string{sasl.Plain, sasl.ScramSHA256, sasl.ScramSHA512}; !slices.Equal(hr.SupportedMechanisms, want) {
		t.Fatalf("mechanisms %v, want %v", hr.SupportedMechanisms, want)
	}
	c.expectClosed()
}

// A v0 handshake is followed by bare tokens (before KIP-152): PLAIN's
// answer is an empty frame, then requests are served; a wrong bare token
// closes the connection.
func TestSaslHandshakeV0BareTokens(t *testing.T) {
	addr, _, _ := saslListener(t, false)
	for _, pass := range []string{"alice-secret", "wrong"} {
		c := dialRaw(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = sasl.Plain
		hr := kmsg.NewPtrSASLHandshakeResponse()
		c.roundTrip(hs, 1, hr)
		if hr.ErrorCode != 0 {
			t.Fatalf("v0 handshake: error %d", hr.ErrorCode)
		}
		c.writeFrame([]byte("\x00alice\x00" + pass))
		if pass == "wrong" {
			c.expectClosed()
			continue
		}
		b, err := c.readFrame()
		if err != nil || len(b) != 0 {
			t.Fatalf("bare PLAIN answer: %q, %v", b, err)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 4
		mr := kmsg.NewPtrMetadataResponse()
		c.roundTrip(md, 2, mr)
		if len(mr.Brokers) != 1 {
			t.Fatalf("Metadata after a bare-token PLAIN: %d brokers", len(mr.Brokers))
		}
	}
}

// A frame over 512 KiB before authentication closes the connection
// before it is read.
func TestSaslLargeFrameBeforeAuthCloses(t *testing.T) {
	addr, s, _ := saslListener(t, false)
	c := dialRaw(t, addr)
	if _, err := c.Write([]byte{0, 0x10, 0, 0}); err != nil { // 1 MiB announced
		t.Fatal(err)
	}
	c.expectClosed()
	waitLog(t, s, "frame larger than allowed before authentication")
}

// On a PLAINTEXT listener, and after authentication, SaslHandshake and
// SaslAuthenticate answer ILLEGAL_SASL_STATE, as Kafka's request handler.
func TestSaslIllegalState(t *testing.T) {
	addr, _, _ := startBroker(t)
	c := dialRaw(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sasl.Plain
	hr := kmsg.NewPtrSASLHandshakeResponse()
	c.roundTrip(hs, 1, hr)
	if hr.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake on PLAINTEXT: error %d, want ILLEGAL_SASL_STATE", hr.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version = 1
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	c.roundTrip(au, 2, ar)
	if ar.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate on PLAINTEXT: error %d, want ILLEGAL_SASL_STATE", ar.ErrorCode)
	}
}

// The broker's own client (inter-broker dialing) authenticates with each
// mechanism, then a Kafka request is served on that connection.
func TestSaslBrokerClientAuthenticates(t *testing.T) {
	addr, _, _ := saslListener(t, false)
	for _, cc := range []sasl.ClientCredentials{
		{Mechanism: sasl.Plain, User: "alice", Password: "alice-secret"},
		{Mechanism: sasl.ScramSHA256, User: "bob", Password: "bob-secret"},
		{Mechanism: sasl.ScramSHA512, User: "bob", Password: "bob-secret"},
		{Mechanism: sasl.ScramSHA512, User: "bob", Password: "nope"},
	} {
		c := dialRaw(t, addr)
		err := sasl.Authenticate(context.Background(), c.Conn, cc)
		if cc.Password == "nope" {
			if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
				t.Fatalf("wrong password: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", cc.Mechanism, err)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 4
		c.roundTrip(md, 100, kmsg.NewPtrMetadataResponse())
	}
}

// AlterUserScramCredentials (kadm, as kafka-configs does) creates a SCRAM
// user that can then authenticate; DescribeUserScramCredentials lists
// it; deleting it locks it out; Kafka's checks answer Kafka's errors.
func TestSaslAlterUserScramCredentials(t *testing.T) {
	sb := startSaslBroker(t, false)
	ctx := testCtx(t)
	adm := newAdmin(t, sb.plain)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carol-secret"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["carol"]; r.Err != nil {
		t.Fatalf("carol: %v", r.Err)
	}
	// kadm checks iterations itself; a raw request reaches the broker's check.
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, u := range []struct {
		name string
		mech int8
		iter int32
	}{{"dave", 1, 100}, {"erin", 3, 4096}} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = u.name, u.mech, u.iter, []byte("salt"), make([]byte, 32)
		alter.Upsertions = append(alter.Upsertions, up)
	}
	ar := issue[*kmsg.AlterUserSCRAMCredentialsResponse](t, newClient(t, sb.plain), alter)
	if len(ar.Results) != 2 || ar.Results[0].ErrorCode != kerr.UnacceptableCredential.Code || ar.Results[1].ErrorCode != kerr.UnsupportedSaslMechanism.Code {
		t.Fatalf("bad upsertions: %+v", ar.Results)
	}
	carol := scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism()
	produceConsume(t, sb.addr, "carol-topic", kgo.SASL(carol))

	desc, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := desc["carol"]
	if c.Err != nil || len(c.CredInfos) != 1 || c.CredInfos[0].Mechanism != kadm.ScramSha512 || c.CredInfos[0].Iterations != 8192 {
		t.Fatalf("describe carol: %+v", c)
	}
	if len(desc) != 2 { // carol and bob (set by startSaslBroker)
		t.Fatalf("describe all: %v", desc)
	}
	if d, err := adm.DescribeUserSCRAMs(ctx, "nobody"); err != nil || !errors.Is(d["nobody"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describe nobody: %+v %v", d, err)
	}

	res, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha512}, {User: "erin", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res["carol"].Err != nil || !errors.Is(res["erin"].Err, kerr.ResourceNotFound) {
		t.Fatalf("delete: %+v", res)
	}
	cl := newClient(t, sb.addr, kgo.SASL(carol), kgo.RequestRetries(0))
	if _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("deleted user: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// fakeSaslPeer is a fakePeer on a SASL listener.
type fakeSaslPeer struct {
	*fakePeer
	cfg       *sasl.Config
	session   any
	principal string
}

func (p *fakeSaslPeer) ListenerContext() any           { return p.cfg }
func (p *fakeSaslPeer) Session() any                   { return p.session }
func (p *fakeSaslPeer) SetSession(v any)               { p.session = v }
func (p *fakeSaslPeer) Authenticated(principal string) { p.principal = principal }
func (p *fakeSaslPeer) Listener() string               { return "SASL" }

// FuzzSaslGate feeds up to four frames (the input split at 0xff 0xfe) to
// one connection of a SASL listener: no panic, every frame completes
// exactly once, nothing but ApiVersions, SaslHandshake and
// SaslAuthenticate (or a bare token after a v0 handshake) is answered
// before authentication, and the only principal reachable is the one
// whose password the seeds hold.
func FuzzSaslGate(f *testing.F) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(engine.Options{Dir: f.TempDir(), Log: engine.DefaultLogConfig(), Logger: logger})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { eng.Close() })
	s := New(Config{NodeID: 1, AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092, Logger: logger}, eng)
	store := sasl.NewStore()
	c, _ := sasl.NewCredential(sasl.ScramSHA256, "bob-secret", sasl.MinIterations)
	store.Set("bob", sasl.ScramSHA256, c)
	cfg := &sasl.Config{Mechanisms: []string{sasl.Plain, sasl.ScramSHA256}, PlainUsers: map[string]string{"alice": "alice-secret"}, Scram: store}

	sep := []byte{0xff, 0xfe}
	join := func(frames ...[]byte) []byte { return bytes.Join(frames, sep) }
	hs := func(v int16, mech string) []byte {
		return encodeRequest(&kmsg.SASLHandshakeRequest{Version: v, Mechanism: mech}, 1, "f")
	}
	au := func(tok string) []byte {
		return encodeRequest(&kmsg.SASLAuthenticateRequest{Version: 2, SASLAuthBytes: []byte(tok)}, 2, "f")
	}
	md := encodeRequest(&kmsg.MetadataRequest{Version: 4}, 3, "f")
	f.Add(join(hs(1, "PLAIN"), au("\x00alice\x00alice-secret"), md))
	f.Add(join(hs(0, "PLAIN"), []byte("\x00alice\x00alice-secret"), md))
	f.Add(join(hs(1, "SCRAM-SHA-256"), au("n,,n=bob,r=abcdef"), au("c=biws,r=abcdef,p=AAAA")))
	f.Add(join(encodeRequest(&kmsg.ApiVersionsRequest{Version: 3, ClientSoftwareName: "a", ClientSoftwareVersion: "1"}, 0, "f"), md))
	f.Add(join(hs(1, "GSSAPI"), md))

	f.Fuzz(func(t *testing.T, data []byte) {
		p := &fakeSaslPeer{fakePeer: newFakePeer(), cfg: cfg}
		raw := false
		for i, frame := range bytes.Split(data, sep) {
			if i == 4 || p.closed.Load() {
				break
			}
			authed := p.principal != ""
			var key int16 = -1
			if len(frame) >= 2 {
				key = int16(binary.BigEndian.Uint16(frame))
			}
			r := newFakeReply()
			s.dispatch(p, frame, r)
			got := r.wait(t)
			select {
			case extra := <-r.c:
				t.Fatalf("frame %d completed twice: %s then %s", i, got.kind, extra.kind)
			default:
			}
			if got.kind == "send" && !authed && !raw && key != 17 && key != 18 && key != 36 {
				t.Fatalf("api key %d answered before authentication", key)
			}
			if st, _ := p.session.(*saslState); st != nil {
				raw = st.phase == saslRaw
			}
			if got.kind == "close" {
				break
			}
		}
		if p.principal != "" && p.principal != "User:alice" {
			t.Fatalf("authenticated as %q", p.principal)
		}
		if n := s.panics.Load(); n != 0 {
			t.Fatalf("%d panics", n)
		}
	})
}
