package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/config"
)

// TestServeTxnConfig: the transaction keys of a properties file reach the
// server's TxnConfig.
func TestServeTxnConfig(t *testing.T) {
	b := config.Defaults()
	if tc := txnConfig(b); tc.TransactionVersion != 2 || !tc.PartitionVerification || tc.MaxTimeoutMs != 900000 ||
		tc.IDExpirationMs != 604800000 || tc.AbortInterval != 10*time.Second {
		t.Fatalf("defaults: %+v", tc)
	}
	props, err := config.ParseProperties(strings.NewReader(`transaction.max.timeout.ms=60000
transactional.id.expiration.ms=120000
transaction.abort.timed.out.transaction.cleanup.interval.ms=250
transaction.version=1
transaction.partition.verification.enable=false
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(props); err != nil {
		t.Fatal(err)
	}
	if tc := txnConfig(b); tc.TransactionVersion != 1 || tc.PartitionVerification || tc.MaxTimeoutMs != 60000 ||
		tc.IDExpirationMs != 120000 || tc.AbortInterval != 250*time.Millisecond {
		t.Fatalf("from the file: %+v", tc)
	}
}
