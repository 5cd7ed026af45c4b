package segment_test

import (
	"testing"

	"github.com/stratalog/strata/segment/segmenttest"
)

// TestTruncationsCountsCuts: Truncations moves exactly when bytes are
// dropped (TruncateTo below Size, Recover cutting a torn tail), so a copy
// of the bytes (the engine's tail cache) can tell it went stale.
func TestTruncationsCountsCuts(t *testing.T) {
	var log []byte
	for i := range 4 {
		log = segmenttest.MakeBatch(log, int64(i), 1, 1, 0, []byte("payload"))
	}
	s, _ := memSegment(t, log)
	defer s.Close()
	if s.Truncations() != 0 {
		t.Fatalf("fresh segment: %d", s.Truncations())
	}
	if err := s.TruncateTo(s.Size()); err != nil || s.Truncations() != 0 {
		t.Fatalf("TruncateTo(Size): %v, %d", err, s.Truncations())
	}
	if _, err := s.Recover(0, nil); err != nil || s.Truncations() != 0 {
		t.Fatalf("Recover of a whole log: %v, %d", err, s.Truncations())
	}
	if err := s.TruncateTo(s.Size() - 10); err != nil || s.Truncations() != 1 {
		t.Fatalf("TruncateTo below Size: %v, %d", err, s.Truncations())
	}
	// The torn last batch is cut by Recover.
	if _, err := s.Recover(0, nil); err != nil || s.Truncations() != 2 {
		t.Fatalf("Recover of a torn tail: %v, %d", err, s.Truncations())
	}
}
