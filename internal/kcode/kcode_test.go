package kcode

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Every map's answer for errors of each kind, pinned: changing a row, a
// map's Kafka flag or its Other fails here.
func TestMapsPinned(t *testing.T) {
	type want struct{ ack, propose, store, txnStore *kerr.Error }
	fenced := want{kerr.ProducerFenced, kerr.NotController, kerr.CoordinatorNotAvailable, kerr.ProducerFenced}
	for _, tc := range []struct {
		name string
		err  error
		want want
	}{
		{"deadline", context.DeadlineExceeded,
			want{kerr.KafkaStorageError, kerr.RequestTimedOut, kerr.CoordinatorNotAvailable, kerr.CoordinatorNotAvailable}},
		{"wrapped deadline", fmt.Errorf("proposing: %w", context.DeadlineExceeded),
			want{kerr.KafkaStorageError, kerr.RequestTimedOut, kerr.CoordinatorNotAvailable, kerr.CoordinatorNotAvailable}},
		{"cancel", context.Canceled,
			want{kerr.KafkaStorageError, kerr.NotController, kerr.CoordinatorNotAvailable, kerr.CoordinatorNotAvailable}},
		{"deadline and cancel", errors.Join(context.DeadlineExceeded, context.Canceled),
			want{kerr.KafkaStorageError, kerr.NotController, kerr.CoordinatorNotAvailable, kerr.CoordinatorNotAvailable}},
		{"not leader", kerr.NotLeaderForPartition,
			want{kerr.NotLeaderForPartition, kerr.NotController, kerr.NotCoordinator, kerr.NotCoordinator}},
		{"wrapped not leader", fmt.Errorf("%w: __consumer_offsets-3", kerr.NotLeaderForPartition),
			want{kerr.NotLeaderForPartition, kerr.NotController, kerr.NotCoordinator, kerr.NotCoordinator}},
		{"other kerr", kerr.NotEnoughReplicasAfterAppend,
			want{kerr.NotEnoughReplicasAfterAppend, kerr.NotController, kerr.CoordinatorNotAvailable, kerr.CoordinatorNotAvailable}},
		{"kerr wrapping deadline", fmt.Errorf("%w: %w", kerr.RequestTimedOut, context.DeadlineExceeded),
			want{kerr.RequestTimedOut, kerr.RequestTimedOut, kerr.CoordinatorNotAvailable, kerr.CoordinatorNotAvailable}},
		{"invalid epoch", kerr.InvalidProducerEpoch,
			want{kerr.InvalidProducerEpoch, kerr.NotController, kerr.CoordinatorNotAvailable, kerr.InvalidProducerEpoch}},
		{"fenced", kerr.ProducerFenced, fenced},
		{"wrapped fenced", fmt.Errorf("producer 7: %w", kerr.ProducerFenced), fenced},
		{"invalid pid mapping", kerr.InvalidProducerIDMapping,
			want{kerr.InvalidProducerIDMapping, kerr.NotController, kerr.CoordinatorNotAvailable, kerr.InvalidProducerIDMapping}},
		{"invalid txn state", kerr.InvalidTxnState,
			want{kerr.InvalidTxnState, kerr.NotController, kerr.CoordinatorNotAvailable, kerr.InvalidTxnState}},
		// Only the first Kafka error in the chain counts.
		{"fenced then not leader", fmt.Errorf("%w: %w", kerr.ProducerFenced, kerr.NotLeaderForPartition), fenced},
		{"other then not leader", errors.Join(kerr.PolicyViolation, kerr.NotLeaderForPartition),
			want{kerr.PolicyViolation, kerr.NotController, kerr.CoordinatorNotAvailable, kerr.CoordinatorNotAvailable}},
		{"unknown", errors.New("disk on fire"),
			want{kerr.KafkaStorageError, kerr.NotController, kerr.CoordinatorNotAvailable, kerr.CoordinatorNotAvailable}},
	} {
		for _, m := range []struct {
			name string
			m    Map
			want *kerr.Error
		}{
			{"Ack", Ack, tc.want.ack},
			{"Propose", Propose, tc.want.propose},
			{"Store", Store, tc.want.store},
			{"TxnStore", TxnStore, tc.want.txnStore},
		} {
			if got := m.m.Error(tc.err); got != m.want {
				t.Errorf("%s.Error(%s) = %v, want %v", m.name, tc.name, got, m.want)
			}
			if got := m.m.Code(tc.err); got != m.want.Code {
				t.Errorf("%s.Code(%s) = %d, want %d", m.name, tc.name, got, m.want.Code)
			}
		}
	}
	// nil: success as a code; as an error, the map's Other.
	for name, m := range map[string]Map{"Ack": Ack, "Propose": Propose, "Store": Store, "TxnStore": TxnStore} {
		if m.Code(nil) != 0 || m.Error(nil) != m.Other {
			t.Errorf("%s: nil gives code %d, error %v", name, m.Code(nil), m.Error(nil))
		}
	}
}

// A row's order decides between two errors of one chain; a Kafka map
// sends the chain's Kafka error before reading rows.
func TestMapOrder(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	m := Map{Rows: []Row{{a, kerr.InvalidRequest}, {b, kerr.InvalidConfig}}, Other: kerr.UnknownServerError}
	if got := m.Error(errors.Join(b, a)); got != kerr.InvalidRequest {
		t.Errorf("first row loses: %v", got)
	}
	m.Kafka = true
	if got := m.Error(fmt.Errorf("%w: %w", a, kerr.PolicyViolation)); got != kerr.PolicyViolation {
		t.Errorf("Kafka map: %v", got)
	}
}
