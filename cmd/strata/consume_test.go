package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Where consuming starts and when it stops: offsets, N before the end,
// times (ms, RFC 3339, a duration before now), the end, --num.
func TestConsumeOffsetsAndNum(t *testing.T) {
	addr := startGroupsBroker(t)
	createTopic(t, addr, "off", 1)
	base := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	var in strings.Builder
	for i := range 10 {
		fmt.Fprintf(&in, `{"value":"%d","timestamp":%d}`+"\n", i, base.Add(time.Duration(i)*time.Minute).UnixMilli())
	}
	if out, err := runProduce(t, addr, in.String(), "off", "--format", "json"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	seq := func(from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			fmt.Fprintf(&b, "%d\n", i)
		}
		return b.String()
	}
	now := base.Add(7*time.Minute + time.Hour)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-n", "3"}, seq(0, 2)},
		{[]string{"--num", "3", "--from-beginning"}, seq(0, 2)},
		{[]string{"-e"}, seq(0, 9)},
		{[]string{"-o", "5", "-e"}, seq(5, 9)},
		{[]string{"--offset", "5", "-n", "2"}, seq(5, 6)},
		{[]string{"-o", "-2", "-e"}, seq(8, 9)},
		{[]string{"-o", "-20", "-e"}, seq(0, 9)}, // clamped to the start
		{[]string{"-o", "99", "-e"}, ""},         // clamped to the end
		{[]string{"-o", "end", "-e"}, ""},
		{[]string{"-o", fmt.Sprintf("@%d", base.Add(7*time.Minute).UnixMilli()), "-e"}, seq(7, 9)},
		{[]string{"-o", "@" + base.Add(7*time.Minute+time.Second).UTC().Format(time.RFC3339Nano), "-e"}, seq(8, 9)},
		{[]string{"-o", "@-1h", "-e"}, seq(7, 9)}, // now is base+1h7m
		{[]string{"-o", "@" + base.Add(time.Hour).UTC().Format(time.RFC3339), "-e"}, ""},
		{[]string{"-p", "0", "-o", "beginning", "-e", "-n", "4"}, seq(0, 3)},
	}
	for _, c := range cases {
		out, err := runConsumeAt(t, addr, now, append([]string{"off"}, c.args...)...)
		if err != nil || out != c.want {
			t.Errorf("consume off %q: %v\n%q\nwant %q", c.args, err, out, c.want)
		}
	}
	// The cluster's refusals are exit 1, not a hang.
	if _, err := runConsume(t, addr, "off", "-p", "3", "-e"); err == nil || !strings.Contains(err.Error(), "topic off has no partition 3 (it has 1)") {
		t.Errorf("partition 3 of 1: %v", err)
	}
	if _, err := runConsume(t, addr, "nosuch", "-e"); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("a topic that does not exist: %v", err)
	}
	// An empty topic with -e: nothing, at once.
	createTopic(t, addr, "empty", 2)
	var both strings.Builder
	for i := range 10 {
		fmt.Fprintf(&both, "off %d\n", i)
	}
	if out, err := runConsume(t, addr, "empty", "off", "-e", "-f", "%t %v\n"); err != nil || out != both.String() {
		t.Errorf("two topics, one empty: %v %q", err, out)
	}
	if out, err := runConsume(t, addr, "empty", "-e"); err != nil || out != "" {
		t.Errorf("an empty topic: %v %q", err, out)
	}
}

// A group member: the partitions come from the group, consuming resumes at
// the committed offsets, and exactly the records printed are committed.
func TestConsumeGroup(t *testing.T) {
	addr := startGroupsBroker(t)
	createTopic(t, addr, "grp", 2)
	var in strings.Builder
	for i := range 10 {
		fmt.Fprintf(&in, "k%d:%d\n", i, i)
	}
	if out, err := runProduce(t, addr, in.String(), "grp", "-K", ":"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	adm, cl, err := adminClient([]string{addr}, groupsTestTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	first, err := runConsume(t, addr, "grp", "-g", "cg", "-n", "4")
	if err != nil || strings.Count(first, "\n") != 4 {
		t.Fatalf("first member: %v %q", err, first)
	}
	if got := committedTotal(t, adm, "cg"); got != 4 {
		t.Errorf("after 4 printed, %d committed", got)
	}
	second, err := runConsume(t, addr, "grp", "--group", "cg", "--num", "6")
	if err != nil || strings.Count(second, "\n") != 6 {
		t.Fatalf("second member: %v %q", err, second)
	}
	seen := map[string]int{}
	for _, v := range strings.Fields(first + second) {
		seen[v]++
	}
	for i := range 10 {
		if seen[fmt.Sprint(i)] != 1 {
			t.Errorf("value %d printed %d times over both runs:\n%s---\n%s", i, seen[fmt.Sprint(i)], first, second)
		}
	}
	if got := committedTotal(t, adm, "cg"); got != 10 {
		t.Errorf("after 10 printed, %d committed", got)
	}
	// --offset is where a group with no commit starts.
	out, err := runConsume(t, addr, "grp", "-g", "fresh", "-o", "-1", "-n", "2")
	if err != nil || strings.Count(out, "\n") != 2 {
		t.Errorf("a new group from 1 before the end of each partition: %v %q", err, out)
	}

	// The describe JSON agrees: lag 0 everywhere, committed at the end.
	var buf strings.Builder
	if err := groupsMainEnv([]string{"describe", "cg", "--format", "json"}, &buf, &buf, time.Now, brokerEnv(addr)); err != nil {
		t.Fatal(err)
	}
	gs := decodeJSON[[]groupJSON](t, buf.String())
	if len(gs) != 1 || gs[0].Group != "cg" || gs[0].State != "Empty" || len(gs[0].Partitions) != 2 {
		t.Fatalf("describe json:\n%s", buf.String())
	}
	for _, p := range gs[0].Partitions {
		if p.Committed == nil || *p.Committed != p.EndOffset || p.Lag != 0 || p.LagMs != nil || p.CliffMs != nil {
			t.Errorf("partition %+v: want committed at the end, no lag", p)
		}
	}
}

// SIGINT (here: the context) stops a consumer tailing the log: it returns
// nil, and a group member commits what it printed.
func TestConsumeInterrupted(t *testing.T) {
	addr := startGroupsBroker(t)
	createTopic(t, addr, "tail", 1)
	adm, cl, err := adminClient([]string{addr}, groupsTestTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, args := range [][]string{{"tail"}, {"tail", "-g", "tg"}} {
		ctx, cancel := context.WithCancel(context.Background())
		var out, errb syncBuffer
		done := make(chan error, 1)
		go func() { done <- consumeMainEnv(ctx, args, &out, &errb, brokerEnv(addr), time.Now()) }()
		// Keep producing until the consumer has printed three lines: a
		// group member prints only what arrives after it joined.
		deadline := time.After(groupsTestTimeout)
		for i := 0; strings.Count(out.String(), "\n") < 3; i++ {
			if _, err := runProduce(t, addr, fmt.Sprintf("r%d\n", i), "tail"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-deadline:
				t.Fatalf("%q printed %q", args, out.String())
			case err := <-done:
				t.Fatalf("%q returned before the interrupt: %v", args, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
		cancel()
		select {
		case err := <-done:
			if err != nil || errb.String() != "" {
				t.Errorf("%q after the interrupt: %v %q", args, err, errb.String())
			}
		case <-time.After(groupsTestTimeout):
			t.Fatalf("%q did not return after the interrupt", args)
		}
		if len(args) > 1 {
			// It started at the log start (no commit yet): the offset
			// committed is the number of records printed.
			if got, printed := committedTotal(t, adm, "tg"), strings.Count(out.String(), "\n"); printed < 3 || got != int64(printed) {
				t.Errorf("member printed %d records, committed offset %d", printed, got)
			}
		}
	}
}

// Transactions: --read-committed skips the aborted records, and -e stops at
// the end though the last offset is a commit marker no consumer sees.
func TestConsumeReadCommitted(t *testing.T) {
	addr := startGroupsBroker(t)
	createTopic(t, addr, "txn", 1)
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("cli-test"), kgo.DefaultProduceTopic("txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, txn := range []struct {
		values []string
		commit kgo.TransactionEndTry
	}{{[]string{"c1", "c2"}, kgo.TryCommit}, {[]string{"a1"}, kgo.TryAbort}, {[]string{"c3"}, kgo.TryCommit}} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range txn.values {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, txn.commit); err != nil {
			t.Fatal(err)
		}
	}
	// EndTransaction returns before the last marker is written (as in
	// Kafka): wait for it, the last stable offset at 7.
	adm := kadm.NewClient(cl)
	for {
		lso, err := adm.ListCommittedOffsets(ctx, "txn")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := lso.Lookup("txn", 0); o.Offset == 7 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("last stable offset %+v, want 7", lso)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if out, err := runConsume(t, addr, "txn", "-e", "--read-committed"); err != nil || out != "c1\nc2\nc3\n" {
		t.Errorf("--read-committed: %v %q", err, out)
	}
	if out, err := runConsume(t, addr, "txn", "-e", "-f", "%o %v\n"); err != nil || out != "0 c1\n1 c2\n3 a1\n5 c3\n" {
		t.Errorf("read uncommitted (markers at 2, 4, 6): %v %q", err, out)
	}
}
