package config

import (
	"strings"
	"testing"

	"github.com/stratalog/strata/engine"
)

// TestProducerExpirationKeys: producer.id.expiration.ms and
// transactional.id.expiration.ms parse with Kafka's defaults and range.
func TestProducerExpirationKeys(t *testing.T) {
	b := Defaults()
	if b.ProducerIDExpirationMs != engine.DefaultProducerIDExpirationMs || b.TransactionalIDExpirationMs != 604800000 {
		t.Fatalf("defaults %d %d", b.ProducerIDExpirationMs, b.TransactionalIDExpirationMs)
	}
	props, err := ParseProperties(strings.NewReader("producer.id.expiration.ms=60000\ntransactional.id.expiration.ms=120000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(props); err != nil {
		t.Fatal(err)
	}
	if b.ProducerIDExpirationMs != 60000 || b.TransactionalIDExpirationMs != 120000 || len(b.Unknown) != 0 {
		t.Fatalf("got %d %d unknown %v", b.ProducerIDExpirationMs, b.TransactionalIDExpirationMs, b.Unknown)
	}
	for _, bad := range []string{"0", "-5", "2147483648", "1d"} {
		b := Defaults()
		if err := b.Apply(map[string]string{"producer.id.expiration.ms": bad}); err == nil {
			t.Errorf("producer.id.expiration.ms=%s accepted", bad)
		}
	}
}
