// Command strata is the one Strata binary: a Kafka-compatible broker
// (`strata serve`), its load generator, capacity planner and admin
// commands.
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

const usage = `strata — a Kafka-compatible, replicated, partitioned commit log

Usage:
  strata serve [--listen host:port] [--data-dir DIR] [--node-id N] [--config FILE] ...
  strata topics create|list|describe|delete|add-partitions|alter-config ... [--brokers host:port,...]
  strata groups list|describe|delete|reset-offsets ... [--brokers host:port,...]
  strata dlq move|redrive ... [--brokers host:port,...]
  strata cluster describe|describe-config|alter-config|log-dirs|quorum ... [--brokers host:port,...]
  strata acls add|list|remove ... [--brokers host:port,...] [--sasl-mechanism M --sasl-username U]
  strata users create|delete|list ... [--brokers host:port,...] [--sasl-mechanism M --sasl-username U]
  strata produce TOPIC [-K DELIM] [-H key=value ...] [--acks all|1|0] [--compression CODEC] ...  < lines
  strata consume TOPIC ... [-o start|end|N|-N|@TIME] [-g GROUP] [-n N] [-e] [-f value|json|FORMAT] ...
  strata loadgen (--brokers host:port,... | --spawn N) [--rate R] [--duration D] [--json F] [--report F.html] ...
  strata plan [--preset reference] [--rate N --peak-rate N ...] [--calibrate result.json] [--json FILE]
  strata version
  strata completion bash|zsh|fish

The client commands (topics, groups, dlq, cluster, acls, users, produce, consume) take their brokers from --brokers, else
$STRATA_BROKERS, else 127.0.0.1:9092.

Run "strata COMMAND --help" for a command's flags ("strata help COMMAND"
does the same). Exit status: 0 success, 1 the command failed or a mistake
on the command line.
`

// The release build (scripts/release) stamps these at link time:
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=<sha> -X main.date=<RFC 3339>"
//
// `strata version` prints them when version is set and falls back to the
// build information Go embeds (debug.ReadBuildInfo) otherwise (version.go).
var (
	version string // git describe --tags --always --dirty
	commit  string // the full commit hash
	date    string // the commit's time, UTC, RFC 3339
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command line: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 1
	}
	cmd, rest := args[0], args[1:]
	if cmd == "help" && len(rest) > 0 { // strata help COMMAND [VERB]
		cmd, rest = rest[0], append(rest[1:], "--help")
	}
	// strata COMMAND help VERB, as cobra's trees answer it (only the
	// commands with verbs: "strata consume help x" reads topics help and x).
	if len(rest) == 2 && rest[0] == "help" && slices.Contains([]string{"topics", "groups", "dlq", "cluster", "acls", "users"}, cmd) {
		rest = []string{rest[1], "--help"}
	}
	var err error
	switch cmd {
	case "serve":
		err = runServe(rest)
	case "loadgen":
		err = runLoadgen(rest, stdout, stderr, timeNow())
	case "plan":
		err = planMain(rest, stdout, stderr)
	case "topics":
		err = topicsMain(rest, stdout, stderr)
	case "groups":
		err = groupsMain(rest, stdout, stderr, timeNow)
	case "dlq":
		err = dlqMain(rest, stdout, stderr) // dlq.go
	case "cluster":
		err = clusterMain(rest, stdout, stderr)
	case "acls":
		err = aclsMain(rest, stdout, stderr) // acls.go
	case "users":
		err = usersMain(rest, stdout, stderr) // users.go
	case "produce":
		err = produceMain(rest, os.Stdin, stdout, stderr)
	case "consume":
		err = consumeMain(rest, stdout, stderr)
	case "completion":
		err = runCompletion(rest, stdout)
	case "version", "--version", "-version":
		err = runVersion(rest, stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "strata: unknown command %q\nUsage: strata %s ...\nRun \"strata --help\" for the commands.\n",
			cmd, strings.Join([]string{"serve", "topics", "groups", "dlq", "cluster", "acls", "users", "produce", "consume", "loadgen", "plan", "version", "completion"}, "|"))
		return 1
	}
	return exitCode(cmd, err, stderr)
}
