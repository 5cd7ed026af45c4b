package stratatest

import (
	"os"
	"strconv"
	"testing"
)

// CrashSeeds is how many seeded rounds a crash-consistency test runs: 500,
// or STRATA_CRASH_SEEDS for long runs.
func CrashSeeds(t testing.TB) int {
	if s := os.Getenv("STRATA_CRASH_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("STRATA_CRASH_SEEDS=%q", s)
		}
		return n
	}
	return 500
}
