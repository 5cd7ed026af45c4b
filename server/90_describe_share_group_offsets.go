package server

// DescribeShareGroupOffsets (API key 90), v0..v1 (v1, Kafka 4.2, adds Lag,
// KIP-1226): each share-partition's start offset and leader epoch, and its
// lag (records at or past the start offset and below the high watermark
// that are not acknowledged or archived yet). Null topics: every
// share-partition the group has state for. A partition without state has
// start offset -1 (and lag -1), as in Kafka; a group unknown to the
// coordinator and without state is GROUP_ID_NOT_FOUND. In a cluster a
// partition led by another broker is described by its leader (the
// request forwarded there, answered from the share-partition it owns),
// so a broker without a replica of the partition answers it too.

import (
	"context"
	"maps"
	"slices"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/broker/sharehost"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(90, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	code, msg := s.shareErr()
	st := s.groups.share
	fwd := s.fromBroker(rc) // another broker, for the partitions led here
	var d durable
	remote := map[int32]*kmsg.DescribeShareGroupOffsetsRequest{}
	var slots map[int32][]shareSlot
	var rk sharehost.Replicas
	if code == 0 {
		// In a cluster, read before the lock is taken: the groups'
		// share-partitions in this broker's replicas of the state topic
		// (all of them for a group described whole, else only for a
		// group unknown here), and the state of those led here.
		var whole, named []string
		var keys []sharehost.Key
		for _, rg := range req.Groups {
			if rg.GroupID == "" || (!fwd && !s.authorized(rc, auth.OpDescribe, auth.ResourceGroup, rg.GroupID)) {
				continue
			}
			if rg.Topics == nil {
				whole = append(whole, rg.GroupID)
				continue
			}
			named = append(named, rg.GroupID)
			for _, rt := range rg.Topics {
				if t := s.eng.Topic(rt.Topic); t != nil && !t.Deleted() {
					for _, p := range rt.Partitions {
						keys = append(keys, sharehost.Key{Group: rg.GroupID, TopicID: t.ID(), Part: p})
					}
				}
			}
		}
		rk = st.ReplicaKeys(whole, false)
		if rk == nil {
			rk = sharehost.Replicas{}
		}
		for g, ks := range st.ReplicaKeys(named, true) {
			rk[g] = ks
		}
		for _, g := range whole {
			for k := range rk[g] {
				keys = append(keys, k)
			}
		}
		st.Load(keys)
		st.Lock()
	}
	for gi, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		switch {
		case code != 0:
			g.ErrorCode, g.ErrorMessage = code, kmsg.StringPtr(msg)
		case rg.GroupID == "":
			g.ErrorCode = kerr.InvalidGroupID.Code
		case fwd:
			g.Topics = s.describeShareOffsets(rg.GroupID, rg.Topics, rk, &d, nil)
		case !s.authorized(rc, auth.OpDescribe, auth.ResourceGroup, rg.GroupID): // authz.go
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		case !st.Known(rg.GroupID, rk):
			g.ErrorCode, g.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr("Group "+rg.GroupID+" not found.")
		default:
			g.Topics = s.describeShareOffsets(rg.GroupID, rg.Topics, rk, &d, func(leader int32, ti, pi int, topic string, p int32) {
				r := remote[leader]
				if r == nil {
					r = kmsg.NewPtrDescribeShareGroupOffsetsRequest()
					r.SetVersion(1)
					remote[leader] = r
				}
				if len(r.Groups) == 0 || r.Groups[len(r.Groups)-1].GroupID != rg.GroupID {
					r.Groups = append(r.Groups, kmsg.DescribeShareGroupOffsetsRequestGroup{GroupID: rg.GroupID, Topics: []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{}})
				}
				rgr := &r.Groups[len(r.Groups)-1]
				if len(rgr.Topics) == 0 || rgr.Topics[len(rgr.Topics)-1].Topic != topic {
					rgr.Topics = append(rgr.Topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: topic})
				}
				rgr.Topics[len(rgr.Topics)-1].Partitions = append(rgr.Topics[len(rgr.Topics)-1].Partitions, p)
				if slots == nil {
					slots = map[int32][]shareSlot{}
				}
				slots[leader] = append(slots[leader], shareSlot{gi, ti, pi})
			})
			for i := range g.Topics {
				if !s.authorized(rc, auth.OpDescribe, auth.ResourceTopic, g.Topics[i].Topic) {
					for j := range g.Topics[i].Partitions {
						p := &g.Topics[i].Partitions[j]
						p.ErrorCode, p.StartOffset, p.Lag = kerr.TopicAuthorizationFailed.Code, -1, -1
					}
				}
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	if code == 0 {
		st.Unlock()
	}
	s.waitDurable(d, func(error) {
		if len(remote) == 0 {
			rc.respond(resp)
			return
		}
		c := st.cluster
		c.fanOut(slices.Sorted(maps.Keys(remote)), func(ctx context.Context, id int32, addr string) {
			r := remote[id]
			rr := r.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
			err := c.forwardTo(ctx, id, addr, r, rr)
			type tp struct {
				group, topic string
				p            int32
			}
			answers := map[tp]kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition{}
			for _, g := range rr.Groups {
				for _, t := range g.Topics {
					for _, p := range t.Partitions {
						if g.ErrorCode != 0 && p.ErrorCode == 0 {
							p.ErrorCode, p.ErrorMessage = g.ErrorCode, g.ErrorMessage
						}
						answers[tp{g.GroupID, t.Topic, p.Partition}] = p
					}
				}
			}
			for _, sl := range slots[id] {
				g := &resp.Groups[sl.g]
				op := &g.Topics[sl.t].Partitions[sl.p]
				if op.ErrorCode != 0 {
					continue // not authorized
				}
				a, ok := answers[tp{g.GroupID, g.Topics[sl.t].Topic, op.Partition}]
				switch {
				case err != nil:
					op.ErrorCode, op.ErrorMessage = forwardCode(err)
				case !ok:
					op.ErrorCode = kerr.UnknownServerError.Code
				default:
					op.ErrorCode, op.ErrorMessage = a.ErrorCode, a.ErrorMessage
					op.StartOffset, op.LeaderEpoch, op.Lag = a.StartOffset, a.LeaderEpoch, a.Lag
				}
			}
		}, func() { rc.respond(resp) })
	})
}

// shareSlot is the place of a partition in a share offsets answer (group,
// topic, partition indexes) that another broker fills in.
type shareSlot struct{ g, t, p int }

// describeShareOffsets answers one group (st.mu held). In a cluster, with
// elsewhere set, a partition led by another broker is left for its
// leader, which owns its state: elsewhere is called with that broker and
// the partition's place (topic and partition indexes) in the answer.
func (s *Server) describeShareOffsets(group string, topics []kmsg.DescribeShareGroupOffsetsRequestGroupTopic, rk sharehost.Replicas, d *durable, elsewhere func(leader int32, ti, pi int, topic string, p int32)) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	st := s.groups.share
	if topics == nil { // every share-partition with state
		byName := map[string][]int32{}
		for _, k := range st.GroupKeys(group, rk) {
			if t := s.eng.TopicByID(k.TopicID); t != nil && !t.Deleted() && !slices.Contains(byName[t.Name()], k.Part) {
				byName[t.Name()] = append(byName[t.Name()], k.Part)
			}
		}
		for _, name := range slices.Sorted(mapsKeys(byName)) {
			ps := byName[name]
			slices.Sort(ps)
			topics = append(topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: name, Partitions: ps})
		}
	}
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for ti, rt := range topics {
		ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		ot.Topic = rt.Topic
		t := s.eng.Topic(rt.Topic)
		if t != nil && t.Deleted() {
			t = nil
		}
		if t != nil {
			ot.TopicID = t.ID()
		}
		for _, p := range rt.Partitions {
			op := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			op.Partition = p
			op.StartOffset, op.LeaderEpoch = -1, -1
			switch l := s.shareElsewhere(rt.Topic, p); {
			case t != nil && l >= 0 && elsewhere != nil:
				elsewhere(l, ti, len(ot.Partitions), rt.Topic, p)
			case t == nil || t.Partition(p) == nil:
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				op.LeaderEpoch = t.Partition(p).LeaderEpoch()
				if sp := st.Existing(group, t, p, d); sp != nil {
					op.StartOffset = sp.P.StartOffset()
					op.Lag = sharehost.Lag(sp)
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		out = append(out, ot)
	}
	return out
}
