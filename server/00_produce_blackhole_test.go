package server

import (
	"fmt"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProduceBlackhole: with Config.Blackhole a franz-go producer gets real
// looking offsets (counted per partition, continuing from what the log
// already held) for every acks mode, and nothing reaches the log.
func TestProduceBlackhole(t *testing.T) {
	addr, _, eng := startBroker(t, func(c *Config, _ *engine.Options) { c.Blackhole = true })
	tp := prodTopic(t, eng, "void", 2, nil)
	fetchProduce(t, tp, 1, 5, 5, "stored") // partition 1 already holds 5 records
	for _, acks := range []kgo.Acks{kgo.AllISRAcks(), kgo.LeaderAck()} {
		for p := range int32(2) {
			cl := prodClient(t, addr, kgo.RequiredAcks(acks), kgo.DefaultProduceTopic("void"),
				kgo.RecordPartitioner(kgo.ManualPartitioner()))
			var recs []*kgo.Record
			for i := range 10 {
				recs = append(recs, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("v-%d", i))})
			}
			if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
				t.Fatalf("acks %v partition %d: %v", acks, p, err)
			}
			base := recs[0].Offset
			for i, r := range recs {
				if r.Offset != base+int64(i) {
					t.Fatalf("partition %d record %d: offset %d, base %d", p, i, r.Offset, base)
				}
			}
			l := tp.Partition(p)
			if l.LogEndOffset() != int64(5*p) || l.HighWatermark() != int64(5*p) {
				t.Fatalf("partition %d stored something: end %d hw %d", p, l.LogEndOffset(), l.HighWatermark())
			}
			if base < int64(5*p) {
				t.Fatalf("partition %d: offsets start at %d, below the log end %d", p, base, 5*p)
			}
		}
	}
	// The next request on partition 1 continues where the counter is.
	cl := prodClient(t, addr, kgo.DefaultProduceTopic("void"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := &kgo.Record{Partition: 1, Value: []byte("last")}
	if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if r.Offset != 5+20 {
		t.Fatalf("partition 1 after 20 blackholed records from 5: offset %d, want 25", r.Offset)
	}
}
