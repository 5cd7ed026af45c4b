package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/stratalog/strata/controller"
)

// rebalanceConfig is the automatic preferred-leader rebalance of the
// controller (Kafka's keys, read from the properties file and overridden by
// the serve flags of the same meaning):
//
//	auto.leader.rebalance.enable             --auto-leader-rebalance (default true)
//	leader.imbalance.check.interval.seconds  --leader-imbalance-check-interval-seconds (300)
//	leader.imbalance.per.broker.percentage   --leader-imbalance-per-broker-percentage (10)
type rebalanceConfig struct {
	enable      bool
	intervalSec int64
	percentage  int
}

func defaultRebalance() rebalanceConfig {
	return rebalanceConfig{
		enable:      true,
		intervalSec: controller.DefaultLeaderImbalanceCheckIntervalMs / 1000,
		percentage:  controller.DefaultLeaderImbalancePerBrokerPct,
	}
}

// rebalanceFlags registers the serve flags; apply them with setFlags after
// parsing.
type rebalanceFlags struct {
	enable      *bool
	intervalSec *int64
	percentage  *int
}

func addRebalanceFlags(fs *flag.FlagSet) rebalanceFlags {
	d := defaultRebalance()
	return rebalanceFlags{
		enable: fs.Bool("auto-leader-rebalance", d.enable,
			"move leaderships back to preferred replicas automatically (auto.leader.rebalance.enable)"),
		intervalSec: fs.Int64("leader-imbalance-check-interval-seconds", d.intervalSec,
			"how often the controller checks the leader imbalance (leader.imbalance.check.interval.seconds)"),
		percentage: fs.Int("leader-imbalance-per-broker-percentage", d.percentage,
			"leader imbalance allowed per broker before a rebalance, in percent (leader.imbalance.per.broker.percentage)"),
	}
}

// takeProps applies the rebalance keys of a properties file and removes
// them from props (so they are not reported as unknown).
func (r *rebalanceConfig) takeProps(props map[string]string) error {
	if v, ok := props["auto.leader.rebalance.enable"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("auto.leader.rebalance.enable=%q: must be true or false", v)
		}
		r.enable = b
		delete(props, "auto.leader.rebalance.enable")
	}
	if v, ok := props["leader.imbalance.check.interval.seconds"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 1<<31 {
			return fmt.Errorf("leader.imbalance.check.interval.seconds=%q: must be an integer >= 1", v)
		}
		r.intervalSec = n
		delete(props, "leader.imbalance.check.interval.seconds")
	}
	if v, ok := props["leader.imbalance.per.broker.percentage"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return fmt.Errorf("leader.imbalance.per.broker.percentage=%q: must be an integer in [0,100]", v)
		}
		r.percentage = n
		delete(props, "leader.imbalance.per.broker.percentage")
	}
	return nil
}

// setFlags applies the flags given on the command line (they win over the
// properties file).
func (r *rebalanceConfig) setFlags(fs *flag.FlagSet, f rebalanceFlags) error {
	var err error
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "auto-leader-rebalance":
			r.enable = *f.enable
		case "leader-imbalance-check-interval-seconds":
			if *f.intervalSec < 1 {
				err = fmt.Errorf("--leader-imbalance-check-interval-seconds %d: must be >= 1", *f.intervalSec)
			}
			r.intervalSec = *f.intervalSec
		case "leader-imbalance-per-broker-percentage":
			if *f.percentage < 0 || *f.percentage > 100 {
				err = fmt.Errorf("--leader-imbalance-per-broker-percentage %d: must be in [0,100]", *f.percentage)
			}
			r.percentage = *f.percentage
		}
	})
	return err
}

// apply sets the controller's rebalance fields.
func (r rebalanceConfig) apply(c *controller.Config) {
	c.DisableAutoLeaderRebalance = !r.enable
	c.LeaderImbalanceCheckInterval = time.Duration(r.intervalSec) * time.Second
	c.LeaderImbalancePerBrokerPercentage = r.percentage
	if r.percentage == 0 {
		c.LeaderImbalancePerBrokerPercentage = -1 // the controller's "0", not its default
	}
}
