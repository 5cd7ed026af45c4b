package coordhost

// Coordinator returns the node that coordinates key in view v: the leader
// of key's partition (Config.Partition over the view's partition count).
// ok is false when there is none to name yet: the topic is missing from v
// (its proposal is started, see Ensure) or the partition is outside the
// view's topic. Whether the node is alive is the caller's to check.
func (h *Host) Coordinator(v View, key string) (leader int32, ok bool) {
	name := h.cfg.Topic.Name
	n, exists := v.Partitions(name)
	if !exists {
		h.propose(v)
		return -1, false
	}
	p := h.cfg.Partition(key, n)
	if p < 0 || p >= n {
		return -1, false
	}
	return v.Leader(name, p), true
}

// Ensure reports whether the topic is in view v, and starts its proposal
// when it is not (as Kafka creates its internal topics on first use).
func (h *Host) Ensure(v View) bool {
	if _, exists := v.Partitions(h.cfg.Topic.Name); exists {
		return true
	}
	h.propose(v)
	return false
}

// propose asks the Creator for the topic, one proposal at a time; a
// request that finds one in flight does not wait for it (clients retry
// on COORDINATOR_NOT_AVAILABLE).
func (h *Host) propose(v View) {
	if h.cfg.Creator == nil || !h.creating.CompareAndSwap(false, true) {
		return
	}
	spec := h.cfg.Topic.Spec(v.LiveBrokers())
	h.cfg.Creator.CreateTopic(spec, func(err error) {
		h.creating.Store(false)
		if err != nil {
			h.log.Warn(h.cfg.Name+": creating "+spec.Name+" failed", "err", err)
		}
	})
}
