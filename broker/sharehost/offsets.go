package sharehost

// The share-group offset admin APIs' side of the host
// (DescribeShareGroupOffsets, AlterShareGroupOffsets,
// DeleteShareGroupOffsets): which share-partitions a group has, a
// share-partition that has state, a start offset reset and a forgotten
// share-partition.

import (
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kerr"
)

// GroupKeys returns the share-partitions of group with state, loaded or
// stored (lock held), in no order; in a cluster those in rk too (this
// broker's replicas of the state topic, ReplicaKeys).
func (h *Host) GroupKeys(group string, rk Replicas) []Key {
	var out []Key
	if h.cluster != nil {
		// The share-partitions led elsewhere too, as this broker's
		// replicas of __share_group_state have them.
		for k := range rk[group] {
			if _, live := h.parts[k]; !live {
				if _, stored := h.stored[k]; !stored {
					out = append(out, k)
				}
			}
		}
	}
	for k := range h.parts {
		if k.Group == group {
			out = append(out, k)
		}
	}
	for k := range h.stored {
		if _, live := h.parts[k]; !live && k.Group == group {
			out = append(out, k)
		}
	}
	return out
}

// Existing returns the share-partition of group on t's partition p when
// it has state (restoring it), nil otherwise (lock held). In a cluster, a
// partition this broker does not lead is read, not restored: its state
// as this broker's replica of __share_group_state has it (peek), for
// DescribeShareGroupOffsets on the group's coordinator.
func (h *Host) Existing(group string, t *engine.Topic, p int32, d *Durable) *Part {
	k := Key{Group: group, TopicID: t.ID(), Part: p}
	if h.cluster != nil {
		if _, ok := h.cluster.Leads(t, p); !ok {
			return h.peek(k, t)
		}
	}
	if _, ok := h.parts[k]; !ok {
		if _, ok := h.stored[k]; !ok {
			return nil
		}
	}
	sp, code := h.partition(group, t, p, d, true)
	if code != 0 {
		return nil
	}
	return sp
}

// Reset moves the start offset of group's share-partition on t's
// partition p to offset, creating it there when it has no state (lock
// held): 0, or the error code and message.
func (h *Host) Reset(group string, t *engine.Topic, p int32, offset int64, d *Durable) (int16, string) {
	switch {
	case t == nil || t.Partition(p) == nil:
		return kerr.UnknownTopicOrPartition.Code, ""
	case offset < 0:
		return kerr.InvalidRequest.Code, "the start offset is negative"
	}
	var epoch int32
	if h.cluster != nil {
		// In a cluster only the partition's leader owns its state.
		var ok bool
		if epoch, ok = h.cluster.Leads(t, p); !ok {
			return kerr.NotLeaderForPartition.Code, "this broker does not lead the partition (in a cluster its leader owns the share-partition)"
		}
	}
	k := Key{Group: group, TopicID: t.ID(), Part: p}
	sp := h.Existing(group, t, p, d)
	if sp == nil {
		sp = &Part{Log: t.Partition(p), Name: t.Name(), P: share.New(h.PartConfig(group), offset), epoch: epoch}
		h.parts[k] = sp
		w, err := h.persistPart(k, sp)
		if err != nil {
			return kerr.KafkaStorageError.Code, err.Error()
		}
		*d = append(*d, w)
		return 0, ""
	}
	ok, e := sp.P.ResetStart(offset)
	if !ok {
		return kerr.NonEmptyGroup.Code, "records of the share-partition are still acquired"
	}
	if err := h.Apply(k, sp, e, d); err != nil {
		return kerr.KafkaStorageError.Code, err.Error()
	}
	return 0, ""
}

// Forget deletes the state of share-partition k (a tombstone appended,
// added to d) if it has any (lock held). In a cluster the partition's
// leader calls it, and a share-partition it has not loaded may have state
// in __share_group_state: it is tombstoned without reading that under the
// lock (a tombstone of a key without state is one record of a compacted
// topic).
func (h *Host) Forget(k Key, d *Durable) error {
	_, live := h.parts[k]
	_, stored := h.stored[k]
	if !live && !stored && h.cluster == nil {
		return nil
	}
	w, err := h.appendShareRecord(shareStateKey(k), nil)
	if err != nil {
		return err
	}
	*d = append(*d, w)
	delete(h.parts, k)
	delete(h.stored, k)
	h.forgetLoad(k)
	return nil
}

// Lag is the records of sp from its start offset to the high watermark
// not yet acknowledged or archived.
func Lag(sp *Part) int64 {
	p, l := sp.P, sp.Log
	hw := l.HighWatermark()
	var lag int64
	for o := p.StartOffset(); o < min(p.EndOffset(), hw); o++ {
		if st, _, _ := p.Record(o); st != share.Acknowledged && st != share.Archived {
			lag++
		}
	}
	if hw > p.EndOffset() {
		lag += hw - max(p.EndOffset(), p.StartOffset())
	}
	return lag
}

// peek returns share-partition k as this broker's replica of its state
// partition has it, not kept (nil without state, or without a replica of
// t's partition for the lag).
func (h *Host) peek(k Key, t *engine.Topic) *Part {
	l := t.Partition(k.Part)
	if l == nil {
		return nil
	}
	state, found, err := h.loadState(shareStateKey(k))
	if err != nil || !found {
		return nil
	}
	pp, err := share.Restore(h.PartConfig(k.Group), state)
	if err != nil {
		return nil
	}
	return &Part{P: pp, Log: l, Name: t.Name()}
}
