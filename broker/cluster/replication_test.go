package cluster

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/replica"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestAlterISRCarriesMemberEpochs (KIP-903): a leader's ISR expansion
// carries each member's broker epoch as the member's fetches carried it,
// and the controller refuses it with INELIGIBLE_REPLICA when that epoch is
// an older registration of the member (the broker restarted); the
// replica manager's updater treats that refusal as "not yet" (an error
// that is not a *kerr.Error: proposed again later). With the current
// epoch the expansion commits.
func TestAlterISRCarriesMemberEpochs(t *testing.T) {
	ctl := oneVoter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	propose := func(c controller.Command) controller.Result {
		t.Helper()
		r, err := ctl.Propose(ctx, c)
		if err != nil || r.Code != 0 {
			t.Fatalf("%T: %v %v", c, err, r.Err())
		}
		return r
	}
	register := func(id int32) int64 {
		t.Helper()
		r := propose(controller.RegisterBroker{ID: id, IncarnationID: controller.NewIncarnationID(), Host: "127.0.0.1", Port: 9092 + id})
		propose(controller.UnfenceBroker{ID: id})
		return r.BrokerEpoch
	}
	e1 := register(1)
	e2old := register(2)
	propose(controller.CreateTopic{Name: "t", ID: controller.NewTopicID(), Assignment: [][]int32{{1, 2}}})
	part := func() controller.Partition {
		var p controller.Partition
		ctl.Read(func(st *controller.State) {
			pp, _ := st.Partition("t", 0)
			p = *pp
		})
		return p
	}
	p := part()
	if p.Leader != 1 {
		t.Fatalf("partition %+v, want leader 1", p)
	}
	alter := func(ctx context.Context, topic string, partition, leaderEpoch, partitionEpoch int32, isr []int32, isrEpochs []int64) (controller.PartitionResult, error) {
		return AlterISR(ctx, ctl, 1, e1, topic, partition, leaderEpoch, partitionEpoch, isr, isrEpochs)
	}
	// Shrink to the leader alone.
	r, err := alter(ctx, "t", 0, p.LeaderEpoch, p.PartitionEpoch, []int32{1}, []int64{-1})
	if err != nil || r.Code != 0 {
		t.Fatalf("shrink: %v %+v", err, r)
	}
	// Broker 2 restarts: a new registration, a newer epoch.
	e2 := register(2)
	if e2 <= e2old {
		t.Fatalf("re-registration epoch %d, was %d", e2, e2old)
	}
	p = part()
	u := isrUpdater{alter}
	req := replica.AlterPartition{Topic: "t", Partition: 0, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		ISR: []int32{1, 2}, ISREpochs: []int64{-1, e2old}}
	r, err = alter(ctx, req.Topic, req.Partition, req.LeaderEpoch, req.PartitionEpoch, req.ISR, req.ISREpochs)
	if err != nil || r.Code != kerr.IneligibleReplica.Code {
		t.Fatalf("expansion with the old incarnation's epoch: %v %+v, want INELIGIBLE_REPLICA", err, r)
	}
	var ke *kerr.Error
	if _, err := u.AlterPartition(ctx, req); err == nil || errors.As(err, &ke) {
		t.Fatalf("updater: %v, want an error of unknown outcome", err)
	}
	if p := part(); !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("ISR %v after refusals, want [1]", p.ISR)
	}
	req.ISREpochs = []int64{-1, e2}
	res, err := u.AlterPartition(ctx, req)
	if err != nil || !slices.Equal(res.ISR, []int32{1, 2}) {
		t.Fatalf("expansion with the current epoch: %v %+v", err, res)
	}
	if p := part(); !slices.Equal(p.ISR, []int32{1, 2}) {
		t.Fatalf("ISR %v, want [1 2]", p.ISR)
	}
}
