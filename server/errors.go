package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/kcode"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// One table maps every Go error the broker answers with to its Kafka error
// code: package internal/kcode (its Row, its Map — one kind of answer's
// reading of the table — and the maps whose errors it can name: Ack,
// Propose, and the group coordinator's Store and TxnStore). This file adds
// the rows that name the engine's and record's sentinels, which kcode
// cannot import (group reads kcode and must not import engine):
//
//	requestCodes   a request's per-resource error (errCode, apiErrCode)
//	kcode.Ack      a failed acks=-1 wait (Produce, WriteTxnMarkers)
//	kcode.Propose  a failed controller proposal (proposeErr)
//
// The transaction coordinator answers with codes it chose itself
// (txn.ErrorCode); txnErrCode below only renames one for old request
// versions.

// errRows are the engine's and record's sentinel errors with the code a
// request sends for them. Order matters only where one error could wrap
// two sentinels; the most specific comes first.
var errRows = []kcode.Row{
	{Err: engine.ErrUnknownTopic, Code: kerr.UnknownTopicOrPartition},
	{Err: engine.ErrTopicExists, Code: kerr.TopicAlreadyExists},
	{Err: engine.ErrInvalidTopic, Code: kerr.InvalidTopicException},
	{Err: engine.ErrInvalidPartitions, Code: kerr.InvalidPartitions},
	{Err: engine.ErrInvalidConfig, Code: kerr.InvalidConfig},
	{Err: engine.ErrMessageTooLarge, Code: kerr.MessageTooLarge},
	{Err: engine.ErrOffsetOutOfRange, Code: kerr.OffsetOutOfRange},
	{Err: engine.ErrCorruptMessage, Code: kerr.CorruptMessage},
	{Err: engine.ErrInvalidRecord, Code: kerr.InvalidRecord},
	// Idempotence and transactions (Produce, WriteTxnMarkers).
	{Err: engine.ErrOutOfOrderSequence, Code: kerr.OutOfOrderSequenceNumber},
	{Err: engine.ErrInvalidProducerEpoch, Code: kerr.InvalidProducerEpoch},
	{Err: engine.ErrInvalidTxnState, Code: kerr.InvalidTxnState},
	{Err: engine.ErrTransactionCoordinatorFenced, Code: kerr.TransactionCoordinatorFenced},
	{Err: record.ErrCorrupt, Code: kerr.CorruptMessage},
	{Err: record.ErrShort, Code: kerr.CorruptMessage},
	{Err: record.ErrMagic, Code: kerr.InvalidRecord},
	{Err: record.ErrInvalid, Code: kerr.InvalidRecord},
	// A failed fsync or a closing engine: the partition cannot be served
	// here now. KAFKA_STORAGE_ERROR is retriable, so clients back off and
	// refresh metadata rather than giving up.
	{Err: engine.ErrOffline, Code: kerr.KafkaStorageError},
	{Err: engine.ErrClosed, Code: kerr.KafkaStorageError},
	// Out of descriptors, memory or space while creating a partition or a
	// segment: that request fails (retriable), the directory stays online.
	{Err: engine.ErrResource, Code: kerr.KafkaStorageError},
	// Below the free-space floor (log.dir.min.free.bytes): produce and
	// topic creation are refused until space returns; retriable, and the
	// code Kafka uses for its log directory's disk (docs/reliability.md,
	// "Disk full").
	{Err: engine.ErrNoSpace, Code: kerr.KafkaStorageError},
	{Err: context.DeadlineExceeded, Code: kerr.RequestTimedOut},
}

// requestCodes: 0 for nil, a *kerr.Error's own code, a sentinel's row,
// UNKNOWN_SERVER_ERROR (-1) for anything else.
var requestCodes = kcode.Map{Kafka: true, Rows: errRows, Other: kerr.UnknownServerError}

// errCode maps an error to the Kafka error code of a request's answer
// (requestCodes): 0 for nil, the code of a *kerr.Error, the code of a known
// engine or record sentinel, and UNKNOWN_SERVER_ERROR (-1) for anything
// else.
func errCode(err error) int16 { return requestCodes.Code(err) }

// ackErrCode is the error code of a failed acks=-1 wait (kcode.Ack; nil
// too is KAFKA_STORAGE_ERROR: a failed wait always has an error).
func ackErrCode(err error) int16 { return kcode.Ack.Error(err).Code }

// proposeErr maps a failed proposal to the Kafka error a client should see
// (kcode.Propose).
func proposeErr(err error) *apiError {
	return &apiError{code: kcode.Propose.Error(err), msg: "controller: " + err.Error()}
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
