package sharehost

// Reading the records a member acquired, and the acquisition itself.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/share"
)

// Acquire acquires up to max records of share-partition sp for member
// and reads the batches that hold them (lock held): the log-start move
// and the lock expiries first, up to the high watermark (the last stable
// offset with read_committed, aborted records archived on the member's
// behalf). A read that fails gives the records back and returns its
// error.
func (h *Host) Acquire(nowMs int64, k Key, sp *Part, member string, max int, d *Durable) ([]share.AcquiredRecords, []byte, error) {
	if start := sp.Log.LogStartOffset(); start > sp.P.StartOffset() {
		if err := h.Apply(k, sp, sp.P.AdvanceLogStart(start), d); err != nil {
			h.log.Error("share: persisting a log start move", "err", err)
		}
	}
	committed := h.ReadCommitted(k.Group)
	end := sp.Log.HighWatermark()
	if committed {
		end = sp.Log.LastStableOffset()
	}
	recs, e := sp.P.Acquire(nowMs, member, max, end)
	if err := h.Apply(k, sp, e, d); err != nil {
		h.log.Error("share: persisting a lock expiry", "err", err)
	}
	if len(recs) == 0 {
		return nil, nil, nil
	}
	data, err := ReadBatches(sp.Log, recs)
	if err != nil {
		// Give the records back: the member never saw them.
		var bs []share.AckBatch
		for _, r := range recs {
			bs = append(bs, share.AckBatch{First: r.First, Last: r.Last, Types: []share.AckType{share.AckRelease}})
		}
		if e, aerr := sp.P.Acknowledge(nowMs, member, bs); aerr == nil {
			_ = h.Apply(k, sp, e, d)
		}
		return nil, nil, err
	}
	if committed {
		recs = h.archiveAborted(nowMs, member, k, sp, recs, data, d)
	}
	return recs, data, nil
}

// archiveAborted is read_committed's step after an acquisition (st.mu
// held): the acquired records of aborted transactions in data (the
// batches read for recs) are archived on the member's behalf, as Kafka
// archives them before answering, and the acquired ranges without them
// are returned. A batch is aborted when it is transactional and its
// producer has an aborted transaction (Log.AbortedTransactions) that began
// at or before it and whose abort marker has not been passed yet: the
// consumer's rule in Kafka.
func (h *Host) archiveAborted(nowMs int64, member string, k Key, sp *Part, recs []share.AcquiredRecords, data []byte, d *Durable) []share.AcquiredRecords {
	first, last := recs[0].First, recs[len(recs)-1].Last
	aborted := sp.Log.AbortedTransactions(nil, first, last+1)
	if len(aborted) == 0 {
		return recs
	}
	slices.SortFunc(aborted, func(a, b engine.AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	open := map[int64]bool{} // producers inside an aborted transaction
	var gone [][2]int64      // aborted offset ranges
	for rest := data; len(rest) >= 61; {
		n := 12 + int(int32(binary.BigEndian.Uint32(rest[8:12])))
		if n < 61 || n > len(rest) {
			break
		}
		base := int64(binary.BigEndian.Uint64(rest))
		end := base + int64(int32(binary.BigEndian.Uint32(rest[23:27])))
		attrs := binary.BigEndian.Uint16(rest[21:23])
		pid := int64(binary.BigEndian.Uint64(rest[43:51]))
		rest = rest[n:]
		for len(aborted) > 0 && aborted[0].FirstOffset <= base {
			open[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		switch {
		case attrs&0x20 != 0: // a control batch: an abort marker ends the producer's transaction
			delete(open, pid)
		case attrs&0x10 != 0 && open[pid]:
			gone = append(gone, [2]int64{base, end})
		}
	}
	if len(gone) == 0 {
		return recs
	}
	isGone := func(o int64) bool {
		for _, g := range gone {
			if o >= g[0] && o <= g[1] {
				return true
			}
		}
		return false
	}
	var keep []share.AcquiredRecords
	var gap []share.AckBatch
	for _, r := range recs {
		for o := r.First; o <= r.Last; o++ {
			if isGone(o) {
				gap = append(gap, share.AckBatch{First: o, Last: o, Types: []share.AckType{share.AckGap}})
				continue
			}
			if n := len(keep); n > 0 && keep[n-1].Last == o-1 && keep[n-1].Count == r.Count {
				keep[n-1].Last = o
			} else {
				keep = append(keep, share.AcquiredRecords{First: o, Last: o, Count: r.Count})
			}
		}
	}
	e, aerr := sp.P.Acknowledge(nowMs, member, gap)
	if aerr != nil {
		h.log.Error("share: archiving aborted records", "err", aerr.Msg)
		return recs
	}
	if err := h.Apply(k, sp, e, d); err != nil {
		h.log.Error("share: persisting archived aborted records", "err", err)
	}
	return keep
}

// ReadBatches returns the record batches of l that hold the offsets
// of recs, each batch once, in offset order.
func ReadBatches(l *engine.Log, recs []share.AcquiredRecords) ([]byte, error) {
	var out []byte
	next := int64(-1) // first offset not yet covered by out
	for _, r := range recs {
		off := max(r.First, next)
		for off <= r.Last {
			res, err := l.ReadMem(off, 1<<20, true)
			if err != nil {
				return nil, err
			}
			buf, err := chunkBytes(res)
			res.Release()
			if err != nil {
				return nil, err
			}
			if len(buf) == 0 {
				return out, nil // below the HW nothing more: gaps
			}
			progressed := false
			for rest := buf; len(rest) >= 61; {
				n := 12 + int(int32(binary.BigEndian.Uint32(rest[8:12])))
				if n < 61 || n > len(rest) {
					break
				}
				base := int64(binary.BigEndian.Uint64(rest))
				last := base + int64(int32(binary.BigEndian.Uint32(rest[23:27])))
				batch := rest[:n]
				rest = rest[n:]
				if last < off {
					continue
				}
				if base > r.Last {
					break
				}
				out = append(out, batch...)
				off, next, progressed = last+1, last+1, true
			}
			if !progressed {
				return out, nil
			}
		}
	}
	return out, nil
}

// chunkBytes copies a read's chunks into memory.
func chunkBytes(res engine.ReadResult) ([]byte, error) {
	buf := make([]byte, 0, res.Bytes)
	for _, c := range res.Chunks {
		if c.Buf != nil {
			buf = append(buf, c.Buf...)
			continue
		}
		if c.Len < 0 || c.Len > 1<<30 {
			return nil, fmt.Errorf("share: chunk of %d bytes", c.Len)
		}
		n := len(buf)
		buf = append(buf, make([]byte, c.Len)...)
		if _, err := c.File.ReadAt(buf[n:], c.Pos); err != nil {
			return nil, errors.Join(errors.New("share: reading a record batch"), err)
		}
	}
	return buf, nil
}
