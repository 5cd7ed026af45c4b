package main

import (
	"log/slog"
	"os"
	"runtime"
)

// syscallProcs is how many Ps serve adds to the runtime's default: the
// threads that spend most of their time blocked in system calls, the
// io_uring owner (locked to its thread, waiting in io_uring_enter for
// completions) and the flush worker running the shared device flush
// (fdatasync). While a P sits in a system call and no other P is idle, the
// runtime's sysmon hands that P to another thread after 20 µs and keeps
// polling every 20 µs; the returning thread then has to find a P again.
// With two spare Ps a blocked thread's P is not needed elsewhere: on the
// 2-CPU development VM at 150,000 records/s (native producer, 96
// partitions) the broker's nanosleeps (sysmon) fell from 12-14 K/s to
// 6.4-6.9 K/s and its CPU from 0.47-0.56 to 0.40-0.45 CPUs (3 Ps:
// 0.36-0.37); docs/performance.md, session 5.
const syscallProcs = 2

// setProcs raises GOMAXPROCS by syscallProcs unless the GOMAXPROCS
// environment variable sets it, and logs the value.
func setProcs(logger *slog.Logger) {
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		logger.Info("GOMAXPROCS", "procs", runtime.GOMAXPROCS(0), "reason", "GOMAXPROCS environment variable")
		return
	}
	def := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(def + syscallProcs)
	logger.Info("GOMAXPROCS", "procs", def+syscallProcs, "cpus", def, "reason", "CPUs plus 2 for threads blocked in io_uring_enter and fdatasync; set GOMAXPROCS to override")
}
