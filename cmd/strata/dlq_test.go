package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func runDLQCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := dlqMainEnv(args, &out, &errb, func(string) string { return "" })
	return out.String() + errb.String(), err
}

// readPartition reads topic/partition's records [from, to) (bounded by
// the test's context).
func readPartition(t *testing.T, ctx context.Context, addr, topic string, partition int32, from, to int64) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for int64(len(recs)) < to-from {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s/%d [%d, %d): %v after %d records", topic, partition, from, to, err, len(recs))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < to {
				recs = append(recs, r)
			}
		})
	}
	return recs
}

func headerMap(t *testing.T, r *kgo.Record) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, h := range r.Headers {
		if _, dup := m[h.Key]; dup {
			t.Errorf("offset %d: header %s twice", r.Offset, h.Key)
		}
		m[h.Key] = string(h.Value)
	}
	return m
}

func endOffset(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, partition int32) int64 {
	t.Helper()
	eo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := eo.Lookup(topic, partition)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s/%d: %v %v", topic, partition, ok, o.Err)
	}
	return o.Offset
}

// TestDLQMoveAndRedrive moves records [10, 20) of a 30-record partition to
// a dead-letter topic with a group's offset inside the range, then re-drives
// them back to the source topic.
func TestDLQMoveAndRedrive(t *testing.T) {
	addr := startGroupsBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	enable := "true"
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{dlqTopicEnable: &enable}, "dlq.orders"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 30 {
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: 1, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: fmt.Appendf(nil, "t%d", i)}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.AddOffset("orders", 1, 12, -1) // the group stopped at a poison record inside the range
	if r, err := adm.CommitOffsets(ctx, "billing", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}

	out, err := runDLQCLI(t, "move", "--brokers", addr, "--topic", "orders", "--partition", "1", "--from-offset", "10", "--to-offset", "20",
		"--group", "billing", "--format", "json")
	if err != nil {
		t.Fatalf("move: %v\n%s", err, out)
	}
	mv := decodeJSON[dlqMoveJSON](t, out)
	if mv.Moved != 10 || mv.DLQ != "dlq.orders" || mv.DLQPartition != 0 || mv.FirstDLQOffset != 0 || mv.LastDLQOffset != 9 ||
		mv.GroupCommitted == nil || *mv.GroupCommitted != 12 || mv.GroupNewOffset == nil || *mv.GroupNewOffset != 20 {
		t.Fatalf("move answered:\n%s", out)
	}
	dead := readPartition(t, ctx, addr, "dlq.orders", 0, 0, 10)
	for i, r := range dead {
		src := 10 + i
		if string(r.Key) != fmt.Sprintf("k%d", src) || string(r.Value) != fmt.Sprintf("v%d", src) {
			t.Errorf("dead letter %d: key %q value %q, want k%d v%d (in order)", i, r.Key, r.Value, src, src)
		}
		h := headerMap(t, r)
		want := map[string]string{"trace": fmt.Sprintf("t%d", src), dlqHeaderTopic: "orders", dlqHeaderPartition: "1",
			dlqHeaderOffset: fmt.Sprint(src), dlqHeaderGroup: "billing", dlqHeaderMessage: "moved"}
		if fmt.Sprint(h) != fmt.Sprint(want) {
			t.Errorf("dead letter %d headers %v, want %v", i, h, want)
		}
	}
	fo, err := adm.FetchOffsets(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fo.Lookup("orders", 1); !ok || o.At != 20 {
		t.Errorf("billing's offset for orders/1 is %+v, want 20", o)
	}
	if end := endOffset(t, ctx, adm, "orders", 1); end != 30 {
		t.Errorf("orders/1 ends at %d after the move, want 30 (the source records stay)", end)
	}

	// A committed offset outside the range is left alone (text output).
	out, err = runDLQCLI(t, "move", "--brokers", addr, "--topic", "orders", "--partition", "1", "--from-offset", "25", "--to-offset", "27",
		"--group", "billing", "--reason", "bad schema")
	if err != nil || !strings.Contains(out, "Moved 2 records of orders/1 [25, 27) to dlq.orders partition 0, offsets 10 to 11.") ||
		!strings.Contains(out, "committed offset 20 is outside [25, 27), unchanged") {
		t.Fatalf("second move: %v\n%s", err, out)
	}
	if r := readPartition(t, ctx, addr, "dlq.orders", 0, 10, 11)[0]; headerMap(t, r)[dlqHeaderMessage] != "bad schema" {
		t.Errorf("--reason: headers %v", headerMap(t, r))
	}

	// A share group's dead letter without a copy of the record: headers only.
	shareDL := &kgo.Record{Topic: "dlq.orders", Partition: 0, Headers: []kgo.RecordHeader{
		{Key: dlqHeaderTopic, Value: []byte("orders")}, {Key: dlqHeaderPartition, Value: []byte("0")}, {Key: dlqHeaderOffset, Value: []byte("0")},
		{Key: dlqHeaderGroup, Value: []byte("sg")}, {Key: "__dlq.errors.delivery.count", Value: []byte("1")},
		{Key: dlqHeaderMessage, Value: []byte("Offset rejected by client.")}}}
	if err := cl.ProduceSync(ctx, shareDL).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Re-drive the first ten back: they land at the end of orders/1 with
	// their original headers only.
	out, err = runDLQCLI(t, "redrive", "--brokers", addr, "--dlq", "dlq.orders", "--to", "orders", "--to-offset", "10", "--format", "json")
	if err != nil {
		t.Fatalf("redrive: %v\n%s", err, out)
	}
	rd := decodeJSON[dlqRedriveJSON](t, out)
	if rd.Redriven != 10 || rd.Skipped != 0 || len(rd.Partitions) != 1 || rd.Partitions[0].Redriven != 10 {
		t.Fatalf("redrive answered:\n%s", out)
	}
	back := readPartition(t, ctx, addr, "orders", 1, 30, 40)
	for i, r := range back {
		src := 10 + i
		if r.Offset != int64(30+i) || string(r.Key) != fmt.Sprintf("k%d", src) || string(r.Value) != fmt.Sprintf("v%d", src) {
			t.Errorf("re-driven %d: offset %d key %q value %q, want offset %d k%d v%d", i, r.Offset, r.Key, r.Value, 30+i, src, src)
		}
		if h := headerMap(t, r); len(h) != 1 || h["trace"] != fmt.Sprintf("t%d", src) {
			t.Errorf("re-driven %d headers %v, want only trace=t%d", i, h, src)
		}
	}
	if end := endOffset(t, ctx, adm, "orders", 0); end != 0 {
		t.Errorf("orders/0 has %d records, want 0 (the partition header names 1)", end)
	}

	// The rest: the two moved records and the share group's dead letter,
	// which has no record to re-drive.
	out, err = runDLQCLI(t, "redrive", "--brokers", addr, "--dlq", "dlq.orders", "--to", "orders", "--from-offset", "10")
	if err != nil || !strings.Contains(out, "Re-drove 2 records from dlq.orders to orders.") ||
		!strings.Contains(out, "Skipped 1 dead letters with a null key and value") {
		t.Fatalf("second redrive: %v\n%s", err, out)
	}
	if end := endOffset(t, ctx, adm, "orders", 1); end != 42 {
		t.Errorf("orders/1 ends at %d, want 42", end)
	}
}

func TestDLQMoveRefusals(t *testing.T) {
	addr := startGroupsBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	enable := "true"
	for _, c := range []struct {
		name string
		cfg  map[string]*string
	}{{"src", nil}, {"dlq.plain", nil}, {"dlq.src", map[string]*string{dlqTopicEnable: &enable}}, {"noprefix", map[string]*string{dlqTopicEnable: &enable}}} {
		if _, err := adm.CreateTopic(ctx, 1, 1, c.cfg, c.name); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "src", Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	move := func(extra ...string) (string, error) {
		return runDLQCLI(t, append([]string{"move", "--brokers", addr, "--topic", "src", "--partition", "0", "--from-offset", "1", "--to-offset", "3"}, extra...)...)
	}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--dlq", "dlq.plain"}, "does not have errors.deadletterqueue.group.enable=true"},
		{[]string{"--dlq", "dlq.missing"}, "does not exist"},
		{[]string{"--dlq", "noprefix"}, `does not start with the broker's errors.deadletterqueue.topic.name.prefix "dlq."`},
		{[]string{"--dlq", "__dlq"}, "starting with __"},
		{[]string{"--to-offset", "9"}, "past src/0's end 5"},
	} {
		out, err := move(c.extra...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("move %v: %v, want an error with %q\n%s", c.extra, err, c.want, out)
		}
	}
	for _, topic := range []string{"dlq.plain", "dlq.src", "noprefix"} {
		if end := endOffset(t, ctx, adm, topic, 0); end != 0 {
			t.Errorf("%s has %d records after refusals", topic, end)
		}
	}
	// Mistakes on the command line are usage errors.
	for _, args := range [][]string{
		{"move", "--topic", "src", "--partition", "0", "--from-offset", "3", "--to-offset", "3"},
		{"move", "--partition", "0", "--from-offset", "1", "--to-offset", "3"},
		{"redrive", "--dlq", "dlq.src"},
	} {
		if _, err := runDLQCLI(t, append(args, "--brokers", addr)...); err == nil || exitCode("dlq", err, &bytes.Buffer{}) != 1 {
			t.Errorf("%v: %v, want a usage error", args, err)
		} else if _, ok := err.(*usageError); !ok {
			t.Errorf("%v: %T %v, want a usage error", args, err, err)
		}
	}

	// A group with a member, classic or KIP-848, is refused before
	// anything is moved.
	for _, g := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"busy", nil},
		{"busy848", []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}},
	} {
		member, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(g.name), kgo.ConsumeTopics("src"),
			kgo.SessionTimeout(2 * time.Second), kgo.HeartbeatInterval(100 * time.Millisecond)}, g.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		polled := make(chan struct{})
		go func() { defer close(polled); member.PollFetches(ctx) }()
		deadline := time.Now().Add(groupsTestTimeout)
		for {
			d, err := adm.DescribeGroups(ctx, g.name)
			if err == nil && d[g.name].State == "Stable" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("member of %s never joined", g.name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		out, err := move("--group", g.name)
		if err == nil || !strings.Contains(err.Error(), "group "+g.name+" is Stable with 1 members: stop its consumers first") {
			t.Errorf("move with the active group %s: %v\n%s", g.name, err, out)
		}
		member.Close()
		<-polled
	}
	if end := endOffset(t, ctx, adm, "dlq.src", 0); end != 0 {
		t.Errorf("dlq.src has %d records after the refusals", end)
	}
	// The KIP-848 group, now without members, has its offset moved past
	// the range; the default dead-letter topic is the prefix and the
	// topic: dlq.src.
	offs := kadm.Offsets{}
	offs.AddOffset("src", 0, 1, -1)
	if r, err := adm.CommitOffsets(ctx, "busy848", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	out, err := move("--group", "busy848")
	if err != nil || !strings.Contains(out, "Moved 2 records of src/0 [1, 3) to dlq.src partition 0") ||
		!strings.Contains(out, "Group busy848: committed offset 1 -> 3.") {
		t.Fatalf("move: %v\n%s", err, out)
	}
	fo, err := adm.FetchOffsets(ctx, "busy848")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fo.Lookup("src", 0); !ok || o.At != 3 {
		t.Errorf("busy848's offset for src/0 is %+v, want 3", o)
	}
	// Without --group: no group header.
	if out, err := move("--from-offset", "3", "--to-offset", "5"); err != nil || !strings.Contains(out, "Moved 2 records of src/0 [3, 5)") {
		t.Fatalf("move: %v\n%s", err, out)
	}
	dead := readPartition(t, ctx, addr, "dlq.src", 0, 0, 4)
	if h := headerMap(t, dead[0]); h[dlqHeaderGroup] != "busy848" || h[dlqHeaderOffset] != "1" {
		t.Errorf("headers with --group: %v", h)
	}
	h := headerMap(t, dead[2])
	if _, hasGroup := h[dlqHeaderGroup]; hasGroup || h[dlqHeaderOffset] != "3" {
		t.Errorf("headers without --group: %v", h)
	}
}

// TestDLQRedriveShareDeadLetters re-drives dead letters the broker wrote
// for a share group with errors.deadletterqueue.copy.record.enable=true:
// the rejected records go back to their partition with key and value.
func TestDLQRedriveShareDeadLetters(t *testing.T) {
	addr := startGroupsBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	enable := "true"
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{dlqTopicEnable: &enable}, "dlq.jobs"); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "workers"
	for _, kv := range [][2]string{{"share.auto.offset.reset", "earliest"}, {"errors.deadletterqueue.topic.name", "dlq.jobs"},
		{"errors.deadletterqueue.copy.record.enable", "true"}} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[0], kmsg.StringPtr(kv[1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group config: %v %+v", err, resp)
	}
	for i, v := range []string{"ok-0", "poison-1", "ok-2", "poison-3"} {
		r := &kgo.Record{Topic: "jobs", Partition: 1, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 4; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 4", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Value), "poison") {
				r.Ack(kgo.AckReject)
			} else {
				r.Ack(kgo.AckAccept)
			}
			got++
		})
		if err := consumer.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	consumer.Close()
	for endOffset(t, ctx, adm, "dlq.jobs", 0) < 2 { // the dead-letter writer runs off the ack
		if ctx.Err() != nil {
			t.Fatal("the two dead letters were never written")
		}
		time.Sleep(20 * time.Millisecond)
	}

	out, err := runDLQCLI(t, "redrive", "--brokers", addr, "--dlq", "dlq.jobs", "--to", "jobs", "--source-topic", "jobs")
	if err != nil || !strings.Contains(out, "Re-drove 2 records from dlq.jobs to jobs.") || strings.Contains(out, "Skipped") {
		t.Fatalf("redrive: %v\n%s", err, out)
	}
	back := readPartition(t, ctx, addr, "jobs", 1, 4, 6)
	for i, want := range []string{"poison-1", "poison-3"} {
		r := back[i]
		if string(r.Value) != want || string(r.Key) != fmt.Sprintf("k%d", 2*i+1) || len(r.Headers) != 0 {
			t.Errorf("re-driven offset %d: key %q value %q headers %v, want k%d %s and no headers", r.Offset, r.Key, r.Value, r.Headers, 2*i+1, want)
		}
	}
	if end := endOffset(t, ctx, adm, "jobs", 0); end != 0 {
		t.Errorf("jobs/0 has %d records, want 0", end)
	}
}

// TestDLQMoveReadCommitted: move reads with read_committed, so an aborted
// transaction's records are not moved, a committed one's are, and a range
// that ends on a transaction marker finishes.
func TestDLQMoveReadCommitted(t *testing.T) {
	addr := startGroupsBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	enable := "true"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "tx"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{dlqTopicEnable: &enable}, "dlq.tx"); err != nil {
		t.Fatal(err)
	}
	plain := func(vs ...string) {
		for _, v := range vs {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("dlq-test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	inTxn := func(commit kgo.TransactionEndTry, vs ...string) {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	plain("p0", "p1", "p2")          // 0..2
	inTxn(kgo.TryAbort, "a3", "a4")  // 3, 4, abort marker 5
	inTxn(kgo.TryCommit, "c6", "c7") // 6, 7, commit marker 8
	// The coordinator writes the commit marker after EndTransaction has
	// returned (as Kafka's does): wait for it, or p9 can take offset 8.
	for i := 0; endOffset(t, ctx, adm, "tx", 0) != 9; i++ {
		if i == 200 {
			t.Fatalf("the commit marker was not written: tx ends at %d, want 9", endOffset(t, ctx, adm, "tx", 0))
		}
		time.Sleep(25 * time.Millisecond)
	}
	plain("p9") // 9
	if end := endOffset(t, ctx, adm, "tx", 0); end != 10 {
		t.Fatalf("tx ends at %d, want 10 (offsets in the comments above)", end)
	}
	out, err := runDLQCLI(t, "move", "--brokers", addr, "--topic", "tx", "--partition", "0", "--from-offset", "3", "--to-offset", "6")
	if err != nil || !strings.Contains(out, "Moved 0 records of tx/0 [3, 6)") {
		t.Fatalf("move of the aborted transaction: %v\n%s", err, out)
	}
	out, err = runDLQCLI(t, "move", "--brokers", addr, "--topic", "tx", "--partition", "0", "--from-offset", "0", "--to-offset", "9", "--format", "json")
	if err != nil {
		t.Fatalf("move: %v\n%s", err, out)
	}
	if mv := decodeJSON[dlqMoveJSON](t, out); mv.Moved != 5 {
		t.Fatalf("moved %d, want 5:\n%s", mv.Moved, out)
	}
	var got []string
	for _, r := range readPartition(t, ctx, addr, "dlq.tx", 0, 0, 5) {
		got = append(got, string(r.Value)+"@"+headerMap(t, r)[dlqHeaderOffset])
	}
	if want := "[p0@0 p1@1 p2@2 c6@6 c7@7]"; fmt.Sprint(got) != want {
		t.Errorf("dead letters %v, want %s", got, want)
	}
}
