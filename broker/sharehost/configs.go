package sharehost

// Share-group configs (GROUP resources of IncrementalAlterConfigs and
// DescribeConfigs): their checks, and the overrides kept per group in
// __share_group_state.

import (
	"encoding/json"
	"maps"

	"github.com/stratalog/strata/share"
)

// CheckGroupConfig checks a value of a group config: known false for a
// config this broker does not keep.
func CheckGroupConfig(name, value string) (known bool, err error) {
	check, ok := shareGroupConfigKeys[name]
	if !ok {
		return false, nil
	}
	return true, check(value)
}

// IsGroupConfig reports whether name is a group config this broker keeps.
func IsGroupConfig(name string) bool {
	_, ok := shareGroupConfigKeys[name]
	return ok
}

// ConfigOp sets (Value non-nil) or deletes (nil) one group config.
type ConfigOp struct {
	Name  string
	Value *string
}

// SetGroupConfigs applies ops to group's configs and persists them in the
// share state topic, returning once that is durable (the error is a
// storage failure). A share-partition that exists keeps its start offset:
// share.auto.offset.reset applies to share-partitions created afterwards,
// as in Kafka; a lock duration applies to the group's acquisitions from
// now on (Partition.SetConfig).
func (h *Host) SetGroupConfigs(group string, ops []ConfigOp) error {
	st := h
	st.mu.Lock()
	cfgs := maps.Clone(st.configs[group])
	if cfgs == nil {
		cfgs = map[string]string{}
	}
	for _, op := range ops {
		if op.Value != nil {
			cfgs[op.Name] = *op.Value
		} else {
			delete(cfgs, op.Name)
		}
	}
	v, err := json.Marshal(cfgs)
	var w DurableAt
	if err == nil {
		w, err = h.appendShareRecord(shareConfigKey(group), v)
	}
	d := Durable{}
	if err == nil {
		d = append(d, w)
		st.configs[group] = cfgs
		h.bumpConfigs(group) // a load's older read is not installed over them
		for k, sp := range st.parts {
			if k.Group != group {
				continue
			}
			if err = h.Apply(k, sp, sp.P.SetConfig(h.PartConfig(group)), &d); err != nil {
				break
			}
			// A changed dead-letter topic: the ARCHIVING records are
			// tried again at once.
			sp.dlqWant, sp.dlqRetryAt, sp.dlqBackoff = true, 0, 0
		}
		h.dlqKick()
	}
	st.mu.Unlock()
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	h.WaitDurable(d, func(err error) { done <- err })
	return <-done
}

// GroupConfigs returns a copy of group's config overrides.
func (h *Host) GroupConfigs(group string) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.configs[group])
}

// DefaultLockDurationMs is the broker's group.share.record.lock.duration.ms.
func (h *Host) DefaultLockDurationMs() int64 {
	if ms := h.cfg.Partition.LockDurationMs; ms > 0 {
		return ms
	}
	return share.DefaultLockDurationMs
}

// DefaultDeliveryCountLimit is the broker's group.share.delivery.count.limit.
func (h *Host) DefaultDeliveryCountLimit() int16 {
	if n := h.cfg.Partition.DeliveryCountLimit; n > 0 {
		return n
	}
	return share.DefaultDeliveryCountLimit
}
