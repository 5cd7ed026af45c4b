package server

import (
	"testing"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// controller_mutation_rate (KIP-599) on a broker whose clock the test
// drives: kadm sets 2 partitions/s for client id "mut", a bucket of 22
// (2 x 11 windows of 1 s). A validate-only request takes nothing; a
// CreateTopics of 12, 11 and 1 partitions creates the first two (the
// second takes the bucket to -1) and answers the third
// THROTTLING_QUOTA_EXCEEDED with the 500 ms the bucket needs to refill;
// with time standing still, DeleteTopics and CreatePartitions of the same
// client are refused the same way, while client id "other" is not
// limited. Once the clock moves on, the client creates, grows and deletes
// again. The versions before the strict ones (CreateTopics v5,
// DeleteTopics v4, CreatePartitions v2) mutate anyway and are told the
// throttle time.
func TestControllerMutationQuota(t *testing.T) {
	clk := &testClock{}
	clk.ms.Store(1_700_000_000_000)
	q := auth.NewQuotas(auth.QuotaConfig{})
	addr, _, eng := startBroker(t, noAutoCreate, func(c *Config, _ *engine.Options) { c.Quotas, c.Now = q, clk.Now })
	ctx := testCtx(t)
	adm := newAdmin(t, addr, kgo.ClientID("admin"))
	mutID := "mut"
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &mutID}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 2}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %+v %v", res, err)
	}
	mut := newClient(t, addr, kgo.ClientID("mut"))
	other := newClient(t, addr, kgo.ClientID("other"))

	type topic struct {
		name string
		n    int32
	}
	createReq := func(validateOnly bool, topics ...topic) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis, req.ValidateOnly = 5000, validateOnly
		for _, tp := range topics {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tp.name, tp.n, 1
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	deleteReq := func(names ...string) *kmsg.DeleteTopicsRequest {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = 5000
		req.TopicNames = names
		for _, n := range names {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	growReq := func(name string, count int32) *kmsg.CreatePartitionsRequest {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		req.Topics = append(req.Topics, rt)
		return req
	}
	created := func(resp *kmsg.CreateTopicsResponse) (codes []int16) {
		for _, rt := range resp.Topics {
			codes = append(codes, rt.ErrorCode)
		}
		return codes
	}
	partitions := func(name string) int32 {
		if tp := eng.Topic(name); tp != nil {
			return tp.Partitions()
		}
		return 0
	}
	throttled := kerr.ThrottlingQuotaExceeded.Code

	// Validate-only: checked, nothing taken.
	resp := issue[*kmsg.CreateTopicsResponse](t, mut, createReq(true, topic{"x", 30}))
	if c := created(resp); c[0] != 0 || resp.ThrottleMillis != 0 || partitions("x") != 0 {
		t.Fatalf("validate-only: codes %v throttle %d", c, resp.ThrottleMillis)
	}
	// 12 + 11 of a bucket of 22: the third topic finds it at -1.
	resp = issue[*kmsg.CreateTopicsResponse](t, mut, createReq(false, topic{"a", 12}, topic{"b", 11}, topic{"c", 1}))
	if c := created(resp); c[0] != 0 || c[1] != 0 || c[2] != throttled || resp.ThrottleMillis != 500 {
		t.Fatalf("CreateTopics past the burst: codes %v throttle %d, want [0 0 %d] and 500 ms", c, resp.ThrottleMillis, throttled)
	}
	if partitions("a") != 12 || partitions("b") != 11 || partitions("c") != 0 {
		t.Fatalf("partitions a %d b %d c %d, want 12 11 0", partitions("a"), partitions("b"), partitions("c"))
	}
	if resp.Topics[2].ErrorMessage == nil || resp.Topics[2].NumPartitions != -1 {
		t.Fatalf("throttled topic: %+v", resp.Topics[2])
	}
	// Another client id is not limited.
	resp = issue[*kmsg.CreateTopicsResponse](t, other, createReq(false, topic{"c", 1}))
	if c := created(resp); c[0] != 0 || resp.ThrottleMillis != 0 || partitions("c") != 1 {
		t.Fatalf("client id other: codes %v throttle %d", c, resp.ThrottleMillis)
	}
	// Time stands still: "mut" may not delete or grow either.
	del := issue[*kmsg.DeleteTopicsResponse](t, mut, deleteReq("c"))
	if del.Topics[0].ErrorCode != throttled || del.ThrottleMillis != 500 || partitions("c") != 1 {
		t.Fatalf("DeleteTopics with the bucket at -1: code %d throttle %d, topic has %d partitions", del.Topics[0].ErrorCode, del.ThrottleMillis, partitions("c"))
	}
	grow := issue[*kmsg.CreatePartitionsResponse](t, mut, growReq("b", 12))
	if grow.Topics[0].ErrorCode != throttled || grow.ThrottleMillis != 500 || partitions("b") != 11 {
		t.Fatalf("CreatePartitions with the bucket at -1: code %d throttle %d, b has %d partitions", grow.Topics[0].ErrorCode, grow.ThrottleMillis, partitions("b"))
	}

	// A second later the bucket holds 1: a topic of 1, then one more
	// partition (from 0 to -1), then nothing until it refills.
	clk.ms.Add(1000)
	resp = issue[*kmsg.CreateTopicsResponse](t, mut, createReq(false, topic{"e", 1}))
	if c := created(resp); c[0] != 0 || resp.ThrottleMillis != 0 || partitions("e") != 1 {
		t.Fatalf("CreateTopics after the refill: codes %v throttle %d", c, resp.ThrottleMillis)
	}
	grow = issue[*kmsg.CreatePartitionsResponse](t, mut, growReq("b", 12))
	if grow.Topics[0].ErrorCode != 0 || grow.ThrottleMillis != 0 || partitions("b") != 12 {
		t.Fatalf("CreatePartitions with the bucket at 0: code %d throttle %d, b has %d partitions", grow.Topics[0].ErrorCode, grow.ThrottleMillis, partitions("b"))
	}
	del = issue[*kmsg.DeleteTopicsResponse](t, mut, deleteReq("c"))
	if del.Topics[0].ErrorCode != throttled || del.ThrottleMillis != 500 || partitions("c") != 1 {
		t.Fatalf("DeleteTopics with the bucket at -1: code %d throttle %d", del.Topics[0].ErrorCode, del.ThrottleMillis)
	}
	clk.ms.Add(500)
	del = issue[*kmsg.DeleteTopicsResponse](t, mut, deleteReq("c"))
	if del.Topics[0].ErrorCode != 0 || del.ThrottleMillis != 0 || partitions("c") != 0 {
		t.Fatalf("DeleteTopics with the bucket at 0: code %d throttle %d", del.Topics[0].ErrorCode, del.ThrottleMillis)
	}

	// Permissive versions, each on its own connection (a throttled one is
	// muted): the bucket at -1, each mutation goes through and is told the
	// time to refill after it.
	rawAsk := func(req kmsg.Request, resp kmsg.Response) {
		t.Helper()
		raw := dialRaw(t, addr)
		raw.writeFrame(encodeRequest(req, 1, "mut"))
		b, err := raw.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		resp.SetVersion(req.GetVersion())
		decodeResponse(t, b, 1, resp)
	}
	cr := createReq(false, topic{"d", 1})
	cr.Version = 5
	cresp := kmsg.NewPtrCreateTopicsResponse()
	rawAsk(cr, cresp)
	if c := created(cresp); c[0] != 0 || cresp.ThrottleMillis != 1000 || partitions("d") != 1 {
		t.Fatalf("CreateTopics v5 past the quota: codes %v throttle %d, want created and 1000 ms", c, cresp.ThrottleMillis)
	}
	gr := growReq("b", 13)
	gr.Version = 2
	gresp := kmsg.NewPtrCreatePartitionsResponse()
	rawAsk(gr, gresp)
	if gresp.Topics[0].ErrorCode != 0 || gresp.ThrottleMillis != 1500 || partitions("b") != 13 {
		t.Fatalf("CreatePartitions v2 past the quota: code %d throttle %d", gresp.Topics[0].ErrorCode, gresp.ThrottleMillis)
	}
	dr := deleteReq("d")
	dr.Version = 4
	dresp := kmsg.NewPtrDeleteTopicsResponse()
	rawAsk(dr, dresp)
	if dresp.Topics[0].ErrorCode != 0 || dresp.ThrottleMillis != 2000 || partitions("d") != 0 {
		t.Fatalf("DeleteTopics v4 past the quota: code %d throttle %d", dresp.Topics[0].ErrorCode, dresp.ThrottleMillis)
	}
	// The strict version still refuses.
	dr = deleteReq("a")
	dr.Version = 5
	dresp = kmsg.NewPtrDeleteTopicsResponse()
	rawAsk(dr, dresp)
	if dresp.Topics[0].ErrorCode != throttled || dresp.ThrottleMillis != 2000 || partitions("a") != 12 {
		t.Fatalf("DeleteTopics v5 past the quota: code %d throttle %d", dresp.Topics[0].ErrorCode, dresp.ThrottleMillis)
	}
}

// The quota's entity follows the client quotas' precedence, and a default
// entity gives each user or client id its own bucket.
func TestMutationQuotaEntities(t *testing.T) {
	q := auth.NewQuotas(auth.QuotaConfig{})
	named := func(n string) auth.EntityName { return auth.EntityName{Set: true, Name: n} }
	def := auth.EntityName{Set: true, Default: true}
	set := func(e auth.QuotaEntity, v float64) auth.QuotaChange {
		return auth.QuotaChange{Entity: e, Type: auth.QuotaControllerMutationRate, Value: v}
	}
	if err := q.Alter([]auth.QuotaChange{
		set(auth.QuotaEntity{ClientID: def}, 1),
		set(auth.QuotaEntity{User: def}, 2),
		set(auth.QuotaEntity{User: named("u"), ClientID: def}, 3),
		set(auth.QuotaEntity{ClientID: named("c")}, 4),
		{Entity: auth.QuotaEntity{ClientID: named("p")}, Type: auth.QuotaProducerByteRate, Value: 100},
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user, client string
		want         float64
		key          mutationKey
	}{
		{"u", "c", 3, mutationKey{user: "u", client: "c", hasU: true, hasC: true}},
		{"v", "c", 2, mutationKey{user: "v", hasU: true}},
		{"v", "p", 2, mutationKey{user: "v", hasU: true}},
	} {
		v, k, ok := mutationLimit(q, c.user, c.client)
		if !ok || v != c.want || k != c.key {
			t.Errorf("%s/%s: %v %+v %v, want %v %+v", c.user, c.client, v, k, ok, c.want, c.key)
		}
	}
	if err := q.Alter([]auth.QuotaChange{{Entity: auth.QuotaEntity{User: def}, Type: auth.QuotaControllerMutationRate, Remove: true}}); err != nil {
		t.Fatal(err)
	}
	if v, k, ok := mutationLimit(q, "v", "c"); !ok || v != 4 || k != (mutationKey{client: "c", hasC: true}) {
		t.Errorf("v/c: %v %+v %v, want client-id=c's 4", v, k, ok)
	}

	// client-id=<default> at 1/s (a bucket of 11): "p" empties its own,
	// "q" still has 11.
	clk := &testClock{}
	clk.ms.Store(1_700_000_000_000)
	s := &Server{now: clk.Now, cfg: Config{Quotas: q}}
	quota := func(client string) *mutationQuota {
		m := s.newMutationQuota(&reqCtx{client: client, version: 6, req: kmsg.NewPtrCreateTopicsRequest()}, 6)
		if m == nil {
			t.Fatalf("%s: no quota", client)
		}
		return m
	}
	if err := quota("p").record(12); err != nil {
		t.Fatal(err)
	}
	if err := quota("p").record(1); apiErrCode(err) != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("p past its bucket: %v", err)
	}
	if err := quota("q").record(11); err != nil {
		t.Fatalf("q has its own bucket: %v", err)
	}
	if err := quota("q").record(1); err != nil {
		t.Fatalf("q at 0: %v", err)
	}
}
