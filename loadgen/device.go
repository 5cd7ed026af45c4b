package loadgen

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Device traffic: the block device holding the spawned brokers' data
// directories, read from /proc/diskstats at the start and the end of each
// measured window (where broker CPU is read), and the --compare-device probe
// of that filesystem's durable sequential write ceiling (device_linux.go).

// sectorBytes is the unit of /proc/diskstats' sector counts, whatever the
// device's own sector size.
const sectorBytes = 512

// diskStats is one device's line of /proc/diskstats (counters since boot).
type diskStats struct {
	reads, readSectors   uint64
	writes, writeSectors uint64
	ioTicksMs            uint64 // time the device had I/O in flight
	flushes              uint64
	hasFlushes           bool // the kernel counts flushes (5.5+: 20 columns)
}

// parseDiskstatsLine parses one line of /proc/diskstats:
//
//	major minor name reads reads_merged sectors_read ms_reading
//	writes writes_merged sectors_written ms_writing in_flight io_ticks_ms weighted_ms
//	[discards discards_merged sectors_discarded ms_discarding]   4.18+
//	[flushes ms_flushing]                                         5.5+
func parseDiskstatsLine(line []byte) (major, minor uint32, name string, s diskStats, err error) {
	f := bytes.Fields(line)
	if len(f) < 14 {
		return 0, 0, "", s, fmt.Errorf("diskstats line has %d fields, want at least 14", len(f))
	}
	var v [20]uint64
	for i, x := range f[:min(len(f), len(v))] {
		if i == 2 {
			continue
		}
		if v[i], err = strconv.ParseUint(string(x), 10, 64); err != nil {
			return 0, 0, "", s, fmt.Errorf("diskstats field %d: %w", i+1, err)
		}
	}
	if v[0] > 1<<32-1 || v[1] > 1<<32-1 {
		return 0, 0, "", s, fmt.Errorf("diskstats device number %d:%d out of range", v[0], v[1])
	}
	s = diskStats{reads: v[3], readSectors: v[5], writes: v[7], writeSectors: v[9], ioTicksMs: v[12]}
	if len(f) >= 20 {
		s.flushes, s.hasFlushes = v[18], true
	}
	return uint32(v[0]), uint32(v[1]), string(f[2]), s, nil
}

// findDiskstats finds device major:minor in the text of /proc/diskstats.
func findDiskstats(text []byte, major, minor uint32) (name string, s diskStats, ok bool, err error) {
	for line := range bytes.SplitSeq(text, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ma, mi, n, st, err := parseDiskstatsLine(line)
		if err != nil {
			return "", s, false, err
		}
		if ma == major && mi == minor {
			return n, st, true, nil
		}
	}
	return "", s, false, nil
}

const diskstatsPath = "/proc/diskstats"

// blockDevice is the device a directory's filesystem lives on (a partition
// when it is on one: /proc/diskstats counts partitions too).
type blockDevice struct {
	name         string
	major, minor uint32
}

// devSample is a device's counters and when they were read.
type devSample struct {
	at time.Time
	s  diskStats
}

// sample reads the device's counters.
func (d *blockDevice) sample() (devSample, error) {
	text, err := os.ReadFile(diskstatsPath)
	if err != nil {
		return devSample{}, err
	}
	at := wallClock()
	_, s, ok, err := findDiskstats(text, d.major, d.minor)
	if err == nil && !ok {
		err = fmt.Errorf("device %s (%d:%d) is no longer in %s", d.name, d.major, d.minor, diskstatsPath)
	}
	return devSample{at: at, s: s}, err
}

// DeviceTraffic is what the data directory's block device did during a
// measured window: the whole device's counters, so several spawned brokers
// (and anything else writing to that device) add up.
type DeviceTraffic struct {
	Name           string  `json:"name"` // as in /proc/diskstats: vda, nvme0n1p2, dm-0
	WriteBytes     int64   `json:"write_bytes"`
	WriteRequests  int64   `json:"write_requests"`
	MeanWriteBytes float64 `json:"mean_write_bytes"`
	// Flushes are the device's completed flush (cache) requests; absent
	// where the kernel does not count them (before 5.5). A device without a
	// volatile write cache gets none.
	Flushes       *int64  `json:"flushes,omitempty"`
	FlushesPerSec float64 `json:"flushes_per_sec,omitempty"`
	ReadBytes     int64   `json:"read_bytes"`
	ReadRequests  int64   `json:"read_requests"`
	// BusyMs is the time the device had at least one request in flight
	// (io_ticks); BusyShare is that over the window's length.
	BusyMs    int64   `json:"busy_ms"`
	BusyShare float64 `json:"busy_share"`
	// BytesPerRecordByte is WriteBytes over the acknowledged record value
	// bytes of the window (those MB/s counts).
	BytesPerRecordByte float64 `json:"bytes_per_record_byte"`
}

// deviceTraffic is the difference of two samples; recordBytes are the
// value bytes acknowledged between them.
func deviceTraffic(name string, d0, d1 devSample, recordBytes int64) *DeviceTraffic {
	a, b := d0.s, d1.s
	t := &DeviceTraffic{
		Name:          name,
		WriteBytes:    int64(b.writeSectors-a.writeSectors) * sectorBytes,
		WriteRequests: int64(b.writes - a.writes),
		ReadBytes:     int64(b.readSectors-a.readSectors) * sectorBytes,
		ReadRequests:  int64(b.reads - a.reads),
		BusyMs:        int64(b.ioTicksMs - a.ioTicksMs),
	}
	secs := d1.at.Sub(d0.at).Seconds()
	if t.WriteRequests > 0 {
		t.MeanWriteBytes = float64(t.WriteBytes) / float64(t.WriteRequests)
	}
	if a.hasFlushes && b.hasFlushes {
		n := int64(b.flushes - a.flushes)
		t.Flushes = &n
		if secs > 0 {
			t.FlushesPerSec = float64(n) / secs
		}
	}
	if secs > 0 {
		t.BusyShare = float64(t.BusyMs) / 1000 / secs
	}
	if recordBytes > 0 {
		t.BytesPerRecordByte = float64(t.WriteBytes) / float64(recordBytes)
	}
	return t
}

// flushesString prints a flush count, "n/a" where the kernel has none.
func (t *DeviceTraffic) flushesString() string {
	if t.Flushes == nil {
		return "flushes n/a (kernel before 5.5)"
	}
	return fmt.Sprintf("%s flushes (%.1f/s)", commas(float64(*t.Flushes), 0), t.FlushesPerSec)
}

// summary is the device's write line for the table and the HTML report.
func (t *DeviceTraffic) summary() string {
	return fmt.Sprintf("%s: %.1f MB written in %s writes (%s mean), %s", t.Name, float64(t.WriteBytes)/1e6,
		commas(float64(t.WriteRequests), 0), kib(t.MeanWriteBytes), t.flushesString())
}

// load is the device's read and busy line.
func (t *DeviceTraffic) load() string {
	return fmt.Sprintf("%.2f device bytes per record byte; %.1f MB read in %s reads; busy %s ms (%.1f%% of the window)",
		t.BytesPerRecordByte, float64(t.ReadBytes)/1e6, commas(float64(t.ReadRequests), 0), commas(float64(t.BusyMs), 0), 100*t.BusyShare)
}

func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }

// DeviceBaseline is the durable sequential write ceiling of the spawned
// brokers' filesystem, measured in the same run (--compare-device): O_DIRECT
// writes of DeviceProbeChunk bytes, DeviceProbeDepth in flight, into a fresh
// fallocated file, one fdatasync per DeviceProbeSyncBytes.
type DeviceBaseline struct {
	Mode      string  `json:"mode"` // "device"
	Dir       string  `json:"dir"`  // where the probe file was written
	Device    string  `json:"device,omitempty"`
	Backend   string  `json:"backend"`    // uring or pwrite (internal/uring's)
	MBPerSec  float64 `json:"mb_per_sec"` // 10^6 bytes written by the probe per second, fdatasyncs included
	Bytes     int64   `json:"bytes"`      // written by the probe
	DurationS float64 `json:"duration_s"`
	Syncs     int     `json:"fdatasyncs"`
	// The device's own counters over the probe (absent without a block
	// device).
	DeviceWriteBytes int64   `json:"device_write_bytes,omitempty"`
	WriteRequests    int64   `json:"write_requests,omitempty"`
	MeanWriteBytes   float64 `json:"mean_write_bytes,omitempty"`
	Flushes          *int64  `json:"flushes,omitempty"`
	// Ratio is the run's acknowledged record MB/s (the max healthy rate's
	// with --find-max) over MBPerSec.
	Ratio float64 `json:"ratio"`
}

// The --compare-device probe's shape.
const (
	DeviceProbeChunk     = 1 << 20
	DeviceProbeDepth     = 16
	DeviceProbeSyncBytes = 16 << 20
	// DeviceProbeMaxTime bounds the probe whatever its byte count.
	DeviceProbeMaxTime = 30 * time.Second
)
