package controller

// Dynamic broker configs (issue 20): the BROKER resources' configs that
// AlterConfigs and IncrementalAlterConfigs change at runtime (Kafka's
// ConfigRecord of resource type BROKER), kept in the replicated State so
// every broker applies the same: the cluster-wide default (resource name
// "", DefaultBrokerConfigs here) and each broker's own (its id). The FSM
// keeps names and values as given; the proposing broker validates them
// (internal/configkeys) and each broker applies what concerns it.
//
//	AlterBrokerConfigs(19): broker int32, replace bool, set (map), delete ([]string)
//
// The State encodes them after the offline-directory list (version 5): a count,
// then per entity ascending by id the id and its map.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TypeAlterBrokerConfigs is AlterBrokerConfigs' command type.
const TypeAlterBrokerConfigs CommandType = 19

// DefaultBrokerConfigs is the entity of the cluster-wide default broker
// configs (a BROKER resource named "").
const DefaultBrokerConfigs int32 = -1

// MaxBrokerConfigEntities bounds the entities (the default and brokers)
// with dynamic configs.
const MaxBrokerConfigEntities = 1 << 16

// AlterBrokerConfigs changes the dynamic configs of Broker (an id, or
// DefaultBrokerConfigs): with Replace they become Set (Kafka's
// AlterConfigs); otherwise the keys of Set are set and those of Delete
// removed. Result.Code INVALID_REQUEST refuses a malformed command.
type AlterBrokerConfigs struct {
	Broker  int32
	Replace bool
	Set     map[string]string
	Delete  []string
}

// Type implements Command.
func (AlterBrokerConfigs) Type() CommandType { return TypeAlterBrokerConfigs }

func (c AlterBrokerConfigs) appendBody(b []byte) []byte {
	b = appendInt(b, int64(c.Broker))
	b = appendBool(b, c.Replace)
	b = appendStringMap(b, c.Set)
	return appendStrings(b, c.Delete)
}

func readAlterBrokerConfigs(r *reader) AlterBrokerConfigs {
	return AlterBrokerConfigs{Broker: r.int32(), Replace: r.bool(), Set: r.stringMap(), Delete: r.strings()}
}

// decodeBrokerConfigsCommand decodes the body of AlterBrokerConfigs.
func decodeBrokerConfigsCommand(t CommandType, r *reader) (Command, bool) {
	if t != TypeAlterBrokerConfigs {
		return nil, false
	}
	return readAlterBrokerConfigs(r), true
}

func (s *State) alterBrokerConfigs(c AlterBrokerConfigs) Result {
	if c.Broker < DefaultBrokerConfigs {
		return failed(kerr.InvalidRequest, "broker %d", c.Broker)
	}
	if !validConfigs(c.Set) {
		return failed(kerr.InvalidConfig, "configs")
	}
	for _, k := range c.Delete {
		if _, both := c.Set[k]; both || k == "" {
			return failed(kerr.InvalidRequest, "config %q both set and deleted, or empty", k)
		}
	}
	cur := s.brokerCfg[c.Broker]
	next := make(map[string]string, len(cur)+len(c.Set))
	if !c.Replace {
		for k, v := range cur {
			next[k] = v
		}
	}
	for k, v := range c.Set {
		next[k] = v
	}
	for _, k := range c.Delete {
		delete(next, k)
	}
	if len(next) > MaxConfigsPerTopic {
		return failed(kerr.InvalidConfig, "%d configs", len(next))
	}
	if len(next) == 0 {
		delete(s.brokerCfg, c.Broker)
		return Result{}
	}
	if _, ok := s.brokerCfg[c.Broker]; !ok && len(s.brokerCfg) >= MaxBrokerConfigEntities {
		return failed(kerr.InvalidRequest, "%d entities with broker configs", len(s.brokerCfg))
	}
	if s.brokerCfg == nil {
		s.brokerCfg = map[int32]map[string]string{}
	}
	s.brokerCfg[c.Broker] = next
	return Result{}
}

// BrokerConfigs returns a copy of the dynamic configs of broker id, or of
// the cluster-wide default for DefaultBrokerConfigs (nil: none).
func (s *State) BrokerConfigs(id int32) map[string]string {
	m := s.brokerCfg[id]
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func cloneBrokerConfigs(m map[int32]map[string]string) map[int32]map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[int32]map[string]string, len(m))
	for id, cfg := range m {
		c := make(map[string]string, len(cfg))
		for k, v := range cfg {
			c[k] = v
		}
		out[id] = c
	}
	return out
}

// appendBrokerConfigs appends the version-5 part: the entities ascending.
func (s *State) appendBrokerConfigs(dst []byte) []byte {
	ids := make([]int32, 0, len(s.brokerCfg))
	for id := range s.brokerCfg {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	dst = appendCount(dst, len(ids))
	for _, id := range ids {
		dst = appendInt(dst, int64(id))
		dst = appendStringMap(dst, s.brokerCfg[id])
	}
	return dst
}

func (s *State) readBrokerConfigs(r *reader) {
	n := r.count(2)
	last := DefaultBrokerConfigs - 1
	for i := 0; i < n && r.err == nil; i++ {
		id, m := r.int32(), r.stringMap()
		if r.err != nil {
			return
		}
		if id <= last || len(m) == 0 || !validConfigs(m) {
			r.fail("broker configs not ascending, empty or invalid")
			return
		}
		last = id
		if s.brokerCfg == nil {
			s.brokerCfg = map[int32]map[string]string{}
		}
		s.brokerCfg[id] = m
	}
}
