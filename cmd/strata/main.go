// Command strata is the one Strata binary: a Kafka-compatible broker
// (`strata serve`) and, as later issues land, its load generator and
// capacity planner.
package main

import (
	"fmt"
	"os"
)

const usage = `strata — a Kafka-compatible, replicated, partitioned commit log

Usage:
  strata serve [--listen host:port] [--data-dir DIR] [--node-id N] [--config FILE]
  strata loadgen (--brokers host:port,... | --spawn N) [--rate R] [--duration D] [--json F] [--report F.html] ...
  strata topics create|list|describe|delete|alter-config ... --brokers host:port
  strata groups list|describe|reset-offsets ... --brokers host:port
  strata plan  [--preset reference] [--rate N --peak-rate N ...] [--calibrate result.json] [--json FILE]

Run "strata serve --help" for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = runServe(os.Args[2:])
	case "loadgen":
		err = runLoadgen(os.Args[2:])
	case "plan":
		err = runPlan(os.Args[2:])
	case "topics":
		err = runTopics(os.Args[2:])
	case "groups":
		err = runGroups(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "strata: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "strata %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
