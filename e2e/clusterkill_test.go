package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterKillAllLosesNothing: 3 brokers (RF 3, min.insync.replicas=2);
// an idempotent acks=all producer runs; all three are SIGKILLed at once;
// after a restart every acknowledged record is read back. A SIGKILL keeps
// what the processes wrote to the page cache; what a power loss would
// drop or tear of the unsynced writes is the engine's crash tests' part
// (engine/crash_test.go: the whole engine over a vfs.MemFS that loses
// power).
//
// It runs in each of durabilityModes (crash_test.go): with the journal
// holding records (the default) or segment ends, and without it, with zero-filled segments or with
// segments written once into unwritten extents, whose private index
// mappings reach their files only at write-backs (recovery rebuilds what
// the kill lost of them).
func TestClusterKillAllLosesNothing(t *testing.T) {
	for _, c := range durabilityModes {
		t.Run(c.name, func(t *testing.T) {
			clusterKillAllLosesNothing(t, clusterProps+c.props)
		})
	}
}

func clusterKillAllLosesNothing(t *testing.T, propsText string) {
	voters := make([]string, 3)
	for i := range voters {
		voters[i] = fmt.Sprintf("%d@%s", i, freeAddr(t))
	}
	props := writeProps(t, propsText)
	c := &testCluster{t: t}
	for i := 0; i < 3; i++ {
		c.brokers = append(c.brokers, startBroker(t, "", "--node-id", fmt.Sprint(i),
			"--controller-quorum", strings.Join(voters, ","), "--config", props))
	}
	ctx := testCtx(t, 3*time.Minute)
	cl := c.client()
	for id := int32(0); id < 3; id++ {
		c.waitBrokers(ctx, cl, id, 3)
	}
	const topic = "killall"
	minISR := "2"
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": &minISR}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond), kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked = map[string][]string{}
		n     int
	)
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // owner: this test; bounded by count and stop
		defer close(done)
		for i := 0; i < 100_000 && pctx.Err() == nil; i++ {
			k, v := fmt.Sprint(i%31), fmt.Sprintf("v%07d", i)
			producer.Produce(pctx, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[k] = append(acked[k], v)
					n++
					mu.Unlock()
				}
			})
			if i%200 == 199 {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	waitFor(t, 60*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		if n < 5000 {
			return fmt.Sprintf("only %d acknowledged", n)
		}
		return ""
	})
	for _, b := range c.brokers { // all at once, mid-run
		b.cmd.Process.Kill()
	}
	for _, b := range c.brokers {
		<-b.exited
		b.cmd = nil
	}
	stop()
	<-done
	producer.Close() // fails what is still in flight: never acknowledged
	mu.Lock()
	total := n
	mu.Unlock()
	for _, b := range c.brokers {
		b.start()
	}
	rep := checkAcked(acked, consumeAll(t, ctx, c.seeds(), topic, total))
	t.Logf("%d acknowledged before the kill: %s", total, rep)
	if !rep.ok() {
		t.Fatalf("%s\n%s", rep, c.warnings())
	}
}
