package main

import (
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
		{[]string{"topics", "alter-config", "--help"}, []string{"-validate-only", "override to remove"}, []string{"-partitions"}},
		{[]string{"groups", "list", "--help"}, []string{"strata groups list [--state STATE ...]", "Reconciling", "only groups in this state"}, []string{"-topic"}},
		{[]string{"groups", "describe", "--help"}, []string{"strata groups describe GROUP", "retention cliff"}, []string{"-state"}},
		{[]string{"groups", "reset-offsets", "--help"}, []string{"--to-datetime", "commit the new offsets"}, []string{"-state"}},
		{[]string{"plan", "--help"}, []string{"strata plan (--preset reference", "Exit status", "-calibrate", "-strict"}, nil},
		{[]string{"loadgen", "--help"}, []string{"strata loadgen (--brokers", "Examples:", "-find-max", "-max-steps"}, nil},
		{[]string{"version", "--help"}, []string{"strata version"}, nil},
		{[]string{"help", "topics", "create"}, []string{"strata topics create NAME", "-if-not-exists"}, nil},
		{[]string{"help", "plan"}, []string{"-calibrate"}, nil},
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
// a pointer to --help on stderr, exit 2: never the whole flag list.
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
		{[]string{"groups", "reset-offsets", "g", "--topic", "t"}, "strata groups reset-offsets: reset-offsets: give exactly one of", "strata groups reset-offsets"},
		{[]string{"groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"}, "strata groups reset-offsets: --to-datetime:", "strata groups reset-offsets"},
		{[]string{"loadgen", "--rate", "x", "--spawn", "1"}, `strata loadgen: invalid value "x" for flag -rate`, "strata loadgen"},
		{[]string{"loadgen"}, "strata loadgen: no target", "strata loadgen"},
		{[]string{"version", "x"}, `strata version: unexpected arguments ["x"]`, "strata version"},
		{[]string{"frobnicate"}, `strata: unknown command "frobnicate"`, "strata serve|topics|groups|loadgen|plan|version"},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(c.args...)
		lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
		if code != 2 || out != "" || len(lines) < 3 || len(lines) > 4 || !strings.HasPrefix(lines[0], c.first) ||
			!strings.HasPrefix(lines[1], "Usage: "+c.usage) || !strings.HasPrefix(lines[len(lines)-1], "Run \"strata ") {
			t.Errorf("%q: exit %d (want 2), stdout %q, stderr:\n%s", c.args, code, out, errOut)
		}
	}
	// No arguments at all: the command list, exit 2.
	if code, _, errOut := runCLI(); code != 2 || !strings.Contains(errOut, "strata plan") {
		t.Errorf("no arguments: exit %d, %q", code, errOut)
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
	out, err = groups("list", "--state", "STABLE")
	if err != nil || strings.Contains(out, "g-empty") {
		t.Errorf("list --state STABLE: %v\n%s", err, out)
	}
}

// The built binary: --help exits 0 for serve, version carries the VCS
// revision go build stamps, flag errors exit 2 and runtime failures 1.
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
	if code, _, errOut := runBin(nil, "serve", "--no-such-flag"); code != 2 || strings.Count(errOut, "\n") != 3 {
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
}
