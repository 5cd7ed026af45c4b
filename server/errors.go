package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// One table maps every Go error the broker answers with to its Kafka error
// code. A row names an error (matched with errors.Is, so wrapped errors
// work) and the code a request sends for it; each kind of answer is a
// codeMap that says whether a *kerr.Error in the chain goes out as it is,
// which rows it reads and what it sends for anything else:
//
//	requestCodes  a request's per-resource error (errCode, apiErrCode)
//	ackCodes      a failed acks=-1 wait (Produce, WriteTxnMarkers)
//	proposeCodes  a failed controller proposal (proposeErr)
//
// The group and transaction coordinators answer with codes they chose
// themselves (group's storeErrCode, txn.ErrorCode); txnErrCode below only
// renames one for old request versions.

// codeRow is one row of the table: err, and the code sent for it.
type codeRow struct {
	err  error
	code *kerr.Error
}

// errRows are the engine's and record's sentinel errors with the code a
// request sends for them. Order matters only where one error could wrap
// two sentinels; the most specific comes first.
var errRows = []codeRow{
	{engine.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{engine.ErrTopicExists, kerr.TopicAlreadyExists},
	{engine.ErrInvalidTopic, kerr.InvalidTopicException},
	{engine.ErrInvalidPartitions, kerr.InvalidPartitions},
	{engine.ErrInvalidConfig, kerr.InvalidConfig},
	{engine.ErrMessageTooLarge, kerr.MessageTooLarge},
	{engine.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{engine.ErrCorruptMessage, kerr.CorruptMessage},
	{engine.ErrInvalidRecord, kerr.InvalidRecord},
	// Idempotence and transactions (Produce, WriteTxnMarkers).
	{engine.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{engine.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{engine.ErrInvalidTxnState, kerr.InvalidTxnState},
	{engine.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	{record.ErrCorrupt, kerr.CorruptMessage},
	{record.ErrShort, kerr.CorruptMessage},
	{record.ErrMagic, kerr.InvalidRecord},
	{record.ErrInvalid, kerr.InvalidRecord},
	// A failed fsync or a closing engine: the partition cannot be served
	// here now. KAFKA_STORAGE_ERROR is retriable, so clients back off and
	// refresh metadata rather than giving up.
	{engine.ErrOffline, kerr.KafkaStorageError},
	{engine.ErrClosed, kerr.KafkaStorageError},
	// Out of descriptors, memory or space while creating a partition or a
	// segment: that request fails (retriable), the directory stays online.
	{engine.ErrResource, kerr.KafkaStorageError},
	// Below the free-space floor (log.dir.min.free.bytes): produce and
	// topic creation are refused until space returns; retriable, and the
	// code Kafka uses for its log directory's disk (docs/reliability.md,
	// "Disk full").
	{engine.ErrNoSpace, kerr.KafkaStorageError},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
}

// proposeRows are a failed proposal's: a cancelled one (the Server or the
// controller closing, leadership lost) is NOT_CONTROLLER even if a
// deadline is in its chain too, so the client asks another broker.
var proposeRows = []codeRow{
	{context.Canceled, kerr.NotController},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
}

// codeMap is one kind of answer's reading of the table.
type codeMap struct {
	kafka bool        // a *kerr.Error in the chain is sent as it is, before rows
	rows  []codeRow   // the first row whose err the error wraps gives the code
	other *kerr.Error // anything else
}

var (
	// requestCodes: 0 for nil, a *kerr.Error's own code, a sentinel's row,
	// UNKNOWN_SERVER_ERROR (-1) for anything else.
	requestCodes = codeMap{kafka: true, rows: errRows, other: kerr.UnknownServerError}
	// ackCodes: the replica manager's Kafka error
	// (NOT_ENOUGH_REPLICAS_AFTER_APPEND, ...) as is, any other failure (a
	// failed fsync, a closing engine) KAFKA_STORAGE_ERROR.
	ackCodes = codeMap{kafka: true, other: kerr.KafkaStorageError}
	// proposeCodes: REQUEST_TIMED_OUT for a deadline, NOT_CONTROLLER for
	// anything else, the controller's own errors included.
	proposeCodes = codeMap{rows: proposeRows, other: kerr.NotController}
)

// code is err's Kafka error under m (for nil too: m.other).
func (m codeMap) code(err error) *kerr.Error {
	var ke *kerr.Error
	if m.kafka && errors.As(err, &ke) {
		return ke
	}
	for _, r := range m.rows {
		if errors.Is(err, r.err) {
			return r.code
		}
	}
	return m.other
}

// errCode maps an error to the Kafka error code of a request's answer
// (requestCodes): 0 for nil, the code of a *kerr.Error, the code of a known
// engine or record sentinel, and UNKNOWN_SERVER_ERROR (-1) for anything
// else.
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	return requestCodes.code(err).Code
}

// ackErrCode is the error code of a failed acks=-1 wait (ackCodes).
func ackErrCode(err error) int16 { return ackCodes.code(err).Code }

// proposeErr maps a failed proposal to the Kafka error a client should see
// (proposeCodes).
func proposeErr(err error) *apiError {
	return &apiError{code: proposeCodes.code(err), msg: "controller: " + err.Error()}
}

// kafkaErr is the Kafka error of a code from elsewhere (a controller
// result, a coordinator): UNKNOWN_SERVER_ERROR for 0 or a code franz-go
// does not know.
func kafkaErr(code int16) *kerr.Error {
	if e, _ := kerr.ErrorForCode(code).(*kerr.Error); e != nil {
		return e
	}
	return kerr.UnknownServerError
}

// resultErr maps a refused command (or partition) to an apiError; an empty
// msg is the code's own message.
func resultErr(code int16, msg string) *apiError {
	e := kafkaErr(code)
	if msg == "" {
		msg = e.Message
	}
	return &apiError{code: e, msg: msg}
}

// txnErrCode is the wire code of a transaction coordinator's answer;
// oldVersion maps PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for request
// versions that predate it (KIP-588), as Kafka's KafkaApis does.
func txnErrCode(e txn.ErrorCode, oldVersion bool) int16 {
	if e == txn.ProducerFenced && oldVersion {
		return kerr.InvalidProducerEpoch.Code
	}
	return int16(e)
}

// errMessage is the ErrorMessage field for responses that carry one: nil for
// success, the error text otherwise (Kafka sends its exception message).
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// apiError is a per-resource failure with the Kafka error to send and a
// message for the ErrorMessage field.
type apiError struct {
	code *kerr.Error
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func newAPIError(code *kerr.Error, format string, args ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// apiErrCode is errCode that also understands *apiError (its own code,
// found anywhere in the chain).
func apiErrCode(err error) int16 {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.code.Code
	}
	return errCode(err)
}
