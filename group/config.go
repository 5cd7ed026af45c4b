package group

import (
	"crypto/rand"
	"fmt"
)

// Config holds the coordinator's settings (Kafka broker keys in comments).
// Zero fields take Kafka's defaults (see withDefaults).
type Config struct {
	MinSessionTimeoutMs     int32 // group.min.session.timeout.ms (6000)
	MaxSessionTimeoutMs     int32 // group.max.session.timeout.ms (1800000)
	InitialRebalanceDelayMs int32 // group.initial.rebalance.delay.ms (3000); negative = 0
	MaxSize                 int32 // group.max.size (0 = unlimited, Kafka's Int.MaxValue)
	OffsetMetadataMaxBytes  int32 // offset.metadata.max.bytes (4096)
	OffsetsPartitions       int32 // offsets.topic.num.partitions (50)
	// OffsetsRetentionMs is offsets.retention.minutes in ms (7 days): the
	// committed offsets of a group that has been Empty this long are
	// deleted, and so are a live consumer group's offsets of topics no
	// member subscribes to, this long after they were committed (Kafka
	// 2.1+, KIP-211).
	OffsetsRetentionMs int64
	// NewMemberJoinTimeoutMs drops a new member that never finishes its
	// first join (Kafka's fixed 5 minutes).
	NewMemberJoinTimeoutMs int32
	// ConsumerSessionTimeoutMs is group.consumer.session.timeout.ms
	// (45000) and ConsumerHeartbeatIntervalMs
	// group.consumer.heartbeat.interval.ms (5000): KIP-848 groups.
	ConsumerSessionTimeoutMs    int32
	ConsumerHeartbeatIntervalMs int32
	// TickMs is how often the coordinator's one timer checks session and
	// rebalance deadlines (100 ms). Deadlines fire at most this late.
	TickMs int32
	// NewMemberID returns a fresh member id for a client id. Default:
	// "<clientID>-<random UUID>", as Kafka.
	NewMemberID func(clientID string) string
}

// Default values, Kafka's.
const (
	DefaultMinSessionTimeoutMs     = 6000
	DefaultMaxSessionTimeoutMs     = 1800000
	DefaultInitialRebalanceDelayMs = 3000
	DefaultOffsetMetadataMaxBytes  = 4096
	DefaultNewMemberJoinTimeoutMs  = 300000
	DefaultTickMs                  = 100
	DefaultOffsetsRetentionMs      = 7 * 24 * 60 * 60 * 1000
)

func (c Config) withDefaults() Config {
	if c.MinSessionTimeoutMs <= 0 {
		c.MinSessionTimeoutMs = DefaultMinSessionTimeoutMs
	}
	if c.MaxSessionTimeoutMs <= 0 {
		c.MaxSessionTimeoutMs = DefaultMaxSessionTimeoutMs
	}
	if c.InitialRebalanceDelayMs == 0 {
		c.InitialRebalanceDelayMs = DefaultInitialRebalanceDelayMs
	} else if c.InitialRebalanceDelayMs < 0 {
		c.InitialRebalanceDelayMs = 0
	}
	if c.OffsetMetadataMaxBytes <= 0 {
		c.OffsetMetadataMaxBytes = DefaultOffsetMetadataMaxBytes
	}
	if c.OffsetsPartitions <= 0 {
		c.OffsetsPartitions = DefaultOffsetsPartitions
	}
	if c.NewMemberJoinTimeoutMs <= 0 {
		c.NewMemberJoinTimeoutMs = DefaultNewMemberJoinTimeoutMs
	}
	if c.OffsetsRetentionMs <= 0 {
		c.OffsetsRetentionMs = DefaultOffsetsRetentionMs
	}
	if c.ConsumerSessionTimeoutMs <= 0 {
		c.ConsumerSessionTimeoutMs = 45000
	}
	if c.ConsumerHeartbeatIntervalMs <= 0 {
		c.ConsumerHeartbeatIntervalMs = 5000
	}
	if c.TickMs <= 0 {
		c.TickMs = DefaultTickMs
	}
	return c
}

func (c *Config) newMemberID(clientID string) string {
	if c.NewMemberID != nil {
		return c.NewMemberID(clientID)
	}
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", clientID, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
