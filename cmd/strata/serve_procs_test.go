package main

import (
	"io"
	"log/slog"
	"runtime"
	"testing"
)

// serve adds syscallProcs Ps to the runtime's default, unless the
// GOMAXPROCS environment variable chose a value.
func TestSetProcs(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	t.Setenv("GOMAXPROCS", "")
	setProcs(logger)
	if got := runtime.GOMAXPROCS(0); got != was+syscallProcs {
		t.Fatalf("GOMAXPROCS %d, want %d + %d", got, was, syscallProcs)
	}
	runtime.GOMAXPROCS(was)
	t.Setenv("GOMAXPROCS", "1")
	setProcs(logger)
	if got := runtime.GOMAXPROCS(0); got != was {
		t.Fatalf("GOMAXPROCS set in the environment, but serve changed it from %d to %d", was, got)
	}
}
