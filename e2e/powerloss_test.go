package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterPowerLossLosesNothing: 3 brokers (RF 3, min.insync.replicas=2)
// record every sync (STRATA_SYNC_LOG, engine/synclog.go); an idempotent
// acks=all producer runs; all three are SIGKILLed at once; each data
// directory is cut back to what was fsynced (plus torn garbage past it);
// after a restart every acknowledged record is read back.
//
// It runs in each of durabilityModes (crash_test.go): with the journal
// (the default), whose files the cut leaves whole and whose checkpoints
// record in the sync log what they made durable; and without it, with
// zero-filled segments or with segments written once into unwritten
// extents, whose shared flushes are syncfs calls the sync log records per
// segment like any other sync, and whose private index mappings reach
// their files only at write-backs: cut back to their last sync, recovery
// rebuilds them.
func TestClusterPowerLossLosesNothing(t *testing.T) {
	for _, c := range durabilityModes {
		t.Run(c.name, func(t *testing.T) {
			clusterPowerLossLosesNothing(t, clusterProps+c.props)
		})
	}
}

func clusterPowerLossLosesNothing(t *testing.T, propsText string) {
	voters := make([]string, 3)
	for i := range voters {
		voters[i] = fmt.Sprintf("%d@%s", i, freeAddr(t))
	}
	props := writeProps(t, propsText)
	c := &testCluster{t: t}
	logs := make([]string, 3)
	for i := 0; i < 3; i++ {
		logs[i] = filepath.Join(t.TempDir(), "sync.log")
		t.Setenv("STRATA_SYNC_LOG", logs[i]) // inherited by the child at start
		c.brokers = append(c.brokers, startBroker(t, "", "--node-id", fmt.Sprint(i),
			"--controller-quorum", strings.Join(voters, ","), "--config", props))
	}
	ctx := testCtx(t, 3*time.Minute)
	cl := c.client()
	for id := int32(0); id < 3; id++ {
		c.waitBrokers(ctx, cl, id, 3)
	}
	const topic = "powerloss"
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
	for i, b := range c.brokers {
		st, err := engine.CutToSyncLog(b.dataDir, logs[i], engine.CutOptions{Torn: true})
		if err != nil {
			t.Fatalf("broker %d: cut: %v", i, err)
		}
		t.Logf("broker %d: %s", i, st)
	}
	for i, b := range c.brokers {
		t.Setenv("STRATA_SYNC_LOG", filepath.Join(t.TempDir(), fmt.Sprintf("after-%d.log", i)))
		b.start()
	}
	rep := checkAcked(acked, consumeAll(t, ctx, c.seeds(), topic, total))
	t.Logf("%d acknowledged before the power loss: %s", total, rep)
	if !rep.ok() {
		t.Fatalf("%s\n%s", rep, c.warnings())
	}
}
