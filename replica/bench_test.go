package replica_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkReplicatedProduce measures acks=all produce through an
// in-process cluster (every ack waits for an fsync on each ISR member)
// against the same client to a one-broker "cluster" in the same run:
// pipelined (throughput) and one record at a time (ack latency). Run with
// -benchtime=Nx; read the ratios, not the absolute figures.
func BenchmarkReplicatedProduce(b *testing.B) {
	for _, bc := range []struct {
		name    string
		brokers int
		minISR  int
	}{{"rf3", 3, 2}, {"rf1", 1, 1}} {
		b.Run(bc.name+"-pipelined", func(b *testing.B) {
			c := newCluster(b, bc.brokers, 30000, bc.minISR)
			b.ResetTimer()
			if failed := produce(b, c.nodes[1], b.N, "bench"); failed != 0 {
				b.Fatalf("%d failed", failed)
			}
		})
		b.Run(bc.name+"-sync", func(b *testing.B) {
			c := newCluster(b, bc.brokers, 30000, bc.minISR)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.nodes[1].addr), kgo.DefaultProduceTopic(testTopic),
				kgo.RequiredAcks(kgo.AllISRAcks()))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			ctx := context.Background()
			rec := &kgo.Record{Value: make([]byte, 100)}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil { // connect, metadata
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: rec.Value}).FirstErr(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
