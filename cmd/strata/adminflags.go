package main

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
