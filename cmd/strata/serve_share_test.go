package main

import (
	"testing"

	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/server"
	"github.com/stratalog/strata/share"
)

// The table's share-group defaults are the packages' (Kafka's).
func TestShareDefaultsAreThePackages(t *testing.T) {
	c := shareConfig(config.Defaults().Groups)
	want := server.ShareConfig{
		Groups: share.GroupConfig{SessionTimeoutMs: share.DefaultSessionTimeoutMs, HeartbeatIntervalMs: share.DefaultHeartbeatIntervalMs,
			MaxSize: share.DefaultMaxGroupSize},
		Partition: share.Config{LockDurationMs: share.DefaultLockDurationMs, DeliveryCountLimit: share.DefaultDeliveryCountLimit,
			MaxRecordLocks: share.DefaultMaxRecordLocks},
		StatePartitions: server.DefaultShareStatePartitions,
	}
	if p := c.DeadLetterTopicPrefix; p == nil || *p != server.DefaultDeadLetterTopicPrefix {
		t.Errorf("errors.deadletterqueue.topic.name.prefix from the defaults: %v, want %q", p, server.DefaultDeadLetterTopicPrefix)
	}
	c.DeadLetterTopicPrefix = nil
	if c != want {
		t.Fatalf("share config from the defaults %+v, want %+v", c, want)
	}
}
