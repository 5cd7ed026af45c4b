package main

// `strata topics`: topic administration against any Kafka-compatible
// cluster, built on franz-go's kadm (CreateTopics, Metadata, ListOffsets,
// DescribeConfigs, IncrementalAlterConfigs, DeleteTopics, DescribeLogDirs).

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratalog/strata/server"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const topicsAbout = `Topic administration against any Kafka-compatible cluster (Strata, Kafka,
Redpanda). Every verb takes --brokers (default: $STRATA_BROKERS, else
127.0.0.1:9092) and --timeout.`

// topicsVerbs are the topics verbs and their help.
var topicsVerbs = []verbDoc{
	{"create", "create a topic", cmdDoc{name: "topics create",
		usage: "strata topics create NAME [--partitions N] [--replication-factor R] [--config key=value ...] [--if-not-exists]",
		about: "Creates topic NAME. --partitions and --replication-factor default to -1: the cluster's\n" +
			"num.partitions and default.replication.factor. Prints the topic id as Kafka does\n" +
			"(URL-safe base64 without padding)."}},
	{"list", "list topic names", cmdDoc{name: "topics list", usage: "strata topics list [--internal] [--format text|json]",
		about: "Prints one topic name a line, sorted. --format json prints an array of objects with\n" +
			"each topic's name, id, partition count, replication factor and whether it is internal."}},
	{"describe", "partitions, leaders, replicas, offsets and overrides", cmdDoc{name: "topics describe", usage: "strata topics describe [NAME ...] [--format text|json]",
		about: "Prints each topic (all of them when none is named): its id, partition count, replication\n" +
			"factor and config overrides, then per partition the leader, replicas, ISR, log start\n" +
			"offset and high watermark, and for tiered storage the earliest local offset\n" +
			"(ListOffsets -4), the last tiered offset (-5) and the leader's local and remote bytes\n" +
			"(DescribeLogDirs; remote bytes from Strata brokers only), -1 when none or unknown.\n" +
			"--format json prints the same as an array of objects."}},
	{"delete", "delete topics", cmdDoc{name: "topics delete", usage: "strata topics delete NAME ...",
		about: "Deletes the named topics and their data."}},
	{"add-partitions", "add partitions to topics", cmdDoc{name: "topics add-partitions",
		usage: "strata topics add-partitions NAME ... (--num N | --total N) [--validate-only]",
		about: "Adds --num partitions to each named topic, or grows each to --total partitions\n" +
			"(CreatePartitions). Partitions can only be added: records with a key may map to another\n" +
			"partition afterwards."}},
	{"alter-config", "set or remove topic config overrides", cmdDoc{name: "topics alter-config",
		usage: "strata topics alter-config NAME [--set key=value ...] [--delete key ...] [--validate-only]",
		about: "Changes only the keys named (IncrementalAlterConfigs); every other override stays.\n" +
			"--delete removes an override, so the key falls back to the broker's default."}},
}

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// topicsFlags are the flags of every topics subcommand (each uses a subset).
type topicsFlags struct {
	fs           *flag.FlagSet
	doc          cmdDoc
	brokers      string
	timeout      time.Duration
	partitions   int
	replication  int
	configs      multiFlag
	set          multiFlag
	del          multiFlag
	ifNotExists  bool
	internal     bool
	validateOnly bool
	format       outputFormat
	addNum       int
	total        int
}

func newTopicsFlags(v verbDoc) *topicsFlags {
	f := &topicsFlags{fs: flag.NewFlagSet("strata topics "+v.verb, flag.ContinueOnError), doc: v.doc, format: formatText}
	f.fs.StringVar(&f.brokers, "brokers", "", brokersHelp)
	f.fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the cluster")
	switch v.verb {
	case "create":
		f.fs.IntVar(&f.partitions, "partitions", -1, "partitions (-1: the broker's num.partitions)")
		f.fs.IntVar(&f.replication, "replication-factor", -1, "replicas per partition (-1: default.replication.factor)")
		f.fs.Var(&f.configs, "config", "topic config `key=value` (repeatable)")
		f.fs.BoolVar(&f.ifNotExists, "if-not-exists", false, "succeed if the topic exists already")
	case "list":
		f.fs.BoolVar(&f.internal, "internal", false, "include internal topics")
		f.fs.Var(&f.format, "format", formatHelp)
	case "describe":
		f.fs.Var(&f.format, "format", formatHelp)
	case "add-partitions":
		f.fs.IntVar(&f.addNum, "num", 0, "partitions to add to each topic")
		f.fs.IntVar(&f.total, "total", 0, "partitions each topic should have")
		f.fs.IntVar(&f.total, "partitions", 0, "the same as --total (kafka-topics --alter's flag)")
		f.fs.BoolVar(&f.validateOnly, "validate-only", false, "check the change without applying it")
	case "alter-config":
		f.fs.Var(&f.set, "set", "`key=value` to set (repeatable)")
		f.fs.Var(&f.del, "delete", "`key` whose override to remove (repeatable)")
		f.fs.BoolVar(&f.validateOnly, "validate-only", false, "check the change without applying it")
	}
	return f
}

func (f *topicsFlags) admin() (*kadm.Client, *kgo.Client, error) {
	return adminClient(splitSeeds(f.brokers), f.timeout)
}

// parseKV splits key=value pairs.
func parseKV(items []string, what string) (map[string]*string, error) {
	out := make(map[string]*string, len(items))
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want key=value", what, it)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s %q given twice", what, k)
		}
		out[k] = kadm.StringPtr(v)
	}
	return out, nil
}

// topicID prints a topic id as Kafka's tools and partition.metadata do:
// URL-safe base64 without padding (kadm's String is standard, padded).
func topicID(id kadm.TopicID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func topicsMain(args []string, stdout, stderr io.Writer) error {
	return topicsMainEnv(args, stdout, stderr, os.Getenv)
}

func topicsMainEnv(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	v, ok, err := dispatchVerb("topics", topicsAbout, topicsVerbs, args, stdout)
	if !ok {
		return err
	}
	f := newTopicsFlags(v)
	pos, err := parseFlags(f.fs, args[1:], v.doc, true, stdout)
	if err != nil {
		return err
	}
	f.brokers = resolveBrokers(f.brokers, getenv)
	if err := topicsCheckArgs(f, v.verb, pos); err != nil {
		return asUsage(v.doc, err)
	}
	adm, cl, err := f.admin()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	switch v.verb {
	case "create":
		return topicsCreate(ctx, adm, f, pos, stdout)
	case "list":
		return topicsList(ctx, adm, f, stdout)
	case "describe":
		return topicsDescribe(ctx, adm, cl, pos, f.format, stdout)
	case "delete":
		return topicsDelete(ctx, adm, pos, stdout)
	case "add-partitions":
		return topicsAddPartitions(ctx, adm, f, pos, stdout)
	default:
		return topicsAlterConfig(ctx, adm, f, pos, stdout)
	}
}

// topicsCheckArgs checks what can be checked before connecting.
func topicsCheckArgs(f *topicsFlags, verb string, pos []string) error {
	switch verb {
	case "create":
		if len(pos) != 1 {
			return fmt.Errorf("create takes one topic name, got %q", pos)
		}
		if f.partitions == 0 || f.partitions < -1 || f.partitions > 1<<20 {
			return fmt.Errorf("--partitions %d: want -1 or 1..%d", f.partitions, 1<<20)
		}
		if f.replication == 0 || f.replication < -1 || f.replication > 1<<15-1 {
			return fmt.Errorf("--replication-factor %d: want -1 or 1..%d", f.replication, 1<<15-1)
		}
		_, err := parseKV(f.configs, "--config")
		return err
	case "list":
		if len(pos) != 0 {
			return fmt.Errorf("list takes no arguments, got %q", pos)
		}
	case "delete":
		if len(pos) == 0 {
			return errors.New("delete takes one or more topic names")
		}
	case "add-partitions":
		if len(pos) == 0 {
			return errors.New("add-partitions takes one or more topic names")
		}
		if (f.addNum > 0) == (f.total > 0) || f.addNum < 0 || f.total < 0 {
			return errors.New("add-partitions needs one of --num N (to add) and --total N (to have), N > 0")
		}
	case "alter-config":
		if len(pos) != 1 {
			return fmt.Errorf("alter-config takes one topic name, got %q", pos)
		}
		set, err := parseKV(f.set, "--set")
		if err != nil {
			return err
		}
		if len(set) == 0 && len(f.del) == 0 {
			return errors.New("alter-config needs --set key=value or --delete key")
		}
		for _, k := range f.del {
			if _, both := set[k]; both {
				return fmt.Errorf("%q is both set and deleted", k)
			}
		}
	}
	return nil
}

func topicsCreate(ctx context.Context, adm *kadm.Client, f *topicsFlags, pos []string, stdout io.Writer) error {
	configs, err := parseKV(f.configs, "--config")
	if err != nil {
		return err
	}
	resp, err := adm.CreateTopic(ctx, int32(f.partitions), int16(f.replication), configs, pos[0])
	if err != nil && resp.Err == nil {
		resp.Err = err // kadm returns the topic's error as the call's error too
	}
	if resp.Err != nil {
		if f.ifNotExists && errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			fmt.Fprintf(stdout, "Topic %s already exists.\n", pos[0])
			return nil
		}
		return fmt.Errorf("creating %s: %w%s", pos[0], resp.Err, errDetail(resp.Err, resp.ErrMessage))
	}
	fmt.Fprintf(stdout, "Created topic %s (id %s, %d partitions, replication factor %d).\n",
		resp.Topic, topicID(resp.ID), resp.NumPartitions, resp.ReplicationFactor)
	return nil
}

// errDetail is ": msg", the broker's message with an error code, unless
// the error's text says it already.
func errDetail(err error, msg string) string {
	if msg == "" || err != nil && strings.Contains(err.Error(), msg) {
		return ""
	}
	return ": " + msg
}

func topicsList(ctx context.Context, adm *kadm.Client, f *topicsFlags, stdout io.Writer) error {
	var (
		td  kadm.TopicDetails
		err error
	)
	if f.internal {
		td, err = adm.ListTopicsWithInternal(ctx)
	} else {
		td, err = adm.ListTopics(ctx)
	}
	if err != nil {
		return err
	}
	if f.format == formatJSON {
		out := []topicListJSON{}
		for _, name := range td.Names() {
			d := td[name]
			out = append(out, topicListJSON{Name: name, ID: topicID(d.ID), Partitions: len(d.Partitions),
				ReplicationFactor: d.Partitions.NumReplicas(), Internal: d.IsInternal})
		}
		return writeJSON(stdout, out)
	}
	for _, name := range td.Names() {
		fmt.Fprintln(stdout, name)
	}
	return nil
}

// topicListJSON is one topic of `topics list --format json`.
type topicListJSON struct {
	Name              string `json:"name"`
	ID                string `json:"id"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
}

// topicJSON is one topic of `topics describe --format json`.
type topicJSON struct {
	Name              string            `json:"name"`
	ID                string            `json:"id"`
	PartitionCount    int               `json:"partition_count"`
	ReplicationFactor int               `json:"replication_factor"`
	Configs           map[string]string `json:"configs"` // the topic's overrides only
	Partitions        []partitionJSON   `json:"partitions"`
}

type partitionJSON struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	LogStartOffset int64   `json:"log_start_offset"`
	HighWatermark  int64   `json:"high_watermark"`
	// Tiered storage (docs/tiered-storage.md), -1 when none or unknown:
	// the earliest offset on the leader's disk (ListOffsets -4), the last
	// offset copied to remote storage (-5), the leader's local bytes
	// (DescribeLogDirs) and its remote bytes (Strata's DescribeLogDirs
	// tag server.RemoteSizeTag; -1 on other brokers and untiered topics).
	LocalLogStartOffset int64  `json:"local_log_start_offset"`
	TieredOffset        int64  `json:"tiered_offset"`
	LocalBytes          int64  `json:"local_bytes"`
	RemoteBytes         int64  `json:"remote_bytes"`
	Error               string `json:"error,omitempty"`
}

// partitionSizes are a partition's bytes on its leader: local (-1:
// unknown) and remote (-1: not reported).
type partitionSizes struct{ local, remote int64 }

// logDirSizes asks every broker for its log directories (DescribeLogDirs)
// and returns each partition's sizes on its leader. A cluster that
// refuses the request gives no sizes, not an error: the rest of describe
// stands without them.
func logDirSizes(ctx context.Context, cl *kgo.Client, td kadm.TopicDetails, names []string) map[string]map[int32]partitionSizes {
	out := map[string]map[int32]partitionSizes{}
	leader := map[string]map[int32]int32{}
	req := kmsg.NewPtrDescribeLogDirsRequest()
	for _, n := range names {
		leader[n] = map[int32]int32{}
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic = n
		for _, p := range td[n].Partitions {
			leader[n][p.Partition] = p.Leader
			rt.Partitions = append(rt.Partitions, p.Partition)
		}
		req.Topics = append(req.Topics, rt)
	}
	for _, shard := range cl.RequestSharded(ctx, req) {
		resp, ok := shard.Resp.(*kmsg.DescribeLogDirsResponse)
		if shard.Err != nil || !ok {
			continue
		}
		for _, d := range resp.Dirs {
			if d.ErrorCode != 0 {
				continue
			}
			for _, t := range d.Topics {
				for _, p := range t.Partitions {
					if l, ok := leader[t.Topic][p.Partition]; !ok || l != shard.Meta.NodeID || p.IsFuture {
						continue
					}
					if out[t.Topic] == nil {
						out[t.Topic] = map[int32]partitionSizes{}
					}
					sz, seen := out[t.Topic][p.Partition]
					if !seen {
						sz = partitionSizes{remote: -1}
					}
					sz.local += p.Size
					p.UnknownTags.Each(func(tag uint32, v []byte) {
						if tag == server.RemoteSizeTag && len(v) == 8 {
							sz.remote = int64(binary.BigEndian.Uint64(v))
						}
					})
					out[t.Topic][p.Partition] = sz
				}
			}
		}
	}
	return out
}

// listedOffset is the offset listed for a partition, when listed
// without error.
func listedOffset(l kadm.ListedOffsets, topic string, p int32) (int64, bool) {
	o, ok := l.Lookup(topic, p)
	if !ok || o.Err != nil {
		return -1, false
	}
	return o.Offset, true
}

func topicsDescribe(ctx context.Context, adm *kadm.Client, cl *kgo.Client, names []string, format outputFormat, stdout io.Writer) error {
	td, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		names = td.Names()
	}
	for _, n := range names {
		if d, ok := td[n]; !ok || d.Err != nil {
			err := fmt.Errorf("topic %q does not exist", n)
			if ok {
				err = fmt.Errorf("topic %s: %w", n, d.Err)
			}
			return err
		}
	}
	start, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return err
	}
	end, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return err
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return err
	}
	// Tiered storage: earliest local (-4) and latest tiered (-5) offsets,
	// local and remote sizes. Clusters without them answer errors, which
	// print as -1.
	localStart0, _ := adm.ListLocalLogStartOffsets(ctx, names...)
	tiered0, _ := adm.ListLatestRemoteOffsets(ctx, names...)
	sizes := logDirSizes(ctx, cl, td, names)
	tieredOf := func(n string, p int32) (localStart, tieredOff, local, remote int64) {
		localStart, tieredOff, local, remote = -1, -1, -1, -1
		if o, ok := listedOffset(localStart0, n, p); ok {
			localStart = o
		}
		if o, ok := listedOffset(tiered0, n, p); ok {
			tieredOff = o
		}
		if sz, ok := sizes[n][p]; ok {
			local, remote = sz.local, sz.remote
		}
		return
	}
	overrides := func(n string) map[string]string {
		over := map[string]string{}
		if rc, err := cfgs.On(n, nil); err == nil {
			for _, c := range rc.Configs {
				if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
					over[c.Key] = c.MaybeValue()
				}
			}
		}
		return over
	}
	if format == formatJSON {
		out := []topicJSON{}
		for _, n := range names {
			d := td[n]
			t := topicJSON{Name: n, ID: topicID(d.ID), PartitionCount: len(d.Partitions),
				ReplicationFactor: d.Partitions.NumReplicas(), Configs: overrides(n), Partitions: []partitionJSON{}}
			for _, p := range d.Partitions.Sorted() {
				so, _ := start.Lookup(n, p.Partition)
				eo, _ := end.Lookup(n, p.Partition)
				pj := partitionJSON{Partition: p.Partition, Leader: p.Leader, Replicas: orEmpty(p.Replicas), ISR: orEmpty(p.ISR),
					LogStartOffset: so.Offset, HighWatermark: eo.Offset}
				pj.LocalLogStartOffset, pj.TieredOffset, pj.LocalBytes, pj.RemoteBytes = tieredOf(n, p.Partition)
				if p.Err != nil {
					pj.Error = p.Err.Error()
				}
				t.Partitions = append(t.Partitions, pj)
			}
			out = append(out, t)
		}
		return writeJSON(stdout, out)
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, n := range names {
		d := td[n]
		var over []string
		for k, v := range overrides(n) {
			over = append(over, k+"="+v)
		}
		sort.Strings(over)
		fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
			n, topicID(d.ID), len(d.Partitions), d.Partitions.NumReplicas(), strings.Join(over, ","))
		for _, p := range d.Partitions.Sorted() {
			so, _ := start.Lookup(n, p.Partition)
			eo, _ := end.Lookup(n, p.Partition)
			status := ""
			if p.Err != nil {
				status = "\tError: " + p.Err.Error()
			}
			ls, to, lb, rb := tieredOf(n, p.Partition)
			fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %d\tReplicas: %s\tIsr: %s\tLogStartOffset: %d\tHighWatermark: %d\tLocalLogStartOffset: %d\tTieredOffset: %d\tLocalBytes: %d\tRemoteBytes: %d%s\n",
				n, p.Partition, p.Leader, joinInt32(p.Replicas), joinInt32(p.ISR), so.Offset, eo.Offset, ls, to, lb, rb, status)
		}
	}
	return w.Flush()
}

// orEmpty is v, or an empty slice (JSON [] rather than null).
func orEmpty(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}

func joinInt32(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ",")
}

func topicsDelete(ctx context.Context, adm *kadm.Client, names []string, stdout io.Writer) error {
	resps, err := adm.DeleteTopics(ctx, names...)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		r, ok := resps[n]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("deleting %s: no answer", n))
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("deleting %s: %w%s", n, r.Err, errDetail(r.Err, r.ErrMessage)))
		default:
			fmt.Fprintf(stdout, "Deleted topic %s.\n", n)
		}
	}
	return errors.Join(errs...)
}

func topicsAddPartitions(ctx context.Context, adm *kadm.Client, f *topicsFlags, names []string, stdout io.Writer) error {
	before, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return err
	}
	var resps kadm.CreatePartitionsResponses
	switch {
	case f.addNum > 0 && f.validateOnly:
		resps, err = adm.ValidateCreatePartitions(ctx, f.addNum, names...)
	case f.addNum > 0:
		resps, err = adm.CreatePartitions(ctx, f.addNum, names...)
	case f.validateOnly:
		resps, err = adm.ValidateUpdatePartitions(ctx, f.total, names...)
	default:
		resps, err = adm.UpdatePartitions(ctx, f.total, names...)
	}
	if err != nil {
		return err
	}
	verb := "now has"
	if f.validateOnly {
		verb = "would have"
	}
	var errs []error
	for _, n := range names {
		r, ok := resps[n]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: no answer", n))
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("adding partitions to %s: %w%s", n, r.Err, errDetail(r.Err, r.ErrMessage)))
		default:
			had := len(before[n].Partitions)
			want := f.total
			if f.addNum > 0 {
				want = had + f.addNum
			}
			fmt.Fprintf(stdout, "Topic %s %s %d partitions (had %d).\n", n, verb, want, had)
		}
	}
	return errors.Join(errs...)
}

func topicsAlterConfig(ctx context.Context, adm *kadm.Client, f *topicsFlags, pos []string, stdout io.Writer) error {
	set, err := parseKV(f.set, "--set")
	if err != nil {
		return err
	}
	var ops []kadm.AlterConfig
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: set[k]})
	}
	for _, k := range f.del {
		ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	alter := adm.AlterTopicConfigs
	if f.validateOnly {
		alter = adm.ValidateAlterTopicConfigs
	}
	resps, err := alter(ctx, ops, pos[0])
	if err != nil {
		return err
	}
	r, err := resps.On(pos[0], nil)
	if err != nil {
		return err
	}
	if r.Err != nil {
		return fmt.Errorf("altering %s: %w%s", pos[0], r.Err, errDetail(r.Err, r.ErrMessage))
	}
	verb := "Altered"
	if f.validateOnly {
		verb = "Validated"
	}
	fmt.Fprintf(stdout, "%s configs of topic %s.\n", verb, pos[0])
	return nil
}
