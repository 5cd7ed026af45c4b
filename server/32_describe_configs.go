package server

import (
	"net"
	"strconv"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs v0..v4.
func init() { register(32, 0, 4, handleDescribeConfigs) }

// topicKeyTypes gives Kafka's type of each topic-level key (ConfigType in
// v3+ responses). A key the engine adds later without an entry here is
// reported as STRING.
var topicKeyTypes = map[string]kmsg.ConfigType{
	"segment.bytes":          kmsg.ConfigTypeInt,
	"segment.ms":             kmsg.ConfigTypeLong,
	"segment.index.bytes":    kmsg.ConfigTypeInt,
	"index.interval.bytes":   kmsg.ConfigTypeInt,
	"retention.ms":           kmsg.ConfigTypeLong,
	"retention.bytes":        kmsg.ConfigTypeLong,
	"max.message.bytes":      kmsg.ConfigTypeInt,
	"message.timestamp.type": kmsg.ConfigTypeString,
	"cleanup.policy":         kmsg.ConfigTypeList,
	"write.caching":          kmsg.ConfigTypeBoolean,
	"flush.messages":         kmsg.ConfigTypeLong,
	"flush.ms":               kmsg.ConfigTypeLong,
	"preallocate":            kmsg.ConfigTypeBoolean,
	"file.delete.delay.ms":   kmsg.ConfigTypeLong,

	"delete.retention.ms":       kmsg.ConfigTypeLong,
	"min.cleanable.dirty.ratio": kmsg.ConfigTypeDouble,
	"min.compaction.lag.ms":     kmsg.ConfigTypeLong,
	"max.compaction.lag.ms":     kmsg.ConfigTypeLong,
}

func topicKeyType(key string) kmsg.ConfigType {
	if t, ok := topicKeyTypes[key]; ok {
		return t
	}
	return kmsg.ConfigTypeString
}

// brokerKey is one broker-level key DescribeConfigs reports. Either value
// reads it from the server Config, or topicKey names the topic-level key
// whose broker-wide default it is (read from Config.LogDefaults).
type brokerKey struct {
	name     string
	typ      kmsg.ConfigType
	def      string // Kafka's default
	value    func(s *Server) string
	topicKey string
}

// brokerKeys are reported in this order (sorted by name, as Kafka does).
var brokerKeys = []brokerKey{
	{name: "advertised.listeners", typ: kmsg.ConfigTypeString, def: "", value: func(s *Server) string {
		host, port := s.Advertised()
		return "PLAINTEXT://" + net.JoinHostPort(host, strconv.Itoa(int(port)))
	}},
	{name: "auto.create.topics.enable", typ: kmsg.ConfigTypeBoolean, def: "true", value: func(s *Server) string {
		return strconv.FormatBool(s.cfg.AutoCreateTopics)
	}},
	{name: "broker.id", typ: kmsg.ConfigTypeInt, def: "-1", value: func(s *Server) string { return itoa32(s.cfg.NodeID) }},
	{name: "default.replication.factor", typ: kmsg.ConfigTypeInt, def: "1", value: func(s *Server) string {
		return strconv.Itoa(int(s.cfg.DefaultReplication))
	}},
	{name: "fetch.max.bytes", typ: kmsg.ConfigTypeInt, def: "57671680", value: func(s *Server) string { return itoa32(s.cfg.FetchMaxBytes) }},
	{name: "log.cleaner.delete.retention.ms", typ: kmsg.ConfigTypeLong, topicKey: "delete.retention.ms"},
	{name: "log.cleaner.max.compaction.lag.ms", typ: kmsg.ConfigTypeLong, topicKey: "max.compaction.lag.ms"},
	{name: "log.cleaner.min.cleanable.ratio", typ: kmsg.ConfigTypeDouble, topicKey: "min.cleanable.dirty.ratio"},
	{name: "log.cleaner.min.compaction.lag.ms", typ: kmsg.ConfigTypeLong, topicKey: "min.compaction.lag.ms"},
	{name: "log.cleanup.policy", typ: kmsg.ConfigTypeList, topicKey: "cleanup.policy"},
	{name: "log.flush.interval.messages", typ: kmsg.ConfigTypeLong, topicKey: "flush.messages"},
	{name: "log.flush.interval.ms", typ: kmsg.ConfigTypeLong, topicKey: "flush.ms"},
	{name: "log.index.interval.bytes", typ: kmsg.ConfigTypeInt, topicKey: "index.interval.bytes"},
	{name: "log.index.size.max.bytes", typ: kmsg.ConfigTypeInt, topicKey: "segment.index.bytes"},
	{name: "log.message.timestamp.type", typ: kmsg.ConfigTypeString, topicKey: "message.timestamp.type"},
	{name: "log.preallocate", typ: kmsg.ConfigTypeBoolean, topicKey: "preallocate"},
	{name: "log.retention.bytes", typ: kmsg.ConfigTypeLong, topicKey: "retention.bytes"},
	{name: "log.retention.ms", typ: kmsg.ConfigTypeLong, topicKey: "retention.ms"},
	{name: "log.roll.ms", typ: kmsg.ConfigTypeLong, topicKey: "segment.ms"},
	{name: "log.segment.bytes", typ: kmsg.ConfigTypeInt, topicKey: "segment.bytes"},
	{name: "log.segment.delete.delay.ms", typ: kmsg.ConfigTypeLong, topicKey: "file.delete.delay.ms"},
	{name: "log.write.caching", typ: kmsg.ConfigTypeBoolean, topicKey: "write.caching"},
	{name: "message.max.bytes", typ: kmsg.ConfigTypeInt, topicKey: "max.message.bytes"},
	{name: "node.id", typ: kmsg.ConfigTypeInt, def: "-1", value: func(s *Server) string { return itoa32(s.cfg.NodeID) }},
	{name: "num.partitions", typ: kmsg.ConfigTypeInt, def: "1", value: func(s *Server) string { return itoa32(s.cfg.NumPartitions) }},
	{name: "socket.request.max.bytes", typ: kmsg.ConfigTypeInt, def: "104857600", value: func(s *Server) string {
		return itoa32(s.cfg.MaxRequestBytes)
	}},
}

// brokerKeyFor maps a topic-level key to the broker key that defaults it.
var brokerKeyFor = func() map[string]string {
	m := make(map[string]string)
	for _, k := range brokerKeys {
		if k.topicKey != "" {
			m[k.topicKey] = k.name
		}
	}
	return m
}()

func itoa32(v int32) string { return strconv.FormatInt(int64(v), 10) }

// valueAndDefault returns a broker key's current value and Kafka's default.
func (k *brokerKey) valueAndDefault(s *Server) (value, def string) {
	if k.topicKey != "" {
		value, _ = s.cfg.LogDefaults.Value(k.topicKey)
		def, _ = engine.DefaultLogConfig().Value(k.topicKey)
		return value, def
	}
	return k.value(s), k.def
}

// handleDescribeConfigs describes TOPIC and BROKER resources.
//
// TOPIC: every engine.TopicKeys() key with its value and source: the topic's
// override (DYNAMIC_TOPIC_CONFIG), a broker-wide default that differs from
// Kafka's (STATIC_BROKER_CONFIG) or Kafka's default (DEFAULT_CONFIG);
// synonyms (v1+, on request) list that chain. BROKER: this broker's id gets
// the keys in brokerKeys (read-only: AlterConfigs changes topic keys only); an empty
// name (cluster-wide dynamic defaults) gets none; another id is
// INVALID_REQUEST, as in Kafka. ConfigNames, when non-null, filters the keys
// (unknown names are left out). Other resource types: INVALID_REQUEST.
func handleDescribeConfigs(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeConfigsRequest)
	resp := kmsg.NewPtrDescribeConfigsResponse()
	resp.Resources = make([]kmsg.DescribeConfigsResponseResource, 0, len(req.Resources))
	for i := range req.Resources {
		rr := &req.Resources[i]
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType = rr.ResourceType
		out.ResourceName = rr.ResourceName
		var err *apiError
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			out.Configs, err = s.describeTopicConfigs(rr, req.IncludeSynonyms)
		case kmsg.ConfigResourceTypeBroker:
			out.Configs, err = s.describeBrokerConfigs(rr, req.IncludeSynonyms)
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

func (s *Server) describeTopicConfigs(rr *kmsg.DescribeConfigsRequestResource, synonyms bool) ([]kmsg.DescribeConfigsResponseResourceConfig, *apiError) {
	if err := validTopicName(rr.ResourceName); err != nil {
		return nil, newAPIError(kerr.InvalidTopicException, "%v", err)
	}
	var overrides map[string]string
	var cfg engine.LogConfig
	if s.clustered() {
		// The controller's record is the truth in a cluster (AlterConfigs
		// persists there); this broker's engine may lag it.
		vt := s.cluster.view.Load().topics[rr.ResourceName]
		if vt == nil {
			return nil, newAPIError(kerr.UnknownTopicOrPartition, "topic %q does not exist", rr.ResourceName)
		}
		overrides = engineConfigs(vt.configs)
		c, err := s.cfg.LogDefaults.Apply(overrides)
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
	for _, e := range s.topicConfigEntries(cfg, overrides) {
		if !wanted(rr.ConfigNames, e.name) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = e.name
		c.Value = kmsg.StringPtr(e.value)
		c.Source = e.source
		c.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig
		c.ConfigType = topicKeyType(e.name)
		if synonyms {
			c.ConfigSynonyms = s.topicSynonyms(e.name, overrides)
		}
		out = append(out, c)
	}
	return out, nil
}

// topicSynonyms is the chain of places a topic key's value can come from,
// highest precedence first, as Kafka lists them.
func (s *Server) topicSynonyms(key string, overrides map[string]string) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	var syn []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	if v, ok := overrides[key]; ok {
		syn = append(syn, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
			Name: key, Value: kmsg.StringPtr(v), Source: kmsg.ConfigSourceDynamicTopicConfig,
		})
	}
	name := brokerKeyFor[key]
	if name == "" {
		name = key
	}
	value, _ := s.cfg.LogDefaults.Value(key)
	def, _ := engine.DefaultLogConfig().Value(key)
	if value != def {
		syn = append(syn, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
			Name: name, Value: kmsg.StringPtr(value), Source: kmsg.ConfigSourceStaticBrokerConfig,
		})
	}
	return append(syn, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
		Name: name, Value: kmsg.StringPtr(def), Source: kmsg.ConfigSourceDefaultConfig,
	})
}

func (s *Server) describeBrokerConfigs(rr *kmsg.DescribeConfigsRequestResource, synonyms bool) ([]kmsg.DescribeConfigsResponseResourceConfig, *apiError) {
	if rr.ResourceName == "" {
		return nil, nil // no dynamic cluster-wide defaults
	}
	if id, err := strconv.ParseInt(rr.ResourceName, 10, 32); err != nil || int32(id) != s.cfg.NodeID {
		return nil, newAPIError(kerr.InvalidRequest,
			"unexpected broker id %q: this is broker %d (or use an empty name)", rr.ResourceName, s.cfg.NodeID)
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for i := range brokerKeys {
		k := &brokerKeys[i]
		if !wanted(rr.ConfigNames, k.name) {
			continue
		}
		value, def := k.valueAndDefault(s)
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = k.name
		c.Value = kmsg.StringPtr(value)
		c.ReadOnly = true
		c.Source = kmsg.ConfigSourceDefaultConfig
		if value != def {
			c.Source = kmsg.ConfigSourceStaticBrokerConfig
		}
		c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
		c.ConfigType = k.typ
		if synonyms {
			if c.Source == kmsg.ConfigSourceStaticBrokerConfig {
				c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
					Name: k.name, Value: kmsg.StringPtr(value), Source: kmsg.ConfigSourceStaticBrokerConfig,
				})
			}
			c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
				Name: k.name, Value: kmsg.StringPtr(def), Source: kmsg.ConfigSourceDefaultConfig,
			})
		}
		out = append(out, c)
	}
	return out, nil
}
