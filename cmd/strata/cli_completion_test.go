package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/stratatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The bash and fish completion scripts, each run by its shell against the
// built binary (as "strata" on PATH) and a broker holding topic "cmp" and
// group "cg", offer the same candidates for the same command lines:
// commands, verbs, flags, flag values (topics, groups, files) and
// positional topics and groups, from $STRATA_BROKERS or the --brokers typed
// on the line.
func TestCompletionBashAndFish(t *testing.T) {
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Fatal("fish is not installed: scripts/test installs it (apt-get install fish)")
	}
	bin, cleanup, err := stratatest.BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	addr := startGroupsBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "cmp"); err != nil || r.Err != nil {
		t.Fatalf("create cmp: %v %v", err, r.Err)
	}
	offs := kadm.Offsets{}
	offs.AddOffset("cmp", 0, 0, -1)
	if r, err := adm.CommitOffsets(ctx, "cg", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit cg: %v %v", err, r.Error())
	}
	dir := t.TempDir()
	etc := t.TempDir()
	conf := filepath.Join(etc, "conf.properties")
	if err := os.WriteFile(conf, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct{ line, want string }{
		{"strata con", "consume"},
		{"strata topics a", "add-partitions alter-config"},
		{"strata topics ", "add-partitions alter-config create delete describe list"},
		{"strata consume --exit", "--exit-at-end"},
		{"strata produce -K", "-K"},
		{"strata consume ", "cmp"},
		{"strata consume -e c", "cmp"},
		{"strata consume -g ", "cg"},
		{"strata groups describe ", "cg"},
		{"strata groups reset-offsets cg --topic ", "cmp"},
		{"strata serve --data", "--data-dir"},
		{"strata serve --config " + etc + "/co", conf},
		{"strata completion ", "bash fish zsh"},
		{"strata help pr", "produce"},
		{"strata cluster describe-c", "describe-config"},
		{"strata users ", "create delete list"},
		{"strata users create --iter", "--iterations"},
		{"strata topics list --f", "--format"},
		{"strata topics describe --brokers 127.0.0.1:1 c", ""}, // the typed --brokers wins: nothing listens there
		{"strata topics describe --brokers " + addr + " c", "cmp"},
	}
	env := append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"STRATA_BROKERS="+addr, "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_DATA_HOME="+filepath.Join(dir, "data"))
	script := func(shell string) string {
		var out strings.Builder
		if err := runCompletion([]string{shell}, &out); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "complete."+shell)
		if err := os.WriteFile(path, []byte(out.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	run := func(name string, args ...string) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		return strings.Split(string(out), "##\n")
	}

	// bash: one call of _strata per line, as readline would make it.
	var bashDriver strings.Builder
	bashDriver.WriteString("source \"$1\"\n")
	for _, c := range cases {
		words := strings.Fields(c.line)
		if strings.HasSuffix(c.line, " ") {
			words = append(words, "")
		}
		fmt.Fprintf(&bashDriver, "COMP_WORDS=(%s); COMP_CWORD=%d; _strata; printf '%%s\\n' \"${COMPREPLY[@]}\"; echo '##'\n",
			shellQuote(words), len(words)-1)
	}
	// fish: its own completion engine on each line (complete -C).
	fishDriver := `source $argv[1]
for line in $argv[2..]
	complete -C $line | string replace -r '\t.*' ''
	echo '##'
end`
	lines := make([]string, len(cases))
	for i, c := range cases {
		lines[i] = c.line
	}
	results := map[string][]string{
		"bash": run("bash", "-c", bashDriver.String(), "bash", script("bash")),
		"fish": run(fish, append([]string{"--no-config", "-c", fishDriver, script("fish")}, lines...)...),
	}
	for shell, got := range results {
		if len(got) != len(cases)+1 || got[len(cases)] != "" {
			t.Fatalf("%s printed %d answers for %d lines:\n%q", shell, len(got)-1, len(cases), got)
		}
		for i, c := range cases {
			offered := strings.Fields(got[i])
			slices.Sort(offered)
			if g := strings.Join(offered, " "); g != c.want {
				t.Errorf("%s: %q offers %q, want %q", shell, c.line, g, c.want)
			}
		}
	}
}

// shellQuote is words as single-quoted bash words (none holds a quote).
func shellQuote(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + w + "'"
	}
	return strings.Join(q, " ")
}
