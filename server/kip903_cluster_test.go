package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/stratalog/strata/replica"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterStaleIncarnationFetch (KIP-903): followers fetch with Fetch
// v15 carrying their broker epoch, and a leader does not count a follower
// fetch that carries an older broker epoch than the follower's
// registration. A follower broker is restarted (new registration, new
// epoch) and stopped; a Fetch v15 with its replica id and its previous
// incarnation's epoch, sent to the leader over a plain connection, is
// answered NOT_LEADER_OR_FOLLOWER and leaves the leader's record of that
// follower as it was, while the same fetch with the current epoch is
// counted (the follower's position moves to its fetch offset).
func TestClusterStaleIncarnationFetch(t *testing.T) {
	brokers, voters := startInCluster(t, 3)
	seeds := []string{brokers[0].addr, brokers[1].addr, brokers[2].addr}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	waitRegistered(t, brokers)

	const topic = "kip903"
	var topicID [16]byte
	var leader int32 = -1
	if ct, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, nil, topic); err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}
	waitMetadata(t, cl, brokers[0], func(r *kmsg.MetadataResponse) string {
		mt := clusterTopic(r, topic)
		if mt == nil || len(mt.Partitions) != 1 || len(mt.Partitions[0].ISR) != 3 || mt.Partitions[0].Leader < 0 {
			return "topic not replicated yet"
		}
		topicID, leader = mt.TopicID, mt.Partitions[0].Leader
		return ""
	})
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	lb := brokers[leader]
	fb := brokers[(leader+1)%3]
	status := func() replica.FollowerStatus {
		t.Helper()
		m, ok := lb.s.cluster.repl.(interface {
			Status(string, int32) (replica.Status, bool)
		})
		if !ok {
			t.Fatalf("leader's replica manager %T has no Status", lb.s.cluster.repl)
		}
		st, ok := m.Status(topic, 0)
		if !ok {
			t.Fatal("leader has no replica state of the partition")
		}
		for _, f := range st.Followers {
			if f.ID == fb.id {
				return f
			}
		}
		t.Fatalf("leader has no follower %d: %+v", fb.id, st)
		return replica.FollowerStatus{}
	}
	// The follower's fetches carry its registration epoch.
	old := fb.s.BrokerEpoch()
	eventuallyT(t, "follower fetches with its broker epoch", func() string {
		if f := status(); f.BrokerEpoch != old || f.FetchOffset < 10 {
			return fmt.Sprintf("follower %+v, broker epoch %d", f, old)
		}
		return ""
	})

	// Restart the follower: a new registration with a newer epoch, which
	// its new incarnation fetches with; then stop it.
	fb.stop(t)
	fb.restart(t, voters)
	var cur int64
	eventuallyT(t, "restarted follower fetches with its new epoch", func() string {
		cur = fb.s.BrokerEpoch()
		b, ok := lb.s.cluster.view.Load().Broker(fb.id)
		if f := status(); cur <= old || !ok || b.Epoch != cur || f.BrokerEpoch != cur || f.FetchOffset < 10 {
			return fmt.Sprintf("epoch %d (was %d), leader's view %+v, follower %+v", cur, old, b, f)
		}
		return ""
	})
	fb.stop(t)
	before := status()

	fetch := func(epoch int64, corr int32) int16 {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(15)
		req.ReplicaID = -1
		req.ReplicaState.ID = fb.id
		req.ReplicaState.Epoch = epoch
		req.MaxBytes = 1 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = 0
		rp.CurrentLeaderEpoch = -1
		rp.LastFetchedEpoch = -1
		rp.FetchOffset = 0
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		c := dialRaw(t, lb.addr)
		defer c.Close()
		resp := kmsg.NewPtrFetchResponse()
		c.roundTrip(req, corr, resp)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch (epoch %d): %+v", epoch, resp)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	// The old incarnation's fetch: refused, nothing recorded.
	if code := fetch(old, 1); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch with the old incarnation's epoch %d: %v, want NOT_LEADER_OR_FOLLOWER", old, kerr.ErrorForCode(code))
	}
	if after := status(); after.FetchOffset != before.FetchOffset || after.LastFetchMs != before.LastFetchMs || after.BrokerEpoch != cur {
		t.Fatalf("stale fetch counted: follower %+v, was %+v", after, before)
	}
	// The same fetch with the current epoch counts.
	if code := fetch(cur, 2); code != 0 {
		t.Fatalf("fetch with the current epoch %d: %v", cur, kerr.ErrorForCode(code))
	}
	if after := status(); after.FetchOffset != 0 || after.BrokerEpoch != cur {
		t.Fatalf("fetch with the current epoch not counted: follower %+v, was %+v", after, before)
	}
}

// eventuallyT polls check (every 20 ms, for testTimeout at most) until it
// returns "".
func eventuallyT(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
