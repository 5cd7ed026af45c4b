package sharehost

import (
	"bytes"
	"testing"

	"github.com/stratalog/strata/share"
)

// TestShareStateKeyIsShares: the broker's __share_group_state keys and
// partitioning are package share's (which the engine's embedded share
// groups write), so either side restores the other's share-partitions.
func TestShareStateKeyIsShares(t *testing.T) {
	if StateTopic != share.StateTopic {
		t.Fatalf("state topic %q, share's %q", StateTopic, share.StateTopic)
	}
	for _, k := range []Key{
		{Group: "g", Part: 0},
		{Group: "workers", TopicID: [16]byte{1, 2, 3, 15: 9}, Part: 7},
		{Group: "ünïcode-group", TopicID: [16]byte{0xff, 15: 0xee}, Part: 1<<31 - 1},
	} {
		want := shareStateKey(k)
		got := share.StateKey(k.Group, k.TopicID, k.Part)
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v: share.StateKey %x, server %x", k, got, want)
		}
		for _, n := range []int32{1, 3, 50} {
			if p, sp := int32(hashKey(want)%uint32(n)), share.StatePartition(want, n); p != sp {
				t.Fatalf("%+v of %d partitions: server writes partition %d, share.StatePartition %d", k, n, p, sp)
			}
		}
		kind, back, ok := decodeShareKey(got)
		if !ok || kind != shareKeyState || back != k {
			t.Fatalf("server decodes share.StateKey(%+v) as %v %+v %v", k, kind, back, ok)
		}
	}
}
