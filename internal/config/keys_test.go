package config

import (
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/configkeys"
)

// Defaults are the table's: applying any key's default to Defaults()
// changes no field, and every broker key reaches a field or the topic
// defaults.
func TestDefaultsAreTheTables(t *testing.T) {
	d := Defaults()
	if d.NodeID != 0 || d.Listen != "127.0.0.1:9092" || d.DataDir != "./strata-data" || d.NumPartitions != 1 ||
		!d.AutoCreateTopics || d.IOBackend != "auto" || d.Cleaner.Backoff != 15*time.Second ||
		d.Cleaner.IOMaxBytesPerSecond != 64<<20 || d.Groups.OffsetsPartitions != 50 || d.Groups.InitialRebalanceDelayMs != 3000 ||
		!d.AutoLeaderRebalance || d.LeaderImbalanceCheckIntervalSec != 300 || d.LeaderImbalancePerBrokerPct != 10 {
		t.Fatalf("defaults %+v", d)
	}
	if len(d.TopicDefaults) != 0 || len(d.Static) != 0 || len(d.Unknown) != 0 {
		t.Fatalf("defaults set keys: %v %v %v", d.TopicDefaults, d.Static, d.Unknown)
	}
	for _, k := range configkeys.All() {
		if k.Broker == "" || k.Default == "" {
			continue
		}
		b := Defaults()
		if err := b.Apply(map[string]string{k.Broker: k.Default}); err != nil {
			t.Fatalf("%s=%s: %v", k.Broker, k.Default, err)
		}
		if b.Static[k.Broker] != k.Default || len(b.Static) != 1 {
			t.Errorf("%s: static %v", k.Broker, b.Static)
		}
		b.Static = map[string]string{}
		if k.Log {
			if b.TopicDefaults[k.Topic] != k.Default {
				t.Errorf("%s: topic defaults %v", k.Broker, b.TopicDefaults)
			}
			continue
		}
		if !reflect.DeepEqual(b, d) {
			t.Errorf("%s=%s changed Defaults():\n%+v\n%+v", k.Broker, k.Default, b, d)
		}
	}
}

// Every name given is recorded with its own value; of a key's names the
// table's first wins; a refused file changes nothing.
func TestApplySynonymsAndStatic(t *testing.T) {
	b := Defaults()
	err := b.Apply(map[string]string{
		"log.retention.hours": "1", "log.retention.ms": " 5000 ", "broker.id": "3", "log.roll.hours": "2",
		"log.dir": "/x", "log.dirs": "/y", "auto.leader.rebalance.enable": "FALSE",
		"leader.imbalance.check.interval.seconds": "60", "leader.imbalance.per.broker.percentage": "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"log.retention.hours": "1", "log.retention.ms": "5000", "broker.id": "3", "log.roll.hours": "2",
		"log.dir": "/x", "log.dirs": "/y", "auto.leader.rebalance.enable": "false",
		"leader.imbalance.check.interval.seconds": "60", "leader.imbalance.per.broker.percentage": "0"}
	if !maps.Equal(b.Static, want) {
		t.Fatalf("static %v", b.Static)
	}
	if !maps.Equal(b.TopicDefaults, map[string]string{"retention.ms": "5000", "segment.ms": "7200000"}) {
		t.Fatalf("topic defaults %v", b.TopicDefaults)
	}
	if b.NodeID != 3 || b.DataDir != "/y" || b.AutoLeaderRebalance || b.LeaderImbalanceCheckIntervalSec != 60 || b.LeaderImbalancePerBrokerPct != 0 {
		t.Fatalf("fields %+v", b)
	}
	// Several data directories are refused, not cut to the first (a
	// --data-dir with a comma in it silently served another directory).
	two := Defaults()
	if err := two.Apply(map[string]string{"log.dirs": "/y,/z"}); err == nil || !strings.Contains(err.Error(), "one data directory") {
		t.Fatalf("log.dirs=/y,/z: %v", err)
	}
	// A later Apply (the flags) wins over the file.
	if err := b.Apply(map[string]string{"node.id": "5"}); err != nil || b.NodeID != 5 || b.Static["broker.id"] != "3" || b.Static["node.id"] != "5" {
		t.Fatalf("node.id after broker.id: %d %v %v", b.NodeID, b.Static, err)
	}

	before := Defaults()
	bad := Defaults()
	err = bad.Apply(map[string]string{"num.partitions": "5", "log.segment.bytes": "12", "zookeeper.connect": "x"})
	if !errors.Is(err, configkeys.ErrInvalid) {
		t.Fatalf("log.segment.bytes=12: %v", err)
	}
	if !reflect.DeepEqual(bad, before) {
		t.Fatalf("a refused Apply changed the broker: %+v", bad)
	}
	for _, kv := range [][2]string{
		{"leader.imbalance.check.interval.seconds", "0"}, {"leader.imbalance.per.broker.percentage", "101"},
		{"auto.leader.rebalance.enable", "maybe"}, {"log.retention.hours", "-1"}, {"log.io.backend", "mmap"},
		{"queued.max.request.bytes", "0"}, {"log.cleaner.io.max.bytes.per.second", "0"},
	} {
		b := Defaults()
		if err := b.Apply(map[string]string{kv[0]: kv[1]}); err == nil {
			t.Errorf("%s=%s accepted", kv[0], kv[1])
		}
	}
}

// The special values of a few keys keep their meaning.
func TestApplySpecialValues(t *testing.T) {
	b := Defaults()
	err := b.Apply(map[string]string{
		"queued.max.request.bytes": "-7", "log.cleaner.io.max.bytes.per.second": "1e300",
		"log.cleaner.enable": "false", "log.cleaner.backoff.ms": "250", "offsets.retention.minutes": "3",
		"advertised.listeners": "PLAINTEXT://example:19092,REPLICATION://other:1", "controller.quorum.voters": "0@a:1, 1@b:2",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.QueuedMaxBytes != -1 || b.Cleaner.IOMaxBytesPerSecond != -1 || !b.Cleaner.Disabled || b.Cleaner.Backoff != 250*time.Millisecond ||
		b.Groups.OffsetsRetentionMs != 180_000 || b.AdvertisedHost != "example" || b.AdvertisedPort != 19092 || b.ControllerQuorum != "0@a:1,1@b:2" {
		t.Fatalf("%+v", b)
	}
}
