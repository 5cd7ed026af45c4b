package server

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// throttleSeen records the throttles a client was told of (kgo's hook).
type throttleSeen struct {
	mu  sync.Mutex
	max time.Duration
	n   int
}

func (h *throttleSeen) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	h.max = max(h.max, d)
}

func (h *throttleSeen) get() (int, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, h.max
}

// Client quotas through Kafka's admin API (kadm): set, describe (filters,
// strict), validate-only, refused values; a producer and a consumer past
// their byte rates are told throttle_time_ms while another client id is
// not; the quotas survive a restart of the store.
func TestClientQuotas(t *testing.T) {
	path := filepath.Join(t.TempDir(), engine.QuotasFile)
	q, err := auth.OpenQuotas(auth.QuotaConfig{}, path)
	if err != nil {
		t.Fatal(err)
	}
	addr, _, _ := startBroker(t, func(c *Config, _ *engine.Options) { c.Quotas = q })
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, addr))
	name := func(s string) *string { return &s }
	slow := kadm.ClientQuotaEntity{{Type: "client-id", Name: name("slow")}}
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: slow, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 20_000}, {Key: "consumer_byte_rate", Value: 20_000}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: nil}}, Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 200}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: name("bad")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "bytes_per_hour", Value: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[1].Err != nil || res[2].Err != kerr.InvalidRequest {
		t.Fatalf("alter: %+v", res)
	}
	if _, err := adm.ValidateAlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: name("dry")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
	}); err != nil {
		t.Fatal(err)
	}
	all, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range all {
		got = append(got, d.Entity.String()+" "+d.Values[0].String())
	}
	if len(all) != 2 || !strings.Contains(strings.Join(got, ";"), "client-id=slow") || !strings.Contains(strings.Join(got, ";"), "user=<default>") {
		t.Fatalf("describe all: %v (the validate-only entity must not be there)", got)
	}
	def, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 1}})
	if err != nil || len(def) != 1 || def[0].Entity.String() != "{user=<default>}" {
		t.Fatalf("describe the default user: %v %v", def, err)
	}

	// A producer with client id "slow" at 20 kB/s is throttled; "fast" is
	// not.
	produce := func(client string) *throttleSeen {
		h := &throttleSeen{}
		p := newClient(t, addr, kgo.ClientID(client), kgo.WithHooks(h), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0))
		val := make([]byte, 10_000)
		rand.Read(val) // incompressible: kgo compresses by default
		for i := 0; i < 60; i++ {
			if err := p.ProduceSync(ctx, &kgo.Record{Topic: "quota", Value: val}).FirstErr(); err != nil {
				t.Fatalf("%s: produce: %v", client, err)
			}
			if n, _ := h.get(); n > 0 {
				break
			}
		}
		return h
	}
	if n, d := produce("slow").get(); n == 0 || d <= 0 {
		t.Fatal("a producer past producer_byte_rate was never throttled")
	}
	if n, _ := produce("fast").get(); n != 0 {
		t.Fatal("a producer without a quota was throttled")
	}
	// A consumer reading the ~600 kB back at 20 kB/s is throttled.
	h := &throttleSeen{}
	c := newClient(t, addr, kgo.ClientID("slow"), kgo.WithHooks(h), kgo.ConsumeTopics("quota"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang guard, not a timing assertion
	defer cancel()
	for n, _ := h.get(); n == 0 && cctx.Err() == nil; n, _ = h.get() {
		c.PollFetches(cctx)
	}
	if n, _ := h.get(); n == 0 {
		t.Fatal("a consumer past consumer_byte_rate was never throttled")
	}

	q2, err := auth.OpenQuotas(auth.QuotaConfig{}, path)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := q2.Limit(auth.QuotaProducerByteRate, "ANONYMOUS", "slow"); !ok || v != 20_000 {
		t.Fatalf("after reopening quotas.json: %v %v", v, ok)
	}
}

// stepClock is a server clock for tests: each reading is step later than
// the one before, so a request read at least twice in its handler (as it
// starts and as it is answered) spends at least step there, whatever the
// machine's speed; step 0 stops time.
type stepClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

func (c *stepClock) setStep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step = d
}

// request_percentage (KIP-124) through Kafka's admin API and a real
// broker whose clock the test drives: kadm sets 10 % for client id
// "busy" and describes it back; while time stands still the client's
// requests cost nothing and are not throttled; once every clock reading
// is 50 ms later, each request spends at least 50 ms in its handler, far
// past 10 % of a 100 ms window, and every answer from Metadata,
// ApiVersions, Produce and a consumer's Fetch carries the throttle, the
// window (Kafka's bound for the request quota), which franz-go also
// sees; a follower's Fetch (exempt, as in Kafka) and a client id without
// the quota are not throttled.
func TestRequestPercentageQuota(t *testing.T) {
	clock := &stepClock{t: time.Unix(1_700_000_000, 0)}
	q := auth.NewQuotas(auth.QuotaConfig{Samples: 2, WindowMs: 100})
	addr, _, _ := startBroker(t, func(c *Config, _ *engine.Options) { c.Quotas, c.Now = q, clock.now })
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, addr, kgo.ClientID("admin")))
	busy := "busy"
	ent := kadm.ClientQuotaEntity{{Type: "client-id", Name: &busy}}
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: ent, Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 10}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsg.StringPtr("neg")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: -1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[1].Err != kerr.InvalidRequest {
		t.Fatalf("alter: %+v", res)
	}
	got, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: &busy}})
	if err != nil || len(got) != 1 || len(got[0].Values) != 1 || got[0].Values[0].Key != "request_percentage" || got[0].Values[0].Value != 10 {
		t.Fatalf("describe client-id=busy: %+v %v", got, err)
	}

	raw := dialRaw(t, addr)
	corr := int32(0)
	ask := func(client string, req kmsg.Request) int32 {
		t.Helper()
		corr++
		raw.writeFrame(encodeRequest(req, corr, client))
		b, err := raw.readFrame()
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		decodeResponse(t, b, corr, resp)
		ms, _ := resp.(kmsg.ThrottleResponse).Throttle()
		return ms
	}
	metadata := func() kmsg.Request {
		r := kmsg.NewPtrMetadataRequest()
		r.Version, r.Topics = 12, []kmsg.MetadataRequestTopic{}
		return r
	}
	apiVersions := func() kmsg.Request {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version, r.ClientSoftwareName, r.ClientSoftwareVersion = 3, "test", "1"
		return r
	}
	produce := func() kmsg.Request {
		r := kmsg.NewPtrProduceRequest()
		r.Version, r.Acks, r.TimeoutMillis = 9, -1, 5000
		return r
	}
	fetch := func(replica int32) kmsg.Request {
		r := kmsg.NewPtrFetchRequest()
		r.Version, r.ReplicaID, r.MaxBytes, r.SessionEpoch = 12, replica, 1<<20, -1
		return r
	}

	// Time stands still: no handler time, no throttle.
	for _, req := range []kmsg.Request{metadata(), apiVersions(), produce(), fetch(-1)} {
		if ms := ask("busy", req); ms != 0 {
			t.Fatalf("%s with no handler time: throttled %d ms", kmsg.NameForKey(req.Key()), ms)
		}
	}

	clock.setStep(50 * time.Millisecond)
	for _, req := range []kmsg.Request{metadata(), apiVersions(), produce(), fetch(-1)} {
		if ms := ask("busy", req); ms != 100 {
			t.Errorf("%s at >= 50 ms a request against 10 %%: throttle %d ms, want the 100 ms window", kmsg.NameForKey(req.Key()), ms)
		}
	}
	if ms := ask("busy", fetch(1)); ms != 0 {
		t.Errorf("a follower's Fetch (exempt): throttled %d ms", ms)
	}
	for _, req := range []kmsg.Request{metadata(), produce(), fetch(-1)} {
		if ms := ask("idle", req); ms != 0 {
			t.Errorf("%s of a client id without a quota: throttled %d ms", kmsg.NameForKey(req.Key()), ms)
		}
	}

	// franz-go is told too (and waits before its next request).
	h := &throttleSeen{}
	cl := newClient(t, addr, kgo.ClientID("busy"), kgo.WithHooks(h))
	resp, err := metadata().(*kmsg.MetadataRequest).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if n, d := h.get(); resp.ThrottleMillis != 100 || n == 0 || d != 100*time.Millisecond {
		t.Fatalf("franz-go: Metadata throttle %d ms, hook saw %d throttles up to %v", resp.ThrottleMillis, n, d)
	}
}

// The requests Kafka does not charge to the request quota.
func TestRequestQuotaExempt(t *testing.T) {
	produce := func(acks int16) kmsg.Request { r := kmsg.NewPtrProduceRequest(); r.Acks = acks; return r }
	fetch := func(v int16, id int32) kmsg.Request {
		r := kmsg.NewPtrFetchRequest()
		r.Version = v
		if v >= 15 {
			r.ReplicaState.ID = id
		} else {
			r.ReplicaID = id
		}
		return r
	}
	for _, c := range []struct {
		name   string
		req    kmsg.Request
		exempt bool
	}{
		{"WriteTxnMarkers", kmsg.NewPtrWriteTxnMarkersRequest(), true},
		{"follower Fetch", fetch(12, 2), true},
		{"follower Fetch v15", fetch(15, 2), true},
		{"consumer Fetch", fetch(12, -1), false},
		{"consumer Fetch v15", fetch(15, -1), false},
		{"Produce acks=0", produce(0), true},
		{"Produce acks=1", produce(1), false},
		{"Produce acks=all", produce(-1), false},
		{"Metadata", kmsg.NewPtrMetadataRequest(), false},
		{"ApiVersions", kmsg.NewPtrApiVersionsRequest(), false},
	} {
		rc := &reqCtx{req: c.req, version: c.req.GetVersion(), key: c.req.Key()}
		if got := requestQuotaExempt(rc); got != c.exempt {
			t.Errorf("%s: exempt %v, want %v", c.name, got, c.exempt)
		}
	}
	// On a SASL listener: exempt until authenticated (Kafka's
	// authenticator answers those requests), charged afterwards.
	p := &saslQuotaPeer{fakePeer: newFakePeer()}
	rc := &reqCtx{conn: p, req: kmsg.NewPtrApiVersionsRequest(), key: apiVersionsKey}
	if !requestQuotaExempt(rc) {
		t.Error("ApiVersions before SASL authentication is charged")
	}
	st, _ := saslStateOf(p)
	st.phase = saslComplete
	if requestQuotaExempt(rc) {
		t.Error("ApiVersions after SASL authentication is exempt")
	}
}

// saslQuotaPeer is a fakePeer on a SASL listener.
type saslQuotaPeer struct {
	*fakePeer
	session any
}

func (p *saslQuotaPeer) ListenerContext() any { return &sasl.Config{} }
func (p *saslQuotaPeer) Session() any         { return p.session }
func (p *saslQuotaPeer) SetSession(s any)     { p.session = s }
func (p *saslQuotaPeer) Authenticated(string) {}
func (p *saslQuotaPeer) Listener() string     { return "SASL_PLAINTEXT" }
