package loadgen

// Share groups (KIP-932): --share-group NAME makes the kgo consumers
// members of share group NAME instead of direct partition assignment or a
// consumer group. Members of a share group fetch records of the same
// partitions, each record locked to one member until it is acknowledged;
// the consumers acknowledge every record ACCEPT (Client.MarkAcks after each
// poll) and count a record whose delivery count is over 1 as redelivered.
//
// Where the share group starts: a share-partition without state starts
// where the group's share.auto.offset.reset says (latest by default) when
// a member first fetches it, which races the producers. Before each
// measured run runOnce therefore sets every share-partition's start offset
// to the topic's end offset listed before producing (AlterShareGroupOffsets,
// setShareStart), as direct assignment starts at them: the group delivers
// the run's records and nothing older. AlterShareGroupOffsets needs a
// group without members: members of an earlier run (a --find-max step)
// still leaving are waited for.
//
// --compare-share-group runs the measured workload twice per round on the
// same brokers and topic after one warm-up: share group NAME, then consumer
// group --group (NAME-consumers by default), the order alternating over
// --compare-rounds rounds (compareShareGroups). Round i > 1 uses groups
// NAME-r<i> and the consumer group's name with -r<i>: fresh groups each
// round on both sides, so the consumer group does not resume from offsets
// it committed before the other side's records. The report is the share
// group's run (the median round's) with the consumer group's as its
// Baseline (mode BaselineConsumerGroup), the ratio that of consumed
// records/s.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Group types a Result names (Result.GroupType).
const (
	GroupTypeShare    = "share"    // --share-group: a KIP-932 share group
	GroupTypeConsumer = "consumer" // --group: a consumer group
	GroupTypeNone     = "none"     // direct partition assignment
)

// setShareStart bounds: AlterShareGroupOffsets is retried while the group
// still has members (an earlier run's, leaving) or its coordinator is not
// ready, every shareStartBackoff, at most shareStartTries times.
const (
	shareStartTries   = 150
	shareStartBackoff = 200 * time.Millisecond
)

// validateShareGroup checks --share-group and --compare-share-group.
func (c *Config) validateShareGroup(bad func(format string, args ...any)) {
	if c.ShareGroup != "" {
		if c.Consumers == 0 {
			bad("--share-group needs --consumers (the share group's members)")
		}
		if c.Group != "" && !c.CompareShareGroup {
			bad("--share-group and --group are exclusive: a consumer is a member of a share group or of a consumer group (--compare-share-group measures both, --group then naming the consumer group)")
		}
		if c.Group == c.ShareGroup {
			bad("--group %q and --share-group %q name the same group: a group id is either a share group or a consumer group", c.Group, c.ShareGroup)
		}
	}
	if !c.CompareShareGroup {
		return
	}
	if c.ShareGroup == "" || c.Consumers == 0 {
		bad("--compare-share-group needs --share-group NAME and --consumers N: it measures the consumers in share group NAME and in a consumer group")
	}
	if c.Spawn == 0 {
		bad("--compare-share-group needs --spawn: both groups must start without history on the brokers (a consumer group of an earlier run would resume from its committed offsets); against --brokers run --share-group and --group as two commands")
	}
	if c.CompareBlackhole || c.CompareBinary != "" || c.ComparePlaintext || c.SpawnBlackhole {
		bad("--compare-share-group, --compare-blackhole, --compare-binary and --compare-plaintext are exclusive: one comparison per run")
	}
	if c.FindMax {
		bad("--compare-share-group compares the two at one --rate: not with --find-max")
	}
	if c.Verify || len(c.Faults) > 0 {
		bad("--compare-share-group measures throughput: not with --verify or --faults (run those with --share-group alone)")
	}
}

// comparedGroup is --compare-share-group's consumer group: --group, or
// the share group's name with -consumers.
func (c *Config) comparedGroup() string {
	if c.Group != "" {
		return c.Group
	}
	return c.ShareGroup + "-consumers"
}

// groupType is how the consumers consume (GroupType*; "" without
// consumers).
func (c *Config) groupType() string {
	switch {
	case c.Consumers == 0:
		return ""
	case c.ShareGroup != "":
		return GroupTypeShare
	case c.Group != "":
		return GroupTypeConsumer
	}
	return GroupTypeNone
}

// groupLabel names the consumers' group: "share group NAME", "consumer
// group NAME", or "" for direct assignment.
func (c *Config) groupLabel() string {
	switch c.groupType() {
	case GroupTypeShare:
		return sideShareGroup + " " + c.ShareGroup
	case GroupTypeConsumer:
		return sideConsumerGroup + " " + c.Group
	}
	return ""
}

// setShareStart sets share group group's start offset of every partition
// of topic to start's (AlterShareGroupOffsets): a share-partition without
// state is created there, one with state is reset to it.
func setShareStart(ctx context.Context, admin *kgo.Client, group, topic string, start map[int32]int64) error {
	offs := kadm.Offsets{}
	for p, o := range start {
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: o})
	}
	adm := kadm.NewClient(admin)
	var err error
	for range shareStartTries {
		var resp kadm.AlterShareGroupOffsetsResponses
		if resp, err = adm.AlterShareGroupOffsets(ctx, group, offs); err == nil {
			err = resp.Error()
			if err == nil && len(start) > 0 {
				if _, ok := resp.Lookup(topic, 0); !ok {
					err = errors.New("the answer lists no partitions")
				}
			}
		}
		if err == nil || ctx.Err() != nil || !shareStartRetriable(err) {
			break
		}
		t := time.NewTimer(shareStartBackoff)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if err != nil {
		return fmt.Errorf("setting share group %s's start offsets to the end of topic %s (AlterShareGroupOffsets; the broker needs KIP-932 share groups): %w", group, topic, err)
	}
	return nil
}

func shareStartRetriable(err error) bool {
	return errors.Is(err, kerr.NonEmptyGroup) || errors.Is(err, kerr.NotCoordinator) ||
		errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
		errors.Is(err, kerr.UnknownTopicOrPartition)
}

// waitGroupReady bounds: the group is described every groupReadyPoll, at
// most groupReadyTries times.
const (
	groupReadyTries = 300
	groupReadyPoll  = 100 * time.Millisecond
)

// waitGroupReady waits until the run's group (a share group or a consumer
// group) has all cfg.Consumers members and every partition of the topic
// is assigned: a consumer group stable, a share group's members at its
// assignment epoch (they have heard their assignment). Joining takes
// seconds (a consumer group's rebalance, a share group's heartbeats);
// started before that, the producers' first records would wait for it and
// the end-to-end latency of the run's first seconds would be the join's.
// After groupReadyTries it logs why and returns: the run goes on.
func waitGroupReady(ctx context.Context, admin *kgo.Client, cfg *Config, partitions int32, logw io.Writer) {
	adm := kadm.NewClient(admin)
	why := ""
	for range groupReadyTries {
		if why = groupNotReady(ctx, adm, cfg, partitions); why == "" || ctx.Err() != nil {
			return
		}
		t := time.NewTimer(groupReadyPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	fmt.Fprintf(logw, "%s not ready after %v (%s): producing starts anyway\n", cfg.groupLabel(), groupReadyTries*groupReadyPoll, why)
}

// groupNotReady says why the group is not ready yet ("" once it is).
func groupNotReady(ctx context.Context, adm *kadm.Client, cfg *Config, partitions int32) string {
	var members int
	var assigned kadm.TopicsSet
	if cfg.ShareGroup != "" {
		ds, err := adm.DescribeShareGroups(ctx, cfg.ShareGroup)
		if err != nil {
			return err.Error()
		}
		d, ok := ds[cfg.ShareGroup]
		switch {
		case !ok:
			return "not described"
		case d.Err != nil:
			return d.Err.Error()
		}
		for _, m := range d.Members {
			if m.MemberEpoch != d.AssignmentEpoch {
				return fmt.Sprintf("member %s at epoch %d, the assignment's %d", m.MemberID, m.MemberEpoch, d.AssignmentEpoch)
			}
		}
		members, assigned = len(d.Members), d.AssignedPartitions()
	} else {
		ds, err := adm.DescribeGroups(ctx, cfg.Group)
		if err != nil {
			return err.Error()
		}
		d, ok := ds[cfg.Group]
		switch {
		case !ok:
			return "not described"
		case d.Err != nil:
			return d.Err.Error()
		case d.State != "Stable":
			return "state " + d.State
		}
		members, assigned = len(d.Members), d.AssignedPartitions()
	}
	if members != cfg.Consumers {
		return fmt.Sprintf("%d of %d members", members, cfg.Consumers)
	}
	if n := len(assigned[cfg.Topic]); n != int(partitions) {
		return fmt.Sprintf("%d of %d partitions assigned", n, partitions)
	}
	return ""
}

// shareSides are round i's two configurations of --compare-share-group:
// consumers in the share group, and in the consumer group.
func shareSides(cfg *Config, i int) (share, group Config) {
	share, group = *cfg, *cfg
	share.CompareShareGroup, group.CompareShareGroup = false, false
	share.CompareRounds, group.CompareRounds = 0, 0
	share.Group, share.ShareGroup = "", roundGroup(cfg.ShareGroup, i)
	group.ShareGroup, group.Group = "", roundGroup(cfg.comparedGroup(), i)
	return share, group
}

// roundGroup is group's name in round i (from 0): fresh groups each round.
func roundGroup(group string, i int) string {
	if i == 0 {
		return group
	}
	return fmt.Sprintf("%s-r%d", group, i+1)
}

// Sides of --compare-share-group in tables and Round.First.
const (
	sideShareGroup    = "share group"
	sideConsumerGroup = "consumer group"
)

// compareShareGroups is --compare-share-group's measurement on runTarget's
// brokers and topic, after its warm-up: max(CompareRounds, 1) rounds of
// the share group's run and the consumer group's, alternating which goes
// first. rep (config, target, host filled in) becomes the share group's
// report (the median round's with rounds) with the consumer group's as
// its Baseline.
func compareShareGroups(ctx context.Context, cfg *Config, admin *kgo.Client, ti *topicInfo, seeds []string, cluster *Cluster,
	rep *Report, lead time.Duration, logw io.Writer) error {
	n := max(cfg.CompareRounds, 1)
	var reps []*Report
	var rounds []Round
	for i := range n {
		share, group := shareSides(cfg, i)
		order := []*Config{&share, &group}
		first := sideShareGroup
		if i%2 == 1 {
			order, first = []*Config{&group, &share}, sideConsumerGroup
		}
		outs := map[*Config]*runOutcome{}
		for _, side := range order {
			fmt.Fprintf(logw, "round %d of %d: consumers in %s\n", i+1, n, side.groupLabel())
			out, err := runOnce(ctx, side, admin, ti, seeds, cluster, cfg.Rate, cfg.Duration, cfg.Records, lead)
			if out == nil || err != nil || ctx.Err() != nil {
				if len(reps) > 0 {
					*rep = *roundsSoFar(BaselineConsumerGroup, nil, reps, rounds)
				} else if out != nil {
					rep.setOutcome(out)
				}
				return errors.Join(err, ctx.Err(), fmt.Errorf("--compare-share-group: round %d of %d did not finish", i+1, n))
			}
			outs[side] = out
		}
		srep, grep := *rep, *rep
		srep.setOutcome(outs[&share])
		grep.setOutcome(outs[&group])
		srep.Baseline = newBaseline(&srep, &grep, BaselineConsumerGroup, "")
		reps = append(reps, &srep)
		rounds = append(rounds, newRound(first, &srep))
	}
	if n == 1 {
		*rep = *reps[0]
		return nil
	}
	*rep = *roundsSoFar(BaselineConsumerGroup, nil, reps, rounds)
	return nil
}
