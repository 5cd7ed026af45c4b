package metrics

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// ReadBlockDevice parses a sysfs stat file (a disk's 17 fields, an old
// kernel's 11) and names the device after its link; the three series
// carry the figures with the device label, and a source that has no device
// reports none of them.
func TestDeviceMetrics(t *testing.T) {
	root := t.TempDir()
	disk := filepath.Join(root, "devices", "virtio1", "block", "vda")
	if err := os.MkdirAll(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	// reads merges sectors ticks, writes merges sectors ticks, in_flight io_ticks time_in_queue, discards (4), flushes (2)
	stat := "  258554    60310 41354042   186207 11459492  1398722 2230985100 14112840        7  1792648 15177553  1421439     2078 2166631088   563327  2215492   315178\n"
	if err := os.WriteFile(filepath.Join(disk, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "254:0")
	if err := os.Symlink(disk, link); err != nil {
		t.Fatal(err)
	}
	s, err := ReadBlockDevice(link)
	if err != nil {
		t.Fatal(err)
	}
	if want := (DeviceStats{Name: "vda", InFlight: 7, BusySeconds: 1792.648, QueueSeconds: 15177.553}); s != want {
		t.Errorf("ReadBlockDevice: %+v, want %+v", s, want)
	}
	old := filepath.Join(root, "8:1")
	if err := os.Mkdir(old, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "stat"), []byte("1 2 3 4 5 6 7 8 3 4000 12500\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadBlockDevice(old); err != nil || s != (DeviceStats{Name: "8:1", InFlight: 3, BusySeconds: 4, QueueSeconds: 12.5}) {
		t.Errorf("11 fields: %+v %v", s, err)
	}
	if err := os.WriteFile(filepath.Join(old, "stat"), []byte("1 2 3 4 5 6 7 8 x 4000 12500\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadBlockDevice(old); err == nil {
		t.Error("a field that is not a number: no error")
	}
	if err := os.WriteFile(filepath.Join(old, "stat"), []byte("1 2 3 4 5 6 7 8 9 10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadBlockDevice(old); err == nil {
		t.Error("10 fields: no error")
	}
	if _, err := ReadBlockDevice(filepath.Join(root, "0:42")); err == nil {
		t.Error("no such device: no error")
	}

	b := New()
	base, _ := serve(t, b)
	if f := scrape(t, base); f[LogDeviceInFlight] != nil || f[LogDeviceQueueSeconds] != nil || f[LogDeviceBusySeconds] != nil {
		t.Error("device series without a source")
	}
	var have atomic.Bool
	b.SetDevice(func() (DeviceStats, bool) {
		if !have.Load() {
			return DeviceStats{}, false
		}
		s, err := ReadBlockDevice(link)
		return s, err == nil
	})
	if f := scrape(t, base); f[LogDeviceInFlight] != nil {
		t.Error("device series from a source without a device")
	}
	have.Store(true)
	f := scrape(t, base)
	if got := f.Gauge(LogDeviceInFlight, "device", "vda"); got != 7 {
		t.Errorf("%s = %v, want 7", LogDeviceInFlight, got)
	}
	if got := f.Counter(LogDeviceQueueSeconds, "device", "vda"); got != 15177.553 {
		t.Errorf("%s = %v", LogDeviceQueueSeconds, got)
	}
	if got := f.Counter(LogDeviceBusySeconds, "device", "vda"); got != 1792.648 {
		t.Errorf("%s = %v", LogDeviceBusySeconds, got)
	}
}
