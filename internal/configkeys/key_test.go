package configkeys

import (
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
)

// The table is well formed: names unique at each scope, every default its
// own canonical text, every key documented and in a README section, the
// flags unique, and dynamic only where it can be set.
func TestTableIsWellFormed(t *testing.T) {
	topic, broker, flags := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, k := range All() {
		name := k.Topic + "/" + k.Broker
		if k.Scope() == 0 {
			t.Fatalf("%s: no name", name)
		}
		if k.Topic != "" {
			if topic[k.Topic] {
				t.Errorf("topic name %s twice", k.Topic)
			}
			topic[k.Topic] = true
		}
		for _, b := range k.BrokerNames() {
			if broker[b] {
				t.Errorf("broker name %s twice", b)
			}
			broker[b] = true
		}
		if k.Flag != "" {
			if flags[k.Flag] {
				t.Errorf("flag --%s twice", k.Flag)
			}
			flags[k.Flag] = true
			if k.Broker == "" {
				t.Errorf("%s: a flag sets a broker key", name)
			}
		}
		if k.Type == 0 || k.Doc == "" || !contains(Sections, k.Section) {
			t.Errorf("%s: type %v, doc %q, section %q", name, k.Type, k.Doc, k.Section)
		}
		if k.Dynamic&^k.Scope() != 0 {
			t.Errorf("%s: dynamic at %v but set at %v", name, k.Dynamic, k.Scope())
		}
		// A key dynamic at the broker must be one the broker applies at
		// runtime (server/dynconfig.go): a log key's default, a
		// connection limit, an SSL store.
		if !k.ReadOnly(Broker) && !k.Log && !appliedAtRuntime[k.Broker] {
			t.Errorf("%s: dynamic at the broker, which nothing applies", name)
		}
		if k.PerBroker && k.ReadOnly(Broker) {
			t.Errorf("%s: per broker but not dynamic at the broker", name)
		}
		for _, syn := range k.Synonyms {
			// A value in another unit is converted only on its way to a
			// topic default; DescribeConfigs reads the other keys' synonyms
			// as they were given.
			if syn.Scale != 0 && !k.Log {
				t.Errorf("%s: synonym %s in another unit on a key that is not a log key", name, syn.Name)
			}
		}
		if k.Log && (k.Topic == "" || k.ReadOnly(Topic)) {
			t.Errorf("%s: a log setting must be a dynamic topic key", name)
		}
		if k.Default == "" {
			if k.Log {
				t.Errorf("%s: a log setting needs a default", name)
			}
			continue
		}
		v, err := k.Parse(k.Default)
		if err != nil {
			t.Errorf("%s: default %q: %v", name, k.Default, err)
		} else if v.Text != k.Default {
			t.Errorf("%s: default %q is not canonical (%q)", name, k.Default, v.Text)
		}
	}
	if len(TopicDefaults()) < 18 {
		t.Fatalf("%d log keys", len(TopicDefaults()))
	}
}

func TestUnknownKeys(t *testing.T) {
	for _, tc := range []struct {
		scope Scope
		name  string
	}{
		{Topic, "no.such.key"},
		{Broker, "zookeeper.connect"},
		{Broker, "segment.bytes"}, // a topic name is not a broker name
		{Topic, "log.segment.bytes"},
		{Topic, "node.id"},
	} {
		err := CheckAlter(tc.scope, tc.name, ptr("1"))
		if !errors.Is(err, ErrUnknown) || ErrorCode(err) != CodeInvalidConfig {
			t.Errorf("%v %s: %v (code %d), want ErrUnknown, INVALID_CONFIG", tc.scope, tc.name, err, ErrorCode(err))
		}
		if _, ok := Lookup(tc.scope, tc.name); ok {
			t.Errorf("Lookup(%v, %s) found a key", tc.scope, tc.name)
		}
	}
	if _, _, _, err := ParseBroker("zookeeper.connect", "x:2181"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("ParseBroker of an unknown name: %v", err)
	}
}

func TestSynonyms(t *testing.T) {
	for _, tc := range []struct {
		name, value, key, own, in string
	}{
		{"log.retention.ms", "60000", "retention.ms", "60000", "60000"},
		{"log.retention.minutes", " 30 ", "retention.ms", "30", "1800000"},
		{"log.retention.hours", "1", "retention.ms", "1", "3600000"},
		{"log.roll.hours", "2", "segment.ms", "2", "7200000"},
		{"broker.id", "7", "", "7", "7"},
		{"log.dir", "/a", "", "/a", "/a"},
	} {
		k, own, v, err := ParseBroker(tc.name, tc.value)
		if err != nil {
			t.Fatalf("%s=%s: %v", tc.name, tc.value, err)
		}
		if k.Topic != tc.key || own != tc.own || v.Text != tc.in {
			t.Errorf("%s=%s: key %q, own %q, value %q; want %q %q %q", tc.name, tc.value, k.Topic, own, v.Text, tc.key, tc.own, tc.in)
		}
	}
	k, _ := TopicKey("retention.ms")
	if got := strings.Join(k.BrokerNames(), " "); got != "log.retention.ms log.retention.minutes log.retention.hours" {
		t.Fatalf("precedence %s", got)
	}
	if b, _ := BrokerKey("broker.id"); b.Broker != "node.id" {
		t.Fatalf("broker.id is a synonym of %s", b.Broker)
	}
	// A synonym's value must fit the key's range once scaled.
	for _, v := range []string{"-1", "9223372036854775807", "2562047788016"} {
		if _, _, _, err := ParseBroker("log.retention.hours", v); !errors.Is(err, ErrInvalid) {
			t.Errorf("log.retention.hours=%s: %v", v, err)
		}
	}
}

func TestTypeAndRangeErrors(t *testing.T) {
	for _, tc := range []struct {
		scope       Scope
		name, value string
	}{
		{Topic, "segment.bytes", "13"},
		{Topic, "segment.bytes", "2147483648"}, // an int
		{Topic, "segment.bytes", "1e6"},
		{Topic, "retention.ms", "-2"},
		{Topic, "retention.ms", "soon"},
		{Topic, "message.timestamp.type", "Now"},
		{Topic, "cleanup.policy", "delete,delete"},
		{Topic, "cleanup.policy", ""},
		{Topic, "cleanup.policy", "shred"},
		{Topic, "preallocate", "yes"},
		{Topic, "min.cleanable.dirty.ratio", "1.5"},
		{Topic, "min.cleanable.dirty.ratio", "NaN"},
		{Topic, "min.insync.replicas", "0"},
		{Topic, "unclean.leader.election.enable", "1"},
	} {
		err := CheckAlter(tc.scope, tc.name, ptr(tc.value))
		if !errors.Is(err, ErrInvalid) || ErrorCode(err) != CodeInvalidConfig {
			t.Errorf("%s=%q: %v (code %d), want ErrInvalid, INVALID_CONFIG", tc.name, tc.value, err, ErrorCode(err))
		}
		if err != nil && !strings.Contains(err.Error(), tc.name) {
			t.Errorf("error %q does not name the key", err)
		}
	}
	for name, bad := range map[string][]string{
		"transaction.version":                 {"3", "-1", "70000"}, // a short, 0..2
		"default.replication.factor":          {"0", "40000"},
		"listeners":                           {"PLAINTEXT://nohost", "PLAINTEXT://h:port"},
		"log.dirs":                            {" ,/b"},
		"queued.max.request.bytes":            {"0"},
		"log.cleaner.io.max.bytes.per.second": {"0", "-1"},
		"log.io.backend":                      {"mmap", ""},
		"node.id":                             {"2147483648"},
		"auto.leader.rebalance.enable":        {"maybe"},
	} {
		for _, v := range bad {
			if _, _, _, err := ParseBroker(name, v); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s=%q: %v, want ErrInvalid", name, v, err)
			}
		}
	}
	// Accepted values come back canonical.
	for _, tc := range []struct{ name, in, out string }{
		{"segment.bytes", " 2048 ", "2048"},
		{"preallocate", "TRUE", "true"},
		{"cleanup.policy", "delete, compact", "delete,compact"},
		{"min.cleanable.dirty.ratio", "0.25", "0.25"},
		{"retention.ms", "-1", "-1"},
	} {
		k, _ := TopicKey(tc.name)
		v, err := k.Parse(tc.in)
		if err != nil || v.Text != tc.out {
			t.Errorf("%s=%q: %q %v, want %q", tc.name, tc.in, v.Text, err, tc.out)
		}
	}
}

// The broker keys other than log defaults that the broker applies at
// runtime.
var appliedAtRuntime = map[string]bool{
	"max.connections": true, "max.connections.per.ip": true, "max.connections.per.ip.overrides": true,
	"max.connection.creation.rate": true, "ssl.keystore.location": true, "ssl.truststore.location": true,
	"log.cleaner.io.max.bytes.per.second": true, "log.cleaner.backoff.ms": true,
	"log.dir.min.free.bytes": true, "log.dir.min.free.percent": true,
	"min.insync.replicas": true,
}

func TestDynamicAndStaticKeys(t *testing.T) {
	// Topic keys change at runtime; so do their broker names (the topic
	// defaults) and the broker keys appliedAtRuntime lists; other broker
	// keys are read-only: INVALID_REQUEST, as Kafka answers a non-dynamic
	// key.
	if err := CheckAlter(Topic, "retention.ms", ptr("1000")); err != nil {
		t.Fatal(err)
	}
	if err := CheckAlter(Topic, "retention.ms", nil); err != nil { // a deletion
		t.Fatal(err)
	}
	if err := CheckAlter(Topic, "min.insync.replicas", ptr("2")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"num.partitions", "broker.id", "log.dirs", "ssl.client.auth"} {
		err := CheckAlter(Broker, name, ptr("1"))
		if !errors.Is(err, ErrReadOnly) || ErrorCode(err) != CodeInvalidRequest {
			t.Errorf("broker %s: %v (code %d), want ErrReadOnly, INVALID_REQUEST", name, err, ErrorCode(err))
		}
		if _, err := CheckBrokerAlter(name, ptr("1"), true); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), name) {
			t.Errorf("CheckBrokerAlter(%s): %v, want ErrReadOnly naming the key", name, err)
		}
	}
	for _, name := range []string{"log.retention.ms", "log.retention.hours", "log.cleanup.policy", "max.connections", "max.connections.per.ip"} {
		v := "1"
		if name == "log.cleanup.policy" {
			v = "compact"
		}
		if err := CheckAlter(Broker, name, ptr(v)); err != nil {
			t.Errorf("broker %s: %v", name, err)
		}
		for _, perBroker := range []bool{true, false} {
			if _, err := CheckBrokerAlter(name, ptr(v), perBroker); err != nil {
				t.Errorf("CheckBrokerAlter(%s, per broker %v): %v", name, perBroker, err)
			}
		}
	}
	k, _ := TopicKey("segment.bytes")
	if k.ReadOnly(Topic) || k.ReadOnly(Broker) || k.Scope() != Broker|Topic {
		t.Fatalf("segment.bytes: read-only at topic %v, at broker %v, scope %v", k.ReadOnly(Topic), k.ReadOnly(Broker), k.Scope())
	}
	if ErrorCode(nil) != 0 || ErrorCode(errors.New("other")) != 0 {
		t.Fatal("ErrorCode of a foreign error")
	}
}

var update = flag.Bool("update", false, "rewrite README.md's generated tables")

// The README's config tables are the table's rendering (go generate
// ./internal/configkeys rewrites them).
func TestREADMETables(t *testing.T) {
	const path = "../../README.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UpdateREADME(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if got == string(b) {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("README.md's config tables differ from internal/configkeys: run go generate ./internal/configkeys")
}

func TestUpdateREADMERefusesBadMarkers(t *testing.T) {
	all := ""
	for _, s := range Sections {
		all += beginMarker + s + " -->\nSTALE-ROW\n" + endMarker + "\n"
	}
	out, err := UpdateREADME("intro\n" + all)
	if err != nil || strings.Contains(out, "STALE-ROW") || !strings.Contains(out, "`log.segment.bytes`") {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, bad := range []string{
		"no markers",
		all + beginMarker + "serve -->\n" + endMarker,
		strings.Replace(all, endMarker, "", 1),
		all + beginMarker + "nope -->\n" + endMarker,
	} {
		if _, err := UpdateREADME(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func ptr(s string) *string { return &s }

func TestCheckBrokerAlter(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		perBroker   bool
		want        error
	}{
		{"log.retention.hours", "2", false, nil},
		{"log.retention.hours", "x", true, ErrInvalid},
		{"log.segment.bytes", "1", true, ErrInvalid}, // below 14
		{"max.connections", "-1", false, ErrInvalid},
		{"ssl.keystore.location", "/k.pem", true, nil},
		{"ssl.keystore.location", "/k.pem", false, ErrReadOnly}, // per broker only, as in Kafka
		{"listener.name.external.ssl.keystore.location", "/k.pem", true, nil},
		{"listener.name.external.max.connections", "5", false, nil},
		{"listener.name.external.max.connections", "x", false, ErrInvalid},
		{"listener.name.external.ssl.client.auth", "required", true, ErrReadOnly},
		{"listener.name.external.no.such", "1", true, ErrReadOnly},
		{"no.such.key", "1", true, ErrUnknown},
		{"retention.ms", "1", true, ErrUnknown}, // a topic name
	} {
		_, err := CheckBrokerAlter(tc.name, ptr(tc.value), tc.perBroker)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("CheckBrokerAlter(%s=%s, per broker %v) = %v, want %v", tc.name, tc.value, tc.perBroker, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: error %q does not name the key", tc.name, err)
		}
	}
	if l, k, ok := SplitListener("listener.name.external.max.connections"); !ok || l != "external" || k != "max.connections" {
		t.Fatalf("SplitListener = %q %q %v", l, k, ok)
	}
	if _, _, ok := SplitListener("listener.name.x"); ok {
		t.Fatal("SplitListener of a name without a key")
	}
	dyn := DynamicBrokerKeys()
	if !contains(dyn, "log.retention.ms") || !contains(dyn, "max.connections") || contains(dyn, "num.partitions") {
		t.Fatalf("DynamicBrokerKeys = %v", dyn)
	}
}
