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
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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
