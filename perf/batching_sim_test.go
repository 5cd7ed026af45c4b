package perf

import (
	"math"
	"math/rand/v2"
	"testing"
)

// simulateProducer is the plain version of the batching model: one keyed
// producer, Poisson arrivals at rate records/s, keys uniform over
// partitions, partition p led by broker p % brokers. It does what Kafka's
// RecordAccumulator and Sender do: one open batch per partition; a broker
// is ready when its oldest batch has lingered lingerMs or any of its
// batches is full; a ready broker is drained of every partition's batch in
// one request. It returns records per batch and requests per second.
func simulateProducer(seed uint64, records int, rate float64, partitions, brokers int, lingerMs float64, capRecords int) (perBatch, requestsPerSec float64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	linger := lingerMs / 1000
	count := make([]int, partitions)
	pending := make([]bool, brokers)
	openAt := make([]float64, brokers)
	var batches, requests, drained int
	drain := func(b int) {
		requests++
		for p := b; p < partitions; p += brokers {
			if count[p] > 0 {
				batches++
				drained += count[p]
				count[p] = 0
			}
		}
		pending[b] = false
	}
	t := 0.0
	for range records {
		t += rng.ExpFloat64() / rate
		p := rng.IntN(partitions)
		b := p % brokers
		if pending[b] && t >= openAt[b]+linger {
			drain(b) // the linger expired before this record arrived
		}
		if !pending[b] {
			pending[b], openAt[b] = true, t
		}
		count[p]++
		if count[p] == capRecords {
			drain(b)
		}
	}
	return float64(drained) / float64(batches), float64(requests) / t
}

// The analytic batching (Plan) agrees with the simulation of Kafka's
// accumulator in the linger-bound regime, where the workloads live,
// and where one partition per broker fills its batches.
func TestBatchingModelMatchesSimulation(t *testing.T) {
	cases := []struct {
		name                          string
		rate                          float64 // one producer's records/s
		partitions, brokers           int
		lingerMs                      float64
		tolerance                     float64 // relative
		wantClosesOn                  string
		minRecordsPerBatch, maxRecord float64 // sanity bounds on the model
	}{
		{"reference sustained, 1 of 10 producers", 20_000, 96, 12, 5, 0.03, "linger", 1.5, 2},
		{"reference peak, 1 of 10 producers", 60_000, 96, 12, 5, 0.03, "linger", 3, 4},
		{"sparse: most cycles carry one record", 500, 96, 12, 5, 0.03, "linger", 1, 1.2},
		{"dense: few partitions, big batches", 100_000, 12, 3, 5, 0.03, "linger", 40, 45},
		{"no linger", 50_000, 48, 6, 0, 0.03, "linger", 1, 1.2},
		{"size-bound, one partition per broker", 1_000_000, 12, 12, 100, 0.03, "size", 64, 64},
	}
	for i, c := range cases {
		w := Defaults()
		w.SustainedRecordsPerSec = c.rate
		w.Producers, w.Partitions, w.FixedBrokers, w.LingerMs = 1, c.partitions, c.brokers, c.lingerMs
		w.RetentionHours = 1
		rep, err := Plan(w)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		s := rep.Sustained
		simBatch, simReq := simulateProducer(uint64(i+1), 400_000, c.rate, c.partitions, c.brokers, c.lingerMs, int(s.BatchCapRecords))
		rel := func(model, sim float64) float64 { return math.Abs(model-sim) / sim }
		if rel(s.RecordsPerBatch, simBatch) > c.tolerance || rel(s.RequestsPerSec, simReq) > c.tolerance {
			t.Errorf("%s: model %.4g records/batch, %.5g requests/s; simulation %.4g, %.5g",
				c.name, s.RecordsPerBatch, s.RequestsPerSec, simBatch, simReq)
		}
		if s.ClosesOn != c.wantClosesOn || s.RecordsPerBatch < c.minRecordsPerBatch || s.RecordsPerBatch > c.maxRecord {
			t.Errorf("%s: closes on %s with %.4g records/batch", c.name, s.ClosesOn, s.RecordsPerBatch)
		}
	}
}
