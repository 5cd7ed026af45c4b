package main

import (
	"flag"
	"io"
	"maps"
	"net"
	"strings"
	"testing"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/netpoll"
	"github.com/stratalog/strata/server"
)

// The serve flags set their keys through the table's checks, after the
// file, and are recorded as set (DescribeConfigs' STATIC_BROKER_CONFIG).
func TestKeyFlags(t *testing.T) {
	parse := func(args ...string) (config.Broker, error) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := addKeyFlags(fs)
		if err := fs.Parse(args); err != nil {
			return config.Broker{}, err
		}
		b := config.Defaults()
		if err := b.Apply(map[string]string{"node.id": "1", "broker.rack": "file"}); err != nil {
			return b, err
		}
		return b, applyKeyFlags(&b, f)
	}
	b, err := parse("--listen", "0.0.0.0:19092", "--data-dir", "/d", "--node-id", "7", "--rack", "r2",
		"--controller-quorum", "0@h:1", "--auto-leader-rebalance=false")
	if err != nil {
		t.Fatal(err)
	}
	if b.Listen != "0.0.0.0:19092" || b.DataDir != "/d" || b.NodeID != 7 || b.Rack != "r2" || b.ControllerQuorum != "0@h:1" || b.AutoLeaderRebalance {
		t.Fatalf("%+v", b)
	}
	want := map[string]string{"listeners": "0.0.0.0:19092", "log.dirs": "/d", "node.id": "7", "broker.rack": "r2",
		"controller.quorum.voters": "0@h:1", "auto.leader.rebalance.enable": "false"}
	if !maps.Equal(b.Static, want) {
		t.Fatalf("static %v, want %v", b.Static, want)
	}
	if b, err := parse(); err != nil || b.NodeID != 1 || b.Rack != "file" {
		t.Fatalf("no flags: %+v %v", b, err)
	}
	for _, bad := range [][]string{{"--listen", "nohost"}, {"--node-id", "x"}, {"--leader-imbalance-per-broker-percentage", "200"}} {
		if _, err := parse(bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// The table's defaults are the ones the packages fall back to.
func TestTableDefaultsAreThePackages(t *testing.T) {
	d := config.Defaults()
	if lc, err := engine.DefaultLogConfig().Apply(d.TopicDefaults); err != nil || lc != engine.DefaultLogConfig() {
		t.Fatalf("log defaults: %v", err)
	}
	g := groupConfig(d.Groups)
	if g.MinSessionTimeoutMs != group.DefaultMinSessionTimeoutMs || g.MaxSessionTimeoutMs != group.DefaultMaxSessionTimeoutMs ||
		g.InitialRebalanceDelayMs != group.DefaultInitialRebalanceDelayMs || g.OffsetMetadataMaxBytes != group.DefaultOffsetMetadataMaxBytes ||
		g.OffsetsPartitions != group.DefaultOffsetsPartitions || g.OffsetsRetentionMs != group.DefaultOffsetsRetentionMs {
		t.Fatalf("group defaults %+v", g)
	}
	if d.ProducerIDExpirationMs != engine.DefaultProducerIDExpirationMs || d.SessionTimeoutMs != controller.DefaultSessionTimeoutMs ||
		d.NumPartitions != server.DefaultNumPartitions || d.DefaultRepl != server.DefaultReplication ||
		d.MaxRequestBytes != server.DefaultMaxRequestBytes || d.FetchMaxBytes != server.DefaultFetchMaxBytes ||
		d.QueuedMaxBytes != netpoll.DefaultMaxQueuedBytes || d.IOBackend != engine.IOBackendAuto {
		t.Fatalf("broker defaults %+v", d)
	}
}

// The listening line's advertised address: the configured one, or, for a
// port left 0, the port the listener was bound to.
func TestAdvertisedAddr(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 41234}
	for _, c := range []struct {
		l    config.Listener
		want string
	}{
		{config.Listener{AdvertisedHost: "127.0.0.1", AdvertisedPort: 0}, "127.0.0.1:41234"},
		{config.Listener{AdvertisedHost: "kafka1.example", AdvertisedPort: 9092}, "kafka1.example:9092"},
		{config.Listener{AdvertisedHost: "kafka1.example", AdvertisedPort: 0}, "kafka1.example:41234"},
	} {
		if got := advertisedAddr(c.l, bound); got != c.want {
			t.Errorf("%+v: %s, want %s", c.l, got, c.want)
		}
	}
}

// The key flags' help names each key's type with its article: "an int",
// "a long", "a string".
func TestKeyFlagsHelpArticle(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addKeyFlags(fs)
	var out strings.Builder
	fs.SetOutput(&out)
	fs.PrintDefaults()
	help := out.String()
	for _, want := range []string{"sets node.id, an int: ", "sets listeners, a string: "} {
		if !strings.Contains(help, want) {
			t.Errorf("serve flags' help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, ", a int") {
		t.Errorf("serve flags' help says \"a int\":\n%s", help)
	}
}
