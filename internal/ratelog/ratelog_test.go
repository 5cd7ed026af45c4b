package ratelog

import (
	"testing"
	"time"
)

// The limiter lets a burst through per window, counts the rest, and
// reports the count with the next line let through.
func TestLimiter(t *testing.T) {
	l := Limiter{Window: 10 * time.Second, Burst: 3}
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if ok, _ := l.Allow(t0.Add(time.Duration(i) * time.Millisecond)); !ok {
			t.Fatalf("line %d of the burst held back", i)
		}
	}
	for i := range 5 {
		if ok, _ := l.Allow(t0.Add(time.Second + time.Duration(i))); ok {
			t.Fatalf("line %d past the burst let through", i)
		}
	}
	ok, held := l.Allow(t0.Add(11 * time.Second))
	if !ok || held != 5 {
		t.Fatalf("next window: ok %v, held back %d, want true, 5", ok, held)
	}
	if ok, held := l.Allow(t0.Add(11*time.Second + 1)); !ok || held != 0 {
		t.Fatalf("second line of the window: %v %d", ok, held)
	}
}
