package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// saramaMember is one member of a sarama ConsumerGroup: it records every
// message it is handed (marking each, so auto-commit covers it) and the
// partitions of each session it is given.
type saramaMember struct {
	name string

	mu       sync.Mutex
	got      map[[2]int64]int // (partition, offset) -> times handed over
	sessions [][]int32        // the claimed partitions of each session, in order
}

func (m *saramaMember) Setup(s sarama.ConsumerGroupSession) error {
	var ps []int32
	for _, claimed := range s.Claims() {
		ps = append(ps, claimed...)
	}
	slices.Sort(ps)
	m.mu.Lock()
	m.sessions = append(m.sessions, ps)
	m.mu.Unlock()
	return nil
}

func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		m.mu.Lock()
		m.got[[2]int64{int64(msg.Partition), msg.Offset}]++
		m.mu.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

func (m *saramaMember) claims() [][]int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sessions)
}

func (m *saramaMember) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.got)
}

// runSaramaMember joins group with sarama's ConsumerGroup (sticky balance
// strategy, auto-commit every 100 ms) and consumes until ctx ends; the
// returned function stops it and waits for it to leave.
func runSaramaMember(t *testing.T, ctx context.Context, b *broker, group, topic string, m *saramaMember) (stop func()) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.ClientID = "strata-e2e-sarama-" + m.name
	cfg.Version = sarama.V3_6_0_0
	cfg.Metadata.AllowAutoTopicCreation = false
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cg, err := sarama.NewConsumerGroup([]string{b.addr}, group, cfg)
	if err != nil {
		t.Fatalf("sarama consumer group %s: %v\n%s", m.name, err, b.logs)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	errs := make(chan error, 16)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			// Consume returns at each rebalance; the loop rejoins.
			if err := cg.Consume(ctx, []string{topic}, m); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				select {
				case errs <- fmt.Errorf("Consume: %w", err):
				default:
				}
				return
			}
		}
	}()
	go func() {
		for err := range cg.Errors() {
			select {
			case errs <- err:
			default:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		if err := cg.Close(); err != nil {
			t.Errorf("sarama %s Close: %v", m.name, err)
		}
		select {
		case err := <-errs:
			t.Errorf("sarama member %s: %v\nbroker:\n%s", m.name, err, b.logs)
		default:
		}
	}
}

// until adapts a condition to waitFor: what is the failure message.
func until(what string, cond func() bool) func() string {
	return func() string {
		if cond() {
			return ""
		}
		return what
	}
}

// TestSaramaConsumerGroupStickyRebalance: a sarama ConsumerGroup member
// (JoinGroup/SyncGroup carrying the sticky strategy's user data, Heartbeat,
// OffsetFetch, OffsetCommit and LeaveGroup at sarama's Kafka 3.6 versions)
// reads the first half of a 6-partition topic alone and commits; a second
// member joins and the group rebalances to three partitions each, disjoint;
// the second half is read by whichever member owns each partition, with no
// further rebalance. Every record is handed over exactly once and the
// group's commits end at the log ends.
func TestSaramaConsumerGroupStickyRebalance(t *testing.T) {
	b := startBroker(t, "")
	ctx := testCtx(t, 3*time.Minute)
	const topic, group, parts = "sarama-group", "sarama-sticky", int32(6)
	createTopic(t, ctx, b, topic, parts)
	half := produceTo(t, ctx, b, topic, parts, 600)

	a := &saramaMember{name: "a", got: map[[2]int64]int{}}
	stopA := runSaramaMember(t, ctx, b, group, topic, a)
	defer func() {
		if stopA != nil {
			stopA()
		}
	}()
	waitFor(t, time.Minute, until("member a to read the first half", func() bool { return a.count() == 600 }))
	waitFor(t, time.Minute, until("member a's commits to reach the first half's ends", func() bool {
		return fmt.Sprint(committedOffsets(t, ctx, b, group)) == fmt.Sprint(half)
	}))
	if c := a.claims(); len(c) != 1 || len(c[0]) != int(parts) {
		t.Fatalf("member a alone: sessions %v, want one with all %d partitions", c, parts)
	}

	m2 := &saramaMember{name: "b", got: map[[2]int64]int{}}
	stopB := runSaramaMember(t, ctx, b, group, topic, m2)
	defer func() {
		if stopB != nil {
			stopB()
		}
	}()
	waitFor(t, time.Minute, until("both members in one generation", func() bool {
		ca, cb := a.claims(), m2.claims()
		return len(ca) >= 2 && len(cb) >= 1 && len(ca[len(ca)-1])+len(cb[len(cb)-1]) == int(parts)
	}))
	ca, cb := a.claims(), m2.claims()
	lastA, lastB := ca[len(ca)-1], cb[len(cb)-1]
	if len(lastA) != int(parts)/2 || len(lastB) != int(parts)/2 {
		t.Fatalf("after the rebalance a has %v and b %v: want %d each", lastA, lastB, parts/2)
	}
	for _, p := range lastB {
		if slices.Contains(lastA, p) {
			t.Fatalf("partition %d assigned to both members: a %v, b %v", p, lastA, lastB)
		}
	}

	ends := produceTo(t, ctx, b, topic, parts, 600)
	waitFor(t, time.Minute, until("the second half to be read", func() bool { return a.count()+m2.count() >= 1200 }))
	waitFor(t, time.Minute, until("the group's commits to reach the ends", func() bool {
		return fmt.Sprint(committedOffsets(t, ctx, b, group)) == fmt.Sprint(ends)
	}))
	// Checked before either member stops: a stop is a LeaveGroup, which
	// rebalances the other.
	if na, nb := len(a.claims()), len(m2.claims()); na != len(ca) || nb != len(cb) {
		t.Fatalf("the group rebalanced again while nobody joined or left: a's sessions %v, b's %v", a.claims(), m2.claims())
	}
	stopA()
	stopA = nil
	stopB()
	stopB = nil

	owner := map[int32]string{}
	for _, p := range lastA {
		owner[p] = "a"
	}
	for _, p := range lastB {
		owner[p] = "b"
	}
	for p := int32(0); p < parts; p++ {
		for o := int64(0); o < ends[p]; o++ {
			k := [2]int64{int64(p), o}
			na, nb := a.got[k], m2.got[k]
			if na+nb != 1 {
				t.Fatalf("record %d/%d handed over %d times to a and %d to b, want once in all", p, o, na, nb)
			}
			if o >= half[p] && ((owner[p] == "a") != (na == 1)) {
				t.Fatalf("record %d/%d of the second half went to the member that does not own partition %d (owner %s)", p, o, p, owner[p])
			}
		}
	}
	t.Logf("partitions after the rebalance: a %v, b %v (a's sessions %v)", lastA, lastB, ca)
}
