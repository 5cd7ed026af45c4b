package group

// Transactional offset commits (TxnOffsetCommit, KIP-98/KIP-447).
//
// A producer in a transaction commits its consumer's offsets with
// TxnOffsetCommit: the offset records are appended to the group's
// __consumer_offsets partition as a transactional batch of that producer
// (TxnLog.AppendTxn), and held per producer id beside the group's committed
// offsets ("staged") until the transaction ends. When the transaction
// coordinator has the COMMIT or ABORT marker written to the partition, the
// server calls CompleteTxn: a commit makes every staged offset of the
// producer in that partition the committed offset, an abort drops them.
// Until then OffsetFetch answers the previously committed offset
// (HasPendingTxnOffsets tells an OffsetFetch with require_stable to answer
// UNSTABLE_OFFSET_COMMIT instead).
//
// Staging is two-phase, as in Kafka's GroupMetadata: the offsets are staged
// (not yet appended) when the append starts, so a marker that arrives
// while the append is in flight (a transaction aborted by its timeout)
// drops them; the append's success marks them appended (only appended
// offsets are applied by a commit marker), its failure removes them.
//
// Loading replays the same rules from the log: records of a transactional
// batch are staged under the batch's producer id and applied or dropped by
// that producer's control batch further on; those with no marker yet stay
// staged (the transaction coordinator resends the markers of transactions
// it had prepared, and aborts the open ones after their timeout).

import (
	"slices"

	"github.com/stratalog/strata/internal/kcode"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Marker is the outcome of a transaction marker (control) batch.
type Marker int8

// Marker values of LoadedRecord.
const (
	NoMarker     Marker = iota // a data record
	CommitMarker               // the COMMIT marker of ProducerID's transaction
	AbortMarker                // the ABORT marker
)

// LoadedRecord is one record of a __consumer_offsets partition with what
// its batch says about transactions.
type LoadedRecord struct {
	Key, Value    []byte
	ProducerID    int64 // the batch's producer id (-1: none)
	Transactional bool  // the batch is part of ProducerID's transaction
	Marker        Marker
}

// TxnLog is implemented by a Log that can also write transactional
// batches; the coordinator serves TxnOffsetCommit only over such a log,
// and loads partitions through LoadTxn instead of Log.Load.
type TxnLog interface {
	// AppendTxn is Log.Append for a transactional batch of producer
	// producerID/producerEpoch (no sequence numbers: the partition's
	// producer state checks the epoch). A *kerr.Error in done's error is
	// answered to the client as is (e.g. INVALID_PRODUCER_EPOCH).
	AppendTxn(p int32, producerID int64, producerEpoch int16, recs []Record, done func(error))
	// LoadTxn is Log.Load with the batch attributes and control markers;
	// it reads to the log end, as Kafka's coordinators do (a new leader
	// holds every committed record but may not know the high watermark
	// that covers them yet).
	LoadTxn(p int32, fn func(LoadedRecord) error) error
}

// txnCompletion is a marker reported while its shard was loading.
type txnCompletion struct {
	pid    int64
	commit bool
}

// txnOffset is one offset staged by a transaction.
type txnOffset struct {
	Offset
	appended bool // the record is in the log (only appended offsets are applied)
}

// TxnCommitRequest is a TxnOffsetCommit for one group.
type TxnCommitRequest struct {
	Group         string
	ProducerID    int64
	ProducerEpoch int16
	Generation    int32 // -1: not checked (v0-v2)
	MemberID      string
	InstanceID    string
	Offsets       []CommitOffset
}

// TxnCommit handles TxnOffsetCommit; done gets one code per offset,
// exactly once, once the records are durable. As in Kafka, the group is
// created if it does not exist, and a member id or generation given is
// checked (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID) but a
// rebalance in progress is not an error.
func (c *Coordinator) TxnCommit(req TxnCommitRequest, done func([]int16)) {
	codes := make([]int16, len(req.Offsets))
	all := func(code int16) {
		for i := range codes {
			codes[i] = code
		}
		done(codes)
	}
	tl, ok := c.log.(TxnLog)
	if !ok {
		all(kerr.UnsupportedVersion.Code)
		return
	}
	sh, g, code := c.lock(req.Group, true)
	if code != 0 {
		all(code)
		return
	}
	nowMs := c.nowMs()
	if code := g.checkTxnCommit(nowMs, req.Generation, req.MemberID, req.InstanceID); code != 0 {
		sh.mu.Unlock()
		all(code)
		return
	}
	recs := make([]Record, 0, len(req.Offsets))
	idx := make([]int, 0, len(req.Offsets))
	staged := g.txnStage(req.ProducerID)
	for i, o := range req.Offsets {
		if int32(len(o.Metadata)) > c.cfg.OffsetMetadataMaxBytes {
			codes[i] = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		v := Offset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimestampMs: nowMs}
		recs = append(recs, Record{Key: OffsetCommitKey(req.Group, o.TP.Topic, o.TP.Partition), Value: OffsetCommitValue(v)})
		idx = append(idx, i)
		staged[o.TP] = txnOffset{Offset: v}
	}
	if len(recs) == 0 {
		if len(staged) == 0 {
			delete(g.txnOffsets, req.ProducerID)
		}
		sh.mu.Unlock()
		done(codes)
		return
	}
	epoch := sh.epoch
	g.inflight++
	sh.mu.Unlock()
	tl.AppendTxn(sh.p, req.ProducerID, req.ProducerEpoch, recs, func(err error) {
		code := txnStoreErrCode(err)
		sh.mu.Lock()
		g.inflight--
		if sh.epoch == epoch && sh.groups[req.Group] == g {
			// The marker may have dropped the staged map meanwhile (an
			// abort by timeout): then there is nothing to mark.
			if m := g.txnOffsets[req.ProducerID]; m != nil {
				for _, i := range idx {
					tp := req.Offsets[i].TP
					if o, ok := m[tp]; ok {
						if code == 0 {
							o.appended = true
							m[tp] = o
						} else if !o.appended {
							delete(m, tp)
						}
					}
				}
				if len(m) == 0 {
					delete(g.txnOffsets, req.ProducerID)
				}
			}
		}
		sh.mu.Unlock()
		for _, i := range idx {
			codes[i] = code
		}
		done(codes)
	})
}

// txnStoreErrCode is storeErrCode, except that a producer's own errors
// (a fenced epoch) reach the client as they are (kcode.TxnStore).
func txnStoreErrCode(err error) int16 { return kcode.TxnStore.Code(err) }

// CompleteTxn applies (commit) or drops (abort) the offsets producerID
// staged in partition p once its marker is durable there: at once if the
// partition is loaded, when its load finishes if it is loading, not at all
// if it is not coordinated here (its next load replays the marker).
func (c *Coordinator) CompleteTxn(p int32, producerID int64, commit bool) {
	if p < 0 || int(p) >= len(c.shards) {
		return
	}
	sh := c.shards[p]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch sh.state {
	case shardUnloaded:
		return
	case shardLoading:
		// The load may have read the log before this marker: apply it
		// when the load finishes (applying it twice is harmless: the
		// producer's next offsets cannot be staged before it completes).
		sh.txnDone = append(sh.txnDone, txnCompletion{pid: producerID, commit: commit})
		return
	}
	for _, g := range sh.groups {
		g.completeTxn(producerID, commit)
	}
}

// HasPendingTxnOffsets reports whether a transaction has staged an offset
// for tp of group that is not committed or aborted yet (OffsetFetch with
// require_stable answers UNSTABLE_OFFSET_COMMIT then, KIP-447).
func (c *Coordinator) HasPendingTxnOffsets(group string, tp TopicPartition) bool {
	sh, g, code := c.lock(group, false)
	if code != 0 {
		return false
	}
	defer sh.mu.Unlock()
	if g == nil {
		return false
	}
	for _, m := range g.txnOffsets {
		if _, ok := m[tp]; ok {
			return true
		}
	}
	return false
}

// PendingTxnProducers returns the producer ids with offsets staged in
// group (sorted), for tests and diagnostics.
func (c *Coordinator) PendingTxnProducers(group string) []int64 {
	sh, g, code := c.lock(group, false)
	if code != 0 {
		return nil
	}
	defer sh.mu.Unlock()
	if g == nil {
		return nil
	}
	var out []int64
	for pid := range g.txnOffsets {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// checkTxnCommit is Kafka's doTxnCommitOffsets check.
func (g *Group) checkTxnCommit(nowMs int64, generation int32, memberID, instanceID string) int16 {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if g.kind == kindConsumer {
		if memberID == "" && generation < 0 {
			return 0
		}
		return g.checkConsumerCommit(nowMs, generation, memberID)
	}
	if instanceID != "" && g.checkInstance(memberID, instanceID) != 0 {
		return kerr.FencedInstanceID.Code
	}
	if memberID != "" {
		if _, ok := g.members[memberID]; !ok {
			return kerr.UnknownMemberID.Code
		}
	}
	if generation >= 0 && generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	return 0
}

// txnStage returns producerID's staged offsets, creating the map.
func (g *Group) txnStage(producerID int64) map[TopicPartition]txnOffset {
	if g.txnOffsets == nil {
		g.txnOffsets = map[int64]map[TopicPartition]txnOffset{}
	}
	m := g.txnOffsets[producerID]
	if m == nil {
		m = map[TopicPartition]txnOffset{}
		g.txnOffsets[producerID] = m
	}
	return m
}

// completeTxn applies or drops producerID's staged offsets.
func (g *Group) completeTxn(producerID int64, commit bool) {
	m, ok := g.txnOffsets[producerID]
	if !ok {
		return
	}
	delete(g.txnOffsets, producerID)
	if !commit {
		return
	}
	for tp, o := range m {
		if o.appended {
			g.offsets[tp] = o.Offset
		}
	}
}

// loadTxn is LoadPartition's replay over a TxnLog: offset records of a
// transactional batch are staged under their producer until its marker.
type txnLoader struct {
	staged map[int64]map[string]map[TopicPartition]Offset // producer -> group -> offsets
}

// stage records a transactional offset record.
func (l *txnLoader) stage(pid int64, group string, tp TopicPartition, o Offset) {
	if l.staged == nil {
		l.staged = map[int64]map[string]map[TopicPartition]Offset{}
	}
	byGroup := l.staged[pid]
	if byGroup == nil {
		byGroup = map[string]map[TopicPartition]Offset{}
		l.staged[pid] = byGroup
	}
	m := byGroup[group]
	if m == nil {
		m = map[TopicPartition]Offset{}
		byGroup[group] = m
	}
	m[tp] = o
}

// complete applies a marker: commit calls apply for every staged offset.
func (l *txnLoader) complete(pid int64, commit bool, apply func(group string, tp TopicPartition, o Offset)) {
	byGroup := l.staged[pid]
	delete(l.staged, pid)
	if !commit {
		return
	}
	for group, m := range byGroup {
		for tp, o := range m {
			apply(group, tp, o)
		}
	}
}
