package share

import (
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func one(first, last int64, t AckType) []AckBatch {
	return []AckBatch{{First: first, Last: last, Types: []AckType{t}}}
}

func mustAck(t *testing.T, p *Partition, now int64, member string, b []AckBatch) Effects {
	t.Helper()
	e, err := p.Acknowledge(now, member, b)
	if err != nil {
		t.Fatalf("ack %v by %s at %d: %d %s", b, member, now, err.Code, err.Msg)
	}
	return e
}

func wantRecord(t *testing.T, p *Partition, o int64, st RecordState, count int16, member string) {
	t.Helper()
	gs, gc, gm := p.Record(o)
	if gs != st || gc != count || gm != member {
		t.Fatalf("offset %d: %v count %d member %q, want %v count %d member %q", o, gs, gc, gm, st, count, member)
	}
}

func TestLockExpiryReleasesAndCountsDeliveries(t *testing.T) {
	p := New(Config{LockDurationMs: 1000, DeliveryCountLimit: 3}, 100)
	got, e := p.Acquire(0, "a", 5, 110)
	if want := []AcquiredRecords{{100, 104, 1}}; !slices.Equal(got, want) || e.Write != nil {
		t.Fatalf("acquire: %v %+v, want %v and no write", got, e, want)
	}
	if d := p.NextDeadline(); d != 1000 {
		t.Fatalf("next deadline %d, want 1000", d)
	}
	for _, tc := range []struct {
		now    int64
		state  RecordState
		count  int16
		member string
	}{
		{999, Acquired, 1, "a"}, // the lock holds until its time
		{1000, Available, 1, ""},
	} {
		p.Tick(tc.now)
		for o := int64(100); o < 105; o++ {
			wantRecord(t, p, o, tc.state, tc.count, tc.member)
		}
	}
	if d := p.NextDeadline(); d != -1 {
		t.Fatalf("next deadline %d with nothing acquired", d)
	}
	// The released records come first, then new ones; the counts differ.
	got, _ = p.Acquire(1500, "b", 8, 110)
	if want := []AcquiredRecords{{100, 104, 2}, {105, 107, 1}}; !slices.Equal(got, want) {
		t.Fatalf("second acquire: %v, want %v", got, want)
	}
	// The first member's lock is gone: its acknowledgement is refused.
	if _, err := p.Acknowledge(1600, "a", one(100, 100, AckAccept)); err == nil || err.Code != kerr.InvalidRecordState.Code || err.Msg != "Member is not the owner of batch record" {
		t.Fatalf("ack by the old owner: %+v", err)
	}
	// An expiry that happens inside Acquire is written.
	_, e = p.Acquire(2500, "c", 1, 110)
	if e.Write == nil || !e.Available {
		t.Fatalf("acquire after expiry: %+v", e)
	}
	wantRecord(t, p, 100, Acquired, 3, "c")
	wantRecord(t, p, 101, Available, 2, "")
}

func TestDeliveryCountLimit(t *testing.T) {
	for _, dlq := range []bool{false, true} {
		p := New(Config{LockDurationMs: 100, DeliveryCountLimit: 2, DeadLetter: dlq}, 0)
		now := int64(0)
		p.Acquire(now, "a", 1, 2)
		now += 100
		p.Tick(now)
		wantRecord(t, p, 0, Available, 1, "")
		got, _ := p.Acquire(now, "a", 1, 2)
		if want := []AcquiredRecords{{0, 0, 2}}; !slices.Equal(got, want) {
			t.Fatalf("redelivery: %v", got)
		}
		// The second delivery is the last: RELEASE archives it.
		e := mustAck(t, p, now+10, "a", one(0, 0, AckRelease))
		if !dlq {
			wantRecord(t, p, 0, Archived, 0, "")
			if p.StartOffset() != 1 || len(e.DeadLetters) != 0 || e.Write == nil || e.Write.StartOffset != 1 {
				t.Fatalf("archived at the limit: SPSO %d, effects %+v", p.StartOffset(), e)
			}
			continue
		}
		wantRecord(t, p, 0, Archiving, 2, "")
		if want := []DeadLetter{{0, 2, ReasonDeliveryLimit}}; !slices.Equal(e.DeadLetters, want) {
			t.Fatalf("dead letters %v, want %v", e.DeadLetters, want)
		}
		if p.StartOffset() != 0 {
			t.Fatalf("SPSO %d passed an ARCHIVING record", p.StartOffset())
		}
		// REJECT with a dead-letter topic archives through ARCHIVING too.
		p.Acquire(now+10, "b", 1, 2)
		e = mustAck(t, p, now+20, "b", one(1, 1, AckReject))
		if want := []DeadLetter{{1, 1, ReasonRejected}}; !slices.Equal(e.DeadLetters, want) {
			t.Fatalf("reject: dead letters %v, want %v", e.DeadLetters, want)
		}
		if !slices.Equal(p.DeadLetters(), []DeadLetter{{0, 2, ReasonDeliveryLimit}, {1, 1, ReasonRejected}}) {
			t.Fatalf("pending dead letters %v", p.DeadLetters())
		}
		// ARCHIVING survives a restart, with its reason.
		q, err := Restore(p.cfg, p.Snapshot())
		if err != nil || !slices.Equal(q.DeadLetters(), p.DeadLetters()) {
			t.Fatalf("restored dead letters %v (%v)", q.DeadLetters(), err)
		}
		if n, e := p.DeadLettered(0, 0); n != 1 || p.StartOffset() != 1 || e.Write == nil {
			t.Fatalf("dead-lettered 0: n %d SPSO %d %+v", n, p.StartOffset(), e)
		}
		if n, _ := p.DeadLettered(0, 0); n != 0 {
			t.Fatal("a repeated DeadLettered archived again")
		}
		if n, _ := p.DeadLettered(1, 5); n != 1 || p.StartOffset() != 2 || p.InFlight() != 0 {
			t.Fatalf("dead-lettered 1: n %d SPSO %d in flight %d", n, p.StartOffset(), p.InFlight())
		}
	}
}

func TestAcknowledgeRefusals(t *testing.T) {
	// Offsets 10..19: 10..14 acquired by a, 15..17 by b, 18 accepted by
	// b, 19 released by b (AVAILABLE); a's locks expire at 1000, b's at
	// 1500.
	setup := func() *Partition {
		p := New(Config{LockDurationMs: 1000}, 10)
		p.Acquire(0, "a", 5, 20)
		p.Acquire(500, "b", 5, 20)
		mustAck(t, p, 600, "b", []AckBatch{{First: 18, Last: 19, Types: []AckType{AckAccept, AckRelease}}})
		return p
	}
	for _, tc := range []struct {
		name   string
		now    int64
		member string
		acks   []AckBatch
		code   int16
		msg    string
	}{
		{"another member's records", 700, "b", one(12, 12, AckAccept), kerr.InvalidRecordState.Code, "Member is not the owner of batch record"},
		{"partly another member's", 700, "a", one(14, 15, AckAccept), kerr.InvalidRecordState.Code, "Member is not the owner of batch record"},
		{"already acknowledged", 700, "b", one(18, 18, AckAccept), kerr.InvalidRecordState.Code, "The batch cannot be acknowledged. The batch is not in the acquired state."},
		{"available, not acquired", 700, "b", one(19, 19, AckAccept), kerr.InvalidRecordState.Code, "The batch cannot be acknowledged. The batch is not in the acquired state."},
		{"lock expired at now", 1000, "a", one(10, 10, AckAccept), kerr.InvalidRecordState.Code, "The batch cannot be acknowledged. The batch is not in the acquired state."},
		{"below the SPSO", 700, "a", one(9, 10, AckAccept), kerr.InvalidRecordState.Code, "Batch record not found. The request batch offsets are not found in the cache."},
		{"past the end", 700, "b", one(17, 20, AckAccept), kerr.InvalidRecordState.Code, "Batch record not found. The request batch offsets are not found in the cache."},
		{"twice in one request", 700, "a", append(one(10, 11, AckAccept), one(11, 11, AckReject)...), kerr.InvalidRecordState.Code, "The batch cannot be acknowledged. The batch is not in the acquired state."},
		{"reversed batch", 700, "a", one(11, 10, AckAccept), kerr.InvalidRequest.Code, ""},
		{"wrong number of types", 700, "a", []AckBatch{{First: 10, Last: 12, Types: []AckType{AckAccept, AckAccept}}}, kerr.InvalidRequest.Code, ""},
		{"unknown type", 700, "a", one(10, 10, AckType(5)), kerr.InvalidRequest.Code, ""},
		// A good batch before a bad one changes nothing either.
		{"all or nothing", 700, "a", append(one(10, 10, AckAccept), one(15, 15, AckAccept)...), kerr.InvalidRecordState.Code, "Member is not the owner of batch record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := setup()
			p.Tick(tc.now) // what the refused call expires anyway
			before := p.Snapshot()
			var recs []record
			recs = append(recs, p.recs...)
			_, err := p.Acknowledge(tc.now, tc.member, tc.acks)
			if err == nil || err.Code != tc.code || (tc.msg != "" && err.Msg != tc.msg) {
				t.Fatalf("got %+v, want code %d %q", err, tc.code, tc.msg)
			}
			if !reflect.DeepEqual(p.Snapshot(), before) || !reflect.DeepEqual(p.recs, recs) {
				t.Fatalf("a refused acknowledgement changed the state")
			}
		})
	}
	// The same requests by the owners succeed.
	p := setup()
	mustAck(t, p, 700, "a", one(10, 14, AckAccept))
	mustAck(t, p, 700, "b", one(15, 17, AckAccept))
}

func TestStartOffsetAdvance(t *testing.T) {
	p := New(Config{LockDurationMs: 1000}, 0)
	p.Acquire(0, "a", 10, 10)
	steps := []struct {
		acks  []AckBatch
		spso  int64
		write bool
	}{
		{one(1, 4, AckAccept), 0, true},                                      // the head is still acquired
		{one(6, 6, AckReject), 0, true},                                      // archived, not the head
		{[]AckBatch{{First: 0, Last: 0, Types: []AckType{AckGap}}}, 5, true}, // 0 archived as a gap: 0..4 terminal
		{one(5, 5, AckRelease), 5, true},                                     // AVAILABLE again holds the SPSO
		{[]AckBatch{{First: 7, Last: 9, Types: []AckType{AckAccept, AckRenew, AckReject}}}, 5, true},
		{one(8, 8, AckRenew), 5, false}, // a renew alone writes nothing
	}
	for i, s := range steps {
		e := mustAck(t, p, 100, "a", s.acks)
		if p.StartOffset() != s.spso || (e.Write != nil) != s.write {
			t.Fatalf("step %d: SPSO %d write %v, want %d %v", i, p.StartOffset(), e.Write != nil, s.spso, s.write)
		}
		if e.Write != nil && e.Write.StartOffset != p.StartOffset() {
			t.Fatalf("step %d: write's start offset %d", i, e.Write.StartOffset)
		}
	}
	p.Acquire(200, "b", 1, 10) // 5 again
	mustAck(t, p, 200, "b", one(5, 5, AckAccept))
	mustAck(t, p, 200, "a", one(8, 8, AckAccept))
	if p.StartOffset() != 10 || p.InFlight() != 0 || p.EndOffset() != 10 {
		t.Fatalf("all terminal: SPSO %d in flight %d end %d", p.StartOffset(), p.InFlight(), p.EndOffset())
	}
}

func TestRenewExtendsTheLock(t *testing.T) {
	p := New(Config{LockDurationMs: 1000}, 0)
	p.Acquire(0, "a", 2, 2)
	if e := mustAck(t, p, 900, "a", one(0, 0, AckRenew)); e.Write != nil {
		t.Fatalf("renew wrote %+v", e.Write)
	}
	if _, err := p.Acknowledge(950, "b", one(1, 1, AckRenew)); err == nil || err.Code != kerr.InvalidRecordState.Code {
		t.Fatalf("renew by another member: %+v", err)
	}
	p.Tick(1000)
	wantRecord(t, p, 0, Acquired, 1, "a")
	wantRecord(t, p, 1, Available, 1, "")
	if d := p.NextDeadline(); d != 1900 {
		t.Fatalf("deadline %d, want 1900", d)
	}
	p.Tick(1900)
	wantRecord(t, p, 0, Available, 1, "")
}

func TestBoundedWindow(t *testing.T) {
	p := New(Config{LockDurationMs: 1000, MaxRecordLocks: 10}, 0)
	got, _ := p.Acquire(0, "a", 100, 1000)
	if want := []AcquiredRecords{{0, 9, 1}}; !slices.Equal(got, want) {
		t.Fatalf("first acquire %v, want %v", got, want)
	}
	if got, _ := p.Acquire(0, "b", 100, 1000); len(got) != 0 {
		t.Fatalf("acquired %v with a full window", got)
	}
	// A redelivery inside a full window is still acquirable.
	mustAck(t, p, 10, "a", one(5, 5, AckRelease))
	if got, _ := p.Acquire(20, "b", 100, 1000); !slices.Equal(got, []AcquiredRecords{{5, 5, 2}}) {
		t.Fatalf("redelivery in a full window: %v", got)
	}
	// Acknowledging past the head leaves the window full.
	mustAck(t, p, 30, "a", one(6, 9, AckAccept))
	if got, _ := p.Acquire(30, "b", 100, 1000); len(got) != 0 {
		t.Fatalf("acquired %v while the SPSO stood still", got)
	}
	mustAck(t, p, 40, "a", one(0, 2, AckAccept))
	got, _ = p.Acquire(40, "b", 100, 1000)
	if want := []AcquiredRecords{{10, 12, 1}}; !slices.Equal(got, want) || p.InFlight() != 10 {
		t.Fatalf("after the SPSO moved 3: %v (in flight %d), want %v", got, p.InFlight(), want)
	}
	// maxRecords and the log end bound an acquisition too.
	q := New(Config{MaxRecordLocks: 10}, 0)
	if got, _ := q.Acquire(0, "a", 3, 1000); !slices.Equal(got, []AcquiredRecords{{0, 2, 1}}) {
		t.Fatalf("maxRecords 3: %v", got)
	}
	if got, _ := q.Acquire(0, "a", 30, 5); !slices.Equal(got, []AcquiredRecords{{3, 4, 1}}) {
		t.Fatalf("log end 5: %v", got)
	}
}

func TestLogStartAndReset(t *testing.T) {
	p := New(Config{LockDurationMs: 1000}, 0)
	p.Acquire(0, "a", 10, 10)
	e := p.AdvanceLogStart(4)
	if p.StartOffset() != 4 || p.InFlight() != 6 || e.Write == nil || e.Write.StartOffset != 4 {
		t.Fatalf("log start 4: SPSO %d in flight %d %+v", p.StartOffset(), p.InFlight(), e)
	}
	if ok, _ := p.ResetStart(0); ok {
		t.Fatal("reset with records acquired")
	}
	p.ReleaseMember(10, "a")
	wantRecord(t, p, 4, Available, 1, "")
	p.AdvanceLogStart(20)
	if p.StartOffset() != 20 || p.EndOffset() != 20 || p.InFlight() != 0 {
		t.Fatalf("log start past the end: SPSO %d end %d", p.StartOffset(), p.EndOffset())
	}
	before := p.Snapshot()
	ok, e := p.ResetStart(7)
	if !ok || p.StartOffset() != 7 || p.StateEpoch() != 1 || e.Write == nil || e.Write.StateEpoch != 1 {
		t.Fatalf("reset: %v SPSO %d epoch %d %+v", ok, p.StartOffset(), p.StateEpoch(), e)
	}
	if got := before.Apply(*e.Write); !reflect.DeepEqual(got, p.Snapshot()) {
		t.Fatalf("reset write applied: %+v, want %+v", got, p.Snapshot())
	}
}
