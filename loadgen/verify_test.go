package loadgen

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// value is a record value of producer k's record seq under nonce.
func verifyValue(nonce uint32, k int, seq uint64) []byte {
	v := make([]byte, MinVerifyRecordBytes+8)
	putStamp(v, 1)
	putVerifyID(v, nonce, k, seq)
	return v
}

// TestVerifierAccounting feeds the verifier synthetic acknowledgements and
// a synthetic read-back with one record lost, one read twice, one pair
// out of order, one read that was never acknowledged and one of another
// run, and checks every count, per partition and in total.
func TestVerifierAccounting(t *testing.T) {
	const nonce = 0xabcd1234
	v := newVerifier(2, nonce)
	// Producer 0: seqs 0..5 to partition 0 at offsets 0..5; producer 1:
	// seqs 0..3 to partition 1 at offsets 10..13, seq 4 sent but never
	// acknowledged.
	for s := range uint64(6) {
		if got := v.next(0); got != s {
			t.Fatalf("next(0) = %d, want %d", got, s)
		}
		v.ack(0, s, 0, int64(s))
	}
	for s := range uint64(5) {
		v.next(1)
		if s < 4 {
			v.ack(1, s, 1, 10+int64(s))
		}
	}
	c := v.newCheck(3, false, false)
	// Partition 0: seq 2 lost (offset 2 never read), seq 4 before seq 3
	// (reordered), seq 5 read twice.
	for i, s := range []uint64{0, 1, 4, 3, 5, 5} {
		c.record(0, int64(i), verifyValue(nonce, 0, s))
	}
	// Partition 1: everything, then the unacknowledged seq 4, a record of
	// another run, and one too short to carry an id.
	for s := range uint64(5) {
		c.record(1, 10+int64(s), verifyValue(nonce, 1, s))
	}
	c.record(1, 15, verifyValue(nonce+1, 1, 0))
	c.record(1, 16, []byte("short"))
	r := c.finish()

	want := map[int32]VerifyPartition{
		0: {Partition: 0, Acked: 6, Read: 6, Lost: 1, Duplicated: 1, Reordered: 1, EndOffset: 6, LastAckedOffset: 5},
		1: {Partition: 1, Acked: 4, Read: 5, UnackedRead: 1, EndOffset: 17, LastAckedOffset: 13},
		2: {Partition: 2, LastAckedOffset: -1},
	}
	if len(r.Partitions) != 3 {
		t.Fatalf("partitions %+v", r.Partitions)
	}
	for _, p := range r.Partitions {
		if p != want[p.Partition] {
			t.Errorf("partition %d: %+v, want %+v", p.Partition, p, want[p.Partition])
		}
	}
	if r.Acked != 10 || r.Read != 11 || r.Lost != 1 || r.Duplicated != 1 || r.Reordered != 1 || r.UnackedRead != 1 || r.Foreign != 2 {
		t.Fatalf("totals %+v", r)
	}
	if r.Verdict != "failed" || !r.Failed() || r.Version != VerifyVersion {
		t.Fatalf("verdict %q version %d", r.Verdict, r.Version)
	}
	kinds := map[string]VerifyExample{}
	for _, e := range r.Examples {
		kinds[e.Kind] = e
	}
	if e := kinds["lost"]; e.Partition != 0 || e.Seq != 2 || e.Offset != 2 || e.Producer != 0 {
		t.Errorf("lost example %+v", e)
	}
	if e := kinds["duplicated"]; e.Seq != 5 || e.Offset != 5 {
		t.Errorf("duplicated example %+v", e)
	}
	if e := kinds["reordered"]; e.Seq != 3 || e.Offset != 3 {
		t.Errorf("reordered example %+v", e)
	}

	var b strings.Builder
	writeVerify(&b, r)
	for _, s := range []string{"verify FAILED: 10 acknowledged, 11 read back, 1 lost, 1 duplicated, 1 reordered",
		"lost: partition 0 producer 0 seq 2 offset 2", "2 records of other runs"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"version":1`, `"verdict":"failed"`, `"lost":1`, `"duplicated":1`, `"reordered":1`} {
		if !strings.Contains(string(js), s) {
			t.Errorf("JSON lacks %s: %s", s, js)
		}
	}
}

// TestVerifyAndFaultsInReports: the table, the HTML page and the JSON
// carry the verify and faults objects.
func TestVerifyAndFaultsInReports(t *testing.T) {
	v := newVerifier(1, 9)
	v.next(0)
	v.next(0)
	v.ack(0, 0, 0, 0)
	v.ack(0, 1, 0, 1)
	c := v.newCheck(1, false, false)
	c.record(0, 0, verifyValue(9, 0, 0))
	rep := syntheticReport(false)
	rep.Verify = c.finish()
	rec := 1.5
	rep.Faults = &FaultsResult{Version: FaultsVersion, Kinds: []string{FaultKill, FaultPause}, IntervalS: 5, PauseS: 2, Total: 3,
		Ran:    []FaultCount{{Kind: FaultKill, Count: 2}, {Kind: FaultPause, Count: 1, NotRecovered: 1}},
		Events: []FaultEvent{{Kind: FaultKill, Broker: 1, AtS: 5, DownS: 0.2, RecoveredS: &rec}}, MaxRecoveredS: rec}
	var txt, page strings.Builder
	if err := rep.WriteTable(&txt); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"faults: kill,pause, one every 5.0 s", "kill   2 ran, 0 failed, 0 without recovery",
		"pause  1 ran, 0 failed, 1 without recovery", "verify FAILED: 2 acknowledged, 1 read back, 1 lost",
		"lost: partition 0 producer 0 seq 1 offset 1"} {
		if !strings.Contains(txt.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, txt.String())
		}
	}
	for _, s := range []string{"<h2>Faults</h2>", "kill,pause, one every 5.0 s", "<h2>Verification</h2>", "verify FAILED: 2 acknowledged",
		"lost: partition 0 producer 0 seq 1 offset 1"} {
		if !strings.Contains(page.String(), s) {
			t.Errorf("HTML lacks %q", s)
		}
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Verify *VerifyResult `json:"verify"`
		Faults *FaultsResult `json:"faults"`
	}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Verify == nil || back.Verify.Version != 1 || back.Verify.Lost != 1 || back.Faults == nil || back.Faults.Version != 1 ||
		back.Faults.Total != 3 || *back.Faults.Events[0].RecoveredS != 1.5 {
		t.Fatalf("JSON round trip: %s", js)
	}
}

// TestVerifierAllowed: a producer that is not idempotent may duplicate
// and reorder; the verdict stays ok then, and a clean read-back is ok.
func TestVerifierAllowed(t *testing.T) {
	const nonce = 7
	v := newVerifier(1, nonce)
	for s := range uint64(3) {
		v.next(0)
		v.ack(0, s, 0, int64(s))
	}
	clean := v.newCheck(1, false, false)
	for s := range uint64(3) {
		clean.record(0, int64(s), verifyValue(nonce, 0, s))
	}
	if r := clean.finish(); r.Verdict != "ok" || r.Acked != 3 || r.Read != 3 || r.Lost+r.Duplicated+r.Reordered != 0 {
		t.Fatalf("clean read-back: %+v", r)
	}
	loose := v.newCheck(1, true, true)
	for i, s := range []uint64{0, 2, 1, 1} {
		loose.record(0, int64(i), verifyValue(nonce, 0, s))
	}
	r := loose.finish()
	if r.Verdict != "ok" || r.Duplicated != 1 || r.Reordered != 1 || r.Lost != 0 {
		t.Fatalf("not idempotent: %+v", r)
	}
	if !strings.Contains(r.Summary(), "1 duplicated (allowed: not idempotent)") {
		t.Fatalf("summary %q", r.Summary())
	}
}

// TestPartLogCompact: the acknowledgement log keeps a producer's usual
// entries (sequence +1..+batch, offset +1) in 2 bytes and decodes what it
// was given, backwards steps included.
func TestPartLogCompact(t *testing.T) {
	var l partLog
	type e struct {
		seq uint64
		off int64
	}
	var in []e
	for i := range 1000 {
		in = append(in, e{uint64(3 * i), int64(100 + i)})
	}
	in = append(in, e{5, 3}, e{1 << 40, 1 << 50})
	for _, x := range in {
		l.add(x.seq, x.off)
	}
	if l.n != int64(len(in)) || len(l.buf) > 2*1000+30 {
		t.Fatalf("%d entries in %d bytes", l.n, len(l.buf))
	}
	var out []e
	if !l.each(func(seq uint64, off int64) { out = append(out, e{seq, off}) }) {
		t.Fatal("log corrupt")
	}
	if len(out) != len(in) {
		t.Fatalf("decoded %d of %d", len(out), len(in))
	}
	for i := range in {
		if in[i] != out[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, out[i], in[i])
		}
	}
}

// TestVerifyValidate: --verify refuses what it cannot check and runs
// whose record count is unbounded or over the cap.
func TestVerifyValidate(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.Spawn = 1
		c.Verify = true
		c.Rate = 1000
		c.Duration = 10 * time.Second
		return c
	}
	ok := base()
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid: %v", err)
	}
	for name, tc := range map[string]struct {
		mod  func(*Config)
		want string
	}{
		"closed loop": {func(c *Config) { c.Rate = 0 }, "bounded record count"},
		"over cap":    {func(c *Config) { c.VerifyMaxRecords = 5000 }, "over --verify-max-records 5000"},
		"native":      {func(c *Config) { c.Engine = EngineNative }, "kgo engine only"},
		"short":       {func(c *Config) { c.RecordBytes = 16 }, "at least 24"},
		"acks 0":      {func(c *Config) { c.Acks = 0 }, "--acks 1 or all"},
		"faults":      {func(c *Config) { c.Spawn, c.Brokers, c.Faults = 0, []string{"127.0.0.1:1"}, []string{FaultKill} }, "--faults needs --spawn"},
		"bad fault":   {func(c *Config) { c.Faults = []string{"flood"} }, `fault "flood"`},
		"interval":    {func(c *Config) { c.Faults, c.FaultInterval = []string{FaultPause}, time.Millisecond }, "--fault-interval"},
		"quorum":      {func(c *Config) { c.Spawn, c.Faults = 2, []string{FaultControllerKill} }, "need --spawn 3 or more"},
	} {
		c := base()
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	if n := verifyCount(&Config{Rate: 1000, Duration: 10 * time.Second, Producers: 1, Records: 500}); n != 500 {
		t.Errorf("count with --records 500: %d", n)
	}
	if _, err := ParseFaults("kill, pause,kill"); err != nil {
		t.Error(err)
	}
	if fs, err := ParseFaults("kill,powerloss,disk-full"); err != nil || len(fs) != 3 {
		t.Errorf("kill,powerloss,disk-full: %v %v", fs, err)
	}
	if fs, err := ParseFaults("controller-kill,controller-pause"); err != nil || len(fs) != 2 {
		t.Errorf("controller-kill,controller-pause: %v %v", fs, err)
	}
	if _, err := ParseFaults("kill,flood"); err == nil {
		t.Error("flood accepted")
	}
}

// TestVerifyDetectsDamage runs --verify against a real broker and damages
// the topic between producing and the read-back: the first 100 records of
// partition 0 deleted (DeleteRecords) and the first 5 of partition 1
// written again. The verdict fails with exactly those lost and duplicated,
// and Run returns the failure (the command's exit 1).
func TestVerifyDetectsDamage(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Spawn = 1
	cfg.StrataBin = strataBin
	cfg.SpawnSegmentBytes = 4 << 20
	cfg.Partitions = 2
	cfg.RecordBytes = 64
	// Keyed, so each partition gets about half of the 2,000 records:
	// keyless, franz-go's sticky partitioner can leave partition 0 with
	// fewer than the 100 deleted below for the whole two seconds, and
	// DeleteRecords past its end fails with OFFSET_OUT_OF_RANGE (CI did).
	cfg.Keys = 1000
	cfg.Idempotent = true
	cfg.Rate = 1000
	cfg.Duration = 2 * time.Second
	cfg.Verify = true
	cfg.VerifyTimeout = 30 * time.Second
	cfg.beforeReadBack = func(ctx context.Context, admin *kgo.Client) error {
		adm := kadm.NewClient(admin)
		del := kadm.Offsets{}
		del.AddOffset(cfg.Topic, 0, 100, -1)
		res, err := adm.DeleteRecords(ctx, del)
		if err != nil {
			return err
		}
		if err := res.Error(); err != nil {
			return err
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(admin.OptValue(kgo.SeedBrokers).([]string)...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: {1: kgo.NewOffset().AtStart()}}),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(cfg.Topic))
		if err != nil {
			return err
		}
		defer cl.Close()
		var again []*kgo.Record
		for len(again) < 5 && ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				if len(again) < 5 {
					again = append(again, &kgo.Record{Partition: 1, Value: r.Value})
				}
			})
		}
		return cl.ProduceSync(ctx, again...).FirstErr()
	}
	rep, err := Run(testCtx(t, 2*time.Minute), cfg)
	if err == nil || !strings.Contains(err.Error(), "verify FAILED") {
		t.Fatalf("Run: %v, want the failed verdict", err)
	}
	v := rep.Verify
	if v == nil || v.Verdict != "failed" || v.Lost != 100 || v.Duplicated != 5 || v.Reordered != 0 || v.Acked != 2000 || v.Read != 1905 {
		t.Fatalf("verify %+v", v)
	}
	if p := v.Partitions[0]; p.Partition != 0 || p.Lost != 100 || p.Duplicated != 0 {
		t.Fatalf("partition 0: %+v", p)
	}
	if p := v.Partitions[1]; p.Lost != 0 || p.Duplicated != 5 {
		t.Fatalf("partition 1: %+v", p)
	}
	for _, e := range v.Examples {
		if e.Kind == "lost" && (e.Partition != 0 || e.Offset >= 100) {
			t.Fatalf("lost example %+v outside the deleted range", e)
		}
	}
}
