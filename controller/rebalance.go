package controller

// Automatic preferred-leader rebalancing (Kafka's auto.leader.rebalance.enable,
// leader.imbalance.check.interval.seconds, leader.imbalance.per.broker.percentage).
//
// After failovers leadership piles up on the brokers that stayed up. Every
// check interval the Raft leader's driver asks the State which partitions
// should move back to their preferred replica (ImbalancedPartitions, a pure
// function of the State) and, if any, proposes one ElectLeaders{Preferred}
// for them. The FSM re-checks every partition when it applies the command
// (the preferred replica must still be live, in the ISR and not the
// leader), so a check made on a state that moved on meanwhile is harmless.

// Defaults of the automatic rebalance, as Kafka's.
const (
	DefaultLeaderImbalanceCheckIntervalMs = 300_000
	DefaultLeaderImbalancePerBrokerPct    = 10
)

// ImbalancedPartitions returns, in topic-name and partition order, the
// partitions an automatic preferred-leader election should move now, as
// Kafka's controller decides (checkAndTriggerAutoLeaderRebalance): for each
// broker that is the preferred replica (first in the assignment) of some
// partitions, its imbalance ratio is the share of those it does not lead;
// when the ratio is above percentage/100, every such partition whose
// preferred replica is live and in the ISR is listed. Partitions under
// reassignment are left alone (their replica order is the reassignment's).
// A negative percentage counts as 0.
func (s *State) ImbalancedPartitions(percentage int) []TopicPartition {
	percentage = max(percentage, 0)
	type count struct{ preferred, notLeading int }
	counts := map[int32]*count{}
	for _, name := range s.topicNames() {
		t := s.topics[name]
		for i := range t.Partitions {
			p := &t.Partitions[i]
			pref := p.Replicas[0]
			c := counts[pref]
			if c == nil {
				c = &count{}
				counts[pref] = c
			}
			c.preferred++
			if p.Leader != pref {
				c.notLeading++
			}
		}
	}
	var out []TopicPartition
	for _, name := range s.topicNames() {
		t := s.topics[name]
		for i := range t.Partitions {
			p := &t.Partitions[i]
			pref := p.Replicas[0]
			c := counts[pref]
			// notLeading/preferred > percentage/100, in integers.
			if p.Leader == pref || p.Reassigning() || int64(c.notLeading)*100 <= int64(percentage)*int64(c.preferred) {
				continue
			}
			if !s.live(pref) || !contains(p.ISR, pref) {
				continue
			}
			out = append(out, TopicPartition{Topic: name, Partition: int32(i)})
		}
	}
	return out
}
