package share

import "testing"

func TestSetConfigAppliesToNextAcquisitions(t *testing.T) {
	p := New(Config{LockDurationMs: 1000}, 0)
	p.Acquire(0, "a", 1, 2) // offset 0 locked until 1000
	p.SetConfig(Config{LockDurationMs: 5000, DeliveryCountLimit: 1})
	p.Acquire(0, "a", 1, 2) // offset 1 locked until 5000
	p.Tick(1000)
	// Offset 0 kept its lock's expiry and, delivered once with the new
	// limit of 1, is archived (the SPSO passed it); offset 1 is still acquired.
	wantRecord(t, p, 1, Acquired, 1, "a")
	if p.StartOffset() != 1 {
		t.Fatalf("start offset %d, want 1 (offset 0 archived)", p.StartOffset())
	}
	if d := p.NextDeadline(); d != 5000 {
		t.Fatalf("next deadline %d, want 5000", d)
	}
}

func TestSetConfigWithoutDeadLetterArchivesArchiving(t *testing.T) {
	p := New(Config{DeadLetter: true}, 0)
	p.Acquire(0, "a", 3, 3)
	e, err := p.Acknowledge(0, "a", []AckBatch{{First: 0, Last: 1, Types: []AckType{AckReject}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.DeadLetters) != 2 || e.DeadLetters[0].Reason != ReasonRejected {
		t.Fatalf("dead letters %+v, want offsets 0 and 1 rejected", e.DeadLetters)
	}
	wantRecord(t, p, 0, Archiving, 1, "")
	if p.StartOffset() != 0 {
		t.Fatalf("start offset %d, want 0: ARCHIVING holds the SPSO", p.StartOffset())
	}
	// Still a dead-letter topic: nothing changes.
	if e := p.SetConfig(Config{DeadLetter: true}); e.Write != nil {
		t.Fatalf("write %+v with the dead-letter topic kept", e.Write)
	}
	e = p.SetConfig(Config{})
	if e.Write == nil || e.Write.StartOffset != 2 {
		t.Fatalf("write %+v, want the SPSO at 2", e.Write)
	}
	wantRecord(t, p, 2, Acquired, 1, "a")
	if len(p.DeadLetters()) != 0 {
		t.Fatalf("dead letters left: %+v", p.DeadLetters())
	}
	if ReasonRejected.Message() != "Offset rejected by client." || ReasonDeliveryLimit.Message() != "Offset delivery count exceeded the threshold." {
		t.Fatal("reason messages are not Kafka's")
	}
}
