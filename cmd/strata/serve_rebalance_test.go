package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/internal/config"
)

func TestRebalanceConfig(t *testing.T) {
	rb := config.Defaults()
	props := map[string]string{
		"auto.leader.rebalance.enable":            "false",
		"leader.imbalance.check.interval.seconds": "60",
		"leader.imbalance.per.broker.percentage":  "0",
		"broker.rack":                             "r1",
	}
	if err := rb.Apply(props); err != nil {
		t.Fatal(err)
	}
	if len(rb.Unknown) != 0 || rb.Rack != "r1" {
		t.Fatalf("unknown %v, rack %q", rb.Unknown, rb.Rack)
	}
	var c controller.Config
	applyRebalance(rb, &c)
	if !c.DisableAutoLeaderRebalance || c.LeaderImbalanceCheckInterval != time.Minute || c.LeaderImbalancePerBrokerPercentage != -1 {
		t.Fatalf("from the file: %+v", c)
	}

	// Flags win over the file; flags not given leave the file's values.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := addKeyFlags(fs)
	if err := fs.Parse([]string{"--auto-leader-rebalance=true", "--leader-imbalance-per-broker-percentage", "25"}); err != nil {
		t.Fatal(err)
	}
	if err := applyKeyFlags(&rb, f); err != nil {
		t.Fatal(err)
	}
	c = controller.Config{}
	applyRebalance(rb, &c)
	if c.DisableAutoLeaderRebalance || c.LeaderImbalanceCheckInterval != time.Minute || c.LeaderImbalancePerBrokerPercentage != 25 {
		t.Fatalf("after flags: %+v", c)
	}

	for _, bad := range []map[string]string{
		{"auto.leader.rebalance.enable": "maybe"},
		{"leader.imbalance.check.interval.seconds": "0"},
		{"leader.imbalance.per.broker.percentage": "101"},
	} {
		r := config.Defaults()
		if err := r.Apply(bad); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f = addKeyFlags(fs)
	if err := fs.Parse([]string{"--leader-imbalance-check-interval-seconds=0"}); err != nil {
		t.Fatal(err)
	}
	r := config.Defaults()
	if err := applyKeyFlags(&r, f); err == nil {
		t.Fatal("--leader-imbalance-check-interval-seconds=0 accepted")
	}

	// The defaults are the controller's.
	c = controller.Config{}
	applyRebalance(config.Defaults(), &c)
	if c.DisableAutoLeaderRebalance || c.LeaderImbalanceCheckInterval != controller.DefaultLeaderImbalanceCheckIntervalMs*time.Millisecond ||
		c.LeaderImbalancePerBrokerPercentage != controller.DefaultLeaderImbalancePerBrokerPct {
		t.Fatalf("defaults: %+v", c)
	}
}
