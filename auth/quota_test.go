package auth

import (
	"path/filepath"
	"testing"
)

func named(n string) EntityName { return EntityName{Set: true, Name: n} }

var defName = EntityName{Set: true, Default: true}

// Kafka's precedence: for each quota type the most specific entity that
// sets it, user before client id, a name before the default.
func TestQuotaPrecedence(t *testing.T) {
	q := NewQuotas(QuotaConfig{})
	set := func(e QuotaEntity, v float64) {
		t.Helper()
		if err := q.Alter([]QuotaChange{{Entity: e, Type: QuotaProducerByteRate, Value: v}}); err != nil {
			t.Fatal(err)
		}
	}
	set(QuotaEntity{ClientID: defName}, 8)
	set(QuotaEntity{ClientID: named("c")}, 7)
	set(QuotaEntity{User: defName}, 6)
	set(QuotaEntity{User: defName, ClientID: defName}, 5)
	set(QuotaEntity{User: defName, ClientID: named("c")}, 4)
	set(QuotaEntity{User: named("u")}, 3)
	set(QuotaEntity{User: named("u"), ClientID: defName}, 2)
	set(QuotaEntity{User: named("u"), ClientID: named("c")}, 1)
	for _, c := range []struct {
		user, client string
		want         float64
	}{
		{"u", "c", 1}, {"u", "other", 2}, {"v", "c", 4}, {"v", "other", 5},
	} {
		if v, ok := q.Limit(QuotaProducerByteRate, c.user, c.client); !ok || v != c.want {
			t.Errorf("(%s, %s): %v %v, want %v", c.user, c.client, v, ok, c.want)
		}
	}
	// Remove the more specific ones one by one: the next takes over.
	for _, step := range []struct {
		e    QuotaEntity
		want float64
	}{
		{QuotaEntity{User: named("u"), ClientID: named("c")}, 2},
		{QuotaEntity{User: named("u"), ClientID: defName}, 3},
		{QuotaEntity{User: named("u")}, 4},
		{QuotaEntity{User: defName, ClientID: named("c")}, 5},
		{QuotaEntity{User: defName, ClientID: defName}, 6},
		{QuotaEntity{User: defName}, 7},
		{QuotaEntity{ClientID: named("c")}, 8},
	} {
		if err := q.Alter([]QuotaChange{{Entity: step.e, Type: QuotaProducerByteRate, Remove: true}}); err != nil {
			t.Fatal(err)
		}
		if v, _ := q.Limit(QuotaProducerByteRate, "u", "c"); v != step.want {
			t.Errorf("without %s: %v, want %v", step.e, v, step.want)
		}
	}
	if _, ok := q.Limit(QuotaConsumerByteRate, "u", "c"); ok {
		t.Error("a consumer quota where only producer quotas were set")
	}
}

// A producer at twice its quota is throttled by Kafka's formula, and its
// rate is its own (a default quota limits each user separately).
func TestQuotaThrottle(t *testing.T) {
	q := NewQuotas(QuotaConfig{Samples: 11, WindowMs: 1000})
	if err := q.Alter([]QuotaChange{{Entity: QuotaEntity{User: defName}, Type: QuotaProducerByteRate, Value: 1000}}); err != nil {
		t.Fatal(err)
	}
	// 900 B/s for 20 s: never throttled.
	for ms := int64(0); ms < 20_000; ms += 100 {
		if th := q.Record(QuotaProducerByteRate, "a", "c", 90, ms); th != 0 {
			t.Fatalf("under quota, %d ms: throttled %d ms", ms, th)
		}
	}
	// 2,000 B/s for 10 s more: throttled about (2000-1000)/1000 x 10 s.
	var th int64
	for ms := int64(20_000); ms < 31_000; ms += 100 {
		th = q.Record(QuotaProducerByteRate, "a", "c", 200, ms)
	}
	if th < 8_000 || th > 11_000 {
		t.Fatalf("at twice the quota for a full window: throttle %d ms, want ~10,000", th)
	}
	// Another user under the same default quota has its own rate.
	if th := q.Record(QuotaProducerByteRate, "b", "c", 100, 31_000); th != 0 {
		t.Fatalf("user b throttled %d ms for user a's bytes", th)
	}
	// No quota for consumers: never throttled.
	if th := q.Record(QuotaConsumerByteRate, "a", "c", 1e9, 31_000); th != 0 {
		t.Fatalf("no consumer quota, throttled %d ms", th)
	}
	// A burst in a fresh sensor is measured over at least samples-1
	// windows (Kafka's Rate): 5,000 B at once against 1,000 B/s.
	if th := q.Record(QuotaProducerByteRate, "new", "c", 5000, 40_000); th != 0 {
		t.Fatalf("5,000 B over a 10 s minimum window is 500 B/s, throttled %d ms", th)
	}
	if th := q.Record(QuotaProducerByteRate, "new", "c", 20000, 40_001); th <= 0 {
		t.Fatal("25,000 B over 10 s at 1,000 B/s not throttled")
	}
}

// request_percentage (KIP-124): a client id held to 50 % of one handler
// thread, keeping one busy 40 % of the time, is not throttled; at 100 %
// it is, by at most one window (Kafka's bound for the request quota);
// Sets follows the quotas set.
func TestQuotaRequestPercentage(t *testing.T) {
	q := NewQuotas(QuotaConfig{Samples: 11, WindowMs: 1000})
	if q.Sets(QuotaRequestPercentage) {
		t.Fatal("Sets with no quota")
	}
	busy := QuotaEntity{ClientID: named("busy")}
	if err := q.Alter([]QuotaChange{{Entity: busy, Type: QuotaRequestPercentage, Value: 50}}); err != nil {
		t.Fatal(err)
	}
	if !q.Sets(QuotaRequestPercentage) || q.Sets(QuotaProducerByteRate) {
		t.Fatal("Sets does not follow the quota set")
	}
	// 40 ms of handler time every 100 ms (4 percent-seconds each) for 20 s.
	for ms := int64(0); ms < 20_000; ms += 100 {
		if th := q.Record(QuotaRequestPercentage, "u", "busy", 4, ms); th != 0 {
			t.Fatalf("at 40 %% of a 50 %% quota, %d ms: throttled %d ms", ms, th)
		}
	}
	// A whole thread (10 percent-seconds per 100 ms) for 11 s more: over
	// twice the quota, throttled one window, not (rate-quota)/quota x 10 s.
	var th int64
	for ms := int64(20_000); ms < 31_000; ms += 100 {
		th = q.Record(QuotaRequestPercentage, "u", "busy", 10, ms)
	}
	if th != 1000 {
		t.Fatalf("at 100 %% of a 50 %% quota: throttle %d ms, want the 1,000 ms bound", th)
	}
	if th := q.Record(QuotaRequestPercentage, "u", "other", 1000, 31_000); th != 0 {
		t.Fatalf("a client id without the quota throttled %d ms", th)
	}
	if err := q.Alter([]QuotaChange{{Entity: busy, Type: QuotaRequestPercentage, Remove: true}}); err != nil {
		t.Fatal(err)
	}
	if q.Sets(QuotaRequestPercentage) || q.Active() {
		t.Fatal("Sets or Active after the last quota was removed")
	}
}

func TestQuotaDescribeAndPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quotas.json")
	q, err := OpenQuotas(QuotaConfig{}, path)
	if err != nil {
		t.Fatal(err)
	}
	ch := []QuotaChange{
		{Entity: QuotaEntity{User: named("alice")}, Type: QuotaProducerByteRate, Value: 1 << 20},
		{Entity: QuotaEntity{User: named("alice"), ClientID: named("app")}, Type: QuotaConsumerByteRate, Value: 2 << 20},
		{Entity: QuotaEntity{ClientID: defName}, Type: QuotaRequestPercentage, Value: 50},
	}
	if err := q.Alter(ch); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []QuotaChange{
		{Entity: QuotaEntity{}, Type: QuotaProducerByteRate, Value: 1},
		{Entity: QuotaEntity{User: named("x")}, Type: "bytes", Value: 1},
		{Entity: QuotaEntity{User: named("x")}, Type: QuotaProducerByteRate, Value: -1},
		{Entity: QuotaEntity{User: named("x")}, Type: QuotaProducerByteRate, Value: 1.5},
	} {
		if err := q.Alter([]QuotaChange{ch[0], bad}); err == nil {
			t.Errorf("Alter accepted %+v", bad)
		}
	}
	q2, err := OpenQuotas(QuotaConfig{}, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		parts  []QuotaFilterPart
		strict bool
		want   []string
	}{
		{[]QuotaFilterPart{{EntityType: EntityUser, Match: MatchExact, Name: "alice"}}, false, []string{"user=alice", "user=alice,client-id=app"}},
		{[]QuotaFilterPart{{EntityType: EntityUser, Match: MatchExact, Name: "alice"}}, true, []string{"user=alice"}},
		{[]QuotaFilterPart{{EntityType: EntityClientID, Match: MatchDefault}}, false, []string{"client-id=<default>"}},
		{[]QuotaFilterPart{{EntityType: EntityClientID, Match: MatchAny}}, false, []string{"user=alice,client-id=app", "client-id=<default>"}},
		{nil, false, []string{"user=alice", "user=alice,client-id=app", "client-id=<default>"}},
	} {
		got, err := q2.Describe(c.parts, c.strict)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range got {
			names = append(names, d.Entity.String())
		}
		if len(names) != len(c.want) {
			t.Errorf("%+v strict %v: %v, want %v", c.parts, c.strict, names, c.want)
			continue
		}
		for _, w := range c.want {
			found := false
			for _, n := range names {
				found = found || n == w
			}
			if !found {
				t.Errorf("%+v strict %v: %v, want %v", c.parts, c.strict, names, c.want)
			}
		}
	}
	if v, ok := q2.Limit(QuotaConsumerByteRate, "alice", "app"); !ok || v != 2<<20 {
		t.Fatalf("after reopen: %v %v", v, ok)
	}
}
