package txnhost

// Reading the coordinators' internal topics: ScanLog replays a partition
// batch by batch (the transaction coordinator's __transaction_state load,
// and the group coordinator's __consumer_offsets load, which must see each
// batch's producer id and control markers).

import (
	"errors"
	"fmt"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
)

// scanReadBytes is how much ScanLog reads per round.
const scanReadBytes = 1 << 20

// ScanLog calls fn for every record of l from its log start offset to its
// log end, in offset order, with its batch's header. It reads to the log
// end, not the high watermark, as Kafka's coordinators load their
// partitions: a broker that just became leader has every committed record
// but may not know the high watermark that covers them yet, and the
// records past it are the new leader's to commit. A log truncated at the start under the scan restarts from
// the new start. The record and header passed to fn are reused (copy
// what is kept of them), but keys and values stay valid: every round reads
// into a new buffer.
func ScanLog(l *engine.Log, fn func(h *record.Header, r *record.Record) error) error {
	from := l.LogStartOffset()
	for {
		if from >= l.LogEndOffset() {
			return nil
		}
		res, err := l.ReadReplica(from, scanReadBytes, true)
		if errors.Is(err, engine.ErrOffsetOutOfRange) {
			if s := l.LogStartOffset(); s > from {
				from = s
				continue
			}
			return nil
		}
		if err != nil {
			return err
		}
		if len(res.Chunks) == 0 {
			res.Release()
			return nil
		}
		buf := make([]byte, 0, res.Bytes)
		for _, c := range res.Chunks {
			if c.Buf != nil {
				buf = append(buf, c.Buf...)
				continue
			}
			if c.Len < 0 || c.Len > 1<<30 {
				res.Release()
				return fmt.Errorf("txnhost: reading %s: chunk of %d bytes", l, c.Len)
			}
			n := len(buf)
			buf = append(buf, make([]byte, c.Len)...)
			if _, err := c.File.ReadAt(buf[n:], c.Pos); err != nil {
				res.Release()
				return fmt.Errorf("txnhost: reading %s: %w", l, err)
			}
		}
		res.Release()
		next := from
		for rest := buf; len(rest) > 0; {
			batch, r, h, err := record.Next(rest)
			if err != nil {
				return fmt.Errorf("txnhost: %s at %d: %w", l, next, err)
			}
			rest = r
			err = record.Iterate(batch, func(h *record.Header, r *record.Record) error {
				if h.BaseOffset+int64(r.OffsetDelta) < from {
					return nil
				}
				return fn(h, r)
			})
			if err != nil {
				return err
			}
			next = max(next, h.LastOffset()+1)
		}
		if next <= from {
			return nil
		}
		from = next
	}
}
