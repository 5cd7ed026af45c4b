package server

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stratalog/strata/broker/sharehost"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterShareDeadLetterExactlyOnceAfterFailover: in a 3-broker
// cluster the leader of a share-partition stops after its dead-letter
// append is durable but before the records are ARCHIVED (persisted); the
// new leader loads them ARCHIVING, finds their dead letters in the
// dead-letter topic (read at that partition's leader) and archives them
// without writing them again, and writes those never written: one dead
// letter per rejected record.
func TestClusterShareDeadLetterExactlyOnceAfterFailover(t *testing.T) {
	brokers := startShareCluster(t, 3, nil)
	st := newShareTopology(t, brokers, "jobs", 1, 3, nil)
	const group, dlq = "workers", "dlq.jobs"
	if _, err := st.adm.CreateTopic(testCtx(t), 1, 3, map[string]*string{"errors.deadletterqueue.group.enable": kmsg.StringPtr("true")}, dlq); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create %s: %v", dlq, err)
	}
	setGroupConfig(t, st.cl, group, "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", dlq)
	st.produce(t, 0, 8)
	old := brokers[st.leaders[0]]
	old.s.groups.share.HoldDeadLettered(true) // it stops before ARCHIVED
	got, epoch := st.acquire(t, group, "rejecter", 0, 8, 20)
	if len(got) != 8 {
		t.Fatalf("acquired %v, want offsets 0-7", got)
	}
	st.ack(t, group, "rejecter", 0, epoch, 0, 4, 3) // REJECT 0-4: dead-lettered
	waitEnd(t, st.adm, dlq, 5)
	st.ack(t, group, "rejecter", 0, epoch+1, 5, 7, 3) // REJECT 5-7: never written there
	old.stop(t)

	var leader *inCluster
	for _, b := range brokers {
		if b == old {
			continue
		}
		waitMetadata(t, st.cl, b, func(r *kmsg.MetadataResponse) string {
			for _, name := range []string{st.topic, dlq} {
				mt := clusterTopic(r, name)
				if mt == nil || len(mt.Partitions) != 1 || mt.Partitions[0].Leader < 0 || mt.Partitions[0].Leader == old.id {
					return "no new leader of " + name + " yet"
				}
				if name == st.topic {
					st.leaders[0] = mt.Partitions[0].Leader
				}
			}
			return ""
		})
	}
	for _, b := range brokers {
		if b.id == st.leaders[0] {
			leader = b
		}
	}
	// A ShareFetch has the new leader load the share-partition; it
	// deals with the ARCHIVING records itself (at most 100 fetches of up
	// to 200 ms).
	for i := 0; ; i++ {
		if spso(leader.s, group, st.topic, 0) >= 8 {
			break
		}
		if i == 100 {
			t.Fatalf("the new leader (broker %d) has start offset %d, want 8", leader.id, spso(leader.s, group, st.topic, 0))
		}
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID = kmsg.StringPtr(group), kmsg.StringPtr("prober-"+strconv.Itoa(i))
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = 200, 1, 1<<20, 10
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = st.id
		rt.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}
		req.Topics = append(req.Topics, rt)
		if _, err := req.RequestWith(testCtx(t), st.cl.Broker(int(leader.id))); err != nil {
			t.Fatalf("ShareFetch at broker %d: %v", leader.id, err)
		}
	}
	if n := archiving(leader.s, group, st.topic, 0); n != 0 {
		t.Fatalf("ARCHIVING records at the new leader: %d, want 0", n)
	}
	if ends := endOffsets(t, st.adm, dlq); ends[0] != 8 {
		t.Fatalf("%s end offsets %v, want 8 records: one per rejected record", dlq, ends)
	}
	offs := map[string]int{}
	for _, r := range readAll(t, brokers, dlq, 8) {
		h := dlqHeaders(r)
		offs[h["__dlq.errors.offset"]]++
		if h["__dlq.errors.group"] != group || h["__dlq.errors.topic"] != st.topic || h["__dlq.errors.delivery.count"] != "1" {
			t.Errorf("headers %v", h)
		}
	}
	for i := range 8 {
		if n := offs[strconv.Itoa(i)]; n != 1 {
			t.Errorf("offset %d has %d dead letters, want 1 (%v)", i, n, offs)
		}
	}
}

// spso is the start offset of the share-partition, -1 when it is not
// loaded.
func spso(s *Server, group, topic string, part int32) int64 {
	st := s.groups.share
	st.Lock()
	defer st.Unlock()
	tp := s.eng.Topic(topic)
	if tp == nil {
		return -1
	}
	sp := st.PartOf(sharehost.Key{Group: group, TopicID: tp.ID(), Part: part})
	if sp == nil {
		return -1
	}
	return sp.P.StartOffset()
}
