package loadgen

import (
	"sync"
	"testing"
	"time"
)

// The producer benchmarks run the two engines against one spawned broker,
// closed loop, b.N records of 1 KiB each, and report the loadgen process's
// CPU per record (getrusage: producer, pacing and measurement, no
// consumers) and the broker's. Compare them within one run:
//
//	go test -run '^$' -bench Producer -benchtime 300000x ./loadgen
var bench struct {
	once    sync.Once
	cluster *Cluster
	err     error
}

func benchBroker(b *testing.B) *Cluster {
	bench.once.Do(func() {
		bench.cluster, bench.err = Spawn(testCtx(b, time.Minute), SpawnOptions{Bin: strataBin, Brokers: 1})
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.cluster
}

func benchProducer(b *testing.B, engine string) {
	c := benchBroker(b)
	cfg := DefaultConfig()
	cfg.Brokers = c.Addrs()
	cfg.Topic = "bench-" + engine
	cfg.Partitions = 8
	cfg.Engine = engine
	cfg.Duration = 0
	cfg.Records = int64(max(b.N, 1))
	b.SetBytes(int64(cfg.RecordBytes))
	b.ReportAllocs()
	cpu0, _, _ := c.usage()
	b.ResetTimer()
	rep, err := Run(testCtx(b, 10*time.Minute), cfg)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	cpu1, _, _ := c.usage()
	r := rep.Result
	if r.RecordsAcked != cfg.Records || r.RecordsFailed != 0 {
		b.Fatalf("acked %d of %d, %d failed: %+v", r.RecordsAcked, cfg.Records, r.RecordsFailed, r.Errors)
	}
	b.ReportMetric(1000*r.ClientCPUUsPerRecord, "client-cpu-ns/rec")
	b.ReportMetric(float64(cpu1-cpu0)/float64(r.RecordsAcked), "broker-cpu-ns/rec")
	b.ReportMetric(r.RecordsPerBatch, "rec/batch")
	b.ReportMetric(r.RecordsPerSec, "rec/s")
}

func BenchmarkProducerNative(b *testing.B) { benchProducer(b, EngineNative) }
func BenchmarkProducerKgo(b *testing.B)    { benchProducer(b, EngineKgo) }
