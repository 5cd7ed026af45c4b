package config

import (
	"strings"
	"testing"
)

// TestTransactionKeys: the transaction keys parse with Kafka's defaults and
// ranges.
func TestTransactionKeys(t *testing.T) {
	b := Defaults()
	if b.TransactionMaxTimeoutMs != 900000 || b.TransactionAbortIntervalMs != 10000 || b.TransactionVersion != 2 || !b.TransactionPartitionVerification {
		t.Fatalf("defaults %d %d %d %v", b.TransactionMaxTimeoutMs, b.TransactionAbortIntervalMs, b.TransactionVersion, b.TransactionPartitionVerification)
	}
	props, err := ParseProperties(strings.NewReader(`transaction.max.timeout.ms=60000
transaction.abort.timed.out.transaction.cleanup.interval.ms=500
transaction.version=1
transaction.partition.verification.enable=false
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(props); err != nil {
		t.Fatal(err)
	}
	if b.TransactionMaxTimeoutMs != 60000 || b.TransactionAbortIntervalMs != 500 || b.TransactionVersion != 1 || b.TransactionPartitionVerification || len(b.Unknown) != 0 {
		t.Fatalf("got %d %d %d %v unknown %v", b.TransactionMaxTimeoutMs, b.TransactionAbortIntervalMs, b.TransactionVersion, b.TransactionPartitionVerification, b.Unknown)
	}
	for k, bad := range map[string][]string{
		"transaction.max.timeout.ms":                                  {"0", "-1", "2147483648", "x"},
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": {"0", "2147483648"},
		"transaction.version":                                         {"3", "-1", "two"},
		"transaction.partition.verification.enable":                   {"maybe"},
	} {
		for _, v := range bad {
			b := Defaults()
			if err := b.Apply(map[string]string{k: v}); err == nil {
				t.Errorf("%s=%s accepted", k, v)
			}
		}
	}
}
