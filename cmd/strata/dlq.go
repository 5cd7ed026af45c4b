package main

// `strata dlq`: dead-letter topics (KIP-1191) for classic and KIP-848
// consumer groups, which have no broker-side dead-letter path (share groups
// do: docs/share-groups.md).
//
// move reads the records [A, B) of one partition (read_committed) and
// produces each, key, value and headers, to a dead-letter topic with the
// context headers the share-group dead-letter writer puts on its dead
// letters (broker/sharehost/dlq.go), then, with --group, moves the group's
// committed offset past the range when it lies inside it. redrive reads
// dead letters back and produces them to a topic, without the context
// headers, to the partition they came from when the topic has it.
//
// Both read with manual Fetch requests to the partition's leader, so that
// the next offset is known after aborted transactions and control batches
// (kgo.ProcessFetchPartition), and produce idempotently with acks=all.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stratalog/strata/partitioner"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The dead-letter context headers, as broker/sharehost/dlq.go writes them
// (KIP-1191; package share names them). move writes all but the delivery
// count (a consumer group has none); redrive drops every header starting
// with dlqHeaderPrefix.
const (
	dlqHeaderPrefix    = share.DeadLetterHeaderPrefix
	dlqHeaderTopic     = share.DeadLetterHeaderTopic
	dlqHeaderPartition = share.DeadLetterHeaderPartition
	dlqHeaderOffset    = share.DeadLetterHeaderOffset
	dlqHeaderGroup     = share.DeadLetterHeaderGroup
	dlqHeaderMessage   = share.DeadLetterHeaderMessage

	dlqTopicEnable   = share.TopicConfigDeadLetterEnable
	dlqBrokerPrefix  = share.BrokerConfigDeadLetterTopicPrefix
	dlqDefaultPrefix = share.DefaultDeadLetterTopicPrefix
)

const dlqAbout = `Dead-letter topics (KIP-1191) for classic and KIP-848 consumer groups: move a range
of records to a dead-letter topic, and re-drive dead letters back to a topic. Every verb
takes --brokers (default: $STRATA_BROKERS, else 127.0.0.1:9092), --timeout, and
--sasl-mechanism, --sasl-username, --sasl-password (default: $STRATA_SASL_PASSWORD),
--tls and --tls-ca for a secured listener.`

var dlqVerbs = []verbDoc{
	{"move", "copy a range of records to a dead-letter topic", cmdDoc{name: "dlq move",
		usage: "strata dlq move --topic T --partition P --from-offset A --to-offset B [--dlq D] [--group G] [--reason TEXT] [--format text|json]",
		about: "Reads the records [A, B) of T's partition P (read_committed) and produces each to the\n" +
			"dead-letter topic D (default: the broker's errors.deadletterqueue.topic.name.prefix,\n" +
			"else \"dlq.\", then T), partition P mod D's partitions, acks=all and idempotent, with\n" +
			"its key, value and headers and the context headers __dlq.errors.topic, .partition,\n" +
			".offset, .group (with --group) and .message (--reason, default \"moved\").\n" +
			"D must exist with errors.deadletterqueue.group.enable=true and start with the broker's\n" +
			"prefix. With --group G (a classic or KIP-848 consumer group with no members), G's\n" +
			"committed offset for T/P is set to B afterwards if it lies in [A, B), so G skips\n" +
			"what was moved. The source records stay where they are."}},
	{"redrive", "produce dead letters back to a topic", cmdDoc{name: "dlq redrive",
		usage: "strata dlq redrive --dlq D --to T [--partition N] [--from-offset A] [--to-offset B] [--source-topic S] [--format text|json]",
		about: "Reads D's dead letters (read_committed; every partition, or --partition N; from\n" +
			"--from-offset, default the log start, up to --to-offset, default the end, in each)\n" +
			"and produces their key, value and headers without the __dlq.errors.* ones to T,\n" +
			"acks=all and idempotent: to the partition in __dlq.errors.partition when T has it,\n" +
			"else by key (Kafka's murmur2) or round robin for a null key. --source-topic S keeps\n" +
			"only dead letters whose __dlq.errors.topic is S. A dead letter with a null key and\n" +
			"value (a share group's, without errors.deadletterqueue.copy.record.enable) has no\n" +
			"record to re-drive: it is skipped and counted."}},
}

type dlqFlags struct {
	fs          *flag.FlagSet
	brokers     string
	timeout     time.Duration
	topic       string
	partition   int
	from, to    int64
	dlq         string
	group       string
	reason      string
	target      string
	sourceTopic string
	format      outputFormat
	sec         secFlags // acls.go: --sasl-*, --tls, --tls-ca
}

func newDLQFlags(v verbDoc) *dlqFlags {
	f := &dlqFlags{fs: flag.NewFlagSet("strata dlq "+v.verb, flag.ContinueOnError), partition: -1, from: -1, to: -1, format: formatText}
	f.fs.StringVar(&f.brokers, "brokers", "", brokersHelp)
	f.fs.DurationVar(&f.timeout, "timeout", 60*time.Second, "how long the whole command may take")
	f.fs.Var(&f.format, "format", formatHelp)
	f.fs.StringVar(&f.dlq, "dlq", "", "the dead-letter `topic`")
	f.sec.register(f.fs)
	switch v.verb {
	case "move":
		f.fs.StringVar(&f.topic, "topic", "", "the source `topic` (required)")
		f.fs.IntVar(&f.partition, "partition", -1, "the source `partition` (required)")
		f.fs.Int64Var(&f.from, "from-offset", -1, "the first `offset` to move (required)")
		f.fs.Int64Var(&f.to, "to-offset", -1, "the `offset` after the last one to move (required, above --from-offset)")
		f.fs.StringVar(&f.group, "group", "", "a consumer `group` whose committed offset skips the moved records")
		f.fs.StringVar(&f.reason, "reason", "moved", "the __dlq.errors.message header")
	case "redrive":
		f.fs.StringVar(&f.target, "to", "", "the `topic` to produce the records to (required)")
		f.fs.IntVar(&f.partition, "partition", -1, "only this dead-letter `partition` (default: all)")
		f.fs.Int64Var(&f.from, "from-offset", -1, "the first dead-letter `offset` (default: the log start)")
		f.fs.Int64Var(&f.to, "to-offset", -1, "the dead-letter `offset` to stop before (default: the end)")
		f.fs.StringVar(&f.sourceTopic, "source-topic", "", "only dead letters of this source `topic`")
	}
	return f
}

func dlqMain(args []string, stdout, stderr io.Writer) error {
	return dlqMainEnv(args, stdout, stderr, os.Getenv)
}

func dlqMainEnv(args []string, stdout, _ io.Writer, getenv func(string) string) error {
	v, ok, err := dispatchVerb("dlq", dlqAbout, dlqVerbs, args, stdout)
	if !ok {
		return err
	}
	f := newDLQFlags(v)
	pos, err := parseFlags(f.fs, args[1:], v.doc, true, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef(v.doc, "unexpected arguments %q", pos)
	}
	f.brokers = resolveBrokers(f.brokers, getenv)
	f.sec.resolve(getenv)
	if err := dlqCheckArgs(f, v.verb); err != nil {
		return asUsage(v.doc, err)
	}
	opts, err := f.sec.clientOpts()
	if err != nil {
		return asUsage(v.doc, err)
	}
	adm, cl, err := dlqClient(splitSeeds(f.brokers), f.timeout, opts)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	if v.verb == "move" {
		return dlqMove(ctx, adm, cl, f, stdout)
	}
	return dlqRedrive(ctx, adm, cl, f, stdout)
}

func dlqCheckArgs(f *dlqFlags, verb string) error {
	if verb == "move" {
		switch {
		case f.topic == "":
			return errors.New("move: --topic is required")
		case f.partition < 0:
			return errors.New("move: --partition is required")
		case f.from < 0 || f.to < 0:
			return errors.New("move: --from-offset and --to-offset are required")
		case f.to <= f.from:
			return fmt.Errorf("move: --to-offset %d must be above --from-offset %d (the range is [from, to))", f.to, f.from)
		case f.dlq == f.topic:
			return errors.New("move: --dlq is the source topic")
		}
		return nil
	}
	switch {
	case f.dlq == "":
		return errors.New("redrive: --dlq is required")
	case f.target == "":
		return errors.New("redrive: --to is required")
	case f.target == f.dlq:
		return errors.New("redrive: --to is the dead-letter topic")
	case f.from >= 0 && f.to >= 0 && f.to <= f.from:
		return fmt.Errorf("redrive: --to-offset %d must be above --from-offset %d", f.to, f.from)
	}
	return nil
}

// dlqClient is a client that produces idempotently with acks=all (kgo's
// default producer is idempotent) and partitions by Record.Partition.
func dlqClient(seeds []string, timeout time.Duration, opts []kgo.Opt) (*kadm.Client, *kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RequestTimeoutOverhead(timeout),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1 << 20)}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

// brokerDLQPrefix is the broker's errors.deadletterqueue.topic.name.prefix
// (DescribeConfigs on a broker), known false when the cluster does not
// report it (a Kafka before KIP-1191, or no DescribeConfigs permission).
func brokerDLQPrefix(ctx context.Context, adm *kadm.Client) (string, bool) {
	md, err := adm.BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) == 0 {
		return "", false
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, md.Brokers[0].NodeID)
	if err != nil {
		return "", false
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			continue
		}
		for _, c := range rc.Configs {
			if c.Key == dlqBrokerPrefix && c.Value != nil {
				return *c.Value, true
			}
		}
	}
	return "", false
}

// checkDLQTopic refuses a dead-letter topic the share-group path would
// refuse: a name starting with "__" or without the broker's prefix, a topic
// that does not exist or lacks errors.deadletterqueue.group.enable=true.
// It returns the topic's partition count.
func checkDLQTopic(ctx context.Context, adm *kadm.Client, name, prefix string, prefixKnown bool) (int, error) {
	if strings.HasPrefix(name, "__") {
		return 0, fmt.Errorf("dead-letter topic %s: a name starting with __ is refused", name)
	}
	if prefixKnown && !strings.HasPrefix(name, prefix) {
		return 0, fmt.Errorf("dead-letter topic %s does not start with the broker's %s %q", name, dlqBrokerPrefix, prefix)
	}
	tds, err := adm.ListTopics(ctx, name)
	if err != nil {
		return 0, err
	}
	td, ok := tds[name]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return 0, fmt.Errorf("dead-letter topic %s does not exist (create it: strata topics create %s --config %s=true)", name, name, dlqTopicEnable)
	}
	if td.Err != nil {
		return 0, fmt.Errorf("dead-letter topic %s: %w", name, td.Err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		return 0, err
	}
	rc, err := rcs.On(name, nil)
	if err != nil {
		return 0, fmt.Errorf("dead-letter topic %s: %w", name, err)
	}
	if rc.Err != nil {
		return 0, fmt.Errorf("dead-letter topic %s: %w", name, rc.Err)
	}
	enabled := false
	for _, c := range rc.Configs {
		if c.Key == dlqTopicEnable && c.Value != nil && strings.EqualFold(*c.Value, "true") {
			enabled = true
		}
	}
	if !enabled {
		return 0, fmt.Errorf("dead-letter topic %s does not have %s=true (set it: strata topics alter-config %s --set %s=true)", name, dlqTopicEnable, name, dlqTopicEnable)
	}
	return len(td.Partitions), nil
}

// checkGroupEmpty refuses a share group and a group with members, as
// kafka-consumer-groups --reset-offsets does.
func checkGroupEmpty(ctx context.Context, adm *kadm.Client, g string) error {
	shares, err := adm.ListGroupsByType(ctx, []string{"share"})
	if err == nil {
		if _, ok := shares[g]; ok {
			return fmt.Errorf("group %s is a share group: its dead letters are written by the broker (docs/share-groups.md); use a classic or consumer group", g)
		}
	}
	refuse := func(state string, members int) error {
		if state == "Empty" || state == "Dead" {
			return nil
		}
		return fmt.Errorf("group %s is %s with %d members: stop its consumers first (offsets can only be changed for an inactive group); nothing was moved",
			g, state, members)
	}
	// A KIP-848 group's members are ConsumerGroupDescribe's.
	if consumers, err := adm.ListGroupsByType(ctx, []string{"consumer"}); err == nil {
		if _, ok := consumers[g]; ok {
			ds, err := adm.DescribeConsumerGroups(ctx, g)
			if err != nil {
				return err
			}
			if d, ok := ds[g]; ok && d.Err == nil {
				return refuse(d.State, len(d.Members))
			}
		}
	}
	ds, err := adm.DescribeGroups(ctx, g)
	if err != nil {
		return err
	}
	if d, ok := ds[g]; ok && d.Err == nil {
		return refuse(d.State, len(d.Members))
	}
	return nil
}

// partitionReader reads one partition with manual read_committed Fetch
// requests to its leader.
type partitionReader struct {
	cl        *kgo.Client
	adm       *kadm.Client
	topic     string
	partition int32
	id        [16]byte
	leader    int32
}

func newPartitionReader(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string, partition int32) (*partitionReader, error) {
	r := &partitionReader{cl: cl, adm: adm, topic: topic, partition: partition}
	return r, r.refresh(ctx)
}

func (r *partitionReader) refresh(ctx context.Context) error {
	md, err := r.adm.Metadata(ctx, r.topic)
	if err != nil {
		return err
	}
	td, ok := md.Topics[r.topic]
	if !ok {
		return fmt.Errorf("topic %s does not exist", r.topic)
	}
	if td.Err != nil {
		return fmt.Errorf("topic %s: %w", r.topic, td.Err)
	}
	pd, ok := td.Partitions[r.partition]
	if !ok {
		return fmt.Errorf("topic %s has no partition %d", r.topic, r.partition)
	}
	r.id, r.leader = td.ID, pd.Leader
	return nil
}

// read calls fn for each committed record with an offset in [from, to), in
// order, and returns when the next offset to read reaches to. It gives up
// after maxStalls fetches in a row that move nothing (an open transaction
// below to, a partition without a leader).
func (r *partitionReader) read(ctx context.Context, from, to int64, fn func(*kgo.Record) error) error {
	const maxStalls = 20
	next, stalls := from, 0
	for next < to {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading %s/%d at offset %d: %w", r.topic, r.partition, next, err)
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 200
		req.MinBytes = 1
		req.MaxBytes = 16 << 20
		req.IsolationLevel = 1
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = r.topic, r.id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = r.partition, next, 4<<20
		rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, r.cl.Broker(int(r.leader)))
		var part *kmsg.FetchResponseTopicPartition
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				err = fmt.Errorf("fetch answered %d topics", len(resp.Topics))
			} else {
				part = &resp.Topics[0].Partitions[0]
			}
		}
		var fp kgo.FetchPartition
		after := next
		if err == nil {
			fp, after = kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: next, IsolationLevel: kgo.ReadCommitted(),
				Topic: r.topic, Partition: r.partition}, part, kgo.DefaultDecompressor(), nil)
			err = fp.Err
		}
		if err != nil {
			if errors.Is(err, kerr.OffsetOutOfRange) {
				return fmt.Errorf("reading %s/%d: offset %d is out of range (below the log start or past the end)", r.topic, r.partition, next)
			}
			if ke := (*kerr.Error)(nil); errors.As(err, &ke) && !ke.Retriable {
				return fmt.Errorf("reading %s/%d at offset %d: %w", r.topic, r.partition, next, err)
			}
		}
		for _, rec := range fp.Records {
			if rec.Offset < next || rec.Offset >= to {
				continue
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
		if after > next {
			next, stalls = after, 0
			continue
		}
		stalls++
		if stalls >= maxStalls {
			why := "no progress"
			if err != nil {
				why = err.Error()
			} else if part != nil && part.LastStableOffset >= 0 && part.LastStableOffset <= next {
				why = fmt.Sprintf("offset %d is in an open transaction (last stable offset %d)", next, part.LastStableOffset)
			}
			return fmt.Errorf("reading %s/%d at offset %d: %s after %d fetches", r.topic, r.partition, next, why, stalls)
		}
		if err != nil {
			_ = r.refresh(ctx) // a moved leader, a recreated topic
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(stalls) * 50 * time.Millisecond):
		}
	}
	return nil
}

// partitionBounds returns the log start and the last stable offset of
// topic's partitions (ListOffsets with read_committed: the end a
// read_committed reader reaches).
func partitionBounds(ctx context.Context, adm *kadm.Client, topic string) (starts, ends map[int32]int64, err error) {
	so, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	eo, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	if err := so.Error(); err != nil {
		return nil, nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	if err := eo.Error(); err != nil {
		return nil, nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	starts, ends = map[int32]int64{}, map[int32]int64{}
	so.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic {
			starts[o.Partition] = o.Offset
		}
	})
	eo.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic {
			ends[o.Partition] = o.Offset
		}
	})
	return starts, ends, nil
}

// produceAll produces recs in order and waits for every acknowledgement.
func produceAll(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("producing to %s: %w", recs[0].Topic, err)
	}
	return nil
}

type dlqMoveJSON struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	FromOffset     int64  `json:"from_offset"`
	ToOffset       int64  `json:"to_offset"`
	DLQ            string `json:"dlq"`
	DLQPartition   int32  `json:"dlq_partition"`
	Moved          int    `json:"moved"`
	FirstDLQOffset int64  `json:"first_dlq_offset"` // -1: none moved
	LastDLQOffset  int64  `json:"last_dlq_offset"`  // -1: none moved
	Group          string `json:"group,omitempty"`
	GroupCommitted *int64 `json:"group_committed_before"` // null: no group, or none committed
	GroupNewOffset *int64 `json:"group_new_offset"`       // null: not changed
}

func dlqMove(ctx context.Context, adm *kadm.Client, cl *kgo.Client, f *dlqFlags, w io.Writer) error {
	prefix, prefixKnown := brokerDLQPrefix(ctx, adm)
	if f.dlq == "" {
		p := prefix
		if !prefixKnown || p == "" {
			p = dlqDefaultPrefix
		}
		f.dlq = p + f.topic
	}
	nDLQ, err := checkDLQTopic(ctx, adm, f.dlq, prefix, prefixKnown)
	if err != nil {
		return err
	}
	part := int32(f.partition)
	starts, ends, err := partitionBounds(ctx, adm, f.topic)
	if err != nil {
		return err
	}
	end, ok := ends[part]
	if !ok {
		return fmt.Errorf("topic %s has no partition %d", f.topic, part)
	}
	if f.from < starts[part] {
		return fmt.Errorf("--from-offset %d is below %s/%d's log start offset %d", f.from, f.topic, part, starts[part])
	}
	if f.to > end {
		return fmt.Errorf("--to-offset %d is past %s/%d's end %d (its last stable offset)", f.to, f.topic, part, end)
	}
	out := dlqMoveJSON{Topic: f.topic, Partition: part, FromOffset: f.from, ToOffset: f.to, DLQ: f.dlq,
		DLQPartition: part % int32(nDLQ), FirstDLQOffset: -1, LastDLQOffset: -1, Group: f.group}
	if f.group != "" {
		if err := checkGroupEmpty(ctx, adm, f.group); err != nil {
			return err
		}
		offs, err := adm.FetchOffsets(ctx, f.group)
		if err != nil {
			return err
		}
		if err := offs.Error(); err != nil {
			return fmt.Errorf("group %s: %w", f.group, err)
		}
		if o, ok := offs.Lookup(f.topic, part); ok && o.At >= 0 {
			at := o.At
			out.GroupCommitted = &at
		}
	}
	r, err := newPartitionReader(ctx, cl, adm, f.topic, part)
	if err != nil {
		return err
	}
	var batch []*kgo.Record
	flush := func() error {
		err := produceAll(ctx, cl, batch)
		if err == nil && len(batch) > 0 {
			if out.FirstDLQOffset < 0 {
				out.FirstDLQOffset = batch[0].Offset
			}
			out.LastDLQOffset = batch[len(batch)-1].Offset
			out.Moved += len(batch)
		}
		batch = batch[:0]
		return err
	}
	err = r.read(ctx, f.from, f.to, func(rec *kgo.Record) error {
		batch = append(batch, deadLetter(rec, f.dlq, out.DLQPartition, f.group, f.reason))
		if len(batch) >= 500 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("%w (%d records were moved before this)", err, out.Moved)
	}
	if out.GroupCommitted != nil && *out.GroupCommitted >= f.from && *out.GroupCommitted < f.to {
		offs := kadm.Offsets{}
		offs.AddOffset(f.topic, part, f.to, -1)
		resp, err := adm.CommitOffsets(ctx, f.group, offs)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("moved %d records, but committing group %s's offset %d for %s/%d failed: %w", out.Moved, f.group, f.to, f.topic, part, err)
		}
		to := f.to
		out.GroupNewOffset = &to
	}
	if f.format == formatJSON {
		return writeJSON(w, out)
	}
	fmt.Fprintf(w, "Moved %d records of %s/%d [%d, %d) to %s partition %d", out.Moved, f.topic, part, f.from, f.to, f.dlq, out.DLQPartition)
	if out.Moved > 0 {
		fmt.Fprintf(w, ", offsets %d to %d", out.FirstDLQOffset, out.LastDLQOffset)
	}
	fmt.Fprintln(w, ".")
	switch {
	case f.group == "":
	case out.GroupNewOffset != nil:
		fmt.Fprintf(w, "Group %s: committed offset %d -> %d.\n", f.group, *out.GroupCommitted, *out.GroupNewOffset)
	case out.GroupCommitted == nil:
		fmt.Fprintf(w, "Group %s: no committed offset for %s/%d, unchanged.\n", f.group, f.topic, part)
	default:
		fmt.Fprintf(w, "Group %s: committed offset %d is outside [%d, %d), unchanged.\n", f.group, *out.GroupCommitted, f.from, f.to)
	}
	return nil
}

// deadLetter is rec as a dead letter in dlq's partition: its key, value and
// headers (less any __dlq.errors.* ones) and the context headers.
func deadLetter(rec *kgo.Record, dlq string, partition int32, group, reason string) *kgo.Record {
	out := &kgo.Record{Topic: dlq, Partition: partition, Key: rec.Key, Value: rec.Value}
	for _, h := range rec.Headers {
		if !strings.HasPrefix(h.Key, dlqHeaderPrefix) {
			out.Headers = append(out.Headers, h)
		}
	}
	out.Headers = append(out.Headers,
		kgo.RecordHeader{Key: dlqHeaderTopic, Value: []byte(rec.Topic)},
		kgo.RecordHeader{Key: dlqHeaderPartition, Value: []byte(strconv.Itoa(int(rec.Partition)))},
		kgo.RecordHeader{Key: dlqHeaderOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))})
	if group != "" {
		out.Headers = append(out.Headers, kgo.RecordHeader{Key: dlqHeaderGroup, Value: []byte(group)})
	}
	out.Headers = append(out.Headers, kgo.RecordHeader{Key: dlqHeaderMessage, Value: []byte(reason)})
	return out
}

type dlqRedriveJSON struct {
	DLQ        string                    `json:"dlq"`
	To         string                    `json:"to"`
	Redriven   int                       `json:"redriven"`
	Skipped    int                       `json:"skipped_no_copy"`
	Filtered   int                       `json:"skipped_other_topic"`
	Partitions []dlqRedrivePartitionJSON `json:"partitions"`
}

type dlqRedrivePartitionJSON struct {
	Partition  int32 `json:"partition"`
	FromOffset int64 `json:"from_offset"`
	ToOffset   int64 `json:"to_offset"`
	Redriven   int   `json:"redriven"`
}

func dlqRedrive(ctx context.Context, adm *kadm.Client, cl *kgo.Client, f *dlqFlags, w io.Writer) error {
	tds, err := adm.ListTopics(ctx, f.target)
	if err != nil {
		return err
	}
	td, ok := tds[f.target]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		return fmt.Errorf("topic %s does not exist", f.target)
	}
	nTarget := int32(len(td.Partitions))
	starts, ends, err := partitionBounds(ctx, adm, f.dlq)
	if err != nil {
		return err
	}
	var parts []int32
	for p := range ends {
		if f.partition < 0 || p == int32(f.partition) {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return fmt.Errorf("dead-letter topic %s has no partition %d", f.dlq, f.partition)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	out := dlqRedriveJSON{DLQ: f.dlq, To: f.target, Partitions: []dlqRedrivePartitionJSON{}}
	var rr uint32 // round robin for null keys without a partition header
	for _, p := range parts {
		from, to := starts[p], ends[p]
		if f.from >= 0 {
			if f.from < from {
				return fmt.Errorf("--from-offset %d is below %s/%d's log start offset %d", f.from, f.dlq, p, from)
			}
			from = f.from
		}
		if f.to >= 0 {
			to = min(f.to, to)
		}
		po := dlqRedrivePartitionJSON{Partition: p, FromOffset: from, ToOffset: max(from, to)}
		r, err := newPartitionReader(ctx, cl, adm, f.dlq, p)
		if err != nil {
			return err
		}
		var batch []*kgo.Record
		flush := func() error {
			err := produceAll(ctx, cl, batch)
			if err == nil {
				po.Redriven += len(batch)
				out.Redriven += len(batch)
			}
			batch = batch[:0]
			return err
		}
		err = r.read(ctx, from, to, func(rec *kgo.Record) error {
			src, srcPart := "", int32(-1)
			rec2 := &kgo.Record{Topic: f.target, Key: rec.Key, Value: rec.Value}
			for _, h := range rec.Headers {
				switch {
				case h.Key == dlqHeaderTopic:
					src = string(h.Value)
				case h.Key == dlqHeaderPartition:
					if n, err := strconv.ParseInt(string(h.Value), 10, 32); err == nil {
						srcPart = int32(n)
					}
				case strings.HasPrefix(h.Key, dlqHeaderPrefix):
				default:
					rec2.Headers = append(rec2.Headers, h)
				}
			}
			if f.sourceTopic != "" && src != f.sourceTopic {
				out.Filtered++
				return nil
			}
			if rec.Key == nil && rec.Value == nil {
				out.Skipped++
				return nil
			}
			switch {
			case srcPart >= 0 && srcPart < nTarget:
				rec2.Partition = srcPart
			case rec.Key != nil:
				rec2.Partition = partitioner.KeyPartition(rec.Key, nTarget)
			default:
				rec2.Partition = int32(rr % uint32(nTarget))
				rr++
			}
			batch = append(batch, rec2)
			if len(batch) >= 500 {
				return flush()
			}
			return nil
		})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return fmt.Errorf("%w (%d records were re-driven before this)", err, out.Redriven)
		}
		out.Partitions = append(out.Partitions, po)
	}
	if f.format == formatJSON {
		return writeJSON(w, out)
	}
	fmt.Fprintf(w, "Re-drove %d records from %s to %s.\n", out.Redriven, f.dlq, f.target)
	if out.Skipped > 0 {
		fmt.Fprintf(w, "Skipped %d dead letters with a null key and value: the record was not copied (the share group's errors.deadletterqueue.copy.record.enable was false).\n", out.Skipped)
	}
	if out.Filtered > 0 {
		fmt.Fprintf(w, "Skipped %d dead letters of other source topics than %s.\n", out.Filtered, f.sourceTopic)
	}
	return nil
}
