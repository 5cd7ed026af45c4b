package config

import "testing"

// log.scrub.bytes.per.second: 16 MiB/s by default, 0 turns the scrubber
// off (the engine takes <= 0 as off), a negative rate is refused.
func TestScrubRate(t *testing.T) {
	if got := Defaults().ScrubBytesPerSec; got != 16<<20 {
		t.Fatalf("default scrub rate %d, want 16 MiB/s", got)
	}
	for v, want := range map[string]int64{"0": 0, "1048576": 1 << 20} {
		b := Defaults()
		if err := b.Apply(map[string]string{"log.scrub.bytes.per.second": v}); err != nil || b.ScrubBytesPerSec != want {
			t.Fatalf("log.scrub.bytes.per.second=%s: %d, %v; want %d", v, b.ScrubBytesPerSec, err, want)
		}
	}
	b := Defaults()
	if err := b.Apply(map[string]string{"log.scrub.bytes.per.second": "-1"}); err == nil {
		t.Fatal("a negative scrub rate was accepted")
	}
}
