// Package kcode is the broker's one table from Go errors to Kafka error
// codes. A Row names an error and the code sent for it; a Map is one kind
// of answer's reading of rows: whether a *kerr.Error in the chain goes out
// as it is, which rows it reads, and what it sends for anything else.
//
// The maps here are those whose errors live at or below this package:
//
//	Ack       a failed acks=-1 wait (Produce, WriteTxnMarkers)
//	Propose   a failed controller proposal
//	Store     a failed write of the group coordinator's log
//	TxnStore  the same for a transaction's offset commit
//
// server/errors.go builds the request map (errCode) from these types with
// the rows that name the engine's and record's sentinels: kcode imports
// only the standard library and franz-go's kerr, so group, which must not
// import engine or server, reads the same table as server.
package kcode

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Row is one row of the table: Err, and the code sent for it. A row whose
// Err is a *kerr.Error matches when it is the first *kerr.Error in the
// chain (errors.As); any other Err matches with errors.Is, so wrapped
// errors match too.
type Row struct {
	Err  error
	Code *kerr.Error
}

// Map is one kind of answer's reading of the table.
type Map struct {
	Kafka bool        // the first *kerr.Error in the chain is sent as it is, before Rows
	Rows  []Row       // the first row that matches gives the code
	Other *kerr.Error // anything else (nil included)
}

// Error is err's Kafka error under m (for nil too: m.Other).
func (m Map) Error(err error) *kerr.Error {
	var ke *kerr.Error
	errors.As(err, &ke)
	if m.Kafka && ke != nil {
		return ke
	}
	for _, r := range m.Rows {
		if rk, ok := r.Err.(*kerr.Error); ok {
			if ke != nil && ke == rk {
				return r.Code
			}
			continue
		}
		if errors.Is(err, r.Err) {
			return r.Code
		}
	}
	return m.Other
}

// Code is err's Kafka error code under m: 0 for nil.
func (m Map) Code(err error) int16 {
	if err == nil {
		return 0
	}
	return m.Error(err).Code
}

var (
	// Ack: the replica manager's Kafka error
	// (NOT_ENOUGH_REPLICAS_AFTER_APPEND, ...) as is, any other failure (a
	// failed fsync, a closing engine) KAFKA_STORAGE_ERROR.
	Ack = Map{Kafka: true, Other: kerr.KafkaStorageError}

	// Propose: REQUEST_TIMED_OUT for a deadline, NOT_CONTROLLER for
	// anything else, the controller's own errors included. A cancelled
	// proposal (the Server or the controller closing, leadership lost) is
	// NOT_CONTROLLER even if a deadline is in its chain too, so the client
	// asks another broker.
	Propose = Map{Rows: []Row{
		{context.Canceled, kerr.NotController},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
	}, Other: kerr.NotController}

	// Store: what Kafka's group coordinator sends for a failed write of
	// its log. NOT_LEADER_OR_FOLLOWER (the __consumer_offsets partition
	// moved) is NOT_COORDINATOR; every other failure, storage ones
	// included, is COORDINATOR_NOT_AVAILABLE, so clients retry after
	// rediscovering the coordinator.
	Store = Map{Rows: storeRows, Other: kerr.CoordinatorNotAvailable}

	// TxnStore is Store for a transaction's offset commit, except that a
	// producer's own errors (a fenced epoch) reach the client as they are.
	TxnStore = Map{Rows: append([]Row{
		{kerr.InvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{kerr.ProducerFenced, kerr.ProducerFenced},
		{kerr.InvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
		{kerr.InvalidTxnState, kerr.InvalidTxnState},
	}, storeRows...), Other: kerr.CoordinatorNotAvailable}
)

var storeRows = []Row{{kerr.NotLeaderForPartition, kerr.NotCoordinator}}
