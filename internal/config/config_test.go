package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseProperties(t *testing.T) {
	in := `# a comment
! another
node.id = 3
listeners=PLAINTEXT://127.0.0.1:19092
log.dirs=/tmp/a,/tmp/b
long.value = one \
  two
colon.sep: x
`
	p, err := ParseProperties(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"node.id": "3", "listeners": "PLAINTEXT://127.0.0.1:19092", "log.dirs": "/tmp/a,/tmp/b",
		"long.value": "one two", "colon.sep": "x",
	}
	if len(p) != len(want) {
		t.Fatalf("got %v", p)
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %q, want %q", k, p[k], v)
		}
	}
	if _, err := ParseProperties(strings.NewReader("novalue\n")); err == nil {
		t.Fatal("line without separator accepted")
	}
}

func TestApplyKafkaKeys(t *testing.T) {
	b := Defaults()
	err := b.Apply(map[string]string{
		"broker.id":                 "2",
		"listeners":                 "PLAINTEXT://127.0.0.1:19092",
		"advertised.listeners":      "PLAINTEXT://localhost:29092",
		"log.dirs":                  "/var/lib/strata",
		"num.partitions":            "6",
		"auto.create.topics.enable": "false",
		"log.segment.bytes":         "1048576",
		"log.retention.hours":       "1",
		"log.retention.minutes":     "30",
		"message.max.bytes":         "2000000",
		"socket.request.max.bytes":  "5000000",
		"zookeeper.connect":         "ignored:2181",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	if b.NodeID != 2 || b.Listen != "127.0.0.1:19092" || b.DataDir != "/var/lib/strata" || b.NumPartitions != 6 || b.AutoCreateTopics {
		t.Fatalf("broker fields: %+v", b)
	}
	if b.AdvertisedHost != "localhost" || b.AdvertisedPort != 29092 {
		t.Fatalf("advertised %s:%d", b.AdvertisedHost, b.AdvertisedPort)
	}
	if b.TopicDefaults["segment.bytes"] != "1048576" || b.TopicDefaults["max.message.bytes"] != "2000000" || b.MaxRequestBytes != 5000000 {
		t.Fatalf("log config: %+v", b.TopicDefaults)
	}
	if b.TopicDefaults["retention.ms"] != "1800000" { // minutes is more precise than hours
		t.Fatalf("retention.ms = %s", b.TopicDefaults["retention.ms"])
	}
	if len(b.Unknown) != 1 || b.Unknown[0] != "zookeeper.connect" {
		t.Fatalf("unknown = %v", b.Unknown)
	}
}

func TestApplyBadValues(t *testing.T) {
	for _, kv := range [][2]string{
		{"node.id", "x"}, {"num.partitions", "0"}, {"log.segment.bytes", "abc"},
		{"auto.create.topics.enable", "maybe"}, {"listeners", "PLAINTEXT://nohost"},
		{"socket.request.max.bytes", "10"},
	} {
		b := Defaults()
		if err := b.Apply(map[string]string{kv[0]: kv[1]}); err == nil {
			t.Errorf("%s=%s accepted", kv[0], kv[1])
		}
	}
}

func TestFinishAdvertisesListenAddress(t *testing.T) {
	b := Defaults()
	b.Listen = "0.0.0.0:9093"
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	if b.AdvertisedHost != "127.0.0.1" || b.AdvertisedPort != 9093 {
		t.Fatalf("advertised %s:%d", b.AdvertisedHost, b.AdvertisedPort)
	}
	b.Listen = "nonsense"
	if err := b.Finish(); err == nil {
		t.Fatal("bad listen address accepted")
	}
}

// TestReplicaFetchKeys: the follower's fetch keys take Kafka's defaults,
// parse, and are checked against each other as Kafka checks them.
func TestReplicaFetchKeys(t *testing.T) {
	b := Defaults()
	want := ReplicaFetch{WaitMaxMs: 500, MinBytes: 1, MaxBytes: 1 << 20, ResponseMaxBytes: 10 << 20, BackoffMs: 1000, SocketTimeoutMs: 30000}
	if b.ReplicaFetch != want {
		t.Fatalf("defaults %+v, want %+v", b.ReplicaFetch, want)
	}
	if err := b.Apply(map[string]string{
		"replica.fetch.wait.max.ms": "100", "replica.fetch.min.bytes": "10", "replica.fetch.max.bytes": "65536",
		"replica.fetch.response.max.bytes": "1048576", "replica.fetch.backoff.ms": "200", "replica.socket.timeout.ms": "5000",
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	want = ReplicaFetch{WaitMaxMs: 100, MinBytes: 10, MaxBytes: 65536, ResponseMaxBytes: 1 << 20, BackoffMs: 200, SocketTimeoutMs: 5000}
	if b.ReplicaFetch != want || len(b.Unknown) != 0 {
		t.Fatalf("applied %+v (unknown %v), want %+v", b.ReplicaFetch, b.Unknown, want)
	}
	for _, props := range []map[string]string{
		{"replica.fetch.wait.max.ms": "40000"},                                    // past replica.lag.time.max.ms
		{"replica.fetch.wait.max.ms": "1000", "replica.socket.timeout.ms": "999"}, // past the socket timeout
		{"replica.fetch.wait.max.ms": "600", "replica.lag.time.max.ms": "500"},    // past a lowered lag time
	} {
		b := Defaults()
		if err := b.Apply(props); err != nil {
			t.Fatal(err)
		}
		if err := b.Finish(); err == nil {
			t.Errorf("%v accepted", props)
		}
	}
	b = Defaults()
	if err := b.Apply(map[string]string{"replica.fetch.backoff.ms": "0"}); err == nil {
		t.Error("replica.fetch.backoff.ms=0 accepted")
	}
}

func TestMetaProperties(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	m1, err := LoadOrCreateMeta(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(m1.ClusterID) != 22 {
		t.Fatalf("cluster id %q", m1.ClusterID)
	}
	m2, err := LoadOrCreateMeta(dir, 1)
	if err != nil || m2 != m1 {
		t.Fatalf("reload: %+v %v", m2, err)
	}
	if _, err := LoadOrCreateMeta(dir, 2); err == nil {
		t.Fatal("node id mismatch accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte("node.id=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateMeta(dir, 1); err == nil {
		t.Fatal("missing cluster.id accepted")
	}
}

func TestIOKeys(t *testing.T) {
	b := Defaults()
	if b.NoSharedFlush || b.IOBackend != "" && b.IOBackend != "auto" {
		t.Fatalf("defaults: shared flush off %v, backend %q", b.NoSharedFlush, b.IOBackend)
	}
	if err := b.Apply(map[string]string{"log.io.backend": "uring", "log.io.flush.shared": "false"}); err != nil {
		t.Fatal(err)
	}
	if b.IOBackend != "uring" || !b.NoSharedFlush {
		t.Fatalf("backend %q, shared flush off %v", b.IOBackend, b.NoSharedFlush)
	}
	if err := b.Apply(map[string]string{"log.io.flush.shared": "true"}); err != nil || b.NoSharedFlush {
		t.Fatalf("log.io.flush.shared=true: err %v, off %v", err, b.NoSharedFlush)
	}
	if !b.NoZeroFill || b.JournalBytes != 256<<20 {
		t.Fatalf("defaults: zero fill off %v (want true), journal %d bytes (want 256 MiB)", b.NoZeroFill, b.JournalBytes)
	}
	if err := b.Apply(map[string]string{"log.io.zero.fill": "true", "log.io.journal.bytes": "0"}); err != nil || b.NoZeroFill || b.JournalBytes != 0 {
		t.Fatalf("log.io.zero.fill=true, journal 0: err %v, zero fill off %v, journal %d", err, b.NoZeroFill, b.JournalBytes)
	}
	if err := b.Apply(map[string]string{"log.io.zero.fill": "false"}); err != nil || !b.NoZeroFill {
		t.Fatalf("log.io.zero.fill=false: err %v, off %v", err, b.NoZeroFill)
	}
	if err := b.Apply(map[string]string{"log.io.zero.fill": "maybe"}); err == nil {
		t.Fatal("log.io.zero.fill=maybe accepted")
	}
	bad := Defaults()
	if err := bad.Apply(map[string]string{"log.io.flush.shared": "sometimes"}); err == nil {
		t.Fatal("log.io.flush.shared=sometimes accepted")
	}
	if b.TailCacheBytes != 256<<20 {
		t.Fatalf("default tail cache %d, want 256 MiB (the engine's default, now explicit)", b.TailCacheBytes)
	}
	for v, want := range map[string]int64{"268435456": 256 << 20, " 1048576 ": 1 << 20, "0": -1, "-1": -1, "-5": -1} {
		c := Defaults()
		if err := c.Apply(map[string]string{"log.tail.cache.bytes": v}); err != nil || c.TailCacheBytes != want {
			t.Fatalf("log.tail.cache.bytes=%q: %d, %v; want %d", v, c.TailCacheBytes, err, want)
		}
	}
	if err := bad.Apply(map[string]string{"log.tail.cache.bytes": "lots"}); err == nil {
		t.Fatal("log.tail.cache.bytes=lots accepted")
	}
}
