package main

import (
	"errors"
	"flag"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// parseInterspersed parses fs over args, accepting flags before, between
// and after positional arguments, and returns the positional ones.
// --brokers (*brokers, read after parsing) is required.
func parseInterspersed(fs *flag.FlagSet, args []string, brokers *string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if *brokers == "" {
		return nil, errors.New("--brokers is required")
	}
	return pos, nil
}

// splitSeeds turns "--brokers a,b, c" into its non-empty addresses.
func splitSeeds(brokers string) []string {
	var seeds []string
	for _, s := range strings.Split(brokers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// adminClient connects a kadm client (and its kgo client, to close) to
// the seed brokers.
func adminClient(seeds []string, timeout time.Duration) (*kadm.Client, *kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestTimeoutOverhead(timeout))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}
