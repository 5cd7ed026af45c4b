package engine

import "testing"

// TestCommittedOnMemFS: Committed (Topic.Consume) reads segments on a file
// system other than the operating system's, whose chunks have no
// *os.File: it failed with "invalid argument" reading through a nil one.
func TestCommittedOnMemFS(t *testing.T) {
	dir := "/data"
	mfs := newDataFS(t, dir)
	e := openEngine(t, dir, func(o *Options) { o.fs = mfs })
	defer e.Close()
	mustTopic(t, e, "t", 1, nil)
	mustTopic(t, e, OffsetsTopic, 1, map[string]string{"cleanup.policy": "compact", "segment.index.bytes": "4096"})
	for _, off := range []int64{7, 42} {
		if err := e.Commit("g", "t", 0, off); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := e.Committed("g", "t", 0); err != nil || got != 42 {
		t.Fatalf("Committed = %d, %v; want 42", got, err)
	}
	recs, err := e.Topic("t").Consume(0, 0, 10)
	if err != nil || len(recs) != 0 {
		t.Fatalf("Consume of an empty partition: %d records, %v", len(recs), err)
	}
}
