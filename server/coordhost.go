package server

// The coordinators' host adapters (issue 19): broker/coordhost runs the
// leader loop, the periodic ticks and the internal-topic proposals for the
// group coordinator (groups.go) and the transaction coordinator
// (broker/txnhost, built in txn_coord.go); these types give them the
// Server's cluster view, clock and controller, and the transaction host the
// produce checks and broker addresses (hostCluster).

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/stratalog/strata/broker/coordhost"
	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// hostSource is coordhost.Source over the Server's cluster view.
type hostSource struct{ s *Server }

func (h hostSource) View() coordhost.View {
	v := h.s.cluster.view.Load()
	if v == nil {
		return nil
	}
	return hostView{s: h.s, v: v}
}

// hostView is coordhost.View over one cluster view and the local engine.
type hostView struct {
	s *Server
	v *clusterView
}

// Led returns the partitions of topic this broker leads in the view and
// holds locally as the same topic (its id), with their leader epochs.
func (h hostView) Led(topic string) coordhost.Leadership {
	vt := h.v.Topics[topic]
	if vt == nil || h.s.eng == nil {
		return nil
	}
	local := h.s.eng.Topic(topic)
	if local == nil || local.ID() != vt.ID {
		return nil
	}
	led := coordhost.Leadership{}
	for p, vp := range vt.Parts {
		if vp.Leader == h.s.cfg.NodeID && local.Partition(int32(p)) != nil {
			led[int32(p)] = vp.LeaderEpoch
		}
	}
	return led
}

func (h hostView) Partitions(topic string) (int32, bool) {
	vt := h.v.Topics[topic]
	if vt == nil {
		return 0, false
	}
	return int32(len(vt.Parts)), true
}

func (h hostView) Leader(topic string, p int32) int32 {
	vt := h.v.Topics[topic]
	if vt == nil || p < 0 || int(p) >= len(vt.Parts) {
		return -1
	}
	return vt.Parts[p].Leader
}

func (h hostView) LiveBrokers() int         { return h.v.LiveBrokers() }
func (h hostView) Changed() <-chan struct{} { return h.v.Changed }

// hostClock is coordhost.Clock over the Server's clock.
type hostClock struct{ s *Server }

func (c hostClock) Now() time.Time { return c.s.now() }

func (hostClock) Tick(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func (hostClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// hostCluster is txnhost.Cluster over the Server's cluster state.
type hostCluster struct{ hostSource }

func (c hostCluster) WriteCheck(t *engine.Topic, p int32) int16 {
	code, _ := c.s.clusterProduceCheck(t, p, -1)
	return code
}

func (c hostCluster) BrokerAddr(id int32) (string, bool) { return c.s.brokerAddr(id) }

// hostCreator is coordhost.Creator through the controller, on a goroutine
// owned by the cluster state (goAdmin).
type hostCreator struct{ s *Server }

func (c hostCreator) CreateTopic(spec coordhost.Spec, done func(error)) {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = spec.Name
	rt.NumPartitions = spec.Partitions
	rt.ReplicationFactor = spec.Replication
	for _, k := range slices.Sorted(maps.Keys(spec.Configs)) {
		rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: kmsg.StringPtr(spec.Configs[k])})
	}
	c.s.goAdmin(30000, func(ctx context.Context) {
		out := kmsg.NewCreateTopicsResponseTopic()
		off, err := c.s.clusterCreateTopic(ctx, &rt, false, &out)
		if err != nil && apiErrCode(err) != kerr.TopicAlreadyExists.Code {
			done(err)
			return
		}
		c.s.waitView(ctx, off)
		done(nil)
	})
}

// coordinatorBroker is the broker a host names as key's coordinator in
// the current view, or COORDINATOR_NOT_AVAILABLE when there is none that
// is registered and unfenced (clients retry).
func (s *Server) coordinatorBroker(h *coordhost.Host, key string) (viewBroker, int16) {
	v := s.cluster.view.Load()
	if v == nil || h == nil {
		return viewBroker{}, kerr.CoordinatorNotAvailable.Code
	}
	leader, ok := h.Coordinator(hostView{s: s, v: v}, key)
	if !ok {
		return viewBroker{}, kerr.CoordinatorNotAvailable.Code
	}
	b, ok := v.Broker(leader)
	if !ok || b.Fenced {
		return viewBroker{}, kerr.CoordinatorNotAvailable.Code
	}
	return b, 0
}
