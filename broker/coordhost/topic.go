package coordhost

import (
	"maps"
	"strconv"
)

// minInsyncKey is Kafka's topic config for the replicas a write needs.
const minInsyncKey = "min.insync.replicas"

// Topic describes a coordinator's internal topic.
type Topic struct {
	Name       string
	Partitions int32 // what the coordinator shards by (the existing topic's count, if any)
	// Replication is the replication factor wanted; a proposal caps it at
	// the live brokers (at least 1).
	Replication int16
	// MinInsync, when positive, sets min.insync.replicas to
	// min(MinInsync, the proposal's replication factor).
	MinInsync int16
	// Configs are the topic's configs (cleanup.policy=compact, ...).
	Configs map[string]string
}

// Spec is one proposal of the internal topic.
type Spec struct {
	Name        string
	Partitions  int32
	Replication int16
	Configs     map[string]string // a copy: the Creator may keep it
}

// Spec returns the proposal of t for a cluster with live unfenced brokers.
func (t Topic) Spec(live int) Spec {
	repl := int16(min(int(t.Replication), max(1, live)))
	if t.Replication <= 0 {
		repl = 1
	}
	cfgs := maps.Clone(t.Configs)
	if cfgs == nil {
		cfgs = map[string]string{}
	}
	if t.MinInsync > 0 {
		cfgs[minInsyncKey] = strconv.Itoa(int(min(t.MinInsync, repl)))
	}
	return Spec{Name: t.Name, Partitions: t.Partitions, Replication: repl, Configs: cfgs}
}
