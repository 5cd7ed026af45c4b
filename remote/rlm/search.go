package rlm

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
)

// OffsetForTimestamp finds, in remote storage, the first offset whose
// record timestamp is at or after ts (ListOffsets by time), with that
// record's timestamp. found is false when no remote segment holds such a
// record (the caller searches the local log). The segment's time index
// gives where to start; batches are scanned from there.
func (m *Manager) OffsetForTimestamp(ctx context.Context, topicID [16]byte, partition int32, ts int64) (offset, timestamp int64, found bool, err error) {
	pm := m.get(tp{topicID, partition})
	if pm == nil {
		return -1, -1, false, nil
	}
	for i := range pm.Segments {
		seg := &pm.Segments[i]
		if seg.State != CopyFinished || seg.MaxTimestamp < ts || seg.End <= pm.LogStart {
			continue
		}
		from := seg.Base
		if _, ok := seg.Files[KindTimeIndex]; ok {
			idx, err := m.object(ctx, pm.Topic, partition, seg, KindTimeIndex)
			if err != nil {
				return -1, -1, false, err
			}
			from = seg.Base + timeIndexBefore(idx, ts)
		}
		from = max(from, pm.LogStart)
		for off := from; off < seg.End; {
			data, err := m.Read(ctx, topicID, partition, off, 1<<20)
			if err != nil {
				return -1, -1, false, err
			}
			for len(data) > 0 {
				batch, rest, h, err := record.Next(data)
				if err != nil {
					return -1, -1, false, fmt.Errorf("%w: %v", ErrCorrupt, err)
				}
				data = rest
				off = h.LastOffset() + 1
				if h.MaxTimestamp < ts || h.Control() {
					continue
				}
				o, t, ok, err := firstAtOrAfter(batch, &h, ts, pm.LogStart)
				if err != nil {
					return -1, -1, false, fmt.Errorf("%w: %v", ErrCorrupt, err)
				}
				if ok {
					return o, t, true, nil
				}
			}
		}
	}
	return -1, -1, false, nil
}

// firstAtOrAfter is the first record of batch at or after offset floor
// stamped at or after ts.
func firstAtOrAfter(batch []byte, h *record.Header, ts, floor int64) (offset, timestamp int64, found bool, err error) {
	if h.LogAppendTime() {
		return max(h.BaseOffset, floor), h.MaxTimestamp, h.MaxTimestamp >= ts && h.LastOffset() >= floor, nil
	}
	err = record.Iterate(batch, func(h *record.Header, r *record.Record) error {
		o := h.BaseOffset + int64(r.OffsetDelta)
		if t := h.BaseTimestamp + r.TimestampDelta; !found && t >= ts && o >= floor {
			offset, timestamp, found = o, t, true
		}
		return nil
	})
	return offset, timestamp, found, err
}

// timeIndexBefore is the relative offset of the last time-index entry
// (Kafka's: 8-byte timestamp, 4-byte offset relative to the base,
// big-endian) stamped before ts: records at or after ts cannot lie below
// it. 0 when none.
func timeIndexBefore(idx []byte, ts int64) int64 {
	rel := int64(0)
	for i := 0; i+12 <= len(idx); i += 12 {
		t := int64(binary.BigEndian.Uint64(idx[i:]))
		if t >= ts {
			break
		}
		rel = int64(binary.BigEndian.Uint32(idx[i+8:]))
	}
	return rel
}

// AbortedTransactions appends to dst the aborted transactions recorded in
// remote segments (their copied .txnindex) that overlap [from, to): marker
// at or after from, first offset below to, as engine.Log's
// AbortedTransactions does for local segments.
func (m *Manager) AbortedTransactions(ctx context.Context, topicID [16]byte, partition int32, dst []engine.AbortedTxn, from, to int64) ([]engine.AbortedTxn, error) {
	pm := m.get(tp{topicID, partition})
	if pm == nil || from >= to {
		return dst, nil
	}
	for i := range pm.Segments {
		seg := &pm.Segments[i]
		if seg.State != CopyFinished || seg.End <= from {
			continue
		}
		if _, ok := seg.Files[KindTxnIndex]; !ok {
			continue
		}
		idx, err := m.object(ctx, pm.Topic, partition, seg, KindTxnIndex)
		if err != nil {
			return dst, err
		}
		complete := false
		for j := 0; j+txnEntryBytes <= len(idx); j += txnEntryBytes {
			e := idx[j:]
			pid := int64(binary.BigEndian.Uint64(e[2:]))
			first := int64(binary.BigEndian.Uint64(e[10:]))
			last := int64(binary.BigEndian.Uint64(e[18:]))
			lso := int64(binary.BigEndian.Uint64(e[26:]))
			if last >= from && first < to {
				dst = append(dst, engine.AbortedTxn{ProducerID: pid, FirstOffset: first})
			}
			complete = complete || lso >= to
		}
		if complete {
			break
		}
	}
	return dst, nil
}

// txnEntryBytes is the size of an aborted-transaction index entry
// (Kafka's: int16 version, int64 producer id, first offset, last offset,
// last stable offset).
const txnEntryBytes = 2 + 8 + 8 + 8 + 8
