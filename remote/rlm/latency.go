package rlm

import "github.com/stratalog/strata/engine"

// readLatencyBounds are the remote read histogram's upper bounds in
// seconds (engine.LatencyHist): 100 µs doubling to ~52 s (20 buckets and
// one past), from a cache hit to a store call retried up to its deadline.
var readLatencyBounds = engine.DoublingBounds(100e-6, 20)
