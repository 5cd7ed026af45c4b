package share

import (
	"reflect"
	"testing"
)

func TestRestoreRefusesBadState(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    State
	}{
		{"negative start", State{StartOffset: -1}},
		{"reversed batch", State{StartOffset: 0, Batches: []StateBatch{{First: 5, Last: 4, State: Archived}}}},
		{"below the start", State{StartOffset: 10, Batches: []StateBatch{{First: 5, Last: 12, State: Archived}}}},
		{"overlapping", State{Batches: []StateBatch{{First: 0, Last: 4, State: Archived}, {First: 4, Last: 6, State: Acknowledged}}}},
		{"unsorted", State{Batches: []StateBatch{{First: 5, Last: 6, State: Archived}, {First: 0, Last: 1, State: Acknowledged}}}},
		{"acquired", State{Batches: []StateBatch{{First: 0, Last: 0, State: Acquired, Count: 1}}}},
		{"unknown state", State{Batches: []StateBatch{{First: 0, Last: 0, State: 9}}}},
		{"negative count", State{Batches: []StateBatch{{First: 0, Last: 0, State: Available, Count: -1}}}},
		{"huge span", State{Batches: []StateBatch{{First: 0, Last: 1 << 40, State: Archived}}}},
	} {
		if p, err := Restore(Config{}, tc.s); err == nil {
			t.Errorf("%s: restored %+v", tc.name, p.Snapshot())
		}
	}
}

func TestRestore(t *testing.T) {
	s := State{StateEpoch: 2, StartOffset: 10, Batches: []StateBatch{
		{First: 11, Last: 12, State: Acknowledged, Count: 1},
		{First: 14, Last: 14, State: Available, Count: 2},
		{First: 15, Last: 15, State: Archiving, Count: 5, Reason: ReasonDeliveryLimit},
	}}
	p, err := Restore(Config{}, s)
	if err != nil {
		t.Fatal(err)
	}
	if p.StartOffset() != 10 || p.EndOffset() != 16 || p.StateEpoch() != 2 {
		t.Fatalf("SPSO %d end %d epoch %d", p.StartOffset(), p.EndOffset(), p.StateEpoch())
	}
	for o, want := range map[int64]RecordState{10: Available, 11: Acknowledged, 13: Available, 14: Available, 15: Archiving} {
		if st, _, _ := p.Record(o); st != want {
			t.Errorf("offset %d: %v, want %v", o, st, want)
		}
	}
	if !reflect.DeepEqual(p.Snapshot(), s) {
		t.Fatalf("snapshot %+v, want %+v", p.Snapshot(), s)
	}
	// The gaps (10, 13) are delivered first, then 14 (its third time).
	got, _ := p.Acquire(0, "a", 10, 16)
	want := []AcquiredRecords{{10, 10, 1}, {13, 13, 1}, {14, 14, 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	// A terminal head is passed at once.
	p, _ = Restore(Config{}, State{StartOffset: 3, Batches: []StateBatch{{First: 3, Last: 4, State: Archived}, {First: 6, Last: 6, State: Acknowledged}}})
	if p.StartOffset() != 5 || p.EndOffset() != 7 {
		t.Fatalf("terminal head: SPSO %d end %d", p.StartOffset(), p.EndOffset())
	}
}

func TestStateApply(t *testing.T) {
	base := State{StartOffset: 0, Batches: []StateBatch{
		{First: 0, Last: 9, State: Available, Count: 1},
		{First: 12, Last: 14, State: Archived, Count: 2},
	}}
	for _, tc := range []struct {
		name string
		u    State
		want State
	}{
		{"split a batch", State{StartOffset: 0, Batches: []StateBatch{{First: 3, Last: 4, State: Acknowledged, Count: 1}}},
			State{StartOffset: 0, Batches: []StateBatch{
				{First: 0, Last: 2, State: Available, Count: 1}, {First: 3, Last: 4, State: Acknowledged, Count: 1},
				{First: 5, Last: 9, State: Available, Count: 1}, {First: 12, Last: 14, State: Archived, Count: 2}}}},
		{"start moves, joins", State{StartOffset: 5, Batches: []StateBatch{{First: 10, Last: 11, State: Available, Count: 1}}},
			State{StartOffset: 5, Batches: []StateBatch{{First: 5, Last: 11, State: Available, Count: 1}, {First: 12, Last: 14, State: Archived, Count: 2}}}},
		{"back to never delivered", State{StartOffset: 0, Batches: []StateBatch{{First: 0, Last: 9, State: Available, Count: 0}}},
			State{StartOffset: 0, Batches: []StateBatch{{First: 12, Last: 14, State: Archived, Count: 2}}}},
		{"a new epoch replaces everything", State{StateEpoch: 1, StartOffset: 40},
			State{StateEpoch: 1, StartOffset: 40}},
	} {
		if got := base.Apply(tc.u); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// ArchivingSince is when the records ARCHIVING began to be some: set by
// the transition that made the first of them ARCHIVING, kept while any
// is, persisted (and restored) with the state, 0 once none is. A
// snapshot written before the field existed reads as 0 (unknown).
func TestArchivingSince(t *testing.T) {
	p := New(Config{LockDurationMs: 1000, DeliveryCountLimit: 2, DeadLetter: true}, 0)
	p.Acquire(10, "m", 4, 4)
	if p.ArchivingSince() != 0 {
		t.Fatalf("since %d with nothing ARCHIVING", p.ArchivingSince())
	}
	e, aerr := p.Acknowledge(20, "m", []AckBatch{{First: 0, Last: 0, Types: []AckType{AckReject}}})
	if aerr != nil || e.Write == nil || e.Write.ArchivingSinceMs != 20 || p.ArchivingSince() != 20 {
		t.Fatalf("reject at 20: since %d, write %+v (%v)", p.ArchivingSince(), e.Write, aerr)
	}
	if _, aerr := p.Acknowledge(30, "m", []AckBatch{{First: 1, Last: 1, Types: []AckType{AckReject}}}); aerr != nil || p.ArchivingSince() != 20 {
		t.Fatalf("a second reject at 30: since %d, want 20 (%v)", p.ArchivingSince(), aerr)
	}
	v, err := EncodeState(p.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeState(v)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Restore(p.cfg, s)
	if err != nil || q.ArchivingSince() != 20 {
		t.Fatalf("restored since %d, want 20 (%v)", q.ArchivingSince(), err)
	}
	q.DeadLettered(0, 0)
	if q.ArchivingSince() != 20 {
		t.Fatalf("since %d with offset 1 still ARCHIVING, want 20", q.ArchivingSince())
	}
	if _, e := q.DeadLettered(1, 1); q.ArchivingSince() != 0 || e.Write == nil || e.Write.ArchivingSinceMs != 0 {
		t.Fatalf("since %d (write %+v) with nothing ARCHIVING, want 0", q.ArchivingSince(), e.Write)
	}
	old, err := DecodeState([]byte(`{"StateEpoch":0,"StartOffset":0,"Batches":[{"First":0,"Last":0,"State":3,"Count":1,"Reason":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Restore(p.cfg, old)
	if err != nil {
		t.Fatal(err)
	}
	if r.ArchivingSince() != 0 || len(r.DeadLetters()) != 1 {
		t.Fatalf("a snapshot without ArchivingSinceMs: since %d, dead letters %v", r.ArchivingSince(), r.DeadLetters())
	}
}
