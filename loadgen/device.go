package loadgen

import (
	"fmt"
	"os"
	"time"

	"github.com/stratalog/strata/internal/diskstats"
)

// Device traffic: the block device holding the spawned brokers' data
// directories, read from /proc/diskstats at the start and the end of each
// measured window (where broker CPU is read), and the --compare-device probe
// of that filesystem's durable sequential write ceiling (device_linux.go).

// blockDevice is the device a directory's filesystem lives on (a partition
// when it is on one: /proc/diskstats counts partitions too).
type blockDevice struct {
	name         string
	major, minor uint32
}

// devSample is a device's counters and when they were read.
type devSample struct {
	at time.Time
	s  diskstats.Stats
}

// sample reads the device's counters.
func (d *blockDevice) sample() (devSample, error) {
	text, err := os.ReadFile(diskstats.Path)
	if err != nil {
		return devSample{}, err
	}
	at := wallClock()
	_, s, ok, err := diskstats.Find(text, d.major, d.minor)
	if err == nil && !ok {
		err = fmt.Errorf("device %s (%d:%d) is no longer in %s", d.name, d.major, d.minor, diskstats.Path)
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
		WriteBytes:    int64(b.WriteSectors-a.WriteSectors) * diskstats.SectorBytes,
		WriteRequests: int64(b.Writes - a.Writes),
		ReadBytes:     int64(b.ReadSectors-a.ReadSectors) * diskstats.SectorBytes,
		ReadRequests:  int64(b.Reads - a.Reads),
		BusyMs:        int64(b.IOTicksMs - a.IOTicksMs),
	}
	secs := d1.at.Sub(d0.at).Seconds()
	if t.WriteRequests > 0 {
		t.MeanWriteBytes = float64(t.WriteBytes) / float64(t.WriteRequests)
	}
	if a.HasFlushes && b.HasFlushes {
		n := int64(b.Flushes - a.Flushes)
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
