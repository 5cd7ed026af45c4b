package rlm

// Remote-log metadata as events (KIP-405's TopicBasedRemoteLogMetadataManager,
// docs/tiered-storage.md, "Replicated remote-log metadata").
//
// Every change of a partition's remote-log metadata is an Event: a
// segment's state change (COPY_SEGMENT_STARTED with the whole segment,
// COPY_SEGMENT_FINISHED with its objects, DELETE_SEGMENT_STARTED,
// DELETE_SEGMENT_FINISHED), the DeleteRecords floor (LOG_START) and the
// end of a deleted topic's partition (DELETE_PARTITION_FINISHED).
// applyEvent is the one place the metadata changes: on a single broker the
// manager applies its own events and saves the partition's file; in a
// cluster (Options.Metadata) the user partition's leader publishes them to
// the internal topic __remote_log_metadata and every broker applies what it
// consumes (materializer), the leader included, before acting on it.
//
// Each event carries the publishing leader's epoch. The materializer keeps
// the newest epoch seen per user partition and ignores an event from an
// older one, so a deposed leader cannot finish a copy or a deletion into
// the new leader's view.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
)

// Event types besides the segment States.
const (
	// EventLogStart moves the DeleteRecords floor (Event.LogStart).
	EventLogStart = "LOG_START"
	// EventPartitionDeleted drops a deleted topic's partition once its
	// remote segments are gone (KIP-405's RemotePartitionDeleteMetadata,
	// DELETE_PARTITION_FINISHED).
	EventPartitionDeleted = "DELETE_PARTITION_FINISHED"
)

// eventVersion is the codec's version; another is refused.
const eventVersion = 1

// Event is one change of a partition's remote-log metadata.
type Event struct {
	Version   int    `json:"v"`
	Type      string `json:"type"` // a State, EventLogStart or EventPartitionDeleted
	TopicID   string `json:"topicId"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// LeaderEpoch is the epoch of the user partition's leader that
	// published the event (fencing; not the segment's own epoch).
	LeaderEpoch int32 `json:"leaderEpoch"`
	Broker      int32 `json:"broker"`
	EventMs     int64 `json:"eventMs"`
	// Segment: the whole segment for COPY_SEGMENT_STARTED, the id (and,
	// for COPY_SEGMENT_FINISHED, End and Files) for the other states.
	Segment  *Segment `json:"segment,omitempty"`
	LogStart int64    `json:"logStart,omitempty"`
}

// EncodeEvent is the record value of ev (JSON, versioned).
func EncodeEvent(ev Event) []byte {
	ev.Version = eventVersion
	b, _ := json.Marshal(ev) // plain data: cannot fail
	return b
}

// DecodeEvent parses a record value written by EncodeEvent.
func DecodeEvent(b []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(b, &ev); err != nil {
		return ev, fmt.Errorf("rlm: event: %w", err)
	}
	if ev.Version != eventVersion {
		return ev, fmt.Errorf("rlm: event version %d", ev.Version)
	}
	switch State(ev.Type) {
	case CopyStarted, CopyFinished, DeleteStarted, DeleteFinished:
		if ev.Segment == nil || ev.Segment.ID == "" {
			return ev, fmt.Errorf("rlm: %s event without a segment", ev.Type)
		}
	default:
		if ev.Type != EventLogStart && ev.Type != EventPartitionDeleted {
			return ev, fmt.Errorf("rlm: event type %q", ev.Type)
		}
	}
	if _, err := parseTopicID(ev.TopicID); err != nil {
		return ev, fmt.Errorf("rlm: event: %w", err)
	}
	return ev, nil
}

// EventKey is the record key of a partition's events: topic id and
// partition (every event of a partition goes to one metadata partition).
func EventKey(topicID [16]byte, partition int32) []byte {
	return binary.BigEndian.AppendUint32(append([]byte(nil), topicID[:]...), uint32(partition))
}

// MetadataPartition is the __remote_log_metadata partition of a user
// partition: a hash of its topic id and number, modulo n.
func MetadataPartition(topicID [16]byte, partition int32, n int32) int32 {
	if n <= 0 {
		return 0
	}
	h := fnv.New32a()
	h.Write(EventKey(topicID, partition))
	return int32(h.Sum32() % uint32(n))
}

// applyEvent applies ev to pm (a copy the caller owns). It reports
// whether the partition's metadata is to be dropped
// (EventPartitionDeleted). Applying is idempotent for every event once
// the partition has moved past it, except COPY_SEGMENT_STARTED of a
// segment already deleted; events are applied once, in order.
func applyEvent(pm *partitionMeta, ev Event) (drop bool) {
	find := func() int {
		if ev.Segment == nil {
			return -1
		}
		return slices.IndexFunc(pm.Segments, func(s Segment) bool { return s.ID == ev.Segment.ID })
	}
	switch ev.Type {
	case string(CopyStarted):
		if find() < 0 {
			s := *ev.Segment
			s.State, s.EventMs, s.Files = CopyStarted, ev.EventMs, nil
			pm.Segments = append(pm.Segments, s)
			slices.SortStableFunc(pm.Segments, func(a, b Segment) int { return cmpInt64(a.Base, b.Base) })
		}
	case string(CopyFinished):
		if i := find(); i >= 0 && pm.Segments[i].State == CopyStarted {
			s := &pm.Segments[i]
			s.State, s.EventMs, s.Files = CopyFinished, ev.EventMs, ev.Segment.Files
			pm.CopiedEnd = max(pm.CopiedEnd, s.End)
		}
	case string(DeleteStarted):
		if i := find(); i >= 0 {
			pm.Segments[i].State, pm.Segments[i].EventMs = DeleteStarted, ev.EventMs
		}
	case string(DeleteFinished):
		if i := find(); i >= 0 {
			pm.Segments = slices.Delete(pm.Segments, i, i+1)
		}
	case EventLogStart:
		pm.LogStart = max(pm.LogStart, ev.LogStart)
	case EventPartitionDeleted:
		return true
	}
	return false
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cloneMeta is a copy of pm whose segments can be changed (nil: a new
// partition's empty metadata).
func cloneMeta(pm *partitionMeta, k tp, topic string) *partitionMeta {
	if pm == nil {
		return &partitionMeta{Version: metaVersion, Topic: topic, TopicID: fmt.Sprintf("%x", k.id[:]), Partition: k.p, CopiedEnd: -1}
	}
	c := *pm
	c.Segments = slices.Clone(pm.Segments)
	for i := range c.Segments {
		c.Segments[i].Files = cloneFiles(c.Segments[i].Files)
	}
	return &c
}

func cloneFiles(f map[string]FileMeta) map[string]FileMeta {
	if f == nil {
		return nil
	}
	out := make(map[string]FileMeta, len(f))
	for k, v := range f {
		out[k] = v
	}
	return out
}

// errFenced: an event of this broker was ignored because a newer leader
// epoch had published first (this broker is no longer the leader).
var errFenced = errors.New("rlm: event fenced by a newer leader epoch")

// materializer is the remote-log metadata built from the events of the
// metadata partitions, applied in each partition's order: per user
// partition its state and the newest leader epoch seen, per metadata
// partition the next offset to apply. Pure: no I/O, no clock.
//
// With want set, only the user partitions it accepts are materialized
// (the ones this broker replicates, assigned.go); the others' events are
// skipped and their keys remembered in skipped. When a skipped partition
// becomes wanted (refresh), its metadata partition is read again from
// offset 0 (a replay, replay[mp] its next offset) applying the events of
// the partitions pending on it only, up to the position where they were
// skipped; records past that are applied as usual.
type materializer struct {
	parts   map[tp]*partitionMeta
	epochs  map[tp]int32
	next    map[int32]int64
	applied int64 // records taken (a change counter for snapshots)

	want    func(k tp, mp int32) bool // nil: every partition
	skipped map[tp]int32              // partitions not materialized -> their metadata partition
	pending map[tp]int64              // partitions being replayed -> the offset their replay ends at
	replay  map[int32]int64           // metadata partitions being replayed -> next offset
	mps     map[tp]int32              // materialized partitions -> their metadata partition
}

func newMaterializer() *materializer {
	return &materializer{parts: map[tp]*partitionMeta{}, epochs: map[tp]int32{}, next: map[int32]int64{},
		skipped: map[tp]int32{}, pending: map[tp]int64{}, replay: map[int32]int64{}, mps: map[tp]int32{}}
}

// apply applies the record at offset of metadata partition mp. It returns
// the partition the event is about and its new metadata (nil when
// dropped or not materialized); applied is false when the event was
// fenced (an older epoch than the partition's newest), skipped (a
// partition not wanted) or the record was already applied, err non-nil
// when the record is not an event (it is skipped).
func (x *materializer) apply(mp int32, offset int64, value []byte) (k tp, pm *partitionMeta, applied bool, err error) {
	if n, ok := x.next[mp]; ok && offset < n {
		return x.replayRecord(mp, offset, n, value)
	}
	x.endReplay(mp)
	x.next[mp] = offset + 1
	x.applied++
	ev, err := DecodeEvent(value)
	if err != nil {
		return k, nil, false, err
	}
	id, _ := parseTopicID(ev.TopicID)
	k = tp{id, ev.Partition}
	if _, ok := x.mps[k]; !ok && x.want != nil && !x.want(k, mp) {
		x.skipped[k] = mp
		return k, nil, false, nil
	}
	return x.applyEvent(k, mp, ev)
}

// replayRecord is apply for a record below the metadata partition's next
// offset (n): during a replay, the events of the partitions pending on it;
// otherwise nothing (a record already applied).
func (x *materializer) replayRecord(mp int32, offset, n int64, value []byte) (k tp, pm *partitionMeta, applied bool, err error) {
	r, ok := x.replay[mp]
	if !ok || offset < r {
		return k, nil, false, nil // already applied (a replay of the consumer's)
	}
	x.replay[mp] = offset + 1
	if offset+1 >= n {
		defer x.endReplay(mp)
	}
	ev, err := DecodeEvent(value)
	if err != nil {
		return k, nil, false, err
	}
	id, _ := parseTopicID(ev.TopicID)
	k = tp{id, ev.Partition}
	if end, ok := x.pending[k]; !ok || offset >= end {
		return k, nil, false, nil
	}
	x.applied++
	return x.applyEvent(k, mp, ev)
}

// endReplay ends mp's replay: its pending partitions are materialized.
func (x *materializer) endReplay(mp int32) {
	if _, ok := x.replay[mp]; !ok {
		return
	}
	delete(x.replay, mp)
	for k := range x.pending {
		if x.mps[k] == mp {
			delete(x.pending, k)
		}
	}
}

// applyEvent applies ev to partition k.
func (x *materializer) applyEvent(k tp, mp int32, ev Event) (tp, *partitionMeta, bool, error) {
	x.mps[k] = mp
	if e, ok := x.epochs[k]; ok && ev.LeaderEpoch < e {
		return k, x.parts[k], false, nil
	}
	x.epochs[k] = ev.LeaderEpoch
	next := cloneMeta(x.parts[k], k, ev.Topic)
	if applyEvent(next, ev) {
		delete(x.parts, k)
		return k, nil, true, nil
	}
	x.parts[k] = next
	return k, next, true, nil
}

// position is the next offset of metadata partition mp to apply (0 when
// none was; during a replay, the replay's).
func (x *materializer) position(mp int32) int64 {
	if r, ok := x.replay[mp]; ok {
		return r
	}
	return x.next[mp]
}
