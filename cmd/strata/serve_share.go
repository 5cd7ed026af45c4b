package main

import (
	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/server"
	"github.com/stratalog/strata/share"
)

// shareConfig maps the share-group broker keys (group.share.*,
// share.coordinator.state.topic.num.partitions) to the server's
// ShareConfig (issue 24).
func shareConfig(g config.Groups) server.ShareConfig {
	return server.ShareConfig{
		Groups: share.GroupConfig{
			SessionTimeoutMs:    g.ShareSessionTimeoutMs,
			HeartbeatIntervalMs: g.ShareHeartbeatIntervalMs,
			MaxSize:             int(g.ShareMaxSize),
		},
		Partition: share.Config{
			LockDurationMs:     g.ShareLockDurationMs,
			DeliveryCountLimit: g.ShareDeliveryCountLimit,
			MaxRecordLocks:     int(g.ShareMaxRecordLocks),
		},
		StatePartitions: g.ShareStatePartitions,
		// Dead-letter topics (KIP-1191).
		DeadLetterTopicPrefix: &g.DeadLetterTopicPrefix,
		DeadLetterAutoCreate:  g.DeadLetterAutoCreate,
	}
}
