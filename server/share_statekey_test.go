package server

import (
	"bytes"
	"testing"

	"github.com/stratalog/strata/share"
)

// TestShareStateKeyIsShares: the broker's __share_group_state keys and
// partitioning are package share's (which the engine's embedded share
// groups write), so either side restores the other's share-partitions.
func TestShareStateKeyIsShares(t *testing.T) {
	if ShareStateTopic != share.StateTopic {
		t.Fatalf("state topic %q, share's %q", ShareStateTopic, share.StateTopic)
	}
	for _, k := range []sharePartKey{
		{group: "g", part: 0},
		{group: "workers", topicID: [16]byte{1, 2, 3, 15: 9}, part: 7},
		{group: "ünïcode-group", topicID: [16]byte{0xff, 15: 0xee}, part: 1<<31 - 1},
	} {
		want := shareStateKey(k)
		got := share.StateKey(k.group, k.topicID, k.part)
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
