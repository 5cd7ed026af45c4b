package main

import (
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/internal/config"
)

// applyRebalance sets the controller's automatic preferred-leader
// rebalance from the broker's keys (internal/configkeys: Kafka's names,
// read from the properties file and overridden by the serve flags of the
// same meaning):
//
//	auto.leader.rebalance.enable             --auto-leader-rebalance (default true)
//	leader.imbalance.check.interval.seconds  --leader-imbalance-check-interval-seconds (300)
//	leader.imbalance.per.broker.percentage   --leader-imbalance-per-broker-percentage (10)
func applyRebalance(cfg config.Broker, c *controller.Config) {
	c.DisableAutoLeaderRebalance = !cfg.AutoLeaderRebalance
	c.LeaderImbalanceCheckInterval = time.Duration(cfg.LeaderImbalanceCheckIntervalSec) * time.Second
	c.LeaderImbalancePerBrokerPercentage = cfg.LeaderImbalancePerBrokerPct
	if cfg.LeaderImbalancePerBrokerPct == 0 {
		c.LeaderImbalancePerBrokerPercentage = -1 // the controller's "0", not its default
	}
}
