package loadgen

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The --device-probe-layout probe (device_layout_linux.go): what a durable
// write layout costs the device under the broker's keyed acks=all pattern,
// without a broker. Files receives appends of AppendBytes each, one per
// file per round (96 partitions at 200,000 1 KiB records/s get ~10 KiB each
// per 5 ms), and every round is made durable before the next starts, as a
// produce request is acknowledged. The layouts differ in where the bytes go
// and what the durability step is:
//
//   - journal: each round's bytes are also written as one sequential write
//     to a recycled (already written) journal file and that file is
//     fdatasynced; the files receive copies written behind in
//     LayoutCopyBytes writes into fallocated (unwritten) blocks, covered by
//     a checkpoint (syncfs, then an fdatasync) each time the journal enters
//     its other half. The broker's default since 2026-12-02.
//   - zerofill: files fallocated and written with zeros ahead of the
//     appends (a LayoutZeroStep at a time, one 1 MiB zero write in flight,
//     an fdatasync per step, as segment PreWrite does); appends overwrite
//     zeros, and one fdatasync of an anchor file (a device cache flush)
//     makes a round durable.
//   - recycled: as zerofill, but the files were written whole before the
//     measurement (recycled segments, as WAL files are recycled) and the
//     appends wrap around in them: the floor of an overwrite layout.
//   - unwritten: files fallocated with FALLOC_FL_KEEP_SIZE (unwritten
//     extents); appends convert extents and raise i_size, and a round ends
//     with an fdatasync of every file, all submitted at once.
//   - unwritten-syncfs: as unwritten, but a round ends with one syncfs of
//     the filesystem and an fdatasync of an anchor file (on ext4 without a
//     journal syncfs flushes the cache before the inode-table writes it
//     starts complete: the engine's devflush.go does the same).
//
// Every write is O_DIRECT; an append whose start is not aligned rewrites
// the aligned block it starts in, as the broker's segment writes do.

// The layouts RunLayoutProbe knows, in the order "all" runs them.
var probeLayouts = []string{"journal", "zerofill", "recycled", "unwritten", "unwritten-syncfs"}

// Layout probe constants.
const (
	LayoutCopyBytes   = 1 << 20  // journal: write-behind copy size
	LayoutZeroWrite   = 1 << 20  // zerofill: one zero write
	LayoutZeroStep    = 4 << 20  // zerofill: zeroed and fdatasynced at a time, and the lead kept ahead of the appends
	LayoutJournalHalf = 32 << 20 // journal: a checkpoint each time the journal enters its other half
	LayoutRecycledMax = 2 << 20  // recycled: each file's size (appends wrap around)
)

// LayoutProbeConfig configures RunLayoutProbe.
type LayoutProbeConfig struct {
	Layouts     []string      // from ParseProbeLayouts
	Dir         string        // a temporary directory is made (and removed) in it
	Files       int           // files appended to each round (partitions)
	AppendBytes int           // bytes appended to each file per round
	Align       int           // O_DIRECT alignment of the writes (a multiple of 512)
	Subdirs     bool          // each file in a directory of its own, as partitions are
	Duration    time.Duration // per layout
	MaxBytes    int64         // per layout: appended bytes at most
	Now         func() time.Time
	Log         io.Writer // progress lines; nil discards
}

// DefaultLayoutProbeConfig is the broker's keyed pattern: 96 partitions,
// 10 KiB each per round, 10 s per layout, at most 4 GiB. Now is the
// caller's (the command's clock).
func DefaultLayoutProbeConfig() LayoutProbeConfig {
	return LayoutProbeConfig{Files: 96, AppendBytes: 10 << 10, Align: 512, Subdirs: true,
		Duration: 10 * time.Second, MaxBytes: 4 << 30}
}

// ParseProbeLayouts parses a comma-separated list of layouts ("all": every
// one).
func ParseProbeLayouts(s string) ([]string, error) {
	var out []string
	for _, l := range strings.Split(s, ",") {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
		case l == "all":
			out = append(out, probeLayouts...)
		case slices.Contains(probeLayouts, l):
			out = append(out, l)
		default:
			return nil, fmt.Errorf("unknown layout %q (want %s or all)", l, strings.Join(probeLayouts, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no layout in %q", s)
	}
	return out, nil
}

// Validate checks the configuration's bounds.
func (c LayoutProbeConfig) Validate() error {
	switch {
	case len(c.Layouts) == 0:
		return fmt.Errorf("device probe: no layout")
	case c.Dir == "":
		return fmt.Errorf("device probe: no directory")
	case c.Files < 1 || c.Files > 4096:
		return fmt.Errorf("device probe: files %d outside [1, 4096]", c.Files)
	case c.Align < 512 || c.Align > 1<<20 || c.Align&(c.Align-1) != 0:
		return fmt.Errorf("device probe: alignment %d is not a power of two in [512, 1 MiB]", c.Align)
	case c.AppendBytes < 1 || c.AppendBytes > 4<<20:
		return fmt.Errorf("device probe: append size %d outside [1, 4 MiB]", c.AppendBytes)
	case int64(c.Files)*int64(c.AppendBytes) > 64<<20:
		return fmt.Errorf("device probe: a round of %d x %d bytes is above 64 MiB", c.Files, c.AppendBytes)
	case c.Duration <= 0 || c.Duration > 10*time.Minute:
		return fmt.Errorf("device probe: duration %v outside (0, 10m]", c.Duration)
	case c.MaxBytes < int64(c.Files)*int64(c.AppendBytes) || c.MaxBytes > 1<<40:
		return fmt.Errorf("device probe: byte bound %d below one round or above 1 TiB", c.MaxBytes)
	case c.Now == nil:
		return fmt.Errorf("device probe: no clock")
	}
	return nil
}

// LayoutResult is one layout's measurement.
type LayoutResult struct {
	Layout      string  `json:"layout"`
	Backend     string  `json:"backend"`
	Device      string  `json:"device,omitempty"`
	Files       int     `json:"files"`
	AppendBytes int     `json:"append_bytes"`
	Rounds      int64   `json:"rounds"`
	DataBytes   int64   `json:"data_bytes"` // appended (record) bytes, all durable
	DurationS   float64 `json:"duration_s"`
	MBPerSec    float64 `json:"mb_per_sec"` // DataBytes / DurationS / 10^6
	// RoundP50Ms, RoundP99Ms: a round's time from its first write to its
	// durability step's end (a produce request's storage wait).
	RoundP50Ms float64 `json:"round_p50_ms"`
	RoundP99Ms float64 `json:"round_p99_ms"`
	// IssuedBytes and IssuedWrites are the probe's own O_DIRECT writes
	// (appends, block rewrites, journal, copies, zeros).
	IssuedBytes  int64 `json:"issued_bytes"`
	IssuedWrites int64 `json:"issued_writes"`
	Syncs        int64 `json:"syncs"` // fdatasync and syncfs calls
	// The device's counters over the window (absent without a block
	// device): everything on the device, other processes' writes included.
	DeviceWriteBytes  int64   `json:"device_write_bytes"`
	WriteRequests     int64   `json:"write_requests"`
	Flushes           *int64  `json:"flushes,omitempty"`
	BytesPerDataByte  float64 `json:"device_bytes_per_data_byte"`
	WritesPerRound    float64 `json:"device_writes_per_round"`
	FlushesPerRound   float64 `json:"flushes_per_round"`
	MetaBytesPerRound float64 `json:"other_bytes_per_round"` // device bytes the probe did not write itself, per round
	// CPUNsPerByte is this process's CPU (getrusage: its threads and
	// io_uring's kernel workers) per appended byte.
	CPUNsPerByte float64 `json:"cpu_ns_per_byte"`
	CPUShare     float64 `json:"cpu_share"` // CPUs used on average
}

// WriteLayoutTable prints results as a table.
func WriteLayoutTable(w io.Writer, rs []LayoutResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layout\tfiles x append\trounds\tMB/s\tround p50 ms\tp99 ms\tdev B/B\tdev writes/round\tflushes/round\tother KiB/round\tmean write KiB\tCPU ns/B\tCPUs\t")
	for _, r := range rs {
		flushes := "n/a"
		if r.Flushes != nil {
			flushes = fmt.Sprintf("%.2f", r.FlushesPerRound)
		}
		mean := 0.0
		if r.WriteRequests > 0 {
			mean = float64(r.DeviceWriteBytes) / float64(r.WriteRequests) / 1024
		}
		fmt.Fprintf(tw, "%s\t%d x %d\t%d\t%.1f\t%.2f\t%.2f\t%.3f\t%.1f\t%s\t%.1f\t%.1f\t%.2f\t%.2f\t\n",
			r.Layout, r.Files, r.AppendBytes, r.Rounds, r.MBPerSec, r.RoundP50Ms, r.RoundP99Ms, r.BytesPerDataByte,
			r.WritesPerRound, flushes, r.MetaBytesPerRound/1024, mean, r.CPUNsPerByte, r.CPUShare)
	}
	return tw.Flush()
}

// percentileMs is the p-quantile (0..1) of ds in milliseconds (ds is
// sorted in place).
func percentileMs(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(p * float64(len(ds)-1))
	return float64(ds[i]) / 1e6
}

// alignDown and alignUp round n to a power of two a.
func alignDown(n, a int64) int64 { return n &^ (a - 1) }
func alignUp(n, a int64) int64   { return (n + a - 1) &^ (a - 1) }
