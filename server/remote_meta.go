package server

// Replicated remote-log metadata (KIP-405's TopicBasedRemoteLogMetadataManager,
// docs/tiered-storage.md): in cluster mode the remote log manager
// (remote/rlm, Options.Metadata) keeps its metadata as events in the
// internal topic __remote_log_metadata. remoteMeta is rlm.MetadataTopic
// over this broker's cluster view and a Kafka client of the cluster's own
// brokers (their inter-broker listeners, Cluster.Dial):
//
//   - the topic is created like __consumer_offsets (coordhost's Creator,
//     through the controller) when a leader first needs it: 50 partitions,
//     replication factor 3 (capped at the live brokers), min.insync.replicas
//     2 (capped too), retention.ms=-1;
//   - events are produced with acks=all to the partition the manager
//     names, as the client id Kafka's internal-topic check lets write
//     (adminClientID);
//   - every broker consumes every partition from where the manager's
//     snapshot left it (the start at first; read_uncommitted) and hands
//     the records to the manager in order;
//   - leadership, topic existence and the metadata partitions' leaders
//     come from the view.

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/broker/coordhost"
	"github.com/stratalog/strata/remote/rlm"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RemoteLogMetadataTopic is Kafka's internal topic of remote-log metadata.
const RemoteLogMetadataTopic = "__remote_log_metadata"

// remoteLogMetadataSpec is the topic as created (Kafka's defaults:
// rlmm.config.remote.log.metadata.topic.num.partitions 50,
// .replication.factor 3, .min.isr 2, retention forever).
var remoteLogMetadataSpec = coordhost.Topic{
	Name: RemoteLogMetadataTopic, Partitions: 50, Replication: 3, MinInsync: 2,
	Configs: map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"},
}

// RemoteMetadata is the replicated metadata topic for rlm.Options.Metadata:
// nil on a single broker (the manager keeps its metadata in files).
func (s *Server) RemoteMetadata() rlm.MetadataTopic {
	if !s.clustered() {
		return nil
	}
	return &remoteMeta{s: s}
}

type remoteMeta struct {
	s        *Server
	creating atomic.Bool

	mu     sync.Mutex
	cl     *kgo.Client // producer and ListOffsets; nil until first needed
	closed bool
}

var _ rlm.MetadataTopic = (*remoteMeta)(nil)

func (r *remoteMeta) topic() *viewTopic {
	return r.s.cluster.view.Load().Topics[RemoteLogMetadataTopic]
}

func (r *remoteMeta) Partitions() int32 {
	if vt := r.topic(); vt != nil {
		return int32(len(vt.Parts))
	}
	return 0
}

func (r *remoteMeta) Ensure() {
	if r.topic() != nil || !r.creating.CompareAndSwap(false, true) {
		return
	}
	spec := remoteLogMetadataSpec.Spec(r.s.cluster.view.Load().LiveBrokers())
	hostCreator{r.s}.CreateTopic(spec, func(err error) {
		r.creating.Store(false)
		if err != nil {
			r.s.log.Warn("creating "+RemoteLogMetadataTopic, "err", err)
		}
	})
}

// clientOpts are the options of this broker's clients of the cluster.
func (r *remoteMeta) clientOpts() []kgo.Opt {
	v := r.s.cluster.view.Load()
	var seeds []string
	for _, b := range v.Brokers {
		if !b.Fenced {
			seeds = append(seeds, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(adminClientID)}
	if dial := r.s.cfg.Cluster.Dial; dial != nil {
		opts = append(opts, kgo.Dialer(func(ctx context.Context, _, host string) (net.Conn, error) { return dial(ctx, host) }))
	}
	return opts
}

func (r *remoteMeta) client() (*kgo.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("remote-log metadata client closed")
	}
	if r.cl == nil {
		cl, err := kgo.NewClient(append(r.clientOpts(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))...)
		if err != nil {
			return nil, err
		}
		r.cl = cl
	}
	return r.cl, nil
}

func (r *remoteMeta) Publish(ctx context.Context, mp int32, key, value []byte) (int64, error) {
	cl, err := r.client()
	if err != nil {
		return 0, err
	}
	rec := &kgo.Record{Topic: RemoteLogMetadataTopic, Partition: mp, Key: key, Value: value}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return 0, err
	}
	return rec.Offset, nil
}

func (r *remoteMeta) EndOffset(ctx context.Context, mp int32) (int64, error) {
	cl, err := r.client()
	if err != nil {
		return 0, err
	}
	res, err := kadm.NewClient(cl).ListEndOffsets(ctx, RemoteLogMetadataTopic)
	if err != nil {
		return 0, err
	}
	o, ok := res.Lookup(RemoteLogMetadataTopic, mp)
	if !ok {
		return 0, errors.New("no end offset for " + RemoteLogMetadataTopic + "-" + strconv.Itoa(int(mp)))
	}
	return o.Offset, o.Err
}

func (r *remoteMeta) Consume(ctx context.Context, from func(mp int32) int64, apply func(mp int32, offset int64, value []byte)) {
	var n int32
	for {
		v := r.s.cluster.view.Load()
		if vt := v.Topics[RemoteLogMetadataTopic]; vt != nil {
			n = int32(len(vt.Parts))
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-v.Changed:
		}
	}
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < n; p++ {
		offsets[p] = kgo.NewOffset().At(from(p))
	}
	cl, err := kgo.NewClient(append(r.clientOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{RemoteLogMetadataTopic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()))...)
	if err != nil {
		r.s.log.Warn("remote-log metadata consumer", "err", err)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				r.s.log.Warn("remote-log metadata fetch", "partition", p, "err", err)
			}
		})
		fs.EachRecord(func(rec *kgo.Record) { apply(rec.Partition, rec.Offset, rec.Value) })
	}
}

func (r *remoteMeta) Leadership(topic string, id [16]byte, p int32) (int32, bool) {
	vt := r.s.cluster.view.Load().Topics[topic]
	if vt == nil || vt.ID != id || p < 0 || int(p) >= len(vt.Parts) {
		return 0, false
	}
	vp := vt.Parts[p]
	return vp.LeaderEpoch, vp.Leader == r.s.cfg.NodeID
}

// Replicates implements rlm.ReplicaSet: whether this broker holds, or is
// being added as, a replica of the partition (true before the first view:
// until then every partition is materialized).
func (r *remoteMeta) Replicates(id [16]byte, p int32) bool {
	select {
	case <-r.s.cluster.ready:
	default:
		return true
	}
	vt := r.s.cluster.view.Load().ByID[id]
	if vt == nil || p < 0 || int(p) >= len(vt.Parts) {
		return false
	}
	vp := &vt.Parts[p]
	return slices.Contains(vp.Replicas, r.s.cfg.NodeID) || slices.Contains(vp.Adding, r.s.cfg.NodeID)
}

func (r *remoteMeta) TopicGone(id [16]byte) bool {
	select {
	case <-r.s.cluster.ready:
	default:
		return false // no view yet
	}
	return r.s.cluster.view.Load().ByID[id] == nil
}

func (r *remoteMeta) LeadsMetadataPartition(mp int32) bool {
	vt := r.topic()
	return vt != nil && mp >= 0 && int(mp) < len(vt.Parts) && vt.Parts[mp].Leader == r.s.cfg.NodeID
}

func (r *remoteMeta) BrokerID() int32 { return r.s.cfg.NodeID }

// Close closes the producer (the manager calls it when it closes).
func (r *remoteMeta) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.cl != nil {
		r.cl.Close()
		r.cl = nil
	}
}
