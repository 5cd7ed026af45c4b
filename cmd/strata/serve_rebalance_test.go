package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stratalog/strata/controller"
)

func TestRebalanceConfig(t *testing.T) {
	rb := defaultRebalance()
	props := map[string]string{
		"auto.leader.rebalance.enable":            "false",
		"leader.imbalance.check.interval.seconds": "60",
		"leader.imbalance.per.broker.percentage":  "0",
		"broker.rack":                             "r1",
	}
	if err := rb.takeProps(props); err != nil {
		t.Fatal(err)
	}
	if len(props) != 1 || props["broker.rack"] != "r1" {
		t.Fatalf("props left %v, want only broker.rack", props)
	}
	var c controller.Config
	rb.apply(&c)
	if !c.DisableAutoLeaderRebalance || c.LeaderImbalanceCheckInterval != time.Minute || c.LeaderImbalancePerBrokerPercentage != -1 {
		t.Fatalf("from the file: %+v", c)
	}

	// Flags win over the file; flags not given leave the file's values.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := addRebalanceFlags(fs)
	if err := fs.Parse([]string{"--auto-leader-rebalance=true", "--leader-imbalance-per-broker-percentage", "25"}); err != nil {
		t.Fatal(err)
	}
	if err := rb.setFlags(fs, f); err != nil {
		t.Fatal(err)
	}
	c = controller.Config{}
	rb.apply(&c)
	if c.DisableAutoLeaderRebalance || c.LeaderImbalanceCheckInterval != time.Minute || c.LeaderImbalancePerBrokerPercentage != 25 {
		t.Fatalf("after flags: %+v", c)
	}

	for _, bad := range []map[string]string{
		{"auto.leader.rebalance.enable": "maybe"},
		{"leader.imbalance.check.interval.seconds": "0"},
		{"leader.imbalance.per.broker.percentage": "101"},
	} {
		r := defaultRebalance()
		if err := r.takeProps(bad); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f = addRebalanceFlags(fs)
	if err := fs.Parse([]string{"--leader-imbalance-check-interval-seconds=0"}); err != nil {
		t.Fatal(err)
	}
	r := defaultRebalance()
	if err := r.setFlags(fs, f); err == nil {
		t.Fatal("--leader-imbalance-check-interval-seconds=0 accepted")
	}
}
