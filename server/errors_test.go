package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestErrCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{engine.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
		{engine.ErrTopicExists, kerr.TopicAlreadyExists},
		{engine.ErrInvalidTopic, kerr.InvalidTopicException},
		{engine.ErrInvalidPartitions, kerr.InvalidPartitions},
		{engine.ErrInvalidConfig, kerr.InvalidConfig},
		{engine.ErrCorruptMessage, kerr.CorruptMessage},
		{engine.ErrInvalidRecord, kerr.InvalidRecord},
		{engine.ErrMessageTooLarge, kerr.MessageTooLarge},
		{engine.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{engine.ErrOffline, kerr.KafkaStorageError},
		{engine.ErrClosed, kerr.KafkaStorageError},
		{fmt.Errorf("producer 7: %w", engine.ErrOutOfOrderSequence), kerr.OutOfOrderSequenceNumber},
		{engine.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{engine.ErrInvalidTxnState, kerr.InvalidTxnState},
		{engine.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
		{record.ErrCorrupt, kerr.CorruptMessage},
		{record.ErrShort, kerr.CorruptMessage},
		{record.ErrMagic, kerr.InvalidRecord},
		{record.ErrInvalid, kerr.InvalidRecord},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
		{kerr.NotController, kerr.NotController},
		{fmt.Errorf("appending: %w", fmt.Errorf("segment: %w", engine.ErrOffline)), kerr.KafkaStorageError},
		{fmt.Errorf("%w: retention.ms", engine.ErrInvalidConfig), kerr.InvalidConfig},
		{fmt.Errorf("wrapped kerr: %w", kerr.PolicyViolation), kerr.PolicyViolation},
		{errors.New("something else"), kerr.UnknownServerError},
	} {
		if got := errCode(tc.err); got != tc.want.Code {
			t.Errorf("errCode(%v) = %d, want %d (%s)", tc.err, got, tc.want.Code, tc.want.Message)
		}
	}
	if errCode(nil) != 0 || errMessage(nil) != nil {
		t.Fatal("nil error is not success")
	}
	if m := errMessage(engine.ErrOffline); m == nil || *m != engine.ErrOffline.Error() {
		t.Fatalf("errMessage = %v", m)
	}
	if got := apiErrCode(newAPIError(kerr.InvalidRequest, "x %d", 1)); got != kerr.InvalidRequest.Code {
		t.Fatalf("apiErrCode = %d", got)
	}
	if got := apiErrCode(engine.ErrTopicExists); got != kerr.TopicAlreadyExists.Code {
		t.Fatalf("apiErrCode falls back to errCode: %d", got)
	}
}

func TestListenerEndpoint(t *testing.T) {
	host, port := listenerEndpoint(&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 9092})
	if host != "10.1.2.3" || port != 9092 {
		t.Fatalf("%s:%d", host, port)
	}
	for _, ip := range []net.IP{net.IPv4zero, net.IPv6unspecified} {
		host, port = listenerEndpoint(&net.TCPAddr{IP: ip, Port: 9093})
		if host == "" || net.ParseIP(host).IsUnspecified() || port != 9093 {
			t.Fatalf("wildcard %v advertised as %q:%d", ip, host, port)
		}
	}
}

// TestErrorCodesPinned pins, for every sentinel error the broker knows (and
// a few it does not), the code each kind of answer sends: a request's
// per-resource error (errCode, apiErrCode), a failed acks=-1 wait
// (ackErrCode) and a failed controller proposal (proposeErr). It was
// written against the six functions before they became one table, and
// must not change with the table's shape.
func TestErrorCodesPinned(t *testing.T) {
	type want struct{ req, api, ack, propose *kerr.Error }
	// Every sentinel of the engine and record packages, with the code a
	// request sends for it.
	sentinels := []struct {
		err error
		req *kerr.Error
	}{
		{engine.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
		{engine.ErrTopicExists, kerr.TopicAlreadyExists},
		{engine.ErrInvalidTopic, kerr.InvalidTopicException},
		{engine.ErrInvalidPartitions, kerr.InvalidPartitions},
		{engine.ErrInvalidConfig, kerr.InvalidConfig},
		{engine.ErrMessageTooLarge, kerr.MessageTooLarge},
		{engine.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{engine.ErrCorruptMessage, kerr.CorruptMessage},
		{engine.ErrInvalidRecord, kerr.InvalidRecord},
		{engine.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
		{engine.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{engine.ErrInvalidTxnState, kerr.InvalidTxnState},
		{engine.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
		{record.ErrCorrupt, kerr.CorruptMessage},
		{record.ErrShort, kerr.CorruptMessage},
		{record.ErrMagic, kerr.InvalidRecord},
		{record.ErrInvalid, kerr.InvalidRecord},
		{engine.ErrOffline, kerr.KafkaStorageError},
		{engine.ErrLogCorrupt, kerr.KafkaStorageError}, // wraps ErrOffline
		{engine.ErrClosed, kerr.KafkaStorageError},
		{engine.ErrResource, kerr.KafkaStorageError},
		{engine.ErrNoSpace, kerr.KafkaStorageError},
		// Sentinels no table names: the handlers that meet them decide.
		{engine.ErrNotHosted, kerr.UnknownServerError},
		{engine.ErrNotReplicated, kerr.UnknownServerError},
		{engine.ErrSegmentGone, kerr.UnknownServerError},
		{context.Canceled, kerr.UnknownServerError},
	}
	type row struct {
		name string
		err  error
		want want
	}
	var rows []row
	for _, s := range sentinels {
		w := want{req: s.req, api: s.req, ack: kerr.KafkaStorageError, propose: kerr.NotController}
		rows = append(rows,
			row{s.err.Error(), s.err, w},
			row{"wrapped " + s.err.Error(), fmt.Errorf("topic t-0: %w", s.err), w})
	}
	rows = append(rows,
		row{"deadline", context.DeadlineExceeded,
			want{kerr.RequestTimedOut, kerr.RequestTimedOut, kerr.KafkaStorageError, kerr.RequestTimedOut}},
		row{"wrapped deadline", fmt.Errorf("proposing: %w", context.DeadlineExceeded),
			want{kerr.RequestTimedOut, kerr.RequestTimedOut, kerr.KafkaStorageError, kerr.RequestTimedOut}},
		// A cancelled proposal is NOT_CONTROLLER even when a deadline is
		// in the chain too.
		row{"deadline and cancel", errors.Join(context.DeadlineExceeded, context.Canceled),
			want{kerr.RequestTimedOut, kerr.RequestTimedOut, kerr.KafkaStorageError, kerr.NotController}},
		// A Kafka error is sent as it is, except by a proposal.
		row{"kerr", kerr.NotEnoughReplicasAfterAppend,
			want{kerr.NotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend, kerr.NotController}},
		row{"wrapped kerr", fmt.Errorf("%w: partition t-0", kerr.NotLeaderForPartition),
			want{kerr.NotLeaderForPartition, kerr.NotLeaderForPartition, kerr.NotLeaderForPartition, kerr.NotController}},
		row{"kerr wrapping deadline", fmt.Errorf("%w: %w", kerr.RequestTimedOut, context.DeadlineExceeded),
			want{kerr.RequestTimedOut, kerr.RequestTimedOut, kerr.RequestTimedOut, kerr.RequestTimedOut}},
		// The Kafka error wins over a sentinel in the same chain.
		row{"sentinel and kerr", fmt.Errorf("%w: %w", engine.ErrOffline, kerr.PolicyViolation),
			want{kerr.PolicyViolation, kerr.PolicyViolation, kerr.PolicyViolation, kerr.NotController}},
		row{"apiError", newAPIError(kerr.InvalidRequest, "bad %s", "x"),
			want{kerr.UnknownServerError, kerr.InvalidRequest, kerr.KafkaStorageError, kerr.NotController}},
		row{"wrapped apiError", fmt.Errorf("creating: %w", newAPIError(kerr.PolicyViolation, "no")),
			want{kerr.UnknownServerError, kerr.PolicyViolation, kerr.KafkaStorageError, kerr.NotController}},
		row{"unknown", errors.New("something else"),
			want{kerr.UnknownServerError, kerr.UnknownServerError, kerr.KafkaStorageError, kerr.NotController}},
	)
	for _, r := range rows {
		if got := errCode(r.err); got != r.want.req.Code {
			t.Errorf("errCode(%s) = %d, want %d %s", r.name, got, r.want.req.Code, r.want.req.Message)
		}
		if got := apiErrCode(r.err); got != r.want.api.Code {
			t.Errorf("apiErrCode(%s) = %d, want %d %s", r.name, got, r.want.api.Code, r.want.api.Message)
		}
		if got := ackErrCode(r.err); got != r.want.ack.Code {
			t.Errorf("ackErrCode(%s) = %d, want %d %s", r.name, got, r.want.ack.Code, r.want.ack.Message)
		}
		pe := proposeErr(r.err)
		if pe.code != r.want.propose || pe.msg != "controller: "+r.err.Error() {
			t.Errorf("proposeErr(%s) = %v %q, want %v %q", r.name, pe.code, pe.msg, r.want.propose, "controller: "+r.err.Error())
		}
	}
	// nil: success for a request; a failed wait always has an error, and
	// a nil one would be a storage error.
	if errCode(nil) != 0 || apiErrCode(nil) != 0 || ackErrCode(nil) != kerr.KafkaStorageError.Code {
		t.Errorf("nil: errCode %d apiErrCode %d ackErrCode %d", errCode(nil), apiErrCode(nil), ackErrCode(nil))
	}

	// resultErr: a refused command's code and message.
	for _, tc := range []struct {
		code    int16
		msg     string
		want    *kerr.Error
		wantMsg string
	}{
		{kerr.InvalidReplicationFactor.Code, "rf 4 > 3 brokers", kerr.InvalidReplicationFactor, "rf 4 > 3 brokers"},
		{kerr.TopicAlreadyExists.Code, "", kerr.TopicAlreadyExists, kerr.TopicAlreadyExists.Message},
		{kerr.UnknownServerError.Code, "", kerr.UnknownServerError, kerr.UnknownServerError.Message},
		{0, "", kerr.UnknownServerError, kerr.UnknownServerError.Message},
		{12345, "odd", kerr.UnknownServerError, "odd"},
	} {
		e := resultErr(tc.code, tc.msg)
		if e.code != tc.want || e.msg != tc.wantMsg {
			t.Errorf("resultErr(%d, %q) = %v %q, want %v %q", tc.code, tc.msg, e.code, e.msg, tc.want, tc.wantMsg)
		}
		if apiErrCode(e) != tc.want.Code {
			t.Errorf("apiErrCode(resultErr(%d)) = %d", tc.code, apiErrCode(e))
		}
	}

	// txnErrCode: the coordinator's codes as they are, except
	// PRODUCER_FENCED to a request older than KIP-588.
	for _, c := range []txn.ErrorCode{txn.None, txn.NotCoordinator, txn.InvalidRequest, txn.InvalidProducerEpoch,
		txn.InvalidTxnState, txn.InvalidProducerIDMapping, txn.InvalidTransactionTimeout,
		txn.ConcurrentTransactions, txn.ProducerFenced, txn.TransactionAbortable,
		txn.ErrorCode(kerr.CoordinatorLoadInProgress.Code), txn.ErrorCode(kerr.CoordinatorNotAvailable.Code)} {
		for _, old := range []bool{false, true} {
			want := int16(c)
			if c == txn.ProducerFenced && old {
				want = kerr.InvalidProducerEpoch.Code
			}
			if got := txnErrCode(c, old); got != want {
				t.Errorf("txnErrCode(%d, old %v) = %d, want %d", c, old, got, want)
			}
		}
	}
}
