//go:build race

package batcher

// raceEnabled: the race detector instruments allocations, so allocation
// counts are only asserted without it.
const raceEnabled = true
