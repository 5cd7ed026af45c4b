package loadgen

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseProbeLayouts(t *testing.T) {
	got, err := ParseProbeLayouts("unwritten, journal")
	if err != nil || strings.Join(got, ",") != "unwritten,journal" {
		t.Fatalf("%v %v", got, err)
	}
	if got, err = ParseProbeLayouts("all"); err != nil || len(got) != len(probeLayouts) {
		t.Fatalf("all: %v %v", got, err)
	}
	for _, bad := range []string{"", " , ", "unwriten", "journal,zero"} {
		if _, err := ParseProbeLayouts(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	c := DefaultLayoutProbeConfig()
	c.Layouts, c.Dir, c.Now = []string{"journal"}, "/tmp", time.Now
	if err := c.Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	for name, mut := range map[string]func(*LayoutProbeConfig){
		"align":    func(c *LayoutProbeConfig) { c.Align = 1000 },
		"files":    func(c *LayoutProbeConfig) { c.Files = 0 },
		"round":    func(c *LayoutProbeConfig) { c.Files, c.AppendBytes = 4096, 1<<20 },
		"bytes":    func(c *LayoutProbeConfig) { c.MaxBytes = 1 },
		"duration": func(c *LayoutProbeConfig) { c.Duration = 0 },
		"clock":    func(c *LayoutProbeConfig) { c.Now = nil },
	} {
		bad := c
		mut(&bad)
		if bad.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestWriteLayoutTable(t *testing.T) {
	n := int64(12)
	var b bytes.Buffer
	if err := WriteLayoutTable(&b, []LayoutResult{{Layout: "unwritten", Files: 96, AppendBytes: 10240, Rounds: 100, MBPerSec: 98.3,
		BytesPerDataByte: 1.4375, WriteRequests: 500, DeviceWriteBytes: 5 << 20, Flushes: &n, FlushesPerRound: 0.12}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"unwritten", "96 x 10240", "98.3", "1.438", "0.12", "10.2"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// fakeClock advances a millisecond per reading: the probe's rounds end by
// their byte bound, not by time.
func fakeClock() func() time.Time {
	t := time.Unix(1_700_000_000, 0)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

// Every layout, run for real on a temporary directory with a byte bound:
// every round is counted, and each file holds exactly its appended bytes
// (the journal's write-behind copies included; zerofill's lead is zeros),
// with unaligned appends rewriting the block they start in.
func TestLayoutProbeWritesEveryAppend(t *testing.T) {
	needDiskstats(t)
	defer func(h int64) { probeJournalHalf = h }(probeJournalHalf)
	probeJournalHalf = 2 << 20
	for _, layout := range probeLayouts {
		for _, app := range []int{8 << 10, 5000} {
			dir := t.TempDir()
			cfg := LayoutProbeConfig{Layouts: []string{layout}, Dir: dir, Files: 3, AppendBytes: app, Align: 512, Subdirs: layout != "unwritten",
				Duration: time.Hour, MaxBytes: 3 * int64(app) * 300, Now: fakeClock()}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			r, err := runLayout(context.Background(), cfg, layout, nil, true)
			if err != nil {
				t.Fatalf("%s/%d: %v", layout, app, err)
			}
			if r.Rounds != 300 || r.DataBytes != 300*3*int64(app) || r.Layout != layout || r.RoundP50Ms <= 0 {
				t.Fatalf("%s/%d: %+v", layout, app, r)
			}
			if layout == "unwritten" && (r.Syncs != 300*3 || r.IssuedWrites != 300*3) {
				t.Errorf("unwritten: %d syncs, %d writes, want 900 each", r.Syncs, r.IssuedWrites)
			}
			if layout == "journal" && r.IssuedBytes < 2*r.DataBytes {
				t.Errorf("journal: issued %d bytes for %d appended", r.IssuedBytes, r.DataBytes)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "strata-layout-probe-*", "*.log"))
			sub, _ := filepath.Glob(filepath.Join(dir, "strata-layout-probe-*", "probe-*", "*.log"))
			files = append(files, sub...)
			if len(files) != 3 {
				t.Fatalf("%s: files %v", layout, files)
			}
			p := &layoutProbe{period: alignUp(max(3*int64(app)+1024, LayoutCopyBytes+512, int64(app)+1024), 1<<20)}
			p.src = make([]byte, 2*p.period)
			seed := uint64(0x9e3779b97f4a7c15)
			for i := range p.src {
				if i%8 == 0 {
					seed ^= seed << 13
					seed ^= seed >> 7
					seed ^= seed << 17
				}
				p.src[i] = byte(seed >> (8 * (i % 8)))
			}
			n := 300 * int64(app)
			for _, name := range files {
				b, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(b)) < n {
					t.Fatalf("%s/%d: %s holds %d bytes, want at least %d", layout, app, name, len(b), n)
				}
				if !bytes.Equal(b[:n], p.srcAt(0, n)) {
					t.Fatalf("%s/%d: %s does not hold the appended bytes", layout, app, name)
				}
				if layout == "zerofill" && bytes.Count(b[alignUp(n, 512):alignUp(n, 512)+LayoutZeroWrite], []byte{0}) != LayoutZeroWrite {
					t.Fatalf("zerofill: %s is not zero past its appends", name)
				}
				if layout == "unwritten" && int64(len(b)) != alignUp(n, 512) {
					t.Fatalf("unwritten: %s is %d bytes, want %d", name, len(b), alignUp(n, 512))
				}
			}
		}
	}
}
