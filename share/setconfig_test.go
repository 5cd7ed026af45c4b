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
