package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/stratalog/strata/server"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const groupsTestTimeout = 60 * time.Second // hang guard only

// startGroupsBroker serves an engine in t.TempDir() on 127.0.0.1:0.
func startGroupsBroker(t *testing.T) string {
	t.Helper()
	addr, _ := startGroupsBrokerIn(t, t.TempDir())
	return addr
}

// startGroupsBrokerIn starts a broker on dir; stop closes it (also done at
// cleanup), so that another can be started on dir.
func startGroupsBrokerIn(t *testing.T, dir string) (addr string, stop func()) {
	t.Helper()
	eng, err := engine.Open(engine.Options{Dir: dir, Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := server.New(server.Config{ClusterID: "groups-cli", AutoCreateTopics: true,
		Groups: server.GroupsConfig{Coordinator: group.Config{MinSessionTimeoutMs: 500, InitialRebalanceDelayMs: -1, TickMs: 20}}}, eng)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			s.Close()
			select {
			case <-done:
			case <-time.After(groupsTestTimeout):
				t.Error("Serve did not return")
			}
			eng.Close()
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

func runGroupsCLI(t *testing.T, now time.Time, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := groupsMain(args, &out, &errb, func() time.Time { return now })
	return out.String() + errb.String(), err
}

// rowFor returns the describe row of topic/partition split into columns.
func rowFor(t *testing.T, out, topic, partition string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 8 && f[0] == topic && f[1] == partition {
			return f
		}
	}
	t.Fatalf("no row for %s/%s in:\n%s", topic, partition, out)
	return nil
}

func TestGroupsDescribeLagAndRetentionCliff(t *testing.T) {
	addr := startGroupsBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	retention := "3600000" // 1 h
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": &retention}, "events"); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond)
	base := now.Add(-40 * time.Minute)
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Topic: "events", Partition: 0, Value: []byte("x"), Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Partition: 1, Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.AddOffset("events", 0, 3, -1) // the record at 3 was written at base+3m
	offs.AddOffset("events", 1, 1, -1) // caught up
	if r, err := adm.CommitOffsets(ctx, "slow", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}

	out, err := runGroupsCLI(t, now, "describe", "slow", "--brokers", addr)
	t.Logf("describe:\n%s", out)
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	// TOPIC PARTITION COMMITTED LOG-START END LAG LAG-TIME RETENTION-CLIFF MEMBER CLIENT
	r0 := rowFor(t, out, "events", "0")
	if r0[2] != "3" || r0[3] != "0" || r0[4] != "10" || r0[5] != "7" {
		t.Errorf("partition 0 row %q: want committed 3, start 0, end 10, lag 7", r0)
	}
	if want := (37 * time.Minute).String(); r0[6] != want {
		t.Errorf("lag time %q, want %q (age of the record at the commit)", r0[6], want)
	}
	// base+3m + 1h - now = 23 minutes.
	if want := (23 * time.Minute).String(); r0[7] != want {
		t.Errorf("retention cliff %q, want %q", r0[7], want)
	}
	r1 := rowFor(t, out, "events", "1")
	if r1[5] != "0" || r1[7] != "-" {
		t.Errorf("partition 1 row %q: want lag 0 and no cliff", r1)
	}
	if !strings.Contains(out, "state Empty") {
		t.Errorf("describe header misses the state:\n%s", out)
	}

	// --format json: the same figures in milliseconds.
	out, err = runGroupsCLI(t, now, "describe", "slow", "--brokers", addr, "--format", "json")
	if err != nil {
		t.Fatalf("describe --format json: %v\n%s", err, out)
	}
	gs := decodeJSON[[]groupJSON](t, out)
	if len(gs) != 1 || gs[0].Group != "slow" || gs[0].State != "Empty" || gs[0].Members != 0 || len(gs[0].Partitions) != 2 {
		t.Fatalf("describe --format json:\n%s", out)
	}
	p0, p1 := gs[0].Partitions[0], gs[0].Partitions[1]
	if p0.Topic != "events" || p0.Partition != 0 || p0.Committed == nil || *p0.Committed != 3 || p0.LogStartOffset != 0 ||
		p0.EndOffset != 10 || p0.Lag != 7 || p0.Lost || p0.RetentionMs == nil || *p0.RetentionMs != 3600000 {
		t.Errorf("partition 0: %+v", p0)
	}
	if p0.LagMs == nil || *p0.LagMs != (37*time.Minute).Milliseconds() {
		t.Errorf("partition 0 lag_ms %v, want %d", p0.LagMs, (37 * time.Minute).Milliseconds())
	}
	if p0.CliffMs == nil || *p0.CliffMs != (23*time.Minute).Milliseconds() {
		t.Errorf("partition 0 retention_cliff_ms %v, want %d", p0.CliffMs, (23 * time.Minute).Milliseconds())
	}
	if p1.Partition != 1 || p1.Lag != 0 || p1.LagMs != nil || p1.CliffMs != nil || p1.Committed == nil || *p1.Committed != 1 {
		t.Errorf("partition 1: %+v", p1)
	}

	list, err := runGroupsCLI(t, now, "list", "--brokers", addr)
	if err != nil || !strings.Contains(list, "slow") {
		t.Fatalf("list: %v\n%s", err, list)
	}
}

func TestGroupsResetOffsets(t *testing.T) {
	addr := startGroupsBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "r"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := 0; i < 6; i++ {
		r := &kgo.Record{Topic: "r", Partition: int32(i % 2), Value: []byte("v"), Timestamp: t0.Add(time.Duration(i) * time.Minute)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	committed := func() map[int32]int64 {
		o, err := adm.FetchOffsets(ctx, "rg")
		if err != nil {
			t.Fatal(err)
		}
		m := map[int32]int64{}
		o.Each(func(r kadm.OffsetResponse) { m[r.Partition] = r.At })
		return m
	}
	now := time.Now()
	if out, err := runGroupsCLI(t, now, "reset-offsets", "rg", "--brokers", addr, "--topic", "r", "--to-latest"); err != nil || !strings.Contains(out, "dry run") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if got := committed(); len(got) != 0 {
		t.Fatalf("a dry run committed %v", got)
	}
	steps := []struct {
		args []string
		want map[int32]int64
	}{
		{[]string{"--to-latest"}, map[int32]int64{0: 3, 1: 3}},
		{[]string{"--to-earliest", "--partitions", "1"}, map[int32]int64{0: 3, 1: 0}},
		{[]string{"--to-offset", "2"}, map[int32]int64{0: 2, 1: 2}},
		{[]string{"--to-offset", "99"}, map[int32]int64{0: 3, 1: 3}}, // clamped to the end
		// Records at t0+0m,2m,4m on partition 0 and 1m,3m,5m on 1:
		// the first at or after t0+2m30s is offset 2 on p0 (4m) and 1 on p1 (3m).
		{[]string{"--to-datetime", t0.Add(150 * time.Second).UTC().Format(time.RFC3339Nano)}, map[int32]int64{0: 2, 1: 1}},
	}
	for _, s := range steps {
		args := append([]string{"reset-offsets", "rg", "--brokers", addr, "--topic", "r", "--execute"}, s.args...)
		if out, err := runGroupsCLI(t, now, args...); err != nil {
			t.Fatalf("%v: %v\n%s", s.args, err, out)
		}
		got := committed()
		for p, w := range s.want {
			if got[p] != w {
				t.Errorf("after %v: partition %d at %d, want %d", s.args, p, got[p], w)
			}
		}
	}

	// A group with an active member is refused.
	member, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("rg"), kgo.ConsumeTopics("r"),
		kgo.SessionTimeout(2*time.Second), kgo.HeartbeatInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan struct{})
	go func() { defer close(polled); member.PollFetches(ctx) }() // joins the group; returns when member closes
	defer func() { member.Close(); <-polled }()
	deadline := time.Now().Add(groupsTestTimeout)
	for {
		d, err := adm.DescribeGroups(ctx, "rg")
		if err == nil && d["rg"].State == "Stable" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("member never joined")
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, err := runGroupsCLI(t, now, "reset-offsets", "rg", "--brokers", addr, "--topic", "r", "--to-earliest", "--execute")
	if err == nil || !strings.Contains(err.Error(), "stop its consumers") {
		t.Fatalf("reset of an active group: %v\n%s", err, out)
	}
	if _, err := runGroupsCLI(t, now, "reset-offsets", "rg", "--brokers", addr, "--topic", "r"); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("reset without a mode: %v", err)
	}
}

// decodeJSON parses one JSON document into a T.
func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v:\n%s", err, s)
	}
	return v
}

// Share groups (KIP-932) in list and describe: type, state, members, and
// per share-partition the start offset, end and lag, read with the
// share-group admin APIs.
func TestGroupsShareGroup(t *testing.T) {
	addr := startGroupsBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sq"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group config: %v %+v", err, resp)
	}
	produce := func(n int) {
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "q", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(5)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("sq"), kgo.ConsumeTopics("q"), kgo.ClientID("cli-share"))
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 5; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 5", got)
		}
		fs.EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept); got++ })
		if err := consumer.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	out, err := runGroupsCLI(t, now, "list", "--brokers", addr)
	if err != nil || !strings.Contains(out, "TYPE") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if f := fieldsOf(out, "sq"); len(f) != 4 || f[1] != "share" || f[2] != "Stable" {
		t.Errorf("list: row of sq %q, want type share, state Stable\n%s", f, out)
	}
	if out, err := runGroupsCLI(t, now, "list", "--brokers", addr, "--type", "consumer"); err != nil || strings.Contains(out, "sq") {
		t.Errorf("list --type consumer shows the share group: %v\n%s", err, out)
	}
	if _, err := runGroupsCLI(t, now, "list", "--brokers", addr, "--type", "queue"); err == nil {
		t.Error("list --type queue: no error")
	}
	out, err = runGroupsCLI(t, now, "describe", "sq", "--brokers", addr)
	if err != nil || !strings.Contains(out, "Share group sq: state Stable, 1 members") {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	// The acknowledgements are flushed: the start offset passed them.
	if r := fieldsOfPrefix(out, "q", "0"); len(r) != 5 || r[2] != "5" || r[3] != "5" || r[4] != "0" {
		t.Errorf("describe: q/0 row %q, want start 5, end 5, lag 0\n%s", r, out)
	}
	if !strings.Contains(out, "cli-share") || !strings.Contains(out, "q:0,1") {
		t.Errorf("describe: no member cli-share assigned q:0,1\n%s", out)
	}
	if _, err := runGroupsCLI(t, now, "reset-offsets", "sq", "--brokers", addr, "--topic", "q", "--to-earliest", "--execute"); err == nil ||
		!strings.Contains(err.Error(), "stop its consumers first") {
		t.Errorf("reset-offsets of a share group with a member: %v, want refused", err)
	}
	consumer.Close() // leaves the group
	produce(3)
	out, err = runGroupsCLI(t, now, "describe", "sq", "--brokers", addr, "--format", "json")
	if err != nil {
		t.Fatalf("describe --format json: %v\n%s", err, out)
	}
	d := decodeJSON[[]shareGroupJSON](t, out)
	if len(d) != 1 || d[0].Type != "share" || d[0].State != "Empty" || len(d[0].Members) != 0 {
		t.Fatalf("describe --format json: %s", out)
	}
	var p0 *sharePartitionJS
	for i := range d[0].Partitions {
		if d[0].Partitions[i].Topic == "q" && d[0].Partitions[i].Partition == 0 {
			p0 = &d[0].Partitions[i]
		}
	}
	if p0 == nil || p0.StartOffset != 5 || p0.EndOffset != 8 || p0.Lag == nil || *p0.Lag != 3 {
		t.Errorf("describe --format json: q/0 %+v, want start 5, end 8, lag 3\n%s", p0, out)
	}

	// reset-offsets moves the share-partition start offsets of the empty
	// group: a dry run first, then --execute.
	out, err = runGroupsCLI(t, now, "reset-offsets", "sq", "--brokers", addr, "--topic", "q", "--partitions", "0", "--to-offset", "2")
	if err != nil || !strings.Contains(out, "dry run") {
		t.Fatalf("reset-offsets dry run: %v\n%s", err, out)
	}
	if f := fieldsOfPrefix(out, "sq", "q", "0"); len(f) != 4 || f[3] != "2" {
		t.Errorf("reset-offsets dry run: row %q, want new offset 2\n%s", f, out)
	}
	out, err = runGroupsCLI(t, now, "reset-offsets", "sq", "--brokers", addr, "--topic", "q", "--partitions", "0", "--to-offset", "2", "--execute")
	if err != nil || !strings.Contains(out, "altered the share-partitions' start offsets") {
		t.Fatalf("reset-offsets --execute: %v\n%s", err, out)
	}
	out, err = runGroupsCLI(t, now, "describe", "sq", "--brokers", addr)
	if r := fieldsOfPrefix(out, "q", "0"); err != nil || len(r) != 5 || r[2] != "2" || r[3] != "8" || r[4] != "6" {
		t.Errorf("describe after reset-offsets: %v: q/0 row %q, want start 2, end 8, lag 6\n%s", err, r, out)
	}
	// Back to 5 for what follows.
	if out, err := runGroupsCLI(t, now, "reset-offsets", "sq", "--brokers", addr, "--topic", "q", "--partitions", "0", "--to-offset", "5", "--execute"); err != nil {
		t.Fatalf("reset-offsets back to 5: %v\n%s", err, out)
	}

	// The same through the built binary.
	bin := filepath.Join(t.TempDir(), "strata")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	runBin := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "STRATA_BROKERS="+addr)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("strata %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out = runBin("groups", "list", "--type", "share")
	if f := fieldsOf(out, "sq"); len(f) != 4 || f[1] != "share" || f[2] != "Empty" || f[3] != "share" {
		t.Errorf("binary groups list --type share: row of sq %q\n%s", f, out)
	}
	out = runBin("groups", "describe", "sq")
	if !strings.Contains(out, "Share group sq: state Empty, 0 members") {
		t.Errorf("binary groups describe sq:\n%s", out)
	}
	if r := fieldsOfPrefix(out, "q", "0"); len(r) != 5 || r[2] != "5" || r[3] != "8" || r[4] != "3" {
		t.Errorf("binary groups describe sq: q/0 row %q, want start 5, end 8, lag 3\n%s", r, out)
	}
}

// fieldsOfPrefix returns the fields of the line of out that starts with
// the fields first.
func fieldsOfPrefix(out string, first ...string) []string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= len(first) && slices.Equal(f[:len(first)], first) {
			return f
		}
	}
	return nil
}

// fieldsOf returns the fields of the line of out whose first field is first.
func fieldsOf(out, first string) []string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return f
		}
	}
	return nil
}

// shareGroupsFixture starts a broker on dir with topic q (one partition,
// three records) and a client; the caller closes the client and stops the
// broker (stop) when it restarts it.
func shareGroupsFixture(ctx context.Context, t *testing.T, dir string) (addr string, stop func(), cl *kgo.Client, adm *kadm.Client) {
	t.Helper()
	addr, stop = startGroupsBrokerIn(t, dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	adm = kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "q", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return addr, stop, cl, adm
}

// A restarted broker knows a share group by its share-partitions' state
// only (members are not persisted): list shows it, describe shows it Empty
// with its start offsets.
func TestGroupsShareGroupAfterRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	addr, stop, cl, adm := shareGroupsFixture(ctx, t, dir)
	// A share group with a share-partition at start offset 1 (no members).
	offs := kadm.Offsets{}
	offs.AddOffset("q", 0, 1, -1)
	if resp, err := adm.AlterShareGroupOffsets(ctx, "sq", offs); err != nil || resp.Error() != nil {
		t.Fatalf("alter share group offsets: %v %v", err, resp.Error())
	}
	cl.Close()
	stop()

	addr, _ = startGroupsBrokerIn(t, dir)
	now := time.Now()
	out, err := runGroupsCLI(t, now, "list", "--brokers", addr, "--type", "share")
	if f := fieldsOf(out, "sq"); err != nil || len(f) != 4 || f[1] != "share" || f[2] != "Empty" {
		t.Fatalf("list after restart: %v: row of sq %q\n%s", err, f, out)
	}
	out, err = runGroupsCLI(t, now, "describe", "sq", "--brokers", addr)
	if err != nil || !strings.Contains(out, "Share group sq: state Empty, 0 members") {
		t.Fatalf("describe after restart: %v\n%s", err, out)
	}
	if r := fieldsOfPrefix(out, "q", "0"); len(r) != 5 || r[2] != "1" || r[3] != "3" || r[4] != "2" {
		t.Errorf("describe after restart: q/0 row %q, want start 1, end 3, lag 2\n%s", r, out)
	}
}

// strata groups delete on a share group (KIP-932), through the built
// binary: refused while it has a member, then deleted with its
// share-partitions' state, so that neither list nor a second delete find it,
// also after the broker restarts on the same data directory; a classic
// group in the same command is deleted as before.
func TestGroupsDeleteShareGroup(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	addr, stop, cl, adm := shareGroupsFixture(ctx, t, dir)
	// sq: a share-partition at start offset 1 and a member; cg: a classic
	// group with a committed offset.
	offs := kadm.Offsets{}
	offs.AddOffset("q", 0, 1, -1)
	if resp, err := adm.AlterShareGroupOffsets(ctx, "sq", offs); err != nil || resp.Error() != nil {
		t.Fatalf("alter share group offsets: %v %v", err, resp.Error())
	}
	if resp, err := adm.CommitOffsets(ctx, "cg", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit cg: %v %v", err, resp.Error())
	}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sq", "m", []string{"q"}
	if r, err := hb.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v %+v", err, r)
	}

	bin := filepath.Join(t.TempDir(), "strata")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	runBin := func(addr string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "STRATA_BROKERS="+addr)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := runBin(addr, "groups", "delete", "sq")
	if err == nil || !strings.Contains(out, "NON_EMPTY_GROUP") || !strings.Contains(out, "stop its consumers first") {
		t.Errorf("groups delete sq with a member: %v, want NON_EMPTY_GROUP\n%s", err, out)
	}
	if out, err := runBin(addr, "groups", "describe", "sq"); err != nil || !strings.Contains(out, "Share group sq: state Stable, 1 members") {
		t.Errorf("describe sq after the refused delete: %v\n%s", err, out)
	}
	hb.MemberEpoch = -1
	if r, err := hb.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("leave: %v %+v", err, r)
	}
	out, err = runBin(addr, "groups", "delete", "sq", "cg")
	if err != nil || !strings.Contains(out, "Deleted group sq.") || !strings.Contains(out, "Deleted group cg.") {
		t.Fatalf("groups delete sq cg: %v\n%s", err, out)
	}
	gone := func(addr, when string) {
		t.Helper()
		out, err := runBin(addr, "groups", "list")
		if err != nil || fieldsOf(out, "sq") != nil || fieldsOf(out, "cg") != nil {
			t.Errorf("groups list %s: %v\n%s", when, err, out)
		}
		out, err = runBin(addr, "groups", "delete", "sq")
		if err == nil || !strings.Contains(out, "GROUP_ID_NOT_FOUND") {
			t.Errorf("groups delete sq %s: %v, want GROUP_ID_NOT_FOUND\n%s", when, err, out)
		}
	}
	gone(addr, "after the delete")
	cl.Close()
	stop()

	addr, _ = startGroupsBrokerIn(t, dir)
	gone(addr, "after a restart")
	cl2, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	ds, err := kadm.NewClient(cl2).DescribeShareGroups(ctx, "sq")
	if err != nil || !errors.Is(ds["sq"].Err, kerr.GroupIDNotFound) {
		t.Errorf("DescribeShareGroups sq after a restart: %v %+v, want GROUP_ID_NOT_FOUND", err, ds["sq"])
	}
}
