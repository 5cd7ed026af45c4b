package config

import (
	"strings"
	"testing"
)

// TestSecurityKeysRefuseToStart: a configuration asking for TLS, SASL or
// authorization is a start-up error naming the key (issue 20: an SSL
// listener used to start a plaintext broker with a warning); PLAINTEXT
// listeners, and security keys that say PLAINTEXT, still start.
func TestSecurityKeysRefuseToStart(t *testing.T) {
	for _, c := range []struct {
		props map[string]string
		key   string // what the error must name
	}{
		{map[string]string{"listeners": "SSL://127.0.0.1:9093"}, "listeners"},
		{map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094"}, "SASL_SSL"},
		{map[string]string{"advertised.listeners": "SASL_PLAINTEXT://h:9092"}, "advertised.listeners"},
		{map[string]string{"listeners": "CLIENT://127.0.0.1:9092", "listener.security.protocol.map": "CLIENT:SSL"}, "CLIENT"},
		{map[string]string{"listeners": "CLIENT://127.0.0.1:9092"}, "listener.security.protocol.map"},
		{map[string]string{"ssl.keystore.location": "/etc/k.jks"}, "ssl.keystore.location"},
		{map[string]string{"sasl.enabled.mechanisms": "PLAIN"}, "sasl.enabled.mechanisms"},
		{map[string]string{"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol"},
		{map[string]string{"listener.name.client.ssl.keystore.location": "/k"}, "listener.name.client"},
		{map[string]string{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}, "authorizer.class.name"},
		{map[string]string{"super.users": "User:admin"}, "super.users"},
		{map[string]string{"listener.security.protocol.map": "bogus"}, "listener.security.protocol.map"},
	} {
		b := Defaults()
		err := b.Apply(c.props)
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%v: %v, want a start-up error naming %s", c.props, err, c.key)
		}
	}
	for _, props := range []map[string]string{
		{"listeners": "PLAINTEXT://127.0.0.1:9092"},
		{"listeners": "127.0.0.1:9092"},
		{"security.inter.broker.protocol": "PLAINTEXT"},
		{"listeners": "CLIENT://127.0.0.1:9092", "listener.security.protocol.map": "CLIENT:PLAINTEXT"},
	} {
		b := Defaults()
		if err := b.Apply(props); err != nil {
			t.Errorf("%v: %v", props, err)
		}
	}
}
