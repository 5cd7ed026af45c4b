package loadgen

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/diskstats"
	"github.com/stratalog/strata/internal/uring"
)

func TestDeviceTraffic(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d0 := devSample{at: t0, s: diskstats.Stats{Reads: 10, ReadSectors: 80, Writes: 100, WriteSectors: 1000, IOTicksMs: 500, Flushes: 3, HasFlushes: true}}
	d1 := devSample{at: t0.Add(2 * time.Second), s: diskstats.Stats{Reads: 12, ReadSectors: 96, Writes: 150, WriteSectors: 9000, IOTicksMs: 1500, Flushes: 13, HasFlushes: true}}
	tr := deviceTraffic("vda", d0, d1, 2_048_000)
	if tr.WriteBytes != 8000*512 || tr.WriteRequests != 50 || tr.MeanWriteBytes != 8000*512/50 ||
		tr.ReadBytes != 16*512 || tr.ReadRequests != 2 || tr.BusyMs != 1000 || tr.BusyShare != 0.5 ||
		tr.Flushes == nil || *tr.Flushes != 10 || tr.FlushesPerSec != 5 || tr.BytesPerRecordByte != 2 {
		t.Fatalf("%+v", tr)
	}
	d1.s.HasFlushes = false
	if tr := deviceTraffic("vda", d0, d1, 0); tr.Flushes != nil || tr.BytesPerRecordByte != 0 {
		t.Fatalf("without flush counters or records: %+v", tr)
	}
}

func needDiskstats(t *testing.T) {
	if _, err := os.Stat(diskstats.Path); err != nil {
		t.Skipf("no %s (not Linux): %v", diskstats.Path, err)
	}
}

// TestLookupDevice finds the device of the test's own temporary directory;
// a directory without a block device says so.
func TestLookupDevice(t *testing.T) {
	needDiskstats(t)
	dir := t.TempDir()
	dev, err := lookupDevice(dir)
	if err != nil {
		if !strings.Contains(err.Error(), "without a block device") {
			t.Fatalf("lookup of %s: %v", dir, err)
		}
		t.Logf("%s has no block device: %v", dir, err)
		return
	}
	if dev.name == "" {
		t.Fatalf("device %+v", dev)
	}
	s, err := dev.sample()
	if err != nil || s.at.IsZero() {
		t.Fatalf("sample of %s: %+v %v", dev.name, s, err)
	}
	t.Logf("%s is on %s (%d:%d), %d writes so far", dir, dev.name, dev.major, dev.minor, s.s.Writes)
	if _, err := os.Stat("/proc/self"); err == nil { // procfs has no device
		if dev, err := lookupDevice("/proc/self"); err == nil {
			t.Fatalf("/proc has device %+v", dev)
		}
	}
}

// TestDeviceProbe writes 64 MiB through the probe into a temporary
// directory: it reports a rate, its fdatasyncs, the device's own counters
// when there is a device, and leaves no file behind.
func TestDeviceProbe(t *testing.T) {
	needDiskstats(t)
	dir := t.TempDir()
	var log strings.Builder
	db, err := probeDevice(testCtx(t, time.Minute), dir, 64<<20, DeviceProbeMaxTime, &log)
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, log.String())
	}
	if db.Mode != "device" || db.MBPerSec <= 0 || db.Bytes != 64<<20 || db.Syncs < 1 || db.Syncs > 5 || db.Backend == "" {
		t.Fatalf("probe result %+v", db)
	}
	if _, derr := lookupDevice(dir); derr == nil && (db.Device == "" || db.DeviceWriteBytes <= 0 || db.WriteRequests <= 0 || db.MeanWriteBytes <= 0) {
		t.Fatalf("probe on a block device without its counters: %+v", db)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 0 {
		t.Fatalf("probe left %v behind (%v)", ents, err)
	}
	t.Logf("%.1f MB/s, %d syncs, %s backend, device %q: %d bytes in %d writes; log: %s", db.MBPerSec, db.Syncs, db.Backend,
		db.Device, db.DeviceWriteBytes, db.WriteRequests, log.String())
}

// TestDeviceProbeTimeBound: out of time, the probe stops submitting,
// waits for the writes in flight, makes them durable and reports what it
// wrote.
func TestDeviceProbeTimeBound(t *testing.T) {
	needDiskstats(t)
	dir := t.TempDir()
	db, err := probeDevice(testCtx(t, time.Minute), dir, 256<<20, time.Nanosecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if db.Bytes <= 0 || db.Bytes >= 256<<20 || db.Bytes%DeviceProbeChunk != 0 || db.Syncs < 1 {
		t.Fatalf("time-bound probe %+v", db)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("probe left %v behind", ents)
	}
}

// TestDeviceProbePwriteBackend: the probe on the ring's pwrite fallback
// (hosts without io_uring) writes as much with as many workers.
func TestDeviceProbePwriteBackend(t *testing.T) {
	needDiskstats(t)
	probeBackend = uring.BackendPwrite
	defer func() { probeBackend = uring.BackendAuto }()
	dir := t.TempDir()
	db, err := probeDevice(testCtx(t, time.Minute), dir, 16<<20, DeviceProbeMaxTime, nil)
	if err != nil {
		t.Fatal(err)
	}
	if db.Backend != string(uring.BackendPwrite) || db.Bytes != 16<<20 || db.MBPerSec <= 0 || db.Syncs < 1 {
		t.Fatalf("pwrite probe %+v", db)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("probe left %v behind", ents)
	}
}

// TestDeviceProbeTmpfs: on tmpfs the probe fails with an error naming
// O_DIRECT where the kernel refuses it (before 6.6), and otherwise runs
// without device counters; either way the file is gone.
func TestDeviceProbeTmpfs(t *testing.T) {
	needDiskstats(t)
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "strata-loadgen-test-")
	if err != nil {
		t.Skipf("/dev/shm: %v", err)
	}
	defer os.RemoveAll(dir)
	db, err := probeDevice(testCtx(t, time.Minute), dir, 4<<20, DeviceProbeMaxTime, nil)
	switch {
	case err != nil && !strings.Contains(err.Error(), "O_DIRECT"):
		t.Fatalf("tmpfs probe error does not say why: %v", err)
	case err != nil:
		t.Logf("tmpfs: %v", err)
	case db.Device != "" || db.DeviceWriteBytes != 0:
		t.Fatalf("tmpfs probe reports a device: %+v", db)
	default:
		t.Logf("tmpfs accepts O_DIRECT here: %.0f MB/s, no device", db.MBPerSec)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("probe left %v behind", ents)
	}
}

// TestReportsShowDevice: the table, the HTML report and the JSON carry the
// device traffic (run and --find-max steps) and the device ceiling.
func TestReportsShowDevice(t *testing.T) {
	rep := syntheticReport(true)
	fl := int64(300)
	dev := &DeviceTraffic{Name: "vda", WriteBytes: 61_200_000, WriteRequests: 1234, MeanWriteBytes: 49_594, Flushes: &fl,
		FlushesPerSec: 15, BusyMs: 4940, BusyShare: 0.247, BytesPerRecordByte: 1.19}
	rep.Result.Device = dev
	rep.FindMax.Steps[1].Result.Device = dev
	rep.DeviceBaseline = &DeviceBaseline{Mode: "device", Dir: "/tmp", Device: "vda", Backend: "uring", MBPerSec: 596.3,
		Bytes: 1 << 30, DurationS: 1.8, Syncs: 64, DeviceWriteBytes: 1 << 30, WriteRequests: 700, MeanWriteBytes: 1533916, Ratio: 0.0859}
	var txt bytes.Buffer
	if err := rep.WriteTable(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"vda: 61.2 MB written in 1,234 writes (48.4 KiB mean), 300 flushes (15.0/s)",
		"1.19 device bytes per record byte", "busy 4,940 ms (24.7% of the window)", "dev B/rec B", "1.19",
		"device ceiling MB/s          596.3", "acked record MB/s / ceiling  8.6%"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, txt.String())
		}
	}
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"device writes", "Device ceiling", "596.3 MB/s", "device B/record B", "24.7 %"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"device":{"name":"vda","write_bytes":61200000`, `"bytes_per_record_byte":1.19`, `"busy_share":0.247`,
		`"device_baseline":{"mode":"device"`, `"mb_per_sec":596.3`, `"ratio":0.0859`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}
