package server

// Dynamic broker configs (issue 20; Kafka's KIP-226): the BROKER
// resources' configs AlterConfigs and IncrementalAlterConfigs change while
// the broker runs, in two layers as in Kafka: the cluster-wide default (a
// BROKER resource named "") and each broker's own (named by its id), this
// one over the default, both over the properties file and the defaults.
// The keys are those internal/configkeys marks dynamic at the broker:
//
//   - the log keys' broker names (log.retention.ms, log.segment.bytes,
//     log.cleanup.policy, message.max.bytes, ...): the topic defaults,
//     applied by engine.SetLogDefaults to every topic without an override;
//   - min.insync.replicas: the default of topics without their own, for
//     the replica roles (the reconciler) and acks=all;
//   - the connection limits (max.connections, max.connections.per.ip and
//     its overrides, max.connection.creation.rate, and per listener
//     listener.name.<l>.max.connections / .max.connection.creation.rate)
//     and the SSL stores (ssl.keystore.location, ssl.truststore.location,
//     per broker only, also per listener): Config.Reconfigure (strata
//     serve) rebuilds its configuration with them and the Server applies
//     the connection limits it returns.
//
// A single broker keeps both layers in its data directory
// (DynamicConfigsFile, written atomically before a change is applied). In
// a cluster they are replicated metadata (controller.AlterBrokerConfigs):
// any broker proposes a change, and every broker applies the default and
// its own layer when its metadata reaches them (the dynamic goroutine), and
// keeps the file as its copy for its next start until it has caught up.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/configkeys"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/netpoll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DynamicConfigsFile is the file of the data directory that holds the
// broker's dynamic configs.
const DynamicConfigsFile = "dynamic-broker-configs.json"

// DynamicConfigs are the dynamic broker configs that concern one broker:
// the cluster-wide default and its own, broker names (or per-listener
// names) to values as they were set.
type DynamicConfigs struct {
	Default map[string]string `json:"default,omitempty"`
	Broker  map[string]string `json:"broker,omitempty"`
}

// Merged is every dynamic config in force: this broker's over the default.
func (d DynamicConfigs) Merged() map[string]string {
	out := maps.Clone(d.Default)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, d.Broker)
	return out
}

func (d DynamicConfigs) equal(o DynamicConfigs) bool {
	return maps.Equal(d.Default, o.Default) && maps.Equal(d.Broker, o.Broker)
}

// LoadDynamicConfigs reads the dynamic configs kept in data directory dir
// (none when the file does not exist).
func LoadDynamicConfigs(dir string) (DynamicConfigs, error) {
	var d DynamicConfigs
	b, err := os.ReadFile(filepath.Join(dir, DynamicConfigsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s: %w", DynamicConfigsFile, err)
	}
	return d, nil
}

func saveDynamicConfigs(dir string, d DynamicConfigs) error {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(filepath.Join(dir, DynamicConfigsFile), append(b, '\n'))
}

// DynamicLogDefaults returns base (the topic defaults of the properties
// file over Kafka's) with the log keys of d applied: the default layer,
// then this broker's, each layer's names in their precedence
// (log.retention.ms over log.retention.minutes over log.retention.hours),
// as Kafka orders DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG and
// STATIC_BROKER_CONFIG.
func DynamicLogDefaults(base engine.LogConfig, d DynamicConfigs) (engine.LogConfig, error) {
	cfg := base
	for _, layer := range []map[string]string{d.Default, d.Broker} {
		over, err := topicDefaultsOf(layer)
		if err != nil {
			return base, err
		}
		if cfg, err = cfg.Apply(over); err != nil {
			return base, err
		}
	}
	return cfg, nil
}

// topicDefaultsOf maps a layer's log keys to topic names and values in the
// key's unit, the first of a key's names in precedence order winning.
func topicDefaultsOf(layer map[string]string) (map[string]string, error) {
	type pick struct {
		rank int
		text string
	}
	picks := map[string]pick{}
	for name, v := range layer {
		if _, _, ok := configkeys.SplitListener(name); ok {
			continue
		}
		k, _, val, err := configkeys.ParseBroker(name, v)
		if err != nil {
			return nil, err
		}
		if !k.Log {
			continue
		}
		rank := slices.Index(k.BrokerNames(), name)
		if p, ok := picks[k.Topic]; !ok || rank < p.rank {
			picks[k.Topic] = pick{rank, val.Text}
		}
	}
	out := make(map[string]string, len(picks))
	for t, p := range picks {
		out[t] = p.text
	}
	return out, nil
}

// dynState is the Server's part for dynamic broker configs.
type dynState struct {
	mu          sync.Mutex // serializes changes: alterations and the cluster's sync
	cur         atomic.Pointer[DynamicConfigs]
	logDefaults atomic.Pointer[engine.LogConfig] // the effective topic defaults
	minISR      atomic.Int64                     // dynamic min.insync.replicas (0: none)
	dir         string                           // the data directory ("": nothing persisted)
}

// minInsyncConfig is the broker name of min.insync.replicas, which the
// Server applies itself (the replica roles' minimum ISR).
const minInsyncConfig = "min.insync.replicas"

// minInsyncDefault is the broker default of min.insync.replicas in force:
// the dynamic one, else the properties file's (ClusterConfig).
func (s *Server) minInsyncDefault() int {
	if n := s.dyn.minISR.Load(); n > 0 {
		return int(n)
	}
	return s.cfg.Cluster.MinInsyncReplicas
}

// dynamicMinInsync is d's min.insync.replicas (this broker's over the
// default), 0 if neither sets it.
func dynamicMinInsync(d DynamicConfigs) int64 {
	for _, layer := range []map[string]string{d.Broker, d.Default} {
		if v, ok := layer[minInsyncConfig]; ok {
			if _, _, val, err := configkeys.ParseBroker(minInsyncConfig, v); err == nil {
				return val.Int
			}
		}
	}
	return 0
}

// logDefaults are the broker-wide topic defaults in force: the properties
// file's (Config.LogDefaults) with the dynamic ones over them.
func (s *Server) logDefaults() engine.LogConfig {
	if p := s.dyn.logDefaults.Load(); p != nil {
		return *p
	}
	return s.cfg.LogDefaults
}

// dynamicConfigs are the dynamic configs in force.
func (s *Server) dynamicConfigs() DynamicConfigs {
	if p := s.dyn.cur.Load(); p != nil {
		return *p
	}
	return DynamicConfigs{}
}

// initDynamic loads the data directory's dynamic configs and applies them
// (New, after initCluster); in a cluster it starts the goroutine that
// applies the replicated ones.
func (s *Server) initDynamic() {
	s.dyn.cur.Store(&DynamicConfigs{})
	if s.eng != nil {
		s.dyn.dir = s.eng.Dir()
		d, err := LoadDynamicConfigs(s.dyn.dir)
		if err != nil {
			s.log.Error("reading the dynamic broker configs; starting without them", "err", err)
		} else if len(d.Default)+len(d.Broker) > 0 {
			s.dyn.mu.Lock()
			s.applyDynamic(d)
			s.dyn.mu.Unlock()
		}
	}
	if !s.clustered() {
		return
	}
	c := &s.cluster
	w := c.ctl.Watch()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer w.Close()
		select {
		case <-c.member.CaughtUp():
		case <-c.ctx.Done():
			return
		}
		for {
			s.syncDynamic()
			select {
			case <-c.ctx.Done():
				return
			case <-w.C():
			}
		}
	}()
}

// applyDynamic makes d the dynamic configs in force: the topic defaults
// (every topic without an override follows them), then what
// Config.Reconfigure applies (connection limits, SSL stores). A part that
// fails is logged and the rest applied. Caller holds dyn.mu.
func (s *Server) applyDynamic(d DynamicConfigs) {
	if ld, err := DynamicLogDefaults(s.cfg.LogDefaults, d); err != nil {
		s.log.Error("dynamic broker configs: topic defaults not applied", "err", err)
	} else if ld != s.logDefaults() {
		if s.eng != nil {
			if err := s.eng.SetLogDefaults(ld); err != nil {
				s.log.Error("dynamic broker configs: applying the topic defaults", "err", err)
			}
		}
		s.dyn.logDefaults.Store(&ld)
	}
	if n := dynamicMinInsync(d); n != s.dyn.minISR.Load() {
		s.dyn.minISR.Store(n)
		if r := s.cluster.reconciler; r != nil {
			r.SetMinInsync(s.minInsyncDefault()) // the next reconcile gives the roles their new minimum
		}
	}
	if f := s.cfg.Reconfigure; f != nil {
		limits, err := f(d.Merged(), true)
		if err != nil {
			s.log.Error("dynamic broker configs: not applied", "err", err)
		} else if limits != nil {
			s.np.SetConnLimits(*limits)
		}
	}
	s.dyn.cur.Store(&d)
	s.log.Info("dynamic broker configs in force", "default", d.Default, "broker", d.Broker)
}

// checkDynamic checks that d can be applied: the topic defaults it makes,
// and Config.Reconfigure's check of the other keys (without it, keys other
// than log defaults cannot be applied by this Server).
func (s *Server) checkDynamic(d DynamicConfigs) error {
	if _, err := DynamicLogDefaults(s.cfg.LogDefaults, d); err != nil {
		return newAPIError(kerr.InvalidRequest, "%v", err)
	}
	merged := d.Merged()
	if f := s.cfg.Reconfigure; f != nil {
		if _, err := f(merged, false); err != nil {
			return newAPIError(kerr.InvalidRequest, "%v", err)
		}
		return nil
	}
	for name := range merged {
		base := name
		if _, key, ok := configkeys.SplitListener(name); ok {
			base = key
		}
		if k, ok := configkeys.BrokerKey(base); !ok || !k.Log && k.Broker != minInsyncConfig {
			return newAPIError(kerr.InvalidRequest, "%s cannot be changed at runtime by this broker", name)
		}
	}
	return nil
}

// syncDynamic applies the replicated dynamic configs that concern this
// broker when they differ from the ones in force, and keeps them in the
// data directory.
func (s *Server) syncDynamic() {
	var d DynamicConfigs
	s.cluster.ctl.Read(func(st *controller.State) {
		d = DynamicConfigs{Default: st.BrokerConfigs(controller.DefaultBrokerConfigs), Broker: st.BrokerConfigs(s.cfg.NodeID)}
	})
	s.dyn.mu.Lock()
	defer s.dyn.mu.Unlock()
	if d.equal(s.dynamicConfigs()) {
		return
	}
	if s.dyn.dir != "" {
		if err := saveDynamicConfigs(s.dyn.dir, d); err != nil {
			s.log.Warn("keeping a copy of the dynamic broker configs", "err", err)
		}
	}
	s.applyDynamic(d)
}

// brokerEdit turns an entity's dynamic configs (a private copy) into the
// next ones.
type brokerEdit func(cur map[string]string) (map[string]string, error)

// brokerEntity resolves a BROKER resource name: "" is the cluster-wide
// default; a broker id is that broker's (on a single broker, only its own).
func (s *Server) brokerEntity(name string) (id int32, perBroker bool, err error) {
	if name == "" {
		return controller.DefaultBrokerConfigs, false, nil
	}
	n, perr := strconv.ParseInt(name, 10, 32)
	if perr != nil || n < 0 || (!s.clustered() && int32(n) != s.cfg.NodeID) {
		return 0, false, newAPIError(kerr.InvalidRequest, "unexpected broker id %q: this is broker %d (or use an empty name for the cluster-wide default)", name, s.cfg.NodeID)
	}
	return int32(n), true, nil
}

// alterBrokerConfigs applies edit to a BROKER resource's dynamic configs:
// every value checked (configkeys.CheckBrokerAlter: a key that is not
// dynamic, unknown, per broker only or badly valued is INVALID_REQUEST,
// Kafka's answer, naming the key), the result checked as a whole when it
// concerns this broker, then unless validateOnly persisted (the data
// directory, or the controller in a cluster) and applied.
func (s *Server) alterBrokerConfigs(ctx context.Context, name string, validateOnly bool, edit brokerEdit) error {
	id, perBroker, err := s.brokerEntity(name)
	if err != nil {
		return err
	}
	if s.clustered() {
		return s.clusterAlterBrokerConfigs(ctx, id, perBroker, validateOnly, edit)
	}
	s.dyn.mu.Lock()
	defer s.dyn.mu.Unlock()
	cur := s.dynamicConfigs()
	next, err := s.editBrokerConfigs(cur, id, perBroker, edit)
	if err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	if s.dyn.dir != "" {
		if err := saveDynamicConfigs(s.dyn.dir, next); err != nil {
			return newAPIError(kerr.KafkaStorageError, "writing the dynamic broker configs: %v", err)
		}
	}
	s.applyDynamic(next)
	return nil
}

// editBrokerConfigs returns cur with entity id's layer edited and checked.
func (s *Server) editBrokerConfigs(cur DynamicConfigs, id int32, perBroker bool, edit brokerEdit) (DynamicConfigs, error) {
	layer := cur.Default
	if perBroker {
		layer = cur.Broker
	}
	nl, err := s.editLayer(layer, perBroker, edit)
	if err != nil {
		return cur, err
	}
	next := cur
	if perBroker {
		next.Broker = nl
	} else {
		next.Default = nl
	}
	return next, s.checkDynamic(next)
}

// editLayer edits a copy of layer and checks every config of the result.
func (s *Server) editLayer(layer map[string]string, perBroker bool, edit brokerEdit) (map[string]string, error) {
	nl, err := edit(maps.Clone(layer))
	if err != nil {
		return nil, err
	}
	if nl == nil {
		nl = map[string]string{}
	}
	names := slices.Sorted(maps.Keys(nl))
	for _, n := range names {
		v := nl[n]
		if _, err := configkeys.CheckBrokerAlter(n, &v, perBroker); err != nil {
			return nil, newAPIError(kerr.InvalidRequest, "%v", err)
		}
	}
	if len(nl) == 0 {
		return nil, nil
	}
	return nl, nil
}

// clusterAlterBrokerConfigs proposes the change of the entity's configs
// to the controller and, once this broker has applied the metadata,
// applies what concerns it (the other brokers do when their metadata
// reaches it).
func (s *Server) clusterAlterBrokerConfigs(ctx context.Context, id int32, perBroker, validateOnly bool, edit brokerEdit) error {
	if err := s.catchUp(ctx); err != nil {
		return err
	}
	var layer map[string]string
	s.cluster.ctl.Read(func(st *controller.State) { layer = st.BrokerConfigs(id) })
	nl, err := s.editLayer(layer, perBroker, edit)
	if err != nil {
		return err
	}
	if id == controller.DefaultBrokerConfigs || id == s.cfg.NodeID {
		next := s.dynamicConfigs()
		if perBroker {
			next.Broker = nl
		} else {
			next.Default = nl
		}
		if err := s.checkDynamic(next); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	// Propose the difference, not the whole set: a change of other keys
	// proposed meanwhile through another broker is kept.
	cmd := controller.AlterBrokerConfigs{Broker: id, Set: map[string]string{}}
	for k, v := range nl {
		if old, ok := layer[k]; !ok || old != v {
			cmd.Set[k] = v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(layer)) {
		if _, ok := nl[k]; !ok {
			cmd.Delete = append(cmd.Delete, k)
		}
	}
	if len(cmd.Set)+len(cmd.Delete) == 0 {
		return nil
	}
	r, err := s.cluster.ctl.Propose(ctx, cmd)
	if err != nil {
		return proposeErr(err)
	}
	if r.Code != 0 {
		return resultErr(r.Code, r.Message)
	}
	if err := s.cluster.ctl.WaitApplied(ctx, r.Offset); err != nil {
		return newAPIError(kerr.RequestTimedOut, "the change is in the metadata but this broker has not applied it yet: %v", err)
	}
	s.syncDynamic()
	return nil
}

// catchUp waits until this broker's copy of the metadata holds every
// change committed before the call, so that an alter edits the configs in
// force and not a copy that lags: an IncrementalAlterConfigs DELETE sent to
// a broker that had not yet applied the SET made through another broker
// found nothing to delete, proposed nothing and answered success (seen in
// TestClusterDynamicBrokerConfigs). It proposes a change that changes
// nothing (AlterBrokerConfigs of the default entity with nothing to set or
// delete) and waits for it here: one metadata round trip per alter, an
// administrative request.
func (s *Server) catchUp(ctx context.Context) error {
	r, err := s.cluster.ctl.Propose(ctx, controller.AlterBrokerConfigs{Broker: controller.DefaultBrokerConfigs})
	if err != nil {
		return proposeErr(err)
	}
	if r.Code != 0 {
		return resultErr(r.Code, r.Message)
	}
	if err := s.cluster.ctl.WaitApplied(ctx, r.Offset); err != nil {
		return newAPIError(kerr.RequestTimedOut, "this broker has not caught up with the metadata: %v", err)
	}
	if err := s.waitView(ctx, r.Offset); err != nil {
		return newAPIError(kerr.RequestTimedOut, "this broker has not caught up with the metadata: %v", err)
	}
	return nil
}

// setBrokerConfigs is AlterConfigs' edit: the request's set replaces the
// entity's (a null value: INVALID_REQUEST).
func setBrokerConfigs(cs []kmsg.AlterConfigsRequestResourceConfig) brokerEdit {
	return func(map[string]string) (map[string]string, error) {
		set := make(map[string]string, len(cs))
		for _, c := range cs {
			if c.Value == nil {
				return nil, newAPIError(kerr.InvalidRequest, "config %q has a null value", c.Name)
			}
			if _, dup := set[c.Name]; dup {
				return nil, newAPIError(kerr.InvalidRequest, "config %q is given twice", c.Name)
			}
			set[c.Name] = *c.Value
		}
		return set, nil
	}
}

// incrementalBrokerEdit is IncrementalAlterConfigs' edit (operations
// already checked by checkIncrementalOps): SET, DELETE (of a key the
// entity may hold: a name that is not a dynamic broker key is refused as
// a SET of it would be), APPEND and SUBTRACT on a list key, from the
// entity's value or else the value in force.
func (s *Server) incrementalBrokerEdit(ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, perBroker bool) brokerEdit {
	return func(cur map[string]string) (map[string]string, error) {
		if cur == nil {
			cur = map[string]string{}
		}
		for _, op := range ops {
			k, err := configkeys.CheckBrokerAlter(op.Name, nil, perBroker)
			if err != nil {
				return nil, newAPIError(kerr.InvalidRequest, "%v", err)
			}
			switch op.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				cur[op.Name] = *op.Value
			case kmsg.IncrementalAlterConfigOpDelete:
				delete(cur, op.Name)
			case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
				if k.Type != configkeys.List {
					return nil, newAPIError(kerr.InvalidRequest, "config %q is not a list: %v is not allowed", op.Name, op.Op)
				}
				base, ok := cur[op.Name]
				if !ok {
					base = s.brokerValueText(k)
				}
				cur[op.Name] = applyListOp(base, *op.Value, op.Op)
			}
		}
		return cur, nil
	}
}

// brokerValueText is a key's value in force at this broker ("" if none).
func (s *Server) brokerValueText(k *configkeys.Key) string {
	v, _ := s.brokerValue(k)
	return v
}

// SetConnLimits changes the connection limits while the Server runs.
func (s *Server) SetConnLimits(l netpoll.ConnLimits) { s.np.SetConnLimits(l) }
