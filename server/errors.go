package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kerr"
)

// errCodes maps the engine's and record's sentinel errors to Kafka error
// codes. Order matters only where one error could wrap two sentinels; the
// most specific comes first.
var errCodes = []struct {
	err  error
	code int16
}{
	{engine.ErrUnknownTopic, kerr.UnknownTopicOrPartition.Code},
	{engine.ErrTopicExists, kerr.TopicAlreadyExists.Code},
	{engine.ErrInvalidTopic, kerr.InvalidTopicException.Code},
	{engine.ErrInvalidPartitions, kerr.InvalidPartitions.Code},
	{engine.ErrInvalidConfig, kerr.InvalidConfig.Code},
	{engine.ErrMessageTooLarge, kerr.MessageTooLarge.Code},
	{engine.ErrOffsetOutOfRange, kerr.OffsetOutOfRange.Code},
	{engine.ErrCorruptMessage, kerr.CorruptMessage.Code},
	{engine.ErrInvalidRecord, kerr.InvalidRecord.Code},
	// Idempotence and transactions (Produce, WriteTxnMarkers).
	{engine.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber.Code},
	{engine.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch.Code},
	{engine.ErrInvalidTxnState, kerr.InvalidTxnState.Code},
	{engine.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced.Code},
	{record.ErrCorrupt, kerr.CorruptMessage.Code},
	{record.ErrShort, kerr.CorruptMessage.Code},
	{record.ErrMagic, kerr.InvalidRecord.Code},
	{record.ErrInvalid, kerr.InvalidRecord.Code},
	// A failed fsync or a closing engine: the partition cannot be served
	// here now. KAFKA_STORAGE_ERROR is retriable, so clients back off and
	// refresh metadata rather than giving up.
	{engine.ErrOffline, kerr.KafkaStorageError.Code},
	{engine.ErrClosed, kerr.KafkaStorageError.Code},
	// Out of descriptors, memory or space while creating a partition or a
	// segment: that request fails (retriable), the directory stays online.
	{engine.ErrResource, kerr.KafkaStorageError.Code},
	// Below the free-space floor (log.dir.min.free.bytes): produce and
	// topic creation are refused until space returns; retriable, and the
	// code Kafka uses for its log directory's disk (docs/reliability.md,
	// "Disk full").
	{engine.ErrNoSpace, kerr.KafkaStorageError.Code},
	{context.DeadlineExceeded, kerr.RequestTimedOut.Code},
}

// errCode maps an error to the Kafka error code to put on the wire: 0 for
// nil, the code of a *kerr.Error, the code of a known engine or record
// sentinel (matched with errors.Is, so wrapped errors work), and
// UNKNOWN_SERVER_ERROR (-1) for anything else.
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	for _, e := range errCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return kerr.UnknownServerError.Code
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

// apiErrCode is errCode that also understands *apiError.
func apiErrCode(err error) int16 {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.code.Code
	}
	return errCode(err)
}
