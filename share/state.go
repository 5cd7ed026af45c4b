package share

import (
	"errors"
	"fmt"
	"slices"
)

// StateBatch is one run of consecutive offsets with the same persisted
// state: KIP-932's state batch (FirstOffset, LastOffset, DeliveryState,
// DeliveryCount) plus Strata's Reason for ARCHIVING records.
type StateBatch struct {
	First, Last int64
	State       RecordState // never Acquired (see State)
	Count       int16       // delivery count
	Reason      Reason      // Archiving only
}

// State is the persistent form of a share-partition, what KIP-932's
// share-group state topic (__share_group_state) records: a ShareSnapshot
// holds all of it, a ShareUpdate the start offset and the batches that
// changed since. Batches are sorted, do not overlap, lie at or above
// StartOffset, and leave out records that are AVAILABLE with delivery
// count 0 (as good as never delivered). ACQUIRED is transient and never
// persisted: as KIP-932 says, an acquired record with delivery count n is
// recorded as AVAILABLE with count n-1, so a leader that fails loses the
// memory of the deliveries under way and delivers those records again.
//
// ArchivingSinceMs is Strata's: when the records ARCHIVING began to be
// some (ms, the share-partition owner's clock), 0 while none is. Every
// dead letter written for them is stamped later (the writer's clock), so
// a new owner looks for the dead letters already written from there on
// (broker/sharehost/dlq.go). A snapshot without it (written before it
// existed) reads as 0: unknown, looked for from the start.
type State struct {
	StateEpoch       int32 // bumped by an offset reset (AlterShareGroupOffsets)
	StartOffset      int64 // the SPSO
	Batches          []StateBatch
	ArchivingSinceMs int64 `json:",omitempty"`
}

// Clone returns a deep copy.
func (s State) Clone() State {
	s.Batches = slices.Clone(s.Batches)
	return s
}

// Apply returns the state after an update: the ShareCoordinator's merge
// of a ShareUpdate into its snapshot. The update's start offset replaces
// the state's (an update from a reset carries a new state epoch and
// replaces everything); batches below it are dropped; the update's
// batches replace the states of the offsets they cover.
func (s State) Apply(u State) State {
	if u.StateEpoch != s.StateEpoch {
		return normalize(u.Clone())
	}
	out := State{StateEpoch: s.StateEpoch, StartOffset: u.StartOffset, ArchivingSinceMs: u.ArchivingSinceMs}
	old := trimBelow(s.Batches, u.StartOffset)
	for _, nb := range trimBelow(u.Batches, u.StartOffset) {
		var cut []StateBatch
		for _, b := range old {
			if b.Last < nb.First || b.First > nb.Last {
				cut = append(cut, b)
				continue
			}
			if b.First < nb.First {
				l := b
				l.Last = nb.First - 1
				cut = append(cut, l)
			}
			if b.Last > nb.Last {
				r := b
				r.First = nb.Last + 1
				cut = append(cut, r)
			}
		}
		old = append(cut, nb)
		slices.SortFunc(old, func(a, b StateBatch) int {
			switch {
			case a.First < b.First:
				return -1
			case a.First > b.First:
				return 1
			}
			return 0
		})
	}
	out.Batches = old
	return normalize(out)
}

func trimBelow(bs []StateBatch, start int64) []StateBatch {
	var out []StateBatch
	for _, b := range bs {
		if b.Last < start {
			continue
		}
		b.First = max(b.First, start)
		out = append(out, b)
	}
	return out
}

// normalize drops AVAILABLE count-0 batches and joins adjacent batches of
// equal state, so equal states compare equal.
func normalize(s State) State {
	var out []StateBatch
	for _, b := range s.Batches {
		if b.State == Available && b.Count == 0 {
			continue
		}
		if b.State != Archiving {
			b.Reason = ReasonNone
		}
		if n := len(out); n > 0 {
			p := &out[n-1]
			if p.Last+1 == b.First && p.State == b.State && p.Count == b.Count && p.Reason == b.Reason {
				p.Last = b.Last
				continue
			}
		}
		out = append(out, b)
	}
	s.Batches = out
	return s
}

// validate checks a state read back from storage.
func (s State) validate() error {
	if s.StartOffset < 0 {
		return fmt.Errorf("share: state start offset %d", s.StartOffset)
	}
	prev := s.StartOffset - 1
	for _, b := range s.Batches {
		switch {
		case b.First > b.Last:
			return fmt.Errorf("share: state batch %d..%d is reversed", b.First, b.Last)
		case b.First <= prev:
			return fmt.Errorf("share: state batch %d..%d overlaps or precedes offset %d", b.First, b.Last, prev)
		case b.Last-s.StartOffset >= MaxWindow:
			return fmt.Errorf("share: state batch %d..%d lies over %d offsets past the start offset %d", b.First, b.Last, MaxWindow, s.StartOffset)
		case b.Count < 0:
			return fmt.Errorf("share: state batch %d..%d has delivery count %d", b.First, b.Last, b.Count)
		}
		switch b.State {
		case Available, Acknowledged, Archived, Archiving:
		case Acquired:
			return errors.New("share: a persisted state batch is ACQUIRED")
		default:
			return fmt.Errorf("share: state batch %d..%d has unknown state %d", b.First, b.Last, b.State)
		}
		prev = b.Last
	}
	return nil
}
