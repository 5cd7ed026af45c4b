package main

import (
	"log/slog"
	"syscall"
)

// raiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit and logs
// both. A partition holds one descriptor while idle (its active segment;
// indexes are mappings, a Direct segment's O_DIRECT open lives in the
// ring's fixed-file table) plus one per open connection and per segment
// being read, so 10,000 partitions need more than the usual 1,024 soft
// limit. The Go runtime (1.19+) already raises it at start-up on Linux;
// this makes sure of it and puts the limit in the log, where an operator
// looking at EMFILE finds it. Run before engine.Open: the ring's
// fixed-file table is sized from the soft limit (engine/backend.go).
func raiseFileLimit(logger *slog.Logger) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		logger.Warn("reading the open-file limit", "err", err)
		return
	}
	if rl.Cur >= rl.Max {
		logger.Info("open-file limit", "soft", rl.Cur, "hard", rl.Max)
		return
	}
	was := rl.Cur
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		logger.Warn("raising the open-file limit", "soft", was, "hard", rl.Max, "err", err)
		return
	}
	logger.Info("open-file limit raised", "soft", rl.Cur, "was", was)
}
