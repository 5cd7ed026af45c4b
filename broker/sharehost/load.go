package sharehost

// Loading a share-partition in a cluster without the host's lock (issue
// 24). A broker that becomes a partition's leader reads the
// share-partition's state (and its group's configs) from its replica of
// __share_group_state, or from the state partition's leader
// (cluster.go, scanState): a scan of a whole state partition, maybe a
// network read of up to readTimeout. That read runs outside the host's
// lock, in a goroutine of its own (one per share-partition and leader
// epoch, however many requests wait for it); only the install of its
// result takes the lock, so the share-partitions already loaded keep
// serving ShareFetch and ShareAcknowledge while another one loads.
//
// The handlers call Load before they take the lock: it starts the loads
// their partitions need and waits for them (without the lock), and
// Partition, under the lock, installs the result. A Partition that finds
// no result for the leader epoch it leads at (the waiting fetches' retry,
// a leadership that moved between Load and Lock) starts the load and
// answers LEADER_NOT_AVAILABLE, which clients retry; it never reads under
// the lock. The offset admin APIs (Existing, Reset) call Load as well but
// still read under the lock when nothing was loaded for them
// (partition(..., sync)); ShareGroupDescribe, the offset admin APIs and
// DeleteGroups read the replicas' keys of their groups before the lock
// (ReplicaKeys, cluster.go).

import (
	"encoding/json"

	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kerr"
)

// loaded is what a load read: a share-partition's state and its group's
// configs as __share_group_state had them at the leader epoch epoch.
type loaded struct {
	epoch    int32
	err      error // the state partition could not be read
	state    share.State
	found    bool   // state holds the last snapshot
	cfg      []byte // the group's configs record (nil: a tombstone)
	cfgFound bool
	cfgGen   uint64 // the group's config generation when the read began
}

// loading is a load under way.
type loading struct {
	epoch int32
	stale bool // the state was deleted meanwhile: the result is dropped
	done  chan struct{}
}

// Load reads the state of the share-partitions in keys that this broker
// leads and has not loaded at its leader epoch, without the host's lock,
// and returns once each read ended (or the host closes); the handlers
// call it before Lock, so that Partition then installs the result under
// the lock without reading. On a single broker it does nothing.
func (h *Host) Load(keys []Key) {
	if h.cluster == nil || h.err != nil || len(keys) == 0 {
		return
	}
	var waits []*loading
	h.mu.Lock()
	for _, k := range keys {
		t := h.eng.TopicByID(k.TopicID)
		if t == nil || t.Deleted() {
			continue
		}
		epoch, ok := h.cluster.Leads(t, k.Part)
		if !ok {
			continue
		}
		if sp := h.parts[k]; sp != nil && sp.epoch == epoch {
			continue
		}
		if ld, ok := h.loaded[k]; ok && ld.epoch == epoch && ld.err == nil {
			continue
		}
		if ld := h.startLoad(k, epoch); ld != nil {
			waits = append(waits, ld)
		}
	}
	h.mu.Unlock()
	for _, ld := range waits {
		select {
		case <-ld.done:
		case <-h.ctx.Done():
			return
		}
	}
}

// startLoad starts reading share-partition k's state for leader epoch
// epoch, or returns the read of it under way (lock held); nil once the
// host is closing.
func (h *Host) startLoad(k Key, epoch int32) *loading {
	if ld := h.loading[k]; ld != nil && ld.epoch == epoch && !ld.stale {
		return ld
	}
	if h.closing {
		return nil
	}
	if h.loading == nil {
		h.loading = map[Key]*loading{}
	}
	ld := &loading{epoch: epoch, done: make(chan struct{})}
	h.loading[k] = ld
	gen := h.cfgGen[k.Group]
	delete(h.loaded, k) // an older epoch's, or a failed read
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		res := h.read(k) // without the lock
		res.epoch, res.cfgGen = epoch, gen
		h.mu.Lock()
		if h.loading[k] == ld {
			delete(h.loading, k)
		}
		keep := !ld.stale && !h.closing
		if keep {
			if h.loaded == nil {
				h.loaded = map[Key]loaded{}
			}
			h.loaded[k] = res
		}
		close(ld.done)
		archiving := keep && res.err == nil && res.found && hasArchiving(res.state)
		if archiving {
			// ARCHIVING records: installed now, so their dead letters
			// are written without waiting for a consumer (as
			// restoreArchiving does at start).
			if t := h.eng.TopicByID(k.TopicID); t != nil && !t.Deleted() {
				var d Durable
				h.Partition(k.Group, t, k.Part, &d)
			}
		}
		waiting := len(h.waiting) > 0
		h.mu.Unlock()
		if waiting {
			h.shareKick() // a waiting fetch may find its share-partition now
		}
	}()
	return ld
}

// read reads share-partition k's state and its group's configs (no lock:
// loadState and loadLocal touch no field the lock guards).
func (h *Host) read(k Key) loaded {
	var res loaded
	res.state, res.found, res.err = h.loadState(shareStateKey(k))
	if res.err != nil {
		return res
	}
	res.cfg, res.cfgFound, res.err = h.loadLocal(shareConfigKey(k.Group))
	return res
}

// install puts share-partition k's loaded state for epoch into stored and
// its group's configs into configs (lock held): 0, or
// LEADER_NOT_AVAILABLE when nothing was read for epoch (the read is
// started, unless sync: then it is done here, under the lock) or the read
// failed (the share-partition is not started over from the reset point:
// clients retry).
func (h *Host) install(k Key, epoch int32, sync bool) int16 {
	ld, ok := h.loaded[k]
	if !ok || ld.epoch != epoch {
		if !sync {
			h.startLoad(k, epoch)
			return kerr.LeaderNotAvailable.Code
		}
		ld = h.read(k)
		ld.epoch, ld.cfgGen = epoch, h.cfgGen[k.Group]
	}
	delete(h.loaded, k)
	if ld.err != nil {
		return kerr.LeaderNotAvailable.Code
	}
	delete(h.stored, k)
	if ld.found {
		h.stored[k] = ld.state
	}
	if ld.cfgFound && ld.cfgGen == h.cfgGen[k.Group] {
		h.setConfigs(k.Group, ld.cfg)
	}
	return 0
}

// setConfigs installs group's configs record v (nil: a tombstone) and
// starts a new config generation of the group (lock held): a load that
// read the configs before is not installed over them.
func (h *Host) setConfigs(group string, v []byte) {
	h.bumpConfigs(group)
	if v == nil {
		delete(h.configs, group)
		return
	}
	cfgs := map[string]string{}
	if err := json.Unmarshal(v, &cfgs); err != nil {
		h.log.Error("share: unreadable group configs skipped", "group", group, "err", err)
		return
	}
	h.configs[group] = cfgs
}

// bumpConfigs starts a new config generation of group (lock held).
func (h *Host) bumpConfigs(group string) {
	if h.cfgGen == nil {
		h.cfgGen = map[string]uint64{}
	}
	h.cfgGen[group]++
}

// forgetLoad drops what was read of share-partition k and what is being
// read (lock held): its state was deleted, the read may predate that.
func (h *Host) forgetLoad(k Key) {
	delete(h.loaded, k)
	if ld := h.loading[k]; ld != nil {
		ld.stale = true
		delete(h.loading, k)
	}
}

// pruneLoaded drops the reads no Partition installed (lock held, the
// tick): of an epoch this broker no longer leads at, or of a
// share-partition loaded since.
func (h *Host) pruneLoaded() {
	for k, ld := range h.loaded {
		t := h.eng.TopicByID(k.TopicID)
		if t != nil && !t.Deleted() {
			if epoch, ok := h.cluster.Leads(t, k.Part); ok && epoch == ld.epoch && h.parts[k] == nil {
				continue
			}
		}
		delete(h.loaded, k)
	}
}

func hasArchiving(s share.State) bool {
	for _, b := range s.Batches {
		if b.State == share.Archiving {
			return true
		}
	}
	return false
}

// KeysOf returns the keys of group's share-partitions on tps, for Load.
func KeysOf(group string, tps []share.TopicPartition) []Key {
	out := make([]Key, 0, len(tps))
	for _, tp := range tps {
		out = append(out, Key{Group: group, TopicID: tp.TopicID, Part: tp.Partition})
	}
	return out
}

// SessionKeys returns the share-partitions of a share session's
// partitions (takes the lock), for Load.
func (h *Host) SessionKeys(key share.SessionKey) []Key {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sessions.Get(key)
	if s == nil {
		return nil
	}
	return KeysOf(key.Group, s.Order)
}
