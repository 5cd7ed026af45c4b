package metrics

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// The block device under the data directory, as the kernel counts it
// (/sys/dev/block/MAJOR:MINOR/stat, Documentation/block/stat.rst): what
// the write path's appends, journal groups and flushes become.
const (
	LogDeviceInFlight     = "strata_log_device_in_flight_requests"
	LogDeviceQueueSeconds = "strata_log_device_queue_seconds_total"
	LogDeviceBusySeconds  = "strata_log_device_busy_seconds_total"
)

// DeviceStats is the data directory's block device at a scrape.
type DeviceStats struct {
	Name string // the kernel's name of the device (vda, nvme0n1p2, dm-0)
	// InFlight is the I/O requests issued to the device and not yet
	// completed (the stat file's in_flight).
	InFlight uint64
	// QueueSeconds is the time requests spent in flight, summed over the
	// requests (time_in_queue, a weighted time): its rate is the average
	// queue depth over the interval (iostat's aqu-sz).
	QueueSeconds float64
	// BusySeconds is the time the device had at least one request in
	// flight (io_ticks): its rate is the device's utilization.
	BusySeconds float64
}

var (
	descDeviceInFlight = prometheus.NewDesc(LogDeviceInFlight,
		"I/O requests in flight on the block device under the data directory at the scrape (the device's queue depth).", []string{"device"}, nil)
	descDeviceQueue = prometheus.NewDesc(LogDeviceQueueSeconds,
		"Time I/O requests spent in flight on the data directory's block device, summed over the requests: its rate is the average queue depth.", []string{"device"}, nil)
	descDeviceBusy = prometheus.NewDesc(LogDeviceBusySeconds,
		"Time the data directory's block device had at least one I/O request in flight: its rate is the device's utilization.", []string{"device"}, nil)
)

// SetDevice sets the source of the data directory's block device
// figures, called at each scrape; ok false (no block device: tmpfs,
// overlay, a network filesystem) reports nothing.
func (b *Broker) SetDevice(f func() (DeviceStats, bool)) { b.device.Store(&f) }

func (b *Broker) collectDevice(ch chan<- prometheus.Metric) {
	f := b.device.Load()
	if f == nil || *f == nil {
		return
	}
	s, ok := (*f)()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(descDeviceInFlight, prometheus.GaugeValue, float64(s.InFlight), s.Name)
	ch <- prometheus.MustNewConstMetric(descDeviceQueue, prometheus.CounterValue, s.QueueSeconds, s.Name)
	ch <- prometheus.MustNewConstMetric(descDeviceBusy, prometheus.CounterValue, s.BusySeconds, s.Name)
}

// ReadBlockDevice reads a block device's figures from its sysfs directory
// (/sys/dev/block/MAJOR:MINOR, a disk or a partition): its stat file, and
// its name from where the directory's link points.
func ReadBlockDevice(sysDir string) (DeviceStats, error) {
	b, err := os.ReadFile(filepath.Join(sysDir, "stat"))
	if err != nil {
		return DeviceStats{}, err
	}
	f := strings.Fields(string(b))
	if len(f) < 11 { // in_flight is the 9th field, io_ticks the 10th, time_in_queue the 11th
		return DeviceStats{}, fmt.Errorf("%s/stat: %d fields, want at least 11", sysDir, len(f))
	}
	var v [3]uint64
	for i, field := range f[8:11] {
		if v[i], err = strconv.ParseUint(field, 10, 64); err != nil {
			return DeviceStats{}, fmt.Errorf("%s/stat: field %d: %w", sysDir, 9+i, err)
		}
	}
	name := filepath.Base(sysDir)
	if p, err := filepath.EvalSymlinks(sysDir); err == nil {
		name = filepath.Base(p)
	}
	return DeviceStats{Name: name, InFlight: v[0], BusySeconds: float64(v[1]) / 1000, QueueSeconds: float64(v[2]) / 1000}, nil
}
