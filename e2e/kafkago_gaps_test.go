package e2e

// Two compatibility gaps reported with kafka-go's Reader and Conn, tried as
// a new user would (issue 24): two group readers sharing a 3-partition
// topic must between them read every message, also across the rebalance
// the second one's join starts; and a Metadata request that auto-creates a
// topic just deleted must say LEADER_NOT_AVAILABLE on its first answer, as
// Kafka's does, not show the new topic's partitions.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestKafkaGoTwoGroupReaders: two kafka.Readers in one group (heartbeat
// interval and rebalance timeout 2 s, otherwise kafka-go's defaults, whose
// balancers are range then round-robin) on a 3-partition topic. The second
// reader joins once the first holds all partitions, and 24 messages are
// written round-robin with kafka.Writer while the group rebalances. The
// two must read all 24 within 30 s.
func TestKafkaGoTwoGroupReaders(t *testing.T) {
	b := startBroker(t, "")
	ctx := testCtx(t, 2*time.Minute)
	const topic, group, parts, n = "kg-two-readers", "kg-two", int32(3), 24
	createTopic(t, ctx, b, topic, parts)

	var mu sync.Mutex
	got := map[string]int{} // value -> reader
	perReader := [2]int{}
	rctx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	read := func(i int) {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:           []string{b.addr},
			GroupID:           group,
			Topic:             topic,
			HeartbeatInterval: 2 * time.Second,
			RebalanceTimeout:  2 * time.Second,
			StartOffset:       kafka.FirstOffset,
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			for {
				m, err := r.FetchMessage(rctx)
				if err != nil {
					if rctx.Err() == nil {
						errs <- fmt.Errorf("reader %d: %w", i, err)
					}
					return
				}
				mu.Lock()
				got[string(m.Value)] = i
				perReader[i]++
				all := len(got) == n
				mu.Unlock()
				if err := r.CommitMessages(rctx, m); err != nil && rctx.Err() == nil {
					errs <- fmt.Errorf("reader %d commit: %w", i, err)
					return
				}
				if all {
					stop()
				}
			}
		}()
	}
	read(0)
	time.Sleep(2500 * time.Millisecond) // the first reader's group is formed (2 s initial delay)
	read(1)

	w := &kafka.Writer{
		Addr:         kafka.TCP(b.addr),
		Topic:        topic,
		Balancer:     &kafka.RoundRobin{},
		BatchSize:    1,
		RequiredAcks: kafka.RequireAll,
	}
	defer w.Close()
	for i := 0; i < n; i++ {
		time.Sleep(200 * time.Millisecond)
		if err := w.WriteMessages(ctx, kafka.Message{Value: []byte(strconv.Itoa(i))}); err != nil {
			stop()
			t.Fatalf("write %d: %v", i, err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var missing []int
	for i := 0; i < n; i++ {
		if _, ok := got[strconv.Itoa(i)]; !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("two readers read %d of %d messages in 30 s (fetches per reader %v); missing %v\nbroker:\n%s",
			len(got), n, perReader, missing, b.logs)
	}
	t.Logf("fetches per reader %v", perReader)
}

// TestKafkaGoReadPartitionsAfterDelete: kafka-go's Conn.ReadPartitions
// right after DeleteTopics auto-creates the topic again (Metadata with
// auto-creation allowed). As from Kafka, that first answer is
// LEADER_NOT_AVAILABLE without partitions, so the caller does not take the
// new topic's partitions for the deleted one's; a later call describes the
// new topic (num.partitions: 1).
func TestKafkaGoReadPartitionsAfterDelete(t *testing.T) {
	b := startBroker(t, "")
	ctx := testCtx(t, time.Minute)
	const topic = "kg-deleted"
	conn, err := kafka.DialContext(ctx, "tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(50 * time.Second))
	if err := conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 5, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if ps, err := conn.ReadPartitions(topic); err != nil || len(ps) != 5 {
		t.Fatalf("ReadPartitions after create: %d partitions, %v; want 5", len(ps), err)
	}
	if err := conn.DeleteTopics(topic); err != nil {
		t.Fatal(err)
	}
	ps, err := conn.ReadPartitions(topic)
	if !errors.Is(err, kafka.LeaderNotAvailable) || len(ps) != 0 {
		t.Fatalf("ReadPartitions right after DeleteTopics: %d partitions %v, %v; want LEADER_NOT_AVAILABLE and none", len(ps), ps, err)
	}
	// The topic was created: a later request sees it.
	for i := 0; ; i++ {
		ps, err = conn.ReadPartitions(topic)
		if err == nil && len(ps) == 1 {
			break
		}
		if i == 50 {
			t.Fatalf("ReadPartitions of the auto-created topic: %d partitions, %v; want 1", len(ps), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, port, _ := net.SplitHostPort(b.addr); ps[0].Leader.Port != mustAtoi(t, port) {
		t.Fatalf("leader %+v, want the broker at %s", ps[0].Leader, b.addr)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
