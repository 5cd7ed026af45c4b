package main

// `strata topics`: topic administration against any Kafka-compatible
// cluster, built on franz-go's kadm (CreateTopics, Metadata, ListOffsets,
// DescribeConfigs, IncrementalAlterConfigs, DeleteTopics).

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
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const topicsUsage = `Usage:
  strata topics create NAME --brokers host:port [--partitions N] [--replication-factor R] [--config key=value ...] [--if-not-exists]
  strata topics list --brokers host:port [--internal]
  strata topics describe [NAME ...] --brokers host:port
  strata topics delete NAME ... --brokers host:port
  strata topics alter-config NAME --brokers host:port [--set key=value ...] [--delete key ...] [--validate-only]

--brokers takes a comma-separated seed list. --partitions and
--replication-factor default to -1: the cluster's num.partitions and
default.replication.factor. alter-config changes only the keys named
(IncrementalAlterConfigs); every other override stays.
`

func runTopics(args []string) error {
	return topicsMain(args, os.Stdout, os.Stderr)
}

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// topicsFlags are the flags of every topics subcommand (each uses a subset).
type topicsFlags struct {
	fs           *flag.FlagSet
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
}

func newTopicsFlags(sub string, stderr io.Writer) *topicsFlags {
	f := &topicsFlags{fs: flag.NewFlagSet("strata topics "+sub, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.fs.Usage = func() { fmt.Fprint(stderr, topicsUsage) }
	f.fs.StringVar(&f.brokers, "brokers", "", "seed brokers, host:port[,host:port...] (required)")
	f.fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the cluster")
	switch sub {
	case "create":
		f.fs.IntVar(&f.partitions, "partitions", -1, "partitions (-1: the broker's num.partitions)")
		f.fs.IntVar(&f.replication, "replication-factor", -1, "replicas per partition (-1: default.replication.factor)")
		f.fs.Var(&f.configs, "config", "topic config key=value (repeatable)")
		f.fs.BoolVar(&f.ifNotExists, "if-not-exists", false, "succeed if the topic exists already")
	case "list":
		f.fs.BoolVar(&f.internal, "internal", false, "include internal topics")
	case "alter-config":
		f.fs.Var(&f.set, "set", "key=value to set (repeatable)")
		f.fs.Var(&f.del, "delete", "key whose override to remove (repeatable)")
		f.fs.BoolVar(&f.validateOnly, "validate-only", false, "check the change without applying it")
	}
	return f
}

// parse accepts flags before, between and after positional arguments.
func (f *topicsFlags) parse(args []string) ([]string, error) {
	return parseInterspersed(f.fs, args, &f.brokers)
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

func topicsMain(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, topicsUsage)
		if len(args) == 0 {
			return errors.New("missing subcommand")
		}
		return nil
	}
	sub := args[0]
	switch sub {
	case "create", "list", "describe", "delete", "alter-config":
	default:
		fmt.Fprint(stderr, topicsUsage)
		return fmt.Errorf("unknown subcommand %q", sub)
	}
	f := newTopicsFlags(sub, stderr)
	pos, err := f.parse(args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	adm, cl, err := f.admin()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	switch sub {
	case "create":
		return topicsCreate(ctx, adm, f, pos, stdout)
	case "list":
		return topicsList(ctx, adm, f, pos, stdout)
	case "describe":
		return topicsDescribe(ctx, adm, pos, stdout)
	case "delete":
		return topicsDelete(ctx, adm, pos, stdout)
	default:
		return topicsAlterConfig(ctx, adm, f, pos, stdout)
	}
}

func topicsCreate(ctx context.Context, adm *kadm.Client, f *topicsFlags, pos []string, stdout io.Writer) error {
	if len(pos) != 1 {
		return fmt.Errorf("create takes one topic name, got %q", pos)
	}
	if f.partitions == 0 || f.partitions < -1 || f.partitions > 1<<20 {
		return fmt.Errorf("--partitions %d: want -1 or 1..%d", f.partitions, 1<<20)
	}
	if f.replication == 0 || f.replication < -1 || f.replication > 1<<15-1 {
		return fmt.Errorf("--replication-factor %d: want -1 or 1..%d", f.replication, 1<<15-1)
	}
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
		return fmt.Errorf("creating %s: %w%s", pos[0], resp.Err, errDetail(resp.ErrMessage))
	}
	fmt.Fprintf(stdout, "Created topic %s (id %s, %d partitions, replication factor %d).\n",
		resp.Topic, resp.ID, resp.NumPartitions, resp.ReplicationFactor)
	return nil
}

func errDetail(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func topicsList(ctx context.Context, adm *kadm.Client, f *topicsFlags, pos []string, stdout io.Writer) error {
	if len(pos) != 0 {
		return fmt.Errorf("list takes no arguments, got %q", pos)
	}
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
	for _, name := range td.Names() {
		fmt.Fprintln(stdout, name)
	}
	return nil
}

func topicsDescribe(ctx context.Context, adm *kadm.Client, names []string, stdout io.Writer) error {
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
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, n := range names {
		d := td[n]
		var over []string
		if rc, err := cfgs.On(n, nil); err == nil {
			for _, c := range rc.Configs {
				if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
					over = append(over, c.Key+"="+c.MaybeValue())
				}
			}
		}
		sort.Strings(over)
		fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
			n, d.ID, len(d.Partitions), d.Partitions.NumReplicas(), strings.Join(over, ","))
		for _, p := range d.Partitions.Sorted() {
			so, _ := start.Lookup(n, p.Partition)
			eo, _ := end.Lookup(n, p.Partition)
			status := ""
			if p.Err != nil {
				status = "\tError: " + p.Err.Error()
			}
			fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %d\tReplicas: %s\tIsr: %s\tLogStartOffset: %d\tHighWatermark: %d%s\n",
				n, p.Partition, p.Leader, joinInt32(p.Replicas), joinInt32(p.ISR), so.Offset, eo.Offset, status)
		}
	}
	return w.Flush()
}

func joinInt32(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ",")
}

func topicsDelete(ctx context.Context, adm *kadm.Client, names []string, stdout io.Writer) error {
	if len(names) == 0 {
		return errors.New("delete takes one or more topic names")
	}
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
			errs = append(errs, fmt.Errorf("deleting %s: %w%s", n, r.Err, errDetail(r.ErrMessage)))
		default:
			fmt.Fprintf(stdout, "Deleted topic %s.\n", n)
		}
	}
	return errors.Join(errs...)
}

func topicsAlterConfig(ctx context.Context, adm *kadm.Client, f *topicsFlags, pos []string, stdout io.Writer) error {
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
		if _, both := set[k]; both {
			return fmt.Errorf("%q is both set and deleted", k)
		}
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
		return fmt.Errorf("altering %s: %w%s", pos[0], r.Err, errDetail(r.ErrMessage))
	}
	verb := "Altered"
	if f.validateOnly {
		verb = "Validated"
	}
	fmt.Fprintf(stdout, "%s configs of topic %s.\n", verb, pos[0])
	return nil
}
