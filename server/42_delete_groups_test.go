package server

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups on share groups (KIP-932) with franz-go's kadm: refused
// while the group has a member (NON_EMPTY_GROUP), done once it is empty,
// in the same request as a classic group (deleted by the group
// coordinator) and an unknown id (GROUP_ID_NOT_FOUND). The deleted group
// is not found by ShareGroupDescribe, DescribeShareGroupOffsets or
// ListGroups, also after a restart on the same data directory, and a new
// consumer of the id starts over where share.auto.offset.reset (a group
// config, which is kept) says: every record again, first delivery.
func TestDeleteGroupsShareGroup(t *testing.T) {
	dir := t.TempDir()
	addr, _, stop := openBroker(t, dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	createShareTopic(t, adm, "q", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest")
	produceValues(t, cl, "q", "v0", "v1", "v2", "v3", "v4")
	if got := receiveAll(t, addr, "sg", "q", 5); len(got) != 5 {
		t.Fatalf("first consumer: %v", got)
	}
	eventually(t, "sg's start offset at 5", func() bool {
		d, err := adm.DescribeShareGroupOffsets(testCtx(t), "sg")
		if err != nil || d["sg"].Err != nil {
			return false
		}
		o, ok := d["sg"].Offsets["q"][0]
		return ok && o.StartOffset == 5
	})
	// A classic group with a committed offset.
	offs := kadm.Offsets{}
	offs.AddOffset("q", 0, 3, -1)
	if r, err := adm.CommitOffsets(testCtx(t), "cg", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit cg: %v %v", err, r.Error())
	}

	// A member holds sg: refused, and nothing is deleted.
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "m", []string{"q"}
	if r := issue[*kmsg.ShareGroupHeartbeatResponse](t, cl, hb); r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	dr, err := adm.DeleteGroups(testCtx(t), "sg", "cg", "nope")
	if err != nil {
		t.Fatal(err)
	}
	if e := dr["sg"].Err; !errors.Is(e, kerr.NonEmptyGroup) {
		t.Errorf("delete sg with a member: %v, want NON_EMPTY_GROUP", e)
	}
	if e := dr["cg"].Err; e != nil {
		t.Errorf("delete classic cg: %v", e)
	}
	if e := dr["nope"].Err; !errors.Is(e, kerr.GroupIDNotFound) {
		t.Errorf("delete unknown nope: %v, want GROUP_ID_NOT_FOUND", e)
	}
	if ds, err := adm.DescribeShareGroups(testCtx(t), "sg"); err != nil || ds["sg"].Err != nil || len(ds["sg"].Members) != 1 {
		t.Fatalf("sg after the refused delete: %v %+v", err, ds["sg"])
	}
	if fr, err := adm.FetchOffsets(testCtx(t), "cg"); err != nil || len(fr) != 0 {
		t.Errorf("cg's offsets after its delete: %v %v", fr, err)
	}

	// Once the member has left the group is deleted.
	hb.MemberEpoch = -1
	if r := issue[*kmsg.ShareGroupHeartbeatResponse](t, cl, hb); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	dr, err = adm.DeleteGroups(testCtx(t), "sg")
	if err != nil || dr["sg"].Err != nil {
		t.Fatalf("delete empty sg: %v %v", err, dr["sg"].Err)
	}
	notFound := func(when string) {
		t.Helper()
		ds, err := adm.DescribeShareGroups(testCtx(t), "sg")
		if err != nil {
			t.Fatal(err)
		}
		if e := ds["sg"].Err; !errors.Is(e, kerr.GroupIDNotFound) {
			t.Errorf("describe sg %s: %v %+v, want GROUP_ID_NOT_FOUND", when, e, ds["sg"])
		}
		do, err := adm.DescribeShareGroupOffsets(testCtx(t), "sg")
		if err == nil {
			err = do["sg"].Err
		}
		if !errors.Is(err, kerr.GroupIDNotFound) {
			t.Errorf("describe sg's offsets %s: %v, want GROUP_ID_NOT_FOUND", when, err)
		}
		listed, err := adm.ListGroups(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := listed["sg"]; ok {
			t.Errorf("ListGroups %s lists sg: %+v", when, listed["sg"])
		}
		dr, err := adm.DeleteGroups(testCtx(t), "sg")
		if err != nil || !errors.Is(dr["sg"].Err, kerr.GroupIDNotFound) {
			t.Errorf("delete sg again %s: %v %v, want GROUP_ID_NOT_FOUND", when, err, dr["sg"].Err)
		}
	}
	notFound("after the delete")
	cl.Close()
	stop()

	// The tombstones hold across a restart.
	addr, _, _ = openBroker(t, dir)
	cl = newClient(t, addr)
	adm = kadm.NewClient(cl)
	notFound("after a restart")
	produceValues(t, cl, "q", "v5")
	got := receiveAll(t, addr, "sg", "q", 6)
	for v, n := range got {
		if n != 1 {
			t.Errorf("after the delete %s was delivered with count %d, want a first delivery (all: %v)", v, n, got)
		}
	}
}
