package loadgen

import (
	"runtime/debug"
	"testing"
)

func TestClientGCPercent(t *testing.T) {
	for in, want := range map[string]int{"": clientGC, "100": 100, "off": -1, "junk": clientGC, "50": 50} {
		if got := clientGCPercent(in); got != want {
			t.Errorf("GOGC %q: %d, want %d", in, got, want)
		}
	}
}

// TestSetClientGC: the process's GC percent is the one SetClientGC
// reports, and processGCPercent (the Result's gc_percent) reads it back.
func TestSetClientGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, c := range []struct {
		env  string
		want int
	}{{"", clientGC}, {"150", 150}, {"off", -1}} {
		t.Setenv("GOGC", c.env)
		if got := SetClientGC(); got != c.want {
			t.Errorf("GOGC %q: SetClientGC %d, want %d", c.env, got, c.want)
		}
		if got := processGCPercent(); got != c.want {
			t.Errorf("GOGC %q: the process runs at %d, want %d", c.env, got, c.want)
		}
	}
}
