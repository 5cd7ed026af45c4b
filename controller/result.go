package controller

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Result is what applying a Command returned. Code is a Kafka error code
// (0: success); commands on several partitions report per-partition codes
// in Partitions and set Code only for a failure of the whole command.
type Result struct {
	Code           int16
	Message        string // detail for logs and ErrorMessage fields
	Offset         int64  // metadata offset of the command (the State's Offset right after it)
	BrokerEpoch    int64  // RegisterBroker, BrokerHeartbeat
	Fenced         bool   // BrokerHeartbeat: the broker is fenced after the heartbeat
	ShouldShutdown bool   // BrokerHeartbeat: controlled shutdown may proceed
	TopicID        TopicID
	Partitions     []PartitionResult
	// AllocateProducerIDs: the block [ProducerIDStart,
	// ProducerIDStart+ProducerIDLen); ProducerIDLen is 0 for other commands.
	ProducerIDStart int64
	ProducerIDLen   int32
}

// PartitionResult is one partition's outcome and, on success, its new state.
type PartitionResult struct {
	Topic          string
	Partition      int32
	Code           int16
	Message        string
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
	Replicas       []int32
}

// Err returns the Kafka error for Code, or nil.
func (r Result) Err() error {
	if r.Code == 0 {
		return nil
	}
	err := kerr.ErrorForCode(r.Code)
	if r.Message != "" {
		return fmt.Errorf("%w: %s", err, r.Message)
	}
	return err
}

func failed(e *kerr.Error, format string, args ...any) Result {
	return Result{Code: e.Code, Message: fmt.Sprintf(format, args...)}
}

func partResult(topic string, idx int32, p *Partition) PartitionResult {
	return PartitionResult{
		Topic: topic, Partition: idx, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
		PartitionEpoch: p.PartitionEpoch, ISR: cloneInt32s(p.ISR), Replicas: cloneInt32s(p.Replicas),
	}
}

func partFailed(topic string, idx int32, e *kerr.Error, format string, args ...any) PartitionResult {
	return PartitionResult{Topic: topic, Partition: idx, Code: e.Code, Message: fmt.Sprintf(format, args...), Leader: NoLeader}
}

// AppendResult appends r's encoding (used by the forwarding RPC):
//
//	code int, message string, offset int, brokerEpoch int, fenced bool,
//	shouldShutdown bool, topicID uuid, count, then per partition:
//	topic string, partition int, code int, message string, leader int,
//	leaderEpoch int, partitionEpoch int, isr []int, replicas []int,
//	then, only when ProducerIDLen != 0 (so results of other commands encode
//	as before): producerIDStart int, producerIDLen int
func AppendResult(b []byte, r Result) []byte {
	b = appendInt(b, int64(r.Code))
	b = appendString(b, r.Message)
	b = appendInt(b, r.Offset)
	b = appendInt(b, r.BrokerEpoch)
	b = appendBool(b, r.Fenced)
	b = appendBool(b, r.ShouldShutdown)
	b = append(b, r.TopicID[:]...)
	b = appendCount(b, len(r.Partitions))
	for _, p := range r.Partitions {
		b = appendString(b, p.Topic)
		b = appendInt(b, int64(p.Partition))
		b = appendInt(b, int64(p.Code))
		b = appendString(b, p.Message)
		b = appendInt(b, int64(p.Leader))
		b = appendInt(b, int64(p.LeaderEpoch))
		b = appendInt(b, int64(p.PartitionEpoch))
		b = appendInt32s(b, p.ISR)
		b = appendInt32s(b, p.Replicas)
	}
	if r.ProducerIDLen != 0 {
		b = appendInt(b, r.ProducerIDStart)
		b = appendInt(b, int64(r.ProducerIDLen))
	}
	return b
}

// DecodeResult parses AppendResult's encoding.
func DecodeResult(b []byte) (Result, error) {
	rd := &reader{b: b}
	r := Result{Code: rd.int16(), Message: rd.string(), Offset: rd.int64(), BrokerEpoch: rd.int64(),
		Fenced: rd.bool(), ShouldShutdown: rd.bool(), TopicID: rd.uuid()}
	n := rd.count(9)
	if rd.err == nil && n > 0 {
		r.Partitions = make([]PartitionResult, n)
		for i := range r.Partitions {
			r.Partitions[i] = PartitionResult{Topic: rd.string(), Partition: rd.int32(), Code: rd.int16(),
				Message: rd.string(), Leader: rd.int32(), LeaderEpoch: rd.int32(), PartitionEpoch: rd.int32(),
				ISR: rd.int32s(), Replicas: rd.int32s()}
		}
	}
	if rd.err == nil && len(rd.b) > 0 {
		r.ProducerIDStart, r.ProducerIDLen = rd.int64(), rd.int32()
		if rd.err == nil && (r.ProducerIDStart < 0 || r.ProducerIDLen <= 0) {
			rd.fail("bad producer id block")
		}
	}
	if err := rd.done(); err != nil {
		return Result{}, err
	}
	return r, nil
}
