package config

import (
	"math"
	"strings"
	"testing"
)

// The connection limit keys (issue 20): Kafka's defaults (unlimited), the
// broker-wide keys, the overrides, the per-listener keys, and the errors
// that name the key.
func TestConnectionLimitKeys(t *testing.T) {
	load := func(props map[string]string) (Broker, error) {
		b := Defaults()
		if err := b.Apply(props); err != nil {
			return b, err
		}
		return b, b.Finish()
	}
	b, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.MaxConnections != math.MaxInt32 || b.MaxConnectionsPerIP != math.MaxInt32 || b.MaxConnectionCreationRate != math.MaxInt32 ||
		b.Listeners[0].MaxConnections != math.MaxInt32 || b.Listeners[0].MaxConnectionCreationRate != math.MaxInt32 {
		t.Fatalf("defaults: %+v", b)
	}
	b, err = load(map[string]string{
		"listeners":                                           "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
		"listener.security.protocol.map":                      "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
		"max.connections":                                     "100",
		"max.connections.per.ip":                              "0",
		"max.connections.per.ip.overrides":                    "127.0.0.1:5, host.example:7",
		"max.connection.creation.rate":                        "9",
		"listener.name.external.max.connections":              "10",
		"listener.name.external.max.connection.creation.rate": "3",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.MaxConnections != 100 || b.MaxConnectionsPerIP != 0 || b.MaxConnectionCreationRate != 9 ||
		b.MaxConnectionsPerIPOvr["127.0.0.1"] != 5 || b.MaxConnectionsPerIPOvr["host.example"] != 7 {
		t.Fatalf("broker keys: %+v", b)
	}
	ext := b.Listeners[1]
	if ext.Name != "EXTERNAL" || ext.MaxConnections != 10 || ext.MaxConnectionCreationRate != 3 || b.Listeners[0].MaxConnections != math.MaxInt32 {
		t.Fatalf("listeners: %+v", b.Listeners)
	}
	for _, c := range []struct {
		props map[string]string
		key   string
	}{
		{map[string]string{"max.connections": "-1"}, "max.connections"},
		{map[string]string{"max.connections.per.ip": "0"}, "max.connections.per.ip.overrides"},
		{map[string]string{"max.connections.per.ip.overrides": "127.0.0.1"}, "max.connections.per.ip.overrides"},
		{map[string]string{"max.connections.per.ip.overrides": "a:1,a:2"}, "max.connections.per.ip.overrides"},
		{map[string]string{"listener.name.plaintext.max.connections": "x"}, "listener.name.plaintext.max.connections"},
		{map[string]string{"listener.name.nosuch.max.connections": "1"}, "listener.name.nosuch.max.connections"},
		{map[string]string{"listener.name.plaintext.num.network.threads": "1"}, "listener.name.plaintext.num.network.threads"},
	} {
		_, err := load(c.props)
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%v: error %v, want one naming %s", c.props, err, c.key)
		}
	}
}
