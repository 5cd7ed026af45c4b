package server

import (
	"errors"
	"reflect"
	"sort"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/configkeys"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeConfigs(t *testing.T, c *rawConn, v int16, synonyms bool, res ...kmsg.DescribeConfigsRequestResource) *kmsg.DescribeConfigsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(v)
	req.IncludeSynonyms = synonyms
	req.Resources = res
	resp := kmsg.NewPtrDescribeConfigsResponse()
	c.roundTrip(req, 32, resp)
	if len(resp.Resources) != len(res) {
		t.Fatalf("%d resources answered, %d asked", len(resp.Resources), len(res))
	}
	return resp
}

func topicRes(name string, keys ...string) kmsg.DescribeConfigsRequestResource {
	r := kmsg.DescribeConfigsRequestResource{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: name}
	if keys != nil {
		r.ConfigNames = keys
	}
	return r
}

func byName(cs []kmsg.DescribeConfigsResponseResourceConfig) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	m := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

// TestDescribeTopicConfigsEveryVersion: a topic override, a broker-wide
// setting that differs from Kafka's default, and a plain default, each with
// the right value, source, default flag and type, at every version.
func TestDescribeTopicConfigsEveryVersion(t *testing.T) {
	addr, _, eng := startBroker(t, func(_ *Config, o *engine.Options) { o.Log.SegmentBytes = 1 << 24 })
	if _, err := eng.CreateTopic("conf", 1, map[string]string{"retention.ms": "60000", "cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, addr)
	for v := int16(0); v <= 4; v++ {
		resp := describeConfigs(t, c, v, v >= 1, topicRes("conf"))
		r := resp.Resources[0]
		if r.ErrorCode != 0 || r.ResourceName != "conf" || r.ResourceType != kmsg.ConfigResourceTypeTopic {
			t.Fatalf("v%d: %+v", v, r)
		}
		got := byName(r.Configs)
		if len(got) != len(engine.TopicKeys()) {
			t.Fatalf("v%d: %d configs, engine has %d keys", v, len(got), len(engine.TopicKeys()))
		}
		for _, want := range []struct {
			key, value string
			source     kmsg.ConfigSource
			typ        kmsg.ConfigType
		}{
			{"retention.ms", "60000", kmsg.ConfigSourceDynamicTopicConfig, kmsg.ConfigTypeLong},
			{"cleanup.policy", "compact", kmsg.ConfigSourceDynamicTopicConfig, kmsg.ConfigTypeList},
			{"segment.bytes", "16777216", kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigTypeInt},
			{"max.message.bytes", "1048588", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeInt},
			{"preallocate", "true", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeBoolean},
			{"message.timestamp.type", "CreateTime", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeString},
		} {
			e, ok := got[want.key]
			if !ok || e.Value == nil || *e.Value != want.value || e.ReadOnly || e.IsSensitive {
				t.Fatalf("v%d %s: %+v", v, want.key, e)
			}
			if v == 0 && e.IsDefault != (want.source == kmsg.ConfigSourceDefaultConfig) {
				t.Fatalf("v0 %s: IsDefault %v", want.key, e.IsDefault)
			}
			if v >= 1 && e.Source != want.source {
				t.Fatalf("v%d %s: source %v, want %v", v, want.key, e.Source, want.source)
			}
			if v >= 3 && e.ConfigType != want.typ {
				t.Fatalf("v%d %s: type %v, want %v", v, want.key, e.ConfigType, want.typ)
			}
		}
		if v >= 1 {
			syn := got["segment.bytes"].ConfigSynonyms
			if len(syn) != 2 || syn[0].Name != "log.segment.bytes" || *syn[0].Value != "16777216" ||
				syn[0].Source != kmsg.ConfigSourceStaticBrokerConfig || syn[1].Source != kmsg.ConfigSourceDefaultConfig || *syn[1].Value != "1073741824" {
				t.Fatalf("v%d segment.bytes synonyms %+v", v, syn)
			}
			syn = got["retention.ms"].ConfigSynonyms
			if len(syn) != 2 || syn[0].Name != "retention.ms" || syn[0].Source != kmsg.ConfigSourceDynamicTopicConfig ||
				syn[1].Name != "log.retention.ms" || syn[1].Source != kmsg.ConfigSourceDefaultConfig {
				t.Fatalf("v%d retention.ms synonyms %+v", v, syn)
			}
		}
	}
}

func TestDescribeConfigsFiltersAndErrors(t *testing.T) {
	addr, _, eng := startBroker(t, noAutoCreate)
	mustCreate(t, eng, "filtered", 1)
	c := dialRaw(t, addr)
	resp := describeConfigs(t, c, 4, false,
		topicRes("filtered", "retention.ms", "no.such.key", "segment.bytes"),
		topicRes("filtered", []string{}...),
		topicRes("absent"),
		topicRes("bad/name"),
		kmsg.DescribeConfigsRequestResource{ResourceType: kmsg.ConfigResourceTypeBrokerLogger, ResourceName: "0"},
	)
	if cs := resp.Resources[0].Configs; len(cs) != 2 || cs[0].Name != "retention.ms" || cs[1].Name != "segment.bytes" {
		t.Fatalf("filtered: %+v", cs)
	}
	if cs := resp.Resources[1].Configs; len(cs) != 0 {
		t.Fatalf("empty filter: %d configs", len(cs))
	}
	for i, want := range map[int]*kerr.Error{2: kerr.UnknownTopicOrPartition, 3: kerr.InvalidTopicException, 4: kerr.InvalidRequest} {
		r := resp.Resources[i]
		if r.ErrorCode != want.Code || r.ErrorMessage == nil || len(r.Configs) != 0 {
			t.Fatalf("resource %d (%s): %+v, want %v", i, r.ResourceName, r, want)
		}
	}
	if eng.Topic("absent") != nil {
		t.Fatal("DescribeConfigs created a topic")
	}
}

func TestDescribeBrokerConfigs(t *testing.T) {
	addr, _, _ := startBroker(t, func(c *Config, o *engine.Options) {
		c.NodeID = 4
		c.NumPartitions = 6
		o.Log.MaxMessageBytes = 4 << 20
	})
	c := dialRaw(t, addr)
	broker := func(name string, keys ...string) kmsg.DescribeConfigsRequestResource {
		return kmsg.DescribeConfigsRequestResource{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: name, ConfigNames: keys}
	}
	resp := describeConfigs(t, c, 4, true, broker("4"), broker(""), broker("5"), broker("four"), broker("4", "num.partitions"))
	all := byName(resp.Resources[0].Configs)
	for _, want := range []struct {
		key, value string
		source     kmsg.ConfigSource
	}{
		{"node.id", "4", kmsg.ConfigSourceStaticBrokerConfig},
		{"num.partitions", "6", kmsg.ConfigSourceStaticBrokerConfig},
		{"message.max.bytes", "4194304", kmsg.ConfigSourceStaticBrokerConfig},
		{"log.segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig},
		{"auto.create.topics.enable", "true", kmsg.ConfigSourceDefaultConfig},
		{"socket.request.max.bytes", "104857600", kmsg.ConfigSourceDefaultConfig},
		{"advertised.listeners", "PLAINTEXT://" + addr, kmsg.ConfigSourceStaticBrokerConfig},
	} {
		e, ok := all[want.key]
		k, _ := configkeys.BrokerKey(want.key)
		if !ok || e.Value == nil || *e.Value != want.value || e.Source != want.source || e.ReadOnly != k.ReadOnly(configkeys.Broker) {
			t.Fatalf("%s: %+v, want %s from %v", want.key, e, want.value, want.source)
		}
		if n := len(e.ConfigSynonyms); n == 0 || e.ConfigSynonyms[n-1].Source != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("%s synonyms %+v", want.key, e.ConfigSynonyms)
		}
	}
	if r := resp.Resources[1]; r.ErrorCode != 0 || len(r.Configs) != 0 {
		t.Fatalf("cluster defaults: %+v", r)
	}
	for _, i := range []int{2, 3} {
		if r := resp.Resources[i]; r.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("broker %q: %+v", r.ResourceName, r)
		}
	}
	if cs := resp.Resources[4].Configs; len(cs) != 1 || *cs[0].Value != "6" {
		t.Fatalf("filtered broker configs %+v", cs)
	}
}

func TestDescribeConfigsThroughKadm(t *testing.T) {
	addr, _, eng := startBroker(t, noAutoCreate)
	if _, err := eng.CreateTopic("kadm-conf", 1, map[string]string{"segment.ms": "3600000"}); err != nil {
		t.Fatal(err)
	}
	adm := newAdmin(t, addr)
	ctx := testCtx(t)
	rcs, err := adm.DescribeTopicConfigs(ctx, "kadm-conf", "kadm-missing")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("kadm-conf", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("kadm-conf: %v %v", err, rc.Err)
	}
	found := false
	for _, c := range rc.Configs {
		if c.Key == "segment.ms" {
			found = c.MaybeValue() == "3600000" && c.Source == kmsg.ConfigSourceDynamicTopicConfig
		}
	}
	if !found {
		t.Fatalf("segment.ms override not described: %+v", rc.Configs)
	}
	if missing, _ := rcs.On("kadm-missing", nil); !errors.Is(missing.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("missing: %v", missing.Err)
	}
	brs, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil || len(brs) != 1 || brs[0].Err != nil || len(brs[0].Configs) == 0 {
		t.Fatalf("broker configs: %v %+v", err, brs)
	}
}

// With the broker's static configuration (what `strata serve` passes), a
// key is STATIC_BROKER_CONFIG when it was set, even to its default, as in
// Kafka; a synonym set in another unit shows under its own name in the
// chain; keys the Server holds no field for read BrokerConfigs; every
// broker key is read-only and carries its type and, on request, its
// documentation.
func TestDescribeConfigsStaticBrokerConfig(t *testing.T) {
	static := map[string]string{
		"log.segment.bytes":   "1073741824", // Kafka's default, but set
		"log.retention.hours": "1",
		"broker.id":           "4",
		"log.io.backend":      "pwrite",
	}
	addr, _, eng := startBroker(t, func(c *Config, o *engine.Options) {
		c.NodeID = 4
		c.BrokerConfigs = static
		o.Log.RetentionMs = 3_600_000
	})
	if _, err := eng.CreateTopic("static", 1, nil); err != nil {
		t.Fatal(err)
	}
	// CreateTopics reports the same sources.
	created, err := newAdmin(t, addr).CreateTopic(testCtx(t), 1, 1, map[string]*string{"flush.ms": kmsg.StringPtr("1000")}, "created")
	if err != nil || created.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, created.Err)
	}
	for key, src := range map[string]kmsg.ConfigSource{
		"segment.bytes": kmsg.ConfigSourceStaticBrokerConfig, "retention.ms": kmsg.ConfigSourceStaticBrokerConfig,
		"flush.ms": kmsg.ConfigSourceDynamicTopicConfig, "max.message.bytes": kmsg.ConfigSourceDefaultConfig,
	} {
		if got := created.Configs[key]; got.Source != src {
			t.Fatalf("CreateTopics %s: %+v, want source %v", key, got, src)
		}
	}
	c := dialRaw(t, addr)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	req.Resources = []kmsg.DescribeConfigsRequestResource{topicRes("static"), {ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "4"}}
	resp := kmsg.NewPtrDescribeConfigsResponse()
	c.roundTrip(req, 32, resp)
	if len(resp.Resources) != 2 {
		t.Fatalf("%d resources", len(resp.Resources))
	}
	type link struct {
		name, value string
		source      kmsg.ConfigSource
	}
	chain := func(e kmsg.DescribeConfigsResponseResourceConfig) []link {
		var out []link
		for _, s := range e.ConfigSynonyms {
			out = append(out, link{s.Name, strOr(s.Value, "<null>"), s.Source})
		}
		return out
	}
	topic := byName(resp.Resources[0].Configs)
	for _, want := range []struct {
		key, value string
		source     kmsg.ConfigSource
		chain      []link
	}{
		{"segment.bytes", "1073741824", kmsg.ConfigSourceStaticBrokerConfig, []link{
			{"log.segment.bytes", "1073741824", kmsg.ConfigSourceStaticBrokerConfig},
			{"log.segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig}}},
		{"retention.ms", "3600000", kmsg.ConfigSourceStaticBrokerConfig, []link{
			{"log.retention.hours", "1", kmsg.ConfigSourceStaticBrokerConfig},
			{"log.retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig}}},
		{"max.message.bytes", "1048588", kmsg.ConfigSourceDefaultConfig, []link{
			{"message.max.bytes", "1048588", kmsg.ConfigSourceDefaultConfig}}},
	} {
		e := topic[want.key]
		if e.Value == nil || *e.Value != want.value || e.Source != want.source || e.ReadOnly {
			t.Fatalf("topic %s: %+v", want.key, e)
		}
		if got := chain(e); !reflect.DeepEqual(got, want.chain) {
			t.Fatalf("topic %s synonyms %+v, want %+v", want.key, got, want.chain)
		}
	}

	broker := resp.Resources[1].Configs
	all := byName(broker)
	for _, k := range configkeys.All() {
		if k.Broker == "" {
			continue
		}
		e, ok := all[k.Broker]
		if !ok || e.ReadOnly != k.ReadOnly(configkeys.Broker) || e.ConfigType != kmsg.ConfigType(k.Type) || e.Documentation == nil || *e.Documentation != k.Doc {
			t.Fatalf("broker %s: %+v", k.Broker, e)
		}
	}
	if !sort.SliceIsSorted(broker, func(i, j int) bool { return broker[i].Name < broker[j].Name }) {
		t.Fatal("broker configs not sorted by name")
	}
	for _, want := range []struct {
		key   string
		value *string
		src   kmsg.ConfigSource
		chain []link
	}{
		{"log.io.backend", kmsg.StringPtr("pwrite"), kmsg.ConfigSourceStaticBrokerConfig, []link{
			{"log.io.backend", "pwrite", kmsg.ConfigSourceStaticBrokerConfig}, {"log.io.backend", "auto", kmsg.ConfigSourceDefaultConfig}}},
		{"log.io.zero.fill", kmsg.StringPtr("false"), kmsg.ConfigSourceDefaultConfig, []link{
			{"log.io.zero.fill", "false", kmsg.ConfigSourceDefaultConfig}}},
		{"log.io.journal.bytes", kmsg.StringPtr("268435456"), kmsg.ConfigSourceDefaultConfig, []link{
			{"log.io.journal.bytes", "268435456", kmsg.ConfigSourceDefaultConfig}}},
		{"broker.rack", nil, kmsg.ConfigSourceDefaultConfig, []link{{"broker.rack", "<null>", kmsg.ConfigSourceDefaultConfig}}},
		{"node.id", kmsg.StringPtr("4"), kmsg.ConfigSourceStaticBrokerConfig, []link{
			{"broker.id", "4", kmsg.ConfigSourceStaticBrokerConfig}, {"node.id", "0", kmsg.ConfigSourceDefaultConfig}}},
		{"broker.id", kmsg.StringPtr("4"), kmsg.ConfigSourceStaticBrokerConfig, nil},
		{"log.retention.ms", kmsg.StringPtr("3600000"), kmsg.ConfigSourceStaticBrokerConfig, []link{
			{"log.retention.hours", "1", kmsg.ConfigSourceStaticBrokerConfig}, {"log.retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig}}},
	} {
		e := all[want.key]
		if !reflect.DeepEqual(e.Value, want.value) || e.Source != want.src {
			t.Fatalf("broker %s: value %v source %v, want %v %v", want.key, strOr(e.Value, "<null>"), e.Source, strOr(want.value, "<null>"), want.src)
		}
		if want.chain != nil && !reflect.DeepEqual(chain(e), want.chain) {
			t.Fatalf("broker %s synonyms %+v, want %+v", want.key, chain(e), want.chain)
		}
	}
	if _, ok := all["log.retention.hours"]; ok {
		t.Fatal("a synonym in another unit listed as its own key")
	}
}

// The table's types are Kafka's ConfigType codes.
func TestConfigKeyTypesAreKafkas(t *testing.T) {
	for typ, want := range map[configkeys.Type]kmsg.ConfigType{
		configkeys.Boolean: kmsg.ConfigTypeBoolean, configkeys.String: kmsg.ConfigTypeString,
		configkeys.Int: kmsg.ConfigTypeInt, configkeys.Short: kmsg.ConfigTypeShort,
		configkeys.Long: kmsg.ConfigTypeLong, configkeys.Double: kmsg.ConfigTypeDouble,
		configkeys.List: kmsg.ConfigTypeList, configkeys.Password: kmsg.ConfigTypePassword,
	} {
		if kmsg.ConfigType(typ) != want {
			t.Errorf("%v = %d, Kafka's %v = %d", typ, typ, want, want)
		}
	}
	if kerr.InvalidConfig.Code != configkeys.CodeInvalidConfig || kerr.InvalidRequest.Code != configkeys.CodeInvalidRequest {
		t.Fatal("configkeys' error codes are not Kafka's")
	}
}

func strOr(p *string, or string) string {
	if p == nil {
		return or
	}
	return *p
}
