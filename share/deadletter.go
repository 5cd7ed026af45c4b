package share

// Names of KIP-1191's dead-letter topics, shared by the broker's share-group
// dead-letter writer (broker/sharehost/dlq.go), `strata dlq`
// (cmd/strata/dlq.go) and the embedded API (engine/deadletter.go), so that
// a dead letter written by one is read the same way by the others.

// The context headers of a dead letter (KIP-1191). Every header of a dead
// letter whose key starts with DeadLetterHeaderPrefix is one of them; a
// re-drive drops them all.
const (
	// DeadLetterHeaderPrefix starts every context header's key.
	DeadLetterHeaderPrefix = "__dlq.errors."
	// DeadLetterHeaderTopic is the source topic.
	DeadLetterHeaderTopic = "__dlq.errors.topic"
	// DeadLetterHeaderPartition is the source partition, in decimal.
	DeadLetterHeaderPartition = "__dlq.errors.partition"
	// DeadLetterHeaderOffset is the source offset, in decimal.
	DeadLetterHeaderOffset = "__dlq.errors.offset"
	// DeadLetterHeaderGroup is the group that dead-lettered the record.
	DeadLetterHeaderGroup = "__dlq.errors.group"
	// DeadLetterHeaderDeliveryCount is the record's delivery count, in
	// decimal (share groups only: a consumer group counts no deliveries).
	DeadLetterHeaderDeliveryCount = "__dlq.errors.delivery.count"
	// DeadLetterHeaderMessage is why the record was dead-lettered.
	DeadLetterHeaderMessage = "__dlq.errors.message"
)

const (
	// TopicConfigDeadLetterEnable is the topic config
	// errors.deadletterqueue.group.enable: a topic may be a dead-letter
	// topic only with it set to true.
	TopicConfigDeadLetterEnable = "errors.deadletterqueue.group.enable"
	// BrokerConfigDeadLetterTopicPrefix is the broker config
	// errors.deadletterqueue.topic.name.prefix: a dead-letter topic's name
	// must start with it (empty: any name).
	BrokerConfigDeadLetterTopicPrefix = "errors.deadletterqueue.topic.name.prefix"
	// DefaultDeadLetterTopicPrefix is errors.deadletterqueue.topic.name.prefix's
	// default.
	DefaultDeadLetterTopicPrefix = "dlq."
)
