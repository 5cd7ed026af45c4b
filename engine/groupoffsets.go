package engine

// Group offsets for the embedded API: Commit and Committed store a consumer
// group's position in the __consumer_offsets topic, in the same records a
// broker's group coordinator writes (package group), so an application can
// start embedded and later serve the same data directory to Kafka clients
// (or the reverse) and keep its positions.
//
// Record layout (Kafka's schemas; big-endian; strings are int16 length +
// bytes):
//
//	key v1    int16 1 | string group | string topic | int32 partition
//	value v3  int16 3 | int64 offset | int32 leader epoch (-1) | string metadata ("") |
//	          int64 commit timestamp ms
//
// A null value is a tombstone (the offset was deleted). Committed reads key
// versions 0 and 1 and value versions 0 to 3 and skips other records (group
// metadata, KIP-848 records). The group's partition is Kafka's
// abs(String.hashCode(group)) % partitions, computed over UTF-16 code units
// like Java.
//
// Committed scans the group's partition from its log start each call: it is
// meant for applications that commit and look up now and then, not per
// record. When a broker serves the same engine, its coordinator's commits
// are seen too (they are records of the same partition).

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unicode/utf16"

	"github.com/stratalog/strata/record"
)

// OffsetsTopic is the internal topic of committed offsets.
const OffsetsTopic = "__consumer_offsets"

// offsetsPartitions is offsets.topic.num.partitions' default, used when
// Commit creates the topic.
const offsetsPartitions = 50

// errBadOffsetRecord marks a record of __consumer_offsets that does not decode.
var errBadOffsetRecord = errors.New("engine: bad __consumer_offsets record")

// Commit records offset (the next offset to consume) as group's position in
// topic/partition and returns once it is durable. The topic and partition
// must exist; __consumer_offsets is created on first use.
func (e *Engine) Commit(group, topic string, partition int32, offset int64) error {
	if group == "" {
		return fmt.Errorf("%w: empty group id", ErrInvalidConfig)
	}
	if len(group) > 32767 || len(topic) > 32767 {
		return fmt.Errorf("%w: group or topic name too long", ErrInvalidConfig)
	}
	t := e.Topic(topic)
	if t == nil || t.Partition(partition) == nil {
		return fmt.Errorf("%w: %s-%d", ErrUnknownTopic, topic, partition)
	}
	return e.commitOffsets(group, map[TopicPartition]int64{{Topic: topic, Partition: partition}: offset})
}

// commitOffsets writes group's offsets as one batch and returns once it is
// durable (the embedded consumer group's Commit).
func (e *Engine) commitOffsets(group string, offsets map[TopicPartition]int64) error {
	ot, err := e.offsetsTopic(true)
	if err != nil {
		return err
	}
	l := ot.Partition(offsetsPartitionFor(group, ot.Partitions()))
	if l == nil {
		return fmt.Errorf("%w: %s-%d", ErrNotHosted, OffsetsTopic, offsetsPartitionFor(group, ot.Partitions()))
	}
	tps := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	b := builderPool.Get().(*record.Builder)
	defer builderPool.Put(b)
	now := e.nowMs()
	b.Reset(record.CodecNone, now)
	for _, tp := range tps {
		b.Add(now, appendOffsetKey(nil, group, tp.Topic, tp.Partition), appendOffsetValue(nil, offsets[tp], now), nil)
	}
	batch, err := b.AppendTo(nil)
	if err != nil {
		return fmt.Errorf("engine: encoding commit: %w", err)
	}
	info, err := l.Append(batch, l.LeaderEpoch())
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	l.WhenDurable(info.LastOffset, func(err error) { done <- err })
	return <-done
}

// Committed returns group's committed offset for topic/partition, or -1 if
// there is none.
func (e *Engine) Committed(group, topic string, partition int32) (int64, error) {
	ot, err := e.offsetsTopic(false)
	if err != nil || ot == nil {
		return -1, err
	}
	p := offsetsPartitionFor(group, ot.Partitions())
	l := ot.Partition(p)
	if l == nil {
		return -1, nil
	}
	want := appendOffsetKey(nil, group, topic, partition)
	wantV0 := append([]byte(nil), want...)
	binary.BigEndian.PutUint16(wantV0, 0)
	result := int64(-1)
	for from := l.LogStartOffset(); from < l.HighWatermark(); {
		recs, err := ot.Consume(p, from, 4096)
		if errors.Is(err, ErrOffsetOutOfRange) {
			from, result = l.LogStartOffset(), -1
			continue
		}
		if err != nil {
			return -1, err
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if string(r.Key) != string(want) && string(r.Key) != string(wantV0) {
				continue
			}
			if r.Value == nil {
				result = -1
				continue
			}
			off, err := decodeOffsetValue(r.Value)
			if err != nil {
				return -1, fmt.Errorf("%s-%d at %d: %w", OffsetsTopic, p, r.Offset, err)
			}
			result = off
		}
		from = recs[len(recs)-1].Offset + 1
	}
	return result, nil
}

// committedAll returns every offset group has committed (one scan of its
// __consumer_offsets partition).
func (e *Engine) committedAll(group string) (map[TopicPartition]int64, error) {
	out := map[TopicPartition]int64{}
	ot, err := e.offsetsTopic(false)
	if err != nil || ot == nil {
		return out, err
	}
	p := offsetsPartitionFor(group, ot.Partitions())
	l := ot.Partition(p)
	if l == nil {
		return out, nil
	}
	for from := l.LogStartOffset(); from < l.HighWatermark(); {
		recs, err := ot.Consume(p, from, 4096)
		if errors.Is(err, ErrOffsetOutOfRange) {
			from, out = l.LogStartOffset(), map[TopicPartition]int64{}
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			g, tp, ok := decodeOffsetKey(r.Key)
			if !ok || g != group {
				continue
			}
			if r.Value == nil {
				delete(out, tp)
				continue
			}
			off, err := decodeOffsetValue(r.Value)
			if err != nil {
				return nil, fmt.Errorf("%s-%d at %d: %w", OffsetsTopic, p, r.Offset, err)
			}
			out[tp] = off
		}
		from = recs[len(recs)-1].Offset + 1
	}
	return out, nil
}

// decodeOffsetKey decodes an offset commit key of version 0 or 1; ok is
// false for other records (group metadata, KIP-848 records) and bad keys.
func decodeOffsetKey(k []byte) (group string, tp TopicPartition, ok bool) {
	if len(k) < 2 || binary.BigEndian.Uint16(k) > 1 {
		return "", tp, false
	}
	rest := k[2:]
	str := func() (string, bool) {
		if len(rest) < 2 {
			return "", false
		}
		n := int(binary.BigEndian.Uint16(rest))
		if len(rest) < 2+n {
			return "", false
		}
		s := string(rest[2 : 2+n])
		rest = rest[2+n:]
		return s, true
	}
	g, ok1 := str()
	t, ok2 := str()
	if !ok1 || !ok2 || len(rest) != 4 {
		return "", tp, false
	}
	return g, TopicPartition{Topic: t, Partition: int32(binary.BigEndian.Uint32(rest))}, true
}

// offsetsTopic returns __consumer_offsets, creating it if asked.
func (e *Engine) offsetsTopic(create bool) (*Topic, error) {
	if t := e.Topic(OffsetsTopic); t != nil || !create {
		return t, nil
	}
	t, err := e.CreateTopic(OffsetsTopic, offsetsPartitions, map[string]string{"cleanup.policy": "compact"})
	if errors.Is(err, ErrTopicExists) {
		return e.Topic(OffsetsTopic), nil
	}
	return t, err
}

// offsetsPartitionFor is Kafka's Utils.abs(group.hashCode()) % n with Java's
// String.hashCode over UTF-16 code units.
func offsetsPartitionFor(group string, n int32) int32 {
	if n <= 0 {
		return 0
	}
	var h int32
	for _, u := range utf16.Encode([]rune(group)) {
		h = 31*h + int32(u)
	}
	return (h & 0x7fffffff) % n
}

func appendString16(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func appendOffsetKey(dst []byte, group, topic string, partition int32) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 1)
	dst = appendString16(dst, group)
	dst = appendString16(dst, topic)
	return binary.BigEndian.AppendUint32(dst, uint32(partition))
}

func appendOffsetValue(dst []byte, offset, nowMs int64) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 3)
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	dst = binary.BigEndian.AppendUint32(dst, 0xffffffff) // leader epoch -1
	dst = appendString16(dst, "")
	return binary.BigEndian.AppendUint64(dst, uint64(nowMs))
}

// decodeOffsetValue returns the offset of an offset commit value of
// versions 0..4 (the offset field follows the version in all of them).
func decodeOffsetValue(v []byte) (int64, error) {
	if len(v) < 10 {
		return -1, fmt.Errorf("%w: value of %d bytes", errBadOffsetRecord, len(v))
	}
	if ver := int16(binary.BigEndian.Uint16(v)); ver < 0 || ver > 4 {
		return -1, fmt.Errorf("%w: value version %d", errBadOffsetRecord, ver)
	}
	return int64(binary.BigEndian.Uint64(v[2:])), nil
}
