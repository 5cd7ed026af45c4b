package engine

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchLog opens an engine with one partition for benchmarks: 64 MiB
// segments, the rest Kafka's defaults.
func benchLog(b *testing.B, caching bool) (*Engine, *Log) {
	e := openEngine(b, b.TempDir(), nil)
	cfg := map[string]string{"segment.bytes": fmt.Sprint(64 << 20), "write.caching": fmt.Sprint(caching)}
	return e, mustTopic(b, e, "bench", 1, cfg).Partition(0)
}

// BenchmarkAppend measures Append (validate, assign offsets, pwrite, index)
// with the flusher syncing in the background. Old segments are deleted as
// the run goes so the disk footprint stays bounded.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []struct {
		name         string
		records, val int
	}{{"64KiB-batch", 64, 1000}, {"1KiB-record", 1, 1000}} {
		for _, caching := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/write.caching=%v", size.name, caching), func(b *testing.B) {
				e, l := benchLog(b, caching)
				defer e.Close()
				batch := batchOf(b, size.records, size.val, 1, 0)
				b.SetBytes(int64(len(batch)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := l.Append(batch, 0); err != nil {
						b.Fatal(err)
					}
					if i%20000 == 19999 {
						b.StopTimer()
						trimLog(b, l)
						b.StartTimer()
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(e.syncs.Load())/float64(b.N), "syncs/op")
			})
		}
	}
}

// BenchmarkAppendDurable measures appends that each wait for durability
// (acks with write.caching=false), from parallel producers: the group
// commit shares fdatasyncs between them.
func BenchmarkAppendDurable(b *testing.B) {
	e, l := benchLog(b, false)
	defer e.Close()
	batch := batchOf(b, 1, 1000, 1, 0)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mine := append([]byte(nil), batch...)
		done := make(chan error, 1)
		cb := func(err error) { done <- err }
		for pb.Next() {
			info, err := l.Append(mine, 0)
			if err != nil {
				b.Error(err)
				return
			}
			l.WhenDurable(info.LastOffset, cb)
			if err := <-done; err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(e.syncs.Load())/float64(b.N), "syncs/op")
}

// trimLog waits for the HW and deletes everything below it.
func trimLog(b *testing.B, l *Log) {
	end := l.LogEndOffset()
	if err := waitDurable(b, l, end-1); err != nil {
		b.Fatal(err)
	}
	if _, err := l.DeleteRecords(end); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRead measures Read (segment lookup, index floor, header scan)
// of 1 MiB fetches over a log of 1 KiB records; the bytes are not copied,
// as with sendfile.
func BenchmarkRead(b *testing.B) {
	e, l := benchLog(b, false)
	defer e.Close()
	batch := batchOf(b, 1, 1000, 1, 0)
	const n = 50000
	for i := 0; i < n; i++ {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := waitDurable(b, l, n-1); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var bytes int64
	for i := 0; i < b.N; i++ {
		off := int64(i*997) % n
		res, err := l.Read(off, 1<<20, true)
		if err != nil {
			b.Fatal(err)
		}
		bytes += res.Bytes
		res.Release()
	}
	b.SetBytes(bytes / int64(b.N))
}

// BenchmarkDurableRequests models acks=all produce requests against many
// partitions: each op appends one 64 KiB batch to each of k distinct
// partitions (of n) and waits until all k are durable, with 4 requests in
// flight (a producer's pipelined requests), for flush worker pools of
// several sizes. Reported: request latency percentiles and fdatasyncs per
// request.
func BenchmarkDurableRequests(b *testing.B) {
	for _, shape := range []struct{ parts, k int }{{96, 5}, {1000, 128}} {
		for _, workers := range []int{4, defaultFlushWorkers, 64} {
			name := fmt.Sprintf("parts=%d/k=%d/workers=%d", shape.parts, shape.k, workers)
			b.Run(name, func(b *testing.B) {
				benchDurableRequests(b, shape.parts, shape.k, workers)
			})
		}
	}
}

func benchDurableRequests(b *testing.B, parts, k, workers int) {
	e := openEngine(b, b.TempDir(), func(o *Options) { o.flushWorkers = workers })
	defer e.Close()
	logs := mustTopic(b, e, "req", int32(parts), nil).logs()
	const inflight = 4
	batch := batchOf(b, 64, 1000, 1, 0)
	// Warm up: the first index entries (written from the second batch on)
	// fault in the index files' first pages, which is slow with readahead.
	for _, l := range logs {
		mustAppend(b, l, batch)
		info := mustAppend(b, l, batch)
		if err := waitDurable(b, l, info.LastOffset); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, b.N)
	var next, cursor atomic.Int64
	before := e.syncs.Load()
	b.SetBytes(int64(len(batch) * k))
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := 0; g < inflight; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := append([]byte(nil), batch...)
			var pending sync.WaitGroup
			done := func(err error) {
				if err != nil {
					b.Error(err)
				}
				pending.Done()
			}
			for {
				op := int(next.Add(1) - 1)
				if op >= b.N {
					return
				}
				first := int(cursor.Add(int64(k)) - int64(k))
				start := time.Now()
				pending.Add(k)
				for i := 0; i < k; i++ {
					l := logs[(first+i)%parts]
					info, err := l.Append(mine, 0)
					if err != nil {
						b.Error(err)
						pending.Done()
						continue
					}
					l.WhenDurable(info.LastOffset, done)
				}
				pending.Wait()
				lat[op] = time.Since(start)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(e.syncs.Load()-before)/float64(b.N), "syncs/op")
}
