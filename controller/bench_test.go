package controller

import (
	"fmt"
	"testing"
)

// benchState is a 12-broker cluster with topics of 96 partitions, RF 3.
func benchState(b *testing.B, topics int) *State {
	s := NewState()
	for id := int32(0); id < 12; id++ {
		r := s.Apply(RegisterBroker{ID: id, IncarnationID: inc(byte(id)), Host: "h", Port: 1, Rack: fmt.Sprint("r", id%3)})
		s.Apply(BrokerHeartbeat{ID: id, Epoch: r.BrokerEpoch, MetadataOffset: s.Offset()})
	}
	for i := 0; i < topics; i++ {
		if r := s.Apply(CreateTopic{Name: fmt.Sprint("t", i), ID: TopicID{0: 1, 1: byte(i), 2: byte(i >> 8)}, Partitions: 96, ReplicationFactor: 3}); r.Code != 0 {
			b.Fatal(r.Err())
		}
	}
	return s
}

func BenchmarkApplyHeartbeat(b *testing.B) {
	s := benchState(b, 10)
	epoch := s.brokers[3].Epoch
	data := EncodeCommand(BrokerHeartbeat{ID: 3, Epoch: epoch, NowMs: 1, MetadataOffset: 1 << 40})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c, err := DecodeCommand(data)
		if err != nil {
			b.Fatal(err)
		}
		s.Apply(c)
	}
}

func BenchmarkFenceUnfence(b *testing.B) {
	s := benchState(b, 10) // 960 partitions
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.Apply(FenceBroker{ID: 5})
		s.Apply(UnfenceBroker{ID: 5})
	}
}

func BenchmarkCreateTopicPlaced(b *testing.B) {
	s := benchState(b, 0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprint("x", i)
		s.Apply(CreateTopic{Name: name, ID: TopicID{0: 2, 1: byte(i), 2: byte(i >> 8), 3: byte(i >> 16)}, Partitions: 96, ReplicationFactor: 3})
		s.Apply(DeleteTopic{Name: name})
	}
}

func BenchmarkStateEncode(b *testing.B) {
	for _, topics := range []int{1, 10, 100} {
		b.Run(fmt.Sprint("topics=", topics), func(b *testing.B) {
			s := benchState(b, topics)
			buf := s.AppendTo(nil)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				buf = s.AppendTo(buf[:0])
			}
		})
	}
}

func BenchmarkStateDecode(b *testing.B) {
	s := benchState(b, 10)
	buf := s.AppendTo(nil)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeState(buf); err != nil {
			b.Fatal(err)
		}
	}
}
