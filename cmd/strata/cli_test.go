package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runCLI runs the command line in-process: exit status, stdout, stderr.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// Every command and verb answers --help on stdout with exit 0, with its own
// usage line and its own flags' text.
func TestHelpEveryCommand(t *testing.T) {
	cases := []struct {
		args []string
		want []string // in stdout
		not  []string // not in stdout
	}{
		{[]string{"--help"}, []string{"strata serve", "strata version", "STRATA_BROKERS"}, nil},
		{[]string{"help"}, []string{"strata topics create|list"}, nil},
		{[]string{"topics", "--help"}, []string{"Verbs:", "alter-config", "strata topics VERB --help"}, nil},
		{[]string{"groups", "-h"}, []string{"reset-offsets", "move a group's committed offsets"}, nil},
		{[]string{"topics", "create", "--help"}, []string{"strata topics create NAME", "-replication-factor", "replicas per partition", "-brokers", "$STRATA_BROKERS"}, []string{"-internal", "-validate-only"}},
		{[]string{"topics", "list", "-h"}, []string{"strata topics list", "include internal topics"}, []string{"-partitions"}},
		{[]string{"topics", "describe", "--help"}, []string{"strata topics describe [NAME ...]", "-timeout"}, []string{"-set"}},
		{[]string{"topics", "delete", "--help"}, []string{"strata topics delete NAME ..."}, nil},
		{[]string{"topics", "add-partitions", "--help"}, []string{"(--num N | --total N)", "partitions each topic should have"}, []string{"-internal"}},
		{[]string{"groups", "delete", "--help"}, []string{"strata groups delete GROUP ...", "NON_EMPTY_GROUP"}, []string{"-state"}},
		{[]string{"topics", "alter-config", "--help"}, []string{"-validate-only", "override to remove"}, []string{"-partitions"}},
		{[]string{"groups", "list", "--help"}, []string{"strata groups list [--type TYPE ...] [--state STATE ...]", "Reconciling", "only groups in this state", "only groups of this type"}, []string{"-topic"}},
		{[]string{"groups", "describe", "--help"}, []string{"strata groups describe GROUP", "retention cliff"}, []string{"-state"}},
		{[]string{"groups", "reset-offsets", "--help"}, []string{"--to-datetime", "commit the new offsets"}, []string{"-state"}},
		{[]string{"dlq", "--help"}, []string{"Verbs:", "move", "redrive", "strata dlq VERB --help"}, nil},
		{[]string{"dlq", "move", "--help"}, []string{"strata dlq move --topic T", "-from-offset", "-group", "-reason"}, []string{"-source-topic"}},
		{[]string{"dlq", "redrive", "--help"}, []string{"strata dlq redrive --dlq D --to T", "-source-topic", "murmur2"}, []string{"-reason"}},
		// The exit status it states is the one TestUsageErrors sees (1).
		{[]string{"plan", "--help"}, []string{"strata plan (--preset reference", "Exit status", "-calibrate", "-strict", "1 for a mistake on the command line"}, []string{"2 for a mistake"}},
		{[]string{"loadgen", "--help"}, []string{"strata loadgen (--brokers", "Examples:", "-find-max", "-max-steps"}, nil},
		{[]string{"version", "--help"}, []string{"strata version"}, nil},
		{[]string{"users", "--help"}, []string{"Verbs:", "create", "sends only the salt", "salts the password"}, nil},
		{[]string{"users", "create", "--help"}, []string{"strata users create NAME", "-iterations", "-mechanism", "STRATA_USER_PASSWORD", "-sasl-username", "-tls-ca"}, []string{"-format"}},
		{[]string{"users", "list", "--help"}, []string{"strata users list [NAME...]", "-format"}, []string{"-iterations"}},
		{[]string{"acls", "--help"}, []string{"one request to", "replicated metadata"}, []string{"every broker", "keeps its own"}},
		{[]string{"completion", "--help"}, []string{"strata completion bash|zsh", "bashcompinit"}, nil},
		{[]string{"completion", "zsh"}, []string{"bashcompinit", "complete -F _strata strata", "consume"}, nil},
		{[]string{"help", "topics", "create"}, []string{"strata topics create NAME", "-if-not-exists"}, nil},
		{[]string{"topics", "help", "create"}, []string{"strata topics create NAME", "-if-not-exists"}, []string{"Verbs:"}},
		{[]string{"cluster", "help", "log-dirs"}, []string{"strata cluster log-dirs"}, []string{"Verbs:"}},
		{[]string{"help", "plan"}, []string{"-calibrate"}, nil},
		{[]string{"topics", "describe", "--help"}, []string{"[--format text|json]", "output format: text or json (default text)"}, nil},
		{[]string{"groups", "describe", "--help"}, []string{"-format format"}, []string{"-state"}},
		{[]string{"produce", "--help"}, []string{"strata produce TOPIC", "-key-delimiter DELIM", "kcat's -K", "-compression", "-acks", "-header key=value", "Examples:"}, []string{"-exit-at-end"}},
		{[]string{"consume", "-h"}, []string{"strata consume TOPIC", "-exit-at-end", "-num N", "-group GROUP", "%t topic", "-read-committed"}, []string{"-key-delimiter"}},
		{[]string{"help", "consume"}, []string{"-from-beginning"}, nil},
		{[]string{"cluster", "--help"}, []string{"describe-config", "alter-config", "Verbs:"}, nil},
		{[]string{"cluster", "describe", "--help"}, []string{"under-replicated", "-format"}, []string{"-broker int", "-all"}},
		{[]string{"cluster", "describe-config", "-h"}, []string{"STATIC_BROKER_CONFIG", "-all"}, []string{"-set"}},
		{[]string{"cluster", "alter-config", "--help"}, []string{"-validate-only", "cluster-wide default"}, []string{"-all"}},
		{[]string{"--help"}, []string{"strata produce TOPIC", "strata consume TOPIC"}, nil},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(c.args...)
		if code != 0 || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", c.args, code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q: stdout lacks %q:\n%s", c.args, w, out)
			}
		}
		for _, n := range c.not {
			if strings.Contains(out, n) {
				t.Errorf("%q: stdout has another verb's %q:\n%s", c.args, n, out)
			}
		}
	}
}

// A mistake on the command line is one line naming it, the usage line, and
// a pointer to --help on stderr, exit 1: never the whole flag list.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args  []string
		first string // stderr's first line
		usage string // stderr's second line starts "Usage: " + this
	}{
		{[]string{"plan", "--rate", "abc"}, `strata plan: invalid value "abc" for flag -rate: "abc" is not a number`, "strata plan (--preset"},
		{[]string{"plan", "--rate", "1", "extra"}, `strata plan: unexpected arguments ["extra"]`, "strata plan"},
		{[]string{"plan"}, "strata plan: --rate is required", "strata plan"},
		{[]string{"topics"}, "strata topics: missing verb", "strata topics VERB"},
		{[]string{"topics", "frobnicate"}, `strata topics: unknown verb "frobnicate"`, "strata topics VERB"},
		{[]string{"topics", "create", "--bogus"}, "strata topics create: flag provided but not defined: -bogus", "strata topics create NAME"},
		{[]string{"topics", "create", "a", "b"}, `strata topics create: create takes one topic name, got ["a" "b"]`, "strata topics create NAME"},
		{[]string{"topics", "create", "a", "--partitions", "0"}, "strata topics create: --partitions 0: want -1 or 1..1048576", "strata topics create"},
		{[]string{"topics", "alter-config", "t"}, "strata topics alter-config: alter-config needs --set key=value or --delete key", "strata topics alter-config"},
		{[]string{"topics", "delete"}, "strata topics delete: delete takes one or more topic names", "strata topics delete"},
		{[]string{"groups", "list", "--state", "Bogus"}, `strata groups list: --state "Bogus": not a group state (Empty, Stable, PreparingRebalance, CompletingRebalance, Dead, Assigning, Reconciling)`, "strata groups list"},
		{[]string{"groups", "describe"}, "strata groups describe: describe: name at least one group", "strata groups describe"},
		{[]string{"groups", "delete"}, "strata groups delete: delete: name at least one group", "strata groups delete GROUP"},
		{[]string{"topics", "add-partitions", "t"}, "strata topics add-partitions: add-partitions needs one of --num N (to add) and --total N (to have)", "strata topics add-partitions NAME"},
		{[]string{"topics", "add-partitions", "t", "--num", "1", "--total", "3"}, "strata topics add-partitions: add-partitions needs one of", "strata topics add-partitions"},
		{[]string{"groups", "reset-offsets", "g", "--topic", "t"}, "strata groups reset-offsets: reset-offsets: give exactly one of", "strata groups reset-offsets"},
		{[]string{"groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"}, "strata groups reset-offsets: --to-datetime:", "strata groups reset-offsets"},
		{[]string{"loadgen", "--rate", "x", "--spawn", "1"}, `strata loadgen: invalid value "x" for flag -rate`, "strata loadgen"},
		{[]string{"loadgen"}, "strata loadgen: no target", "strata loadgen"},
		{[]string{"version", "x"}, `strata version: unexpected arguments ["x"]`, "strata version"},
		// serve: the arguments are checked before the flags' values, so
		// without that check the bad --node-id fails the case (no broker
		// starts).
		{[]string{"serve", "--node-id", "x", "extra"}, `strata serve: unexpected arguments ["extra"]`, "strata serve"},
		{[]string{"serve", "--node-id", "x"}, `strata serve: --node-id: config: node.id="x": not an integer`, "strata serve"},
		{[]string{"serve", "--log-level", "loud", "--node-id", "x"}, `strata serve: --log-level: `, "strata serve"},
		{[]string{"frobnicate"}, `strata: unknown command "frobnicate"`, "strata serve|topics|groups|dlq|cluster|acls|users|produce|consume|loadgen|plan|version|completion"},
		{[]string{"dlq", "move", "--partition", "0", "--from-offset", "0", "--to-offset", "1"}, "strata dlq move: move: --topic is required", "strata dlq move --topic T"},
		{[]string{"dlq", "move", "--topic", "t", "--partition", "0", "--from-offset", "5", "--to-offset", "5"}, "strata dlq move: move: --to-offset 5 must be above --from-offset 5", "strata dlq move"},
		{[]string{"dlq", "redrive", "--dlq", "d"}, "strata dlq redrive: redrive: --to is required", "strata dlq redrive --dlq D"},
		{[]string{"dlq", "redrive", "--dlq", "d", "--to", "t", "--sasl-mechanism", "GSSAPI"}, `strata dlq redrive: --sasl-mechanism "GSSAPI": want PLAIN`, "strata dlq redrive"},
		{[]string{"topics", "list", "--format", "yaml"}, `strata topics list: invalid value "yaml" for flag -format: want text or json`, "strata topics list"},
		{[]string{"groups", "describe", "g", "--format", "xml"}, `strata groups describe: invalid value "xml" for flag -format: want text or json`, "strata groups describe"},
		{[]string{"produce"}, "strata produce: name one topic, got []", "strata produce TOPIC"},
		{[]string{"produce", "help", "x"}, "strata produce: name one topic", "strata produce TOPIC"}, // a topic named help, not "COMMAND help VERB"
		{[]string{"cluster"}, "strata cluster: missing verb", "strata cluster VERB"},
		{[]string{"completion"}, "strata completion: name one shell (bash, zsh or fish), got []", "strata completion bash|zsh|fish"},
		{[]string{"completion", "tcsh"}, `strata completion: shell "tcsh": want bash, zsh or fish`, "strata completion"},
		{[]string{"cluster", "describe", "x"}, `strata cluster describe: unexpected arguments ["x"]`, "strata cluster describe"},
		{[]string{"cluster", "alter-config"}, "strata cluster alter-config: alter-config needs --set key=value or --delete key", "strata cluster alter-config"},
		{[]string{"cluster", "describe-config", "--broker", "-2"}, "strata cluster describe-config: --broker -2: want a broker id or -1", "strata cluster describe-config"},
		{[]string{"produce", "t", "--acks", "2"}, `strata produce: --acks "2": want all, -1, 1 or 0`, "strata produce TOPIC"},
		{[]string{"produce", "t", "-z", "brotli"}, `strata produce: --compression "brotli": want none, gzip, snappy, lz4 or zstd`, "strata produce"},
		{[]string{"produce", "t", "-H", "novalue"}, `strata produce: --header "novalue": want key=value`, "strata produce"},
		{[]string{"produce", "t", "--format", "json", "-K", ":"}, "strata produce: -K splits text lines", "strata produce"},
		{[]string{"produce", "t", "--partition", "x"}, `strata produce: invalid value "x" for flag -partition`, "strata produce"},
		{[]string{"consume"}, "strata consume: name at least one topic", "strata consume TOPIC"},
		{[]string{"consume", "t", "-o", "yesterday"}, `strata consume: --offset "yesterday": want start, end, N, -N or @TIME`, "strata consume"},
		{[]string{"consume", "t", "-o", "@-soon"}, `strata consume: --offset "@-soon"`, "strata consume"},
		{[]string{"consume", "t", "-f", "xml"}, `strata consume: --format "xml": want value, json, or a format string`, "strata consume"},
		{[]string{"consume", "t", "-f", "%q"}, "strata consume: --format: unknown directive %q", "strata consume"},
		{[]string{"consume", "t", "-g", "g", "-p", "0"}, "strata consume: --partition and --group", "strata consume"},
		{[]string{"consume", "t", "-g", "g", "-e"}, "strata consume: --exit-at-end and --group", "strata consume"},
		{[]string{"consume", "t", "-n", "-1"}, "strata consume: --num -1: want 0 (no limit) or more", "strata consume"},
		{[]string{"consume", "t", "--num", "x"}, `strata consume: invalid value "x" for flag -num`, "strata consume"},
		{[]string{"consume", "t", "-p", "one"}, `strata consume: --partition "one": want comma-separated partition numbers`, "strata consume"},
		{[]string{"consume", "t", "-o", "3", "--from-beginning"}, "strata consume: --from-beginning and --offset: give one", "strata consume"},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(c.args...)
		lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
		if code != 1 || out != "" || len(lines) < 3 || len(lines) > 4 || !strings.HasPrefix(lines[0], c.first) ||
			!strings.HasPrefix(lines[1], "Usage: "+c.usage) || !strings.HasPrefix(lines[len(lines)-1], "Run \"strata ") {
			t.Errorf("%q: exit %d (want 1), stdout %q, stderr:\n%s", c.args, code, out, errOut)
		}
	}
	// No arguments at all: the command list, exit 1.
	if code, _, errOut := runCLI(); code != 1 || !strings.Contains(errOut, "strata plan") {
		t.Errorf("no arguments: exit %d, %q", code, errOut)
	}
}

// strata --help names every verb of the commands that have verbs, and each
// command's verb list keeps its summaries in one column (a verb longer than
// the others does not push its summary out of line).
func TestTopUsageNamesEveryVerb(t *testing.T) {
	code, top, _ := runCLI("--help")
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, c := range []struct {
		cmd   string
		verbs []verbDoc
	}{{"topics", topicsVerbs}, {"groups", groupsVerbs}, {"dlq", dlqVerbs}, {"cluster", clusterVerbs}, {"acls", aclsVerbs}, {"users", usersVerbs}} {
		names := make([]string, len(c.verbs))
		for i, v := range c.verbs {
			names[i] = v.verb
		}
		line := regexp.MustCompile(`(?m)^  strata ` + c.cmd + ` (\S+)`).FindStringSubmatch(top)
		if line == nil {
			t.Errorf("--help has no line for strata %s", c.cmd)
			continue
		}
		listed := map[string]bool{}
		for _, v := range strings.Split(line[1], "|") {
			listed[v] = true
		}
		for _, v := range names {
			if !listed[v] {
				t.Errorf("--help: strata %s %s does not name the verb %s", c.cmd, line[1], v)
			}
		}
		_, help, _ := runCLI(c.cmd, "--help")
		col := -1
		for _, v := range c.verbs {
			i := strings.Index(help, "\n  "+v.verb+" ")
			if i < 0 {
				t.Errorf("strata %s --help does not list %s", c.cmd, v.verb)
				continue
			}
			rest := help[i+1:]
			rest = rest[:strings.IndexByte(rest, '\n')]
			at := strings.Index(rest, v.summary)
			if col >= 0 && at != col {
				t.Errorf("strata %s --help: the summary of %s starts at column %d, the others at %d:\n%s", c.cmd, v.verb, at, col, help)
			}
			col = at
		}
	}
}

func TestResolveBrokers(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == brokersEnv {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct{ flag, env, want string }{
		{"a:1", "b:2", "a:1"},
		{"", "b:2,c:3", "b:2,c:3"},
		{"", "  ", "127.0.0.1:9092"},
		{"", "", "127.0.0.1:9092"},
	} {
		if got := resolveBrokers(c.flag, env(c.env)); got != c.want {
			t.Errorf("flag %q env %q: %q, want %q", c.flag, c.env, got, c.want)
		}
	}
}

func TestFormatVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/stratalog/strata", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "5f895e5abc"}, {Key: "vcs.time", Value: "2025-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	got := formatVersion(bi, true)
	if !strings.HasPrefix(got, "strata (devel), revision 5f895e5abc (2025-01-02T03:04:05Z, modified), go1.26.8 ") {
		t.Errorf("got %q", got)
	}
	bi.Main.Version, bi.Settings = "v0.3.0", nil
	if got := formatVersion(bi, true); !strings.HasPrefix(got, "strata v0.3.0, revision unknown, go1.26.8 ") {
		t.Errorf("got %q", got)
	}
	if got := formatVersion(nil, false); !strings.HasPrefix(got, "strata (unknown version) go") {
		t.Errorf("got %q", got)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "strata ") || !strings.Contains(out, "revision") {
			t.Errorf("%q: exit %d, %q %q", args, code, out, errOut)
		}
	}
}

// The admin commands against a real broker: brokers from the environment,
// topic ids as Kafka prints them, --state checked and spelled as Kafka does.
func TestAdminCommands(t *testing.T) {
	addr := startGroupsBroker(t)
	env := func(k string) string {
		if k == brokersEnv {
			return addr
		}
		return ""
	}
	topics := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := topicsMainEnv(args, &out, &errb, env)
		return out.String() + errb.String(), err
	}
	groups := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := groupsMainEnv(args, &out, &errb, time.Now, env)
		return out.String() + errb.String(), err
	}
	out, err := topics("create", "ids", "--partitions", "2", "--replication-factor", "1")
	if err != nil {
		t.Fatalf("create (brokers from $STRATA_BROKERS): %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, "ids")
	if err != nil {
		t.Fatal(err)
	}
	id := td["ids"].ID
	want := base64.RawURLEncoding.EncodeToString(id[:])
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`).MatchString(want) {
		t.Fatalf("id %q", want)
	}
	if !strings.Contains(out, "(id "+want+",") {
		t.Errorf("create printed %q, want id %s", out, want)
	}
	out, err = topics("describe", "ids")
	if err != nil || !strings.Contains(out, "TopicId: "+want+" ") || strings.Contains(out, id.String()) && id.String() != want {
		t.Errorf("describe: %v\n%s\nwant TopicId %s", err, out, want)
	}
	// --format json: the same facts as objects, the id as Kafka prints it.
	out, err = topics("list", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	if l := decodeJSON[[]topicListJSON](t, out); len(l) != 1 || l[0] != (topicListJSON{Name: "ids", ID: want, Partitions: 2, ReplicationFactor: 1}) {
		t.Errorf("list --format json: %+v", l)
	}
	if _, err := topics("alter-config", "ids", "--set", "retention.ms=1000"); err != nil {
		t.Fatal(err)
	}
	out, err = topics("describe", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	d := decodeJSON[[]topicJSON](t, out)
	if len(d) != 1 || d[0].Name != "ids" || d[0].ID != want || d[0].PartitionCount != 2 || d[0].ReplicationFactor != 1 ||
		len(d[0].Configs) != 1 || d[0].Configs["retention.ms"] != "1000" || len(d[0].Partitions) != 2 {
		t.Fatalf("describe --format json:\n%s", out)
	}
	for i, p := range d[0].Partitions {
		if p.Partition != int32(i) || p.Leader != 0 || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.LogStartOffset != 0 || p.HighWatermark != 0 || p.Error != "" {
			t.Errorf("describe --format json, partition %d: %+v", i, p)
		}
	}
	// add-partitions: --num adds, --total grows to, --validate-only changes nothing.
	if out, err := topics("add-partitions", "ids", "--num", "1"); err != nil || out != "Topic ids now has 3 partitions (had 2).\n" {
		t.Errorf("add-partitions --num 1: %v %q", err, out)
	}
	if out, err := topics("add-partitions", "ids", "--total", "6", "--validate-only"); err != nil || out != "Topic ids would have 6 partitions (had 3).\n" {
		t.Errorf("add-partitions --total 6 --validate-only: %v %q", err, out)
	}
	if out, err := topics("add-partitions", "ids", "--total", "2"); err == nil || !strings.Contains(err.Error(), "INVALID_PARTITIONS") {
		t.Errorf("add-partitions --total 2 of 3: %v %q", err, out)
	}
	// --partitions is --total, as kafka-topics --alter --partitions means it.
	if out, err := topics("add-partitions", "ids", "--partitions", "5", "--validate-only"); err != nil || out != "Topic ids would have 5 partitions (had 3).\n" {
		t.Errorf("add-partitions --partitions 5 --validate-only: %v %q", err, out)
	}
	out, err = topics("list", "--format", "json")
	if l := decodeJSON[[]topicListJSON](t, out); err != nil || len(l) != 1 || l[0].Partitions != 3 {
		t.Errorf("after add-partitions: %v %+v", err, l)
	}
	// The flag wins over the environment.
	if _, err := topics("list", "--brokers", "127.0.0.1:1", "--timeout", "300ms"); err == nil {
		t.Error("list against --brokers 127.0.0.1:1 succeeded: the flag did not win over $STRATA_BROKERS")
	}

	// An empty group (committed offsets, no members).
	offs := kadm.Offsets{}
	offs.AddOffset("ids", 0, 0, -1)
	if r, err := adm.CommitOffsets(ctx, "g-empty", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	out, err = groups("list", "--state", "empty")
	if err != nil || !strings.Contains(out, "g-empty") || !strings.Contains(out, "Empty") {
		t.Errorf("list --state empty: %v\n%s", err, out)
	}
	out, err = groups("list", "--state", "Empty", "--format", "json")
	if l := decodeJSON[[]groupListJSON](t, out); err != nil || len(l) != 1 || l[0] != (groupListJSON{Group: "g-empty", State: "Empty"}) {
		t.Errorf("list --format json: %v\n%s", err, out)
	}
	out, err = groups("list", "--state", "STABLE")
	if err != nil || strings.Contains(out, "g-empty") {
		t.Errorf("list --state STABLE: %v\n%s", err, out)
	}
	if out, err := groups("delete", "g-empty"); err != nil || out != "Deleted group g-empty.\n" {
		t.Errorf("delete: %v %q", err, out)
	}
	if out, err := groups("list"); err != nil || strings.Contains(out, "g-empty") {
		t.Errorf("list after delete: %v\n%s", err, out)
	}
	if _, err := groups("delete", "g-empty"); err == nil || !strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") {
		t.Errorf("delete again: %v", err)
	}
}

// The built binary: --help exits 0 for serve, version carries the VCS
// revision go build stamps, flag errors and runtime failures exit 1.
func TestBinaryExitCodes(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "strata")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	runBin := func(env []string, args ...string) (int, string, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	code, out, errOut := runBin(nil, "serve", "--help")
	if code != 0 || errOut != "" || !strings.Contains(out, "-node-id int") || !strings.Contains(out, "this broker's id (default 0)\n") ||
		strings.Contains(out, "(default 0) (default") {
		t.Errorf("serve --help: exit %d, stderr %q\n%s", code, errOut, out)
	}
	if code, _, errOut := runBin(nil, "serve", "--no-such-flag"); code != 1 || strings.Count(errOut, "\n") != 3 {
		t.Errorf("serve --no-such-flag: exit %d\n%s", code, errOut)
	}
	code, out, _ = runBin(nil, "--version")
	if code != 0 || !regexp.MustCompile(`^strata \S+, revision [0-9a-f]{40} \(\d{4}-`).MatchString(out) {
		t.Errorf("--version: exit %d: %q (built in a git work tree: want the revision)", code, out)
	}
	// Brokers default: nothing listens on port 1, so the command fails (1)
	// after naming the address it tried.
	code, _, errOut = runBin([]string{"STRATA_BROKERS=127.0.0.1:1"}, "topics", "list", "--timeout", "500ms")
	if code != 1 || !strings.HasPrefix(errOut, "strata topics: ") {
		t.Errorf("topics list against a dead $STRATA_BROKERS: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runBin(nil, "plan", "--preset", "reference")
	if code != 1 || !strings.Contains(errOut, "does not add up") {
		t.Errorf("plan --preset reference (has ERROR lines): exit %d\n%s", code, errOut)
	}

	// produce | consume through the binary, and SIGINT.
	env := []string{"STRATA_BROKERS=" + startGroupsBroker(t)}
	prod := exec.Command(bin, "produce", "bin", "-K", ":", "-H", "via=binary")
	prod.Env = append(os.Environ(), env...)
	prod.Stdin = strings.NewReader("a:1\nb:2\n")
	if out, err := prod.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("produce: %v %q", err, out)
	}
	code, out, errOut = runBin(env, "consume", "bin", "-e", "-f", `%k=%v %h\n`)
	if code != 0 || out != "a=1 via=binary\nb=2 via=binary\n" || errOut != "" {
		t.Errorf("consume -e: exit %d %q %q", code, out, errOut)
	}
	for _, args := range [][]string{{"consume", "bin"}, {"consume", "bin", "-g", "bg"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() { // ends when the process's stdout closes
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		var got []string
		timeout := time.After(groupsTestTimeout)
		for len(got) < 2 {
			select {
			case l := <-lines:
				got = append(got, l)
			case <-timeout:
				cmd.Process.Kill()
				t.Fatalf("%q printed only %q", args, got)
			}
		}
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
	drain: // until the process closes its stdout
		for {
			select {
			case _, ok := <-lines:
				if !ok {
					break drain
				}
			case <-timeout:
				cmd.Process.Kill()
				t.Fatalf("%q did not exit after SIGINT", args)
			}
		}
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case err := <-waited:
			if err != nil || errb.Len() != 0 || got[0] != "1" || got[1] != "2" {
				t.Errorf("%q after SIGINT: %v, stderr %q, printed %q", args, err, errb.String(), got)
			}
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("%q did not exit after SIGINT", args)
		}
	}

	// The bash completion script, run by bash against this binary and the
	// broker (topic "bin", group "bg" from above).
	script := filepath.Join(dir, "complete.sh")
	code, out, errOut = runBin(nil, "completion", "bash")
	if code != 0 || errOut != "" || os.WriteFile(script, []byte(out), 0o600) != nil {
		t.Fatalf("completion bash: exit %d %q", code, errOut)
	}
	driver := `source "$1"; shift
c() { COMP_WORDS=("$BIN" "$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _strata; echo "$*|${COMPREPLY[*]}"; }
c con; c topics a; c consume --exit; c produce -K; c consume ""; c consume -e b; c groups describe ""
c groups reset-offsets g --topic ""; c serve --data; c completion ""; c cluster describe-c
`
	comp := exec.Command("bash", "-c", driver, "bash", script)
	comp.Env = append(os.Environ(), append(env, "BIN="+bin)...)
	got, err := comp.CombinedOutput()
	want := `con|consume
topics a|add-partitions alter-config
consume --exit|--exit-at-end
produce -K|-K
consume |bin
consume -e b|bin
groups describe |bg
groups reset-offsets g --topic |bin
serve --data|--data-dir
completion |bash zsh fish
cluster describe-c|describe-config
`
	if err != nil || string(got) != want {
		t.Errorf("bash completion: %v\n%s\nwant\n%s", err, got, want)
	}
}
