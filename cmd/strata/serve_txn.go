package main

import (
	"time"

	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/server"
)

// txnConfig is the broker's transaction settings (server.TxnConfig) from
// the properties file (internal/config, Kafka's keys and defaults):
//
//	transaction.max.timeout.ms                                  900000
//	transactional.id.expiration.ms                              604800000 (7 days)
//	transaction.abort.timed.out.transaction.cleanup.interval.ms 10000
//	transaction.partition.verification.enable                   true (KIP-890 part 1)
//	transaction.version                                         2 (KIP-890 part 2; 1 or 0: the older flow)
//
// transaction.version is a finalized feature in Kafka (kafka-features.sh);
// here it is a broker key, and every broker of a cluster should set the
// same level. The __transaction_state topic keeps Kafka's defaults (50
// partitions, replication 3 capped by the live brokers).
func txnConfig(cfg config.Broker) server.TxnConfig {
	return server.TxnConfig{
		MaxTimeoutMs:          cfg.TransactionMaxTimeoutMs,
		IDExpirationMs:        cfg.TransactionalIDExpirationMs,
		AbortInterval:         time.Duration(cfg.TransactionAbortIntervalMs) * time.Millisecond,
		PartitionVerification: cfg.TransactionPartitionVerification,
		TransactionVersion:    cfg.TransactionVersion,
	}
}
