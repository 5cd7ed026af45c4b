package main

// `strata cluster`: the cluster as a whole, against any Kafka-compatible
// cluster (Metadata, DescribeConfigs, IncrementalAlterConfigs,
// DescribeLogDirs): its brokers and controller, the partitions that need
// attention, the brokers' configuration and log directories
// (cli_logdirs.go).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const clusterAbout = `The cluster as a whole: brokers, controller, partitions that need attention, broker
configuration, log directories, the metadata quorum. Every verb takes --brokers (default:
$STRATA_BROKERS, else 127.0.0.1:9092), --timeout, and --sasl-mechanism, --sasl-username,
--sasl-password (default: $STRATA_SASL_PASSWORD), --tls and --tls-ca for a secured listener
(quorum's --bootstrap-controller too: a controller listener's security protocol).`

var clusterVerbs = []verbDoc{
	{"describe", "brokers, controller and unhealthy partitions", cmdDoc{name: "cluster describe",
		usage: "strata cluster describe [--format text|json]",
		about: "Prints the cluster id, the controller, every broker (id, host, port, rack), the topic and\n" +
			"partition counts, and the partitions that need attention: under-replicated (an ISR\n" +
			"smaller than the replica set), under min ISR (an ISR smaller than the topic's\n" +
			"min.insync.replicas: acks=all produce fails) and offline (no leader)."}},
	{"describe-config", "a broker's configuration and where each value comes from", cmdDoc{name: "cluster describe-config",
		usage: "strata cluster describe-config [--broker N | --default] [--all] [--format text|json]",
		about: "Prints broker N's configuration (default: the first broker the client reaches): each key,\n" +
			"its value and its source (DYNAMIC_BROKER_CONFIG: set at run time for this broker;\n" +
			"DYNAMIC_DEFAULT_BROKER_CONFIG: set at run time as the cluster-wide default;\n" +
			"STATIC_BROKER_CONFIG: the properties file or a flag; DEFAULT_CONFIG: the built-in\n" +
			"default). Without --all only the keys not at their default. With --default, the\n" +
			"cluster-wide dynamic defaults alone (kafka-configs --entity-default). Sensitive values\n" +
			"print as (sensitive)."}},
	{"alter-config", "set or remove dynamic broker configuration", cmdDoc{name: "cluster alter-config",
		usage: "strata cluster alter-config [--broker N] [--set key=value ...] [--delete key ...] [--validate-only]",
		about: "Changes dynamic broker configuration (IncrementalAlterConfigs), as kafka-configs\n" +
			"--entity-type brokers does: of broker N, or with --broker -1 (the default) the\n" +
			"cluster-wide default, which every broker without its own value follows. The change\n" +
			"applies without a restart and is kept (the controller's metadata in a cluster, the data\n" +
			"directory on a single broker); --delete goes back to the properties file's value. Strata's\n" +
			"dynamic keys: the log.* topic defaults (log.retention.ms, log.segment.bytes,\n" +
			"log.cleanup.policy, message.max.bytes, ...), min.insync.replicas, the connection limits (max.connections,\n" +
			"max.connections.per.ip and its overrides, max.connection.creation.rate, per listener too),\n" +
			"the cleaner's log.cleaner.io.max.bytes.per.second and log.cleaner.backoff.ms, the free-space\n" +
			"floor (log.dir.min.free.bytes, log.dir.min.free.percent) and, per broker only, ssl.keystore.location and ssl.truststore.location (also per\n" +
			"listener). Other keys are refused, naming the key."}},
	logDirsVerb, // cli_logdirs.go
	quorumVerb,  // cli_quorum.go
}

type clusterFlags struct {
	fs           *flag.FlagSet
	brokers      string
	timeout      time.Duration
	format       outputFormat
	broker       int
	all          bool
	set          multiFlag
	del          multiFlag
	validateOnly bool
	dflt         bool      // describe-config --default
	topics       multiFlag // log-dirs
	partitions   bool      // log-dirs
	controllers  string    // quorum --bootstrap-controller
	sec          secFlags  // acls.go: --sasl-*, --tls, --tls-ca
}

func newClusterFlags(v verbDoc) *clusterFlags {
	f := &clusterFlags{fs: flag.NewFlagSet("strata cluster "+v.verb, flag.ContinueOnError), format: formatText}
	f.fs.StringVar(&f.brokers, "brokers", "", brokersHelp)
	f.fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the cluster")
	f.sec.register(f.fs)
	switch v.verb {
	case "describe":
		f.fs.Var(&f.format, "format", formatHelp)
	case "describe-config":
		f.fs.Var(&f.format, "format", formatHelp)
		f.fs.IntVar(&f.broker, "broker", -1, "the broker `id` whose configuration to print (-1: the first one reached)")
		f.fs.BoolVar(&f.dflt, "default", false, "the cluster-wide dynamic defaults instead of a broker's configuration")
		f.fs.BoolVar(&f.all, "all", false, "every key, defaults included")
	case "log-dirs":
		f.fs.Var(&f.format, "format", formatHelp)
		f.fs.Var(&f.topics, "topic", "only the partitions of `topic` (repeatable)")
		f.fs.BoolVar(&f.partitions, "partitions", false, "list every partition with its size and offset lag")
	case "quorum":
		f.fs.Var(&f.format, "format", formatHelp)
		f.fs.StringVar(&f.controllers, "bootstrap-controller", "", "ask the controllers' `host:port,...` (their controller listeners) instead of the brokers")
	case "alter-config":
		f.fs.IntVar(&f.broker, "broker", -1, "the broker `id` to change (-1: the cluster-wide default)")
		f.fs.Var(&f.set, "set", "`key=value` to set (repeatable)")
		f.fs.Var(&f.del, "delete", "`key` whose dynamic value to remove (repeatable)")
		f.fs.BoolVar(&f.validateOnly, "validate-only", false, "check the change without applying it")
	}
	return f
}

func clusterMain(args []string, stdout, stderr io.Writer) error {
	return clusterMainEnv(args, stdout, stderr, os.Getenv)
}

func clusterMainEnv(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	v, ok, err := dispatchVerb("cluster", clusterAbout, clusterVerbs, args, stdout)
	if !ok {
		return err
	}
	f := newClusterFlags(v)
	pos, err := parseFlags(f.fs, args[1:], v.doc, true, stdout)
	if err != nil {
		return err
	}
	f.brokers = resolveBrokers(f.brokers, getenv)
	f.sec.resolve(getenv)
	if err := f.check(v.verb, pos); err != nil {
		return asUsage(v.doc, err)
	}
	opts, err := f.sec.clientOpts()
	if err != nil {
		return asUsage(v.doc, err)
	}
	if v.verb == "quorum" {
		return clusterQuorum(f, opts, stdout) // cli_quorum.go
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(splitSeeds(f.brokers)...), kgo.RequestTimeoutOverhead(f.timeout))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	switch v.verb {
	case "describe":
		return clusterDescribe(ctx, adm, f.format, stdout)
	case "describe-config":
		return clusterDescribeConfig(ctx, adm, f, stdout)
	case "log-dirs":
		return clusterLogDirs(ctx, adm, f, stdout)
	default:
		return clusterAlterConfig(ctx, adm, f, stdout)
	}
}

func (f *clusterFlags) check(verb string, pos []string) error {
	if len(pos) != 0 {
		return fmt.Errorf("unexpected arguments %q", pos)
	}
	if f.broker < -1 {
		return fmt.Errorf("--broker %d: want a broker id or -1", f.broker)
	}
	if f.dflt && f.broker >= 0 {
		return errors.New("--default and --broker go separately")
	}
	if verb == "alter-config" {
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

// clusterJSON is `cluster describe --format json`.
type clusterJSON struct {
	ClusterID       string        `json:"cluster_id"`
	Controller      int32         `json:"controller"` // -1: none known
	Brokers         []brokerJSON  `json:"brokers"`
	Topics          int           `json:"topics"`
	Partitions      int           `json:"partitions"`
	UnderReplicated []problemJSON `json:"under_replicated"`
	UnderMinISR     []problemJSON `json:"under_min_isr"`
	Offline         []problemJSON `json:"offline"` // no leader
}

type brokerJSON struct {
	ID   int32   `json:"id"`
	Host string  `json:"host"`
	Port int32   `json:"port"`
	Rack *string `json:"rack"`
}

// problemJSON is a partition that needs attention.
type problemJSON struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	Error     string  `json:"error,omitempty"`
}

// clusterProblem is a partition that needs attention and what ails it.
type clusterProblem struct {
	p    problemJSON
	what string // offline, under-replicated, under-min-isr
}

// clusterHealth sorts md's brokers and finds the partitions that need
// attention; minISR is each topic's min.insync.replicas (if known).
func clusterHealth(md kadm.Metadata, minISR map[string]int) (clusterJSON, []clusterProblem) {
	names := md.Topics.Names()
	out := clusterJSON{ClusterID: md.Cluster, Controller: md.Controller, Brokers: []brokerJSON{}, Topics: len(names),
		UnderReplicated: []problemJSON{}, UnderMinISR: []problemJSON{}, Offline: []problemJSON{}}
	brokers := append(kadm.BrokerDetails{}, md.Brokers...)
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].NodeID < brokers[j].NodeID })
	for _, b := range brokers {
		out.Brokers = append(out.Brokers, brokerJSON{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	var problems []clusterProblem // in topic and partition order, for the text
	for _, n := range names {
		for _, p := range md.Topics[n].Partitions.Sorted() {
			out.Partitions++
			pj := problemJSON{Topic: n, Partition: p.Partition, Leader: p.Leader, Replicas: orEmpty(p.Replicas), ISR: orEmpty(p.ISR)}
			if p.Err != nil {
				pj.Error = p.Err.Error()
			}
			if p.Leader < 0 {
				out.Offline = append(out.Offline, pj)
				problems = append(problems, clusterProblem{pj, "offline"})
			}
			if len(p.ISR) < len(p.Replicas) {
				out.UnderReplicated = append(out.UnderReplicated, pj)
				problems = append(problems, clusterProblem{pj, "under-replicated"})
			}
			if m, ok := minISR[n]; ok && len(p.ISR) < m {
				out.UnderMinISR = append(out.UnderMinISR, pj)
				problems = append(problems, clusterProblem{pj, "under-min-isr"})
			}
		}
	}
	return out, problems
}

func clusterDescribe(ctx context.Context, adm *kadm.Client, format outputFormat, w io.Writer) error {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return err
	}
	names := md.Topics.Names()
	minISR := map[string]int{}
	if len(names) > 0 {
		cfgs, err := adm.DescribeTopicConfigs(ctx, names...)
		if err != nil {
			return err
		}
		for _, rc := range cfgs {
			for _, c := range rc.Configs {
				if c.Key == "min.insync.replicas" && c.Value != nil {
					if v, err := strconv.Atoi(*c.Value); err == nil {
						minISR[rc.Name] = v
					}
				}
			}
		}
	}
	out, problems := clusterHealth(md, minISR)
	if format == formatJSON {
		return writeJSON(w, out)
	}
	controller := "none"
	if md.Controller >= 0 {
		controller = strconv.Itoa(int(md.Controller))
	}
	fmt.Fprintf(w, "Cluster %s: controller %s, %d brokers, %d topics, %d partitions\n",
		orDash(md.Cluster), controller, len(out.Brokers), out.Topics, out.Partitions)
	fmt.Fprintf(w, "Under-replicated: %d, under min ISR: %d, offline: %d\n\n",
		len(out.UnderReplicated), len(out.UnderMinISR), len(out.Offline))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BROKER\tHOST\tPORT\tRACK\tCONTROLLER")
	for _, b := range out.Brokers {
		rack, ctl := "-", ""
		if b.Rack != nil {
			rack = *b.Rack
		}
		if b.ID == md.Controller {
			ctl = "yes"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", b.ID, b.Host, b.Port, rack, ctl)
	}
	if len(problems) > 0 {
		fmt.Fprintln(tw, "\nTOPIC\tPARTITION\tLEADER\tREPLICAS\tISR\tPROBLEM")
		for _, pr := range problems {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", pr.p.Topic, pr.p.Partition, pr.p.Leader,
				joinInt32(pr.p.Replicas), joinInt32(pr.p.ISR), pr.what)
		}
	}
	return tw.Flush()
}

// configJSON is one key of `cluster describe-config --format json`.
type configJSON struct {
	Key       string  `json:"key"`
	Value     *string `json:"value"` // null: no value, or sensitive
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive"`
}

func clusterDescribeConfig(ctx context.Context, adm *kadm.Client, f *clusterFlags, w io.Writer) error {
	broker := int32(f.broker)
	if f.dflt {
		rcs, err := adm.DescribeBrokerConfigs(ctx) // the resource "": the cluster-wide defaults
		if err != nil {
			return err
		}
		rc, err := rcs.On("", nil)
		if err != nil {
			return err
		}
		if rc.Err != nil {
			return fmt.Errorf("cluster-wide defaults: %w%s", rc.Err, errDetail(rc.Err, rc.ErrMessage))
		}
		return printConfigs(rc.Configs, true, f.format, w)
	}
	if f.broker < 0 {
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		if len(md.Brokers) == 0 {
			return errors.New("the cluster named no brokers")
		}
		broker = md.Brokers[0].NodeID
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, broker)
	if err != nil {
		return err
	}
	rc, err := rcs.On(strconv.Itoa(int(broker)), nil)
	if err != nil {
		return err
	}
	if rc.Err != nil {
		return fmt.Errorf("broker %d: %w%s", broker, rc.Err, errDetail(rc.Err, rc.ErrMessage))
	}
	return printConfigs(rc.Configs, f.all, f.format, w)
}

// printConfigs prints a resource's configs (those at their default only
// with all), sorted by key.
func printConfigs(configs []kadm.Config, all bool, format outputFormat, w io.Writer) error {
	out := []configJSON{}
	for _, c := range configs {
		if !all && c.Source == kmsg.ConfigSourceDefaultConfig {
			continue
		}
		cj := configJSON{Key: c.Key, Value: c.Value, Source: c.Source.String(), Sensitive: c.Sensitive}
		if c.Sensitive {
			cj.Value = nil
		}
		out = append(out, cj)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if format == formatJSON {
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "KEY\tVALUE\tSOURCE\n")
	for _, c := range out {
		v := "-"
		switch {
		case c.Sensitive:
			v = "(sensitive)"
		case c.Value != nil:
			v = *c.Value
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Key, v, c.Source)
	}
	return tw.Flush()
}

func clusterAlterConfig(ctx context.Context, adm *kadm.Client, f *clusterFlags, w io.Writer) error {
	set, err := parseKV(f.set, "--set")
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ops []kadm.AlterConfig
	for _, k := range keys {
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: set[k]})
	}
	for _, k := range f.del {
		ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	alter := adm.AlterBrokerConfigs
	if f.validateOnly {
		alter = adm.ValidateAlterBrokerConfigs
	}
	var brokers []int32
	name, what := "", "the cluster-wide broker default"
	if f.broker >= 0 {
		brokers = []int32{int32(f.broker)}
		name, what = strconv.Itoa(f.broker), "broker "+strconv.Itoa(f.broker)
	}
	resps, err := alter(ctx, ops, brokers...)
	if err != nil {
		return err
	}
	r, err := resps.On(name, nil)
	if err != nil {
		return err
	}
	if r.Err != nil {
		return fmt.Errorf("altering %s: %w%s", what, r.Err, errDetail(r.Err, r.ErrMessage))
	}
	verb := "Altered"
	if f.validateOnly {
		verb = "Validated"
	}
	fmt.Fprintf(w, "%s the configuration of %s.\n", verb, what)
	return nil
}
