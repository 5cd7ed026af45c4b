package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
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
