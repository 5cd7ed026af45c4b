package engine

import (
	"errors"
	"testing"
)

func TestGroupOffsetsCommitCommitted(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	mustTopic(t, e, "orders", 3, nil)
	if off, err := e.Committed("app", "orders", 1); err != nil || off != -1 {
		t.Fatalf("before any commit: %d, %v", off, err)
	}
	for _, off := range []int64{5, 9, 12} {
		if err := e.Commit("app", "orders", 1, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Commit("other", "orders", 1, 3); err != nil {
		t.Fatal(err)
	}
	if err := e.Commit("app", "nope", 0, 1); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("commit to an unknown topic: %v", err)
	}
	if err := e.Commit("app", "orders", 3, 1); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("commit to a missing partition: %v", err)
	}
	check := func(e *Engine) {
		t.Helper()
		for _, c := range []struct {
			group string
			p     int32
			want  int64
		}{{"app", 1, 12}, {"other", 1, 3}, {"app", 0, -1}} {
			if off, err := e.Committed(c.group, "orders", c.p); err != nil || off != c.want {
				t.Errorf("Committed(%s, orders, %d) = %d, %v; want %d", c.group, c.p, off, err, c.want)
			}
		}
	}
	check(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, nil)
	check(e)
	if p := e.Topic(OffsetsTopic).Partitions(); p != offsetsPartitions {
		t.Errorf("%s has %d partitions", OffsetsTopic, p)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOffsetsPartitionForIsJavaHash(t *testing.T) {
	// "test".hashCode() = 3556498 in Java.
	if got := offsetsPartitionFor("test", 50); got != 3556498%50 {
		t.Fatalf("got %d", got)
	}
	// A hash that overflows int32 and turns negative: abs by masking.
	g := "a-much-longer-group-name-with-overflow"
	var h int32
	for i := 0; i < len(g); i++ {
		h = 31*h + int32(g[i])
	}
	if got := offsetsPartitionFor(g, 50); got != (h&0x7fffffff)%50 {
		t.Fatalf("got %d", got)
	}
}
