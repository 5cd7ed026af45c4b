package metrics

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docs/metrics.md names every metric the broker exports (with every source
// set and every hook called once), and every strata_ name it mentions is
// one of them (or a histogram's _bucket, _sum or _count series).
func TestDocsListEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, perPartition := range []bool{false, true} {
		b := NewWithOptions(Options{PartitionLabels: perPartition, Now: func() time.Time { return time.Unix(1_700_000_000, 0) }})
		b.Request(0, 9, time.Millisecond)
		b.RequestPhases(0, time.Millisecond, time.Millisecond)
		b.ResponseSent(0, time.Millisecond)
		b.RequestOnReader(0, time.Millisecond)
		b.Error(0, 6)
		b.Topic("t").In(1, 1)
		b.Listener("PLAINTEXT").Accepted()
		b.SetPartitions(func() PartitionCounts { return PartitionCounts{} })
		b.SetJournal(func() (JournalStats, bool) { return JournalStats{}, true })
		b.SetLogs(func() []LogSize { return []LogSize{{Topic: "t", Segments: 1}} })
		b.SetTailCache(func() (TailCacheStats, bool) { return TailCacheStats{}, true })
		b.SetGroups(func() []GroupOffset { return []GroupOffset{{Group: "g", Topic: "t"}} })
		b.SetController(func() (RaftStats, bool) { return RaftStats{Role: "leader"}, true })
		b.SetDevice(func() (DeviceStats, bool) { return DeviceStats{Name: "vda"}, true })
		fams, err := b.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			name := f.GetName()
			if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
				continue
			}
			exported[name] = true
			if !strings.Contains(string(doc), "`"+name+"`") {
				t.Errorf("docs/metrics.md does not name %s", name)
			}
		}
	}
	if len(exported) < 40 {
		t.Fatalf("only %d metrics exported", len(exported))
	}
	for _, m := range regexp.MustCompile(`strata_[a-z_]+[a-z]`).FindAllString(string(doc), -1) {
		base := m
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if s, ok := strings.CutSuffix(m, suffix); ok && exported[s] {
				base = s
			}
		}
		if !exported[base] {
			t.Errorf("docs/metrics.md names %s, which the broker does not export", m)
		}
	}
}
