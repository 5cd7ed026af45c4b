package server

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareGroupEmbeddedThenBroker: an embedded share group's state
// (engine.ShareGroup) is restored by a broker serving the same data
// directory, and the broker's by the embedded group after it: both write
// package share's records to __share_group_state.
func TestShareGroupEmbeddedThenBroker(t *testing.T) {
	dir := t.TempDir()
	eng, err := engine.Open(engine.Options{Dir: dir, Log: engine.DefaultLogConfig(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	topic, err := eng.CreateTopic("handoff", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	topicID := topic.ID()
	for i := range 6 {
		if _, _, err := topic.Produce(nil, []byte{'e', byte('0' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	g, err := eng.ShareGroup("sg", engine.ShareGroupOptions{Reset: engine.ResetEarliest})
	if err != nil {
		t.Fatal(err)
	}
	m, err := g.Join("handoff")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := m.Acquire(4)
	if err != nil || len(rs) != 4 {
		t.Fatalf("embedded Acquire: %d records, %v", len(rs), err)
	}
	if err := m.Accept(rs[:3]...); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(rs[3]); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	// The broker (whose default reset is latest) goes on from offset 3,
	// offset 3 at its second delivery.
	addr, _, stop := openBroker(t, dir)
	cl := newClient(t, addr)
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "raw", []string{"handoff"}
	if r := issue[*kmsg.ShareGroupHeartbeatResponse](t, cl, hb); r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r := rawShareFetch(t, cl, "sg", "raw", 0, topicID, nil)
	if r.ErrorCode != 0 || len(r.Topics) != 1 {
		t.Fatalf("share fetch: %+v", r)
	}
	var got [][3]int64
	for _, a := range r.Topics[0].Partitions[0].AcquiredRecords {
		got = append(got, [3]int64{a.FirstOffset, a.LastOffset, int64(a.DeliveryCount)})
	}
	if want := [][3]int64{{3, 3, 2}, {4, 5, 1}}; !slices.Equal(got, want) {
		t.Fatalf("the broker acquired (first, last, delivery) %v, want %v", got, want)
	}
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	gid, mid := "sg", "raw"
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = &gid, &mid, 1
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = topicID
	at.Partitions = []kmsg.ShareAcknowledgeRequestTopicPartition{{AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
		{FirstOffset: 3, LastOffset: 4, AcknowledgeTypes: []int8{int8(share.AckAccept)}}}}}
	ack.Topics = append(ack.Topics, at)
	if r := issue[*kmsg.ShareAcknowledgeResponse](t, cl, ack); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("accept: %+v", r)
	}
	cl.Close()
	stop()

	// Embedded again: offsets 3 and 4 are done; 5, acquired at the
	// broker's close, comes back with the delivery count it had (an
	// acquisition is not persisted, as KIP-932 says).
	eng, err = engine.Open(engine.Options{Dir: dir, Log: engine.DefaultLogConfig(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	g, err = eng.ShareGroup("sg", engine.ShareGroupOptions{Reset: engine.ResetEarliest})
	if err != nil {
		t.Fatal(err)
	}
	if m, err = g.Join("handoff"); err != nil {
		t.Fatal(err)
	}
	rs, err = m.Acquire(10)
	if err != nil || len(rs) != 1 || rs[0].Offset != 5 || rs[0].DeliveryCount != 1 || string(rs[0].Value) != "e5" {
		t.Fatalf("embedded after the broker acquired %+v, %v; want offset 5 at delivery 1", rs, err)
	}
}
