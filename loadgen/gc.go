package loadgen

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
)

// clientGC is the GOGC of the load generator's processes (the one that
// produces and the consumer process) unless the environment sets one.
//
// The consumer process's heap is mostly franz-go's fetch responses, one
// buffer allocated per response and dropped once its records are polled:
// at Go's default of 100 its GC ran four times as often and the runtime
// kept handing those pages back to the kernel (madvise) and faulting
// fresh ones in (the zeroing of each new buffer; the two were a quarter
// of its profile at 100,000 records/s); at 400 the process used a third
// of the CPU, taken from the two cores the broker and the producer share
// (docs/performance.md, "Session 32"). The requests it sends are the same.
//
// The producing process collected every 0.7-1.4 s at 100 (a keyed franz-go
// producer at 100,000 records/s keeps 13-30 MB live and allocates ~17 MB/s
// around it), and about one run in three of that workload stalled: the
// client fell ~30 ms behind its schedule once, franz-go then sent what it
// had buffered in multi-megabyte requests, and the backlog took a second
// to drain, every record in it 100-300 ms late: produce p99 over 50 ms
// (95-684 ms) in 9 of 27 runs. At 400 (one or two collections in a 30 s
// run of it, heap goals of 200-445 MB): 1 of 27 (54.8 ms), the other 26
// at 15.7-26.8 ms (docs/performance.md, "Session 47"). The broker's
// answers are the same either way: the stall was the load generator's,
// not what it measures.
const clientGC = 400

// clientGCPercent is a load generator process's GC percent: GOGC's when
// set to a number (or "off", -1), clientGC otherwise.
func clientGCPercent(gogc string) int {
	switch {
	case gogc == "off":
		return -1
	case gogc != "":
		if n, err := strconv.Atoi(gogc); err == nil {
			return n
		}
	}
	return clientGC
}

// SetClientGC sets this process's GC percent for a load generator
// process (clientGCPercent of the environment's GOGC) and returns it.
// strata loadgen calls it first thing, the consumer process too.
func SetClientGC() int {
	n := clientGCPercent(os.Getenv("GOGC"))
	debug.SetGCPercent(n)
	return n
}

// processGCPercent is this process's GC percent as the runtime has it (-1:
// off).
func processGCPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int(int64(s[0].Value.Uint64())) // off is -1 stored unsigned
}
