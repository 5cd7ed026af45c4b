package cluster

import (
	"context"
	"fmt"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/replica"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ReplicationEnv is what a replica manager gets from the broker.
type ReplicationEnv struct {
	BrokerID int32
	// BrokerAddr returns a live broker's listener host:port.
	BrokerAddr func(id int32) (string, bool)
	// AlterISR proposes a partition's new ISR to the controller (Kafka's
	// AlterPartition) with the epochs the leader knows and each member's
	// broker epoch as its fetches carried it (-1: not checked); the result
	// carries the partition's new state or the refusal code.
	AlterISR func(ctx context.Context, topic string, partition, leaderEpoch, partitionEpoch int32, isr []int32, isrEpochs []int64) (controller.PartitionResult, error)
	// BrokerEpoch is this broker's registration epoch (0 before it
	// registered), sent in its followers' fetches (KIP-903); nil: none.
	BrokerEpoch func() int64
	// Registration is this broker's metadata view of a broker's
	// registration (replica.Config.Registration); nil: epochs not checked.
	Registration func(id int32) replica.Registration
}

// PartitionRole is what the controller says about one partition this broker
// is a replica of.
type PartitionRole struct {
	Log            *engine.Log
	Topic          string
	Partition      int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	MinISR         int
}

// ReplicaManager runs leader and follower roles (package replica). The
// broker's metadata reconcile calls BecomeLeader/BecomeFollower/Stop;
// Produce calls CheckProduce before appending and WaitReplicated for
// acks=-1. Errors are *kerr.Error values, possibly wrapped.
type ReplicaManager interface {
	BecomeLeader(PartitionRole) error
	BecomeFollower(PartitionRole) error
	Stop(topic string, partition int32)
	CheckProduce(l *engine.Log, acks int16) error
	WaitReplicated(l *engine.Log, lastOffset int64, fn func(error))
	Close() error
}

// NewReplicaManager is package replica's Manager as a ReplicaManager, its
// ISR changes going to the controller through env.AlterISR.
func NewReplicaManager(env ReplicationEnv, cfg replica.Config) ReplicaManager {
	cfg.BrokerID = env.BrokerID
	cfg.BrokerAddr = env.BrokerAddr
	cfg.ISR = isrUpdater{env.AlterISR}
	cfg.BrokerEpoch = env.BrokerEpoch
	cfg.Registration = env.Registration
	return replicaManager{replica.New(cfg)}
}

// replicaManager is the replica package's Manager as a ReplicaManager.
type replicaManager struct{ *replica.Manager }

func (m replicaManager) BecomeLeader(r PartitionRole) error {
	return m.Manager.BecomeLeader(replica.Partition(r))
}

func (m replicaManager) BecomeFollower(r PartitionRole) error {
	return m.Manager.BecomeFollower(replica.Partition(r))
}

// AlterISR proposes partition's new ISR to ctl for broker id at broker
// epoch (Kafka's AlterPartition): ReplicationEnv.AlterISR. isrEpochs[i] is
// member isr[i]'s broker epoch, which the controller checks (-1, or
// missing: not checked).
func AlterISR(ctx context.Context, ctl *controller.Controller, id int32, epoch int64, topic string, partition, leaderEpoch, partitionEpoch int32, isr []int32, isrEpochs []int64) (controller.PartitionResult, error) {
	members := make([]controller.ISRMember, len(isr))
	for i, id := range isr {
		members[i] = controller.ISRMember{ID: id, Epoch: -1}
		if i < len(isrEpochs) {
			members[i].Epoch = isrEpochs[i]
		}
	}
	r, err := ctl.Propose(ctx, controller.AlterPartition{
		BrokerID: id, BrokerEpoch: epoch,
		Partitions: []controller.AlterPartitionItem{{Topic: topic, Partition: partition,
			LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: members}},
	})
	if err != nil {
		return controller.PartitionResult{}, err
	}
	if r.Code != 0 {
		return controller.PartitionResult{Topic: topic, Partition: partition, Code: r.Code, Message: r.Message}, nil
	}
	if len(r.Partitions) != 1 {
		return controller.PartitionResult{}, fmt.Errorf("server: AlterPartition answered %d partitions", len(r.Partitions))
	}
	return r.Partitions[0], nil
}

// isrUpdater carries a leader's ISR changes to the controller
// (replica.ISRUpdater): a refusal is the controller's *kerr.Error, a failed
// proposal an error of unknown outcome (the manager proposes again later).
type isrUpdater struct {
	alter func(ctx context.Context, topic string, partition, leaderEpoch, partitionEpoch int32, isr []int32, isrEpochs []int64) (controller.PartitionResult, error)
}

func (u isrUpdater) AlterPartition(ctx context.Context, req replica.AlterPartition) (replica.AlterPartitionResult, error) {
	pr, err := u.alter(ctx, req.Topic, req.Partition, req.LeaderEpoch, req.PartitionEpoch, req.ISR, req.ISREpochs)
	if err != nil {
		return replica.AlterPartitionResult{}, err
	}
	if pr.Code == kerr.IneligibleReplica.Code {
		// A member that is not yet registered, unfenced or done shutting
		// down may become eligible any moment (a restarting broker): like
		// Kafka's leader, propose again on a later check rather than wait
		// for the partition to change.
		return replica.AlterPartitionResult{}, fmt.Errorf("server: ISR change not applied yet: %s", pr.Message)
	}
	if pr.Code != 0 {
		ke, _ := kerr.ErrorForCode(pr.Code).(*kerr.Error)
		if ke == nil {
			ke = kerr.UnknownServerError
		}
		return replica.AlterPartitionResult{}, fmt.Errorf("%w: %s", ke, pr.Message)
	}
	return replica.AlterPartitionResult{LeaderEpoch: pr.LeaderEpoch, PartitionEpoch: pr.PartitionEpoch, ISR: pr.ISR}, nil
}
