package server

import (
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/configkeys"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs v0..v4.
func init() { register(32, 0, 4, handleDescribeConfigs) }

// topicKeyType is Kafka's type of a topic-level key (ConfigType in v3+
// responses), from internal/configkeys; STRING for a name it does not know.
func topicKeyType(key string) kmsg.ConfigType {
	if k, ok := configkeys.TopicKey(key); ok {
		return kmsg.ConfigType(k.Type)
	}
	return kmsg.ConfigTypeString
}

// serverValues are the broker keys whose value the Server holds itself.
// Every other broker key reads Config.BrokerConfigs (or its default), and a
// topic key's broker name the engine's topic defaults (Config.LogDefaults).
var serverValues = map[string]func(s *Server) string{
	"advertised.listeners":       func(s *Server) string { return s.advertisedListeners() }, // listeners.go
	"auto.create.topics.enable":  func(s *Server) string { return strconv.FormatBool(s.cfg.AutoCreateTopics) },
	"default.replication.factor": func(s *Server) string { return strconv.Itoa(int(s.cfg.DefaultReplication)) },
	"fetch.max.bytes":            func(s *Server) string { return itoa32(s.cfg.FetchMaxBytes) },
	"node.id":                    func(s *Server) string { return itoa32(s.cfg.NodeID) },
	"num.partitions":             func(s *Server) string { return itoa32(s.cfg.NumPartitions) },
	"socket.request.max.bytes":   func(s *Server) string { return itoa32(s.cfg.MaxRequestBytes) },
}

// brokerNames are the names a BROKER resource lists, sorted as Kafka sorts
// them: every key's broker name and its synonyms in the same unit
// (broker.id, log.dir); a synonym in another unit (log.retention.hours)
// shows only in its key's synonym chain.
var brokerNames = func() []brokerName {
	var out []brokerName
	for _, k := range configkeys.All() {
		if k.Broker == "" {
			continue
		}
		out = append(out, brokerName{k.Broker, k})
		for _, syn := range k.Synonyms {
			if syn.Scale == 0 {
				out = append(out, brokerName{syn.Name, k})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}()

type brokerName struct {
	name string
	key  *configkeys.Key
}

func itoa32(v int32) string { return strconv.FormatInt(int64(v), 10) }

type configSynonym = kmsg.DescribeConfigsResponseResourceConfigConfigSynonym

// brokerValue is a broker key's current value; ok is false for a key with
// no default that is not set (Kafka reports null). A dynamic config
// (dynconfig.go) wins over the properties file.
func (s *Server) brokerValue(k *configkeys.Key) (value string, ok bool) {
	if f := serverValues[k.Broker]; f != nil {
		return f(s), true
	}
	if k.Log {
		return s.logDefault(k.Topic), true
	}
	if syn := s.dynamicSynonyms(k); len(syn) > 0 {
		return *syn[0].Value, true
	}
	return s.staticValue(k)
}

// staticValue is a broker key's value without the dynamic configs: the
// properties file's, or the default.
func (s *Server) staticValue(k *configkeys.Key) (value string, ok bool) {
	if f := serverValues[k.Broker]; f != nil {
		return f(s), true
	}
	if k.Log {
		v, _ := s.cfg.LogDefaults.Value(k.Topic)
		return v, true
	}
	for _, name := range k.BrokerNames() {
		if v, set := s.cfg.BrokerConfigs[name]; set {
			return v, true
		}
	}
	return k.Default, k.Default != ""
}

func (s *Server) logDefault(topicKey string) string {
	v, _ := s.logDefaults().Value(topicKey)
	return v
}

// staticSynonyms are a key's STATIC_BROKER_CONFIG synonyms: each broker
// name set in the properties file or by a flag (Config.BrokerConfigs), in
// precedence order, with its value in its own unit. Without BrokerConfigs
// (a Server not started by `strata serve`) a key counts as set when its
// value differs from its default.
func (s *Server) staticSynonyms(k *configkeys.Key) []configSynonym {
	var out []configSynonym
	if s.cfg.BrokerConfigs == nil {
		if value, ok := s.staticValue(k); ok && value != k.Default {
			out = append(out, configSynonym{Name: k.Broker, Value: kmsg.StringPtr(value), Source: kmsg.ConfigSourceStaticBrokerConfig})
		}
		return out
	}
	for _, name := range k.BrokerNames() {
		if v, set := s.cfg.BrokerConfigs[name]; set {
			out = append(out, configSynonym{Name: name, Value: kmsg.StringPtr(v), Source: kmsg.ConfigSourceStaticBrokerConfig})
		}
	}
	return out
}

// dynamicSynonyms are a key's dynamic broker configs in force
// (dynconfig.go), in Kafka's order: this broker's (DYNAMIC_BROKER_CONFIG),
// then the cluster-wide default's (DYNAMIC_DEFAULT_BROKER_CONFIG), each
// in the key's name precedence, with the values as set.
func (s *Server) dynamicSynonyms(k *configkeys.Key) []configSynonym {
	d := s.dynamicConfigs()
	var out []configSynonym
	for _, layer := range []struct {
		m   map[string]string
		src kmsg.ConfigSource
	}{{d.Broker, kmsg.ConfigSourceDynamicBrokerConfig}, {d.Default, kmsg.ConfigSourceDynamicDefaultBrokerConfig}} {
		for _, name := range k.BrokerNames() {
			if v, ok := layer.m[name]; ok {
				out = append(out, configSynonym{Name: name, Value: kmsg.StringPtr(v), Source: layer.src})
			}
		}
	}
	return out
}

// brokerChain is a broker key's chain: dynamic, static, default.
func (s *Server) brokerChain(k *configkeys.Key) []configSynonym {
	chain := s.dynamicSynonyms(k)
	chain = append(chain, s.staticSynonyms(k)...)
	return append(chain, defaultSynonym(k))
}

// defaultSynonym is the last link of a chain: the key's default under its
// broker name (its topic name for a topic-only key); a null value when it
// has none.
func defaultSynonym(k *configkeys.Key) configSynonym {
	name := k.Broker
	if name == "" {
		name = k.Topic
	}
	syn := configSynonym{Name: name, Source: kmsg.ConfigSourceDefaultConfig}
	if k.Default != "" {
		syn.Value = kmsg.StringPtr(k.Default)
	}
	return syn
}

// topicDefaultSource is where a topic key's broker-wide default comes
// from: the head of its broker chain (DYNAMIC_BROKER_CONFIG,
// DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG), else
// DEFAULT_CONFIG. CreateTopics reports it too.
func (s *Server) topicDefaultSource(topicKey string) kmsg.ConfigSource {
	if k, ok := configkeys.TopicKey(topicKey); ok && k.Broker != "" {
		return s.brokerChain(k)[0].Source
	}
	return kmsg.ConfigSourceDefaultConfig
}

// topicSynonyms is the chain of places a topic key's value can come from,
// highest precedence first, as Kafka lists them: the topic's override
// (DYNAMIC_TOPIC_CONFIG), the dynamic broker configs
// (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG), the broker names
// set in the broker's configuration (STATIC_BROKER_CONFIG), the default
// (DEFAULT_CONFIG). The first link is the value's source.
func (s *Server) topicSynonyms(k *configkeys.Key, overrides map[string]string) []configSynonym {
	var syn []configSynonym
	if v, ok := overrides[k.Topic]; ok {
		syn = append(syn, configSynonym{Name: k.Topic, Value: kmsg.StringPtr(v), Source: kmsg.ConfigSourceDynamicTopicConfig})
	}
	if k.Broker != "" {
		return append(syn, s.brokerChain(k)...)
	}
	return append(syn, defaultSynonym(k))
}

// handleDescribeConfigs describes TOPIC and BROKER resources from the
// table of keys (internal/configkeys).
//
// TOPIC: every log key (engine.TopicKeys) with its value, and its source
// and synonyms (v1+, on request) as topicSynonyms chains them; read-only
// false (topic keys are dynamic). BROKER: this broker's id gets every
// broker key, read-only unless dynamic at the broker (dynconfig.go), with
// its source (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
// STATIC_BROKER_CONFIG when set in the properties file or by a flag, else
// DEFAULT_CONFIG) and synonyms, then its per-listener dynamic configs; an
// empty name gets the cluster-wide dynamic defaults set; another id is
// INVALID_REQUEST, as in Kafka. v3+: each key's type, and its
// documentation on request. ConfigNames, when non-null, filters the keys
// (unknown names are left out). GROUP: the share-group configs
// (share.go's describeGroupConfigs). Other resource types: INVALID_REQUEST.
func handleDescribeConfigs(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeConfigsRequest)
	resp := kmsg.NewPtrDescribeConfigsResponse()
	resp.Resources = make([]kmsg.DescribeConfigsResponseResource, 0, len(req.Resources))
	opts := describeOpts{synonyms: req.IncludeSynonyms, docs: req.IncludeDocumentation}
	for i := range req.Resources {
		rr := &req.Resources[i]
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType = rr.ResourceType
		out.ResourceName = rr.ResourceName
		var err *apiError
		switch {
		case s.configsDenied(rc, auth.OpDescribeConfigs, rr.ResourceType, rr.ResourceName) != nil: // authz.go
			err = s.configsDenied(rc, auth.OpDescribeConfigs, rr.ResourceType, rr.ResourceName)
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			out.Configs, err = s.describeTopicConfigs(rr, opts)
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			out.Configs, err = s.describeBrokerConfigs(rr, opts)
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			out.Configs, err = s.describeGroupConfigs(rr, opts.synonyms, opts.docs) // share.go
		default:
			err = newAPIError(kerr.InvalidRequest, "unsupported resource type %v", rr.ResourceType)
		}
		if err != nil {
			out.ErrorCode, out.ErrorMessage = err.code.Code, kmsg.StringPtr(err.msg)
			out.Configs = nil
		}
		resp.Resources = append(resp.Resources, out)
	}
	rc.respond(resp)
}

type describeOpts struct{ synonyms, docs bool }

// wanted reports whether key passes a ConfigNames filter (nil = all).
func wanted(names []string, key string) bool {
	if names == nil {
		return true
	}
	for _, n := range names {
		if n == key {
			return true
		}
	}
	return false
}

// describedConfig is one entry: its value (nil: null), source from the
// chain's head, the chain when asked for, type and documentation.
func describedConfig(name string, value *string, k *configkeys.Key, chain []configSynonym, readOnly bool, opts describeOpts) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = name
	c.Value = value
	c.ReadOnly = readOnly
	c.Source = chain[0].Source
	c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
	c.ConfigType = kmsg.ConfigType(k.Type)
	if opts.synonyms {
		c.ConfigSynonyms = chain
	}
	if opts.docs {
		c.Documentation = kmsg.StringPtr(k.Doc)
	}
	return c
}

func (s *Server) describeTopicConfigs(rr *kmsg.DescribeConfigsRequestResource, opts describeOpts) ([]kmsg.DescribeConfigsResponseResourceConfig, *apiError) {
	if err := validTopicName(rr.ResourceName); err != nil {
		return nil, newAPIError(kerr.InvalidTopicException, "%v", err)
	}
	var overrides map[string]string
	var cfg engine.LogConfig
	if s.clustered() {
		// The controller's record is the truth in a cluster (AlterConfigs
		// persists there); this broker's engine may lag it.
		vt := s.cluster.view.Load().Topics[rr.ResourceName]
		if vt == nil {
			return nil, newAPIError(kerr.UnknownTopicOrPartition, "topic %q does not exist", rr.ResourceName)
		}
		overrides = engineConfigs(vt.Configs)
		c, err := s.logDefaults().Apply(overrides)
		if err != nil {
			return nil, newAPIError(kerr.InvalidConfig, "topic %q: %v", rr.ResourceName, err)
		}
		cfg = c
	} else {
		t := s.eng.Topic(rr.ResourceName)
		if t == nil {
			return nil, newAPIError(kerr.UnknownTopicOrPartition, "topic %q does not exist", rr.ResourceName)
		}
		overrides, cfg = t.Overrides(), t.Config()
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, name := range engine.TopicKeys() {
		k, ok := configkeys.TopicKey(name)
		if !ok || !wanted(rr.ConfigNames, name) {
			continue
		}
		value, _ := cfg.Value(name)
		out = append(out, describedConfig(name, kmsg.StringPtr(value), k, s.topicSynonyms(k, overrides), k.ReadOnly(configkeys.Topic), opts))
	}
	return out, nil
}

func (s *Server) describeBrokerConfigs(rr *kmsg.DescribeConfigsRequestResource, opts describeOpts) ([]kmsg.DescribeConfigsResponseResourceConfig, *apiError) {
	d := s.dynamicConfigs()
	if rr.ResourceName == "" {
		// The cluster-wide default: the dynamic configs set there only.
		return describeLayer(d.Default, kmsg.ConfigSourceDynamicDefaultBrokerConfig, rr.ConfigNames, opts, nil), nil
	}
	if id, err := strconv.ParseInt(rr.ResourceName, 10, 32); err != nil || int32(id) != s.cfg.NodeID {
		return nil, newAPIError(kerr.InvalidRequest,
			"unexpected broker id %q: this is broker %d (or use an empty name)", rr.ResourceName, s.cfg.NodeID)
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, bn := range brokerNames {
		if !wanted(rr.ConfigNames, bn.name) {
			continue
		}
		k := bn.key
		var value *string
		if v, ok := s.brokerValue(k); ok {
			value = kmsg.StringPtr(v)
		}
		out = append(out, describedConfig(bn.name, value, k, s.brokerChain(k), k.ReadOnly(configkeys.Broker), opts))
	}
	// Per-listener dynamic configs (listener.name.<l>.max.connections):
	// this broker's, then the default's not overridden here.
	out = append(out, describeLayer(d.Broker, kmsg.ConfigSourceDynamicBrokerConfig, rr.ConfigNames, opts, listenerOnly)...)
	def := map[string]string{}
	for n, v := range d.Default {
		if _, over := d.Broker[n]; !over {
			def[n] = v
		}
	}
	return append(out, describeLayer(def, kmsg.ConfigSourceDynamicDefaultBrokerConfig, rr.ConfigNames, opts, listenerOnly)...), nil
}

// listenerOnly keeps per-listener names.
func listenerOnly(name string) bool {
	_, _, ok := configkeys.SplitListener(name)
	return ok
}

// describeLayer describes the configs of one dynamic layer (those keep
// passes; nil: all), sorted by name, each its own one-link chain.
func describeLayer(layer map[string]string, src kmsg.ConfigSource, names []string, opts describeOpts, keep func(string) bool) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, name := range slices.Sorted(maps.Keys(layer)) {
		if !wanted(names, name) || keep != nil && !keep(name) {
			continue
		}
		base := name
		if _, key, ok := configkeys.SplitListener(name); ok {
			base = key
		}
		k, ok := configkeys.BrokerKey(base)
		if !ok {
			continue
		}
		v := layer[name]
		chain := []configSynonym{{Name: name, Value: kmsg.StringPtr(v), Source: src}}
		out = append(out, describedConfig(name, kmsg.StringPtr(v), k, chain, false, opts))
	}
	return out
}
