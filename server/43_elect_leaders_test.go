package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A single broker leads every partition and has nowhere to move replicas:
// ElectLeaders answers ELECTION_NOT_NEEDED (UNKNOWN_TOPIC_OR_PARTITION for
// what does not exist), AlterPartitionReassignments accepts nothing but
// [this broker] and ListPartitionReassignments is empty.
func TestElectAndReassignSingleBroker(t *testing.T) {
	addr, _, _ := startBroker(t)
	adm := newAdmin(t, addr)
	ctx := testCtx(t)
	if r, err := adm.CreateTopic(ctx, 2, 1, nil, "single"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	ts := make(kadm.TopicsSet)
	ts.Add("single", 0, 1, 5)
	er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, ts)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]error{0: kerr.ElectionNotNeeded, 1: kerr.ElectionNotNeeded, 5: kerr.UnknownTopicOrPartition} {
		if got := er["single"][p].Err; got != want {
			t.Fatalf("elect partition %d: %v, want %v", p, got, want)
		}
	}

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("single", 0, []int32{0})
	req.Assign("single", 1, []int32{0, 1})
	rs, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := rs["single"][0].Err; got != nil {
		t.Fatalf("reassign to [0]: %v", got)
	}
	if got := rs["single"][1].Err; got != kerr.InvalidReplicaAssignment {
		t.Fatalf("reassign to [0 1]: %v, want INVALID_REPLICA_ASSIGNMENT", got)
	}
	lr, err := adm.ListPartitionReassignments(ctx, ts)
	if err != nil || len(lr["single"]) != 0 {
		t.Fatalf("list: %v %+v", err, lr)
	}
}
