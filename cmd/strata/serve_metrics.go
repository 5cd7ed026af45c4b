package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/segment"
)

// startMetrics starts the metrics endpoint (/metrics, /healthz, /readyz)
// on cfg.MetricsListeners, before the data directory is opened, so /readyz
// answers "not ready" while the logs recover. It returns the metrics the
// server feeds and the endpoint's stop, which serve defers; with no
// listener, nil metrics (the server then measures nothing) and a stop that
// does nothing. dataDir is the data directory, whose block device the
// metrics report (dataDevice).
func startMetrics(cfg config.Broker, dataDir string, logger *slog.Logger) (*metrics.Broker, func(), error) {
	if len(cfg.MetricsListeners) == 0 {
		return nil, func() {}, nil
	}
	m := metrics.NewWithOptions(metrics.Options{PartitionLabels: cfg.MetricsPartitionLabels, Now: time.Now})
	m.SetDevice(dataDevice(dataDir, sysDevBlock))
	ep, err := metrics.Listen(cfg.MetricsListeners, m, logger)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range ep.Addrs() {
		logger.Info("metrics endpoint listening", "listen", a.String(), "paths", "/metrics /healthz /readyz")
	}
	return m, func() {
		ep.Close()
		logger.Info("metrics endpoint stopped")
	}, nil
}

// sysDevBlock is sysfs' directory of block devices by number.
const sysDevBlock = "/sys/dev/block"

// dataDevice is the metrics' source of the block device under dir (the
// strata_log_device_* series): at each scrape, dir's device number and
// that device's stat file under sys (sysDevBlock). Nothing when dir's
// filesystem has no block device of its own (tmpfs, overlay, NFS) or the
// system has no sysfs.
func dataDevice(dir, sys string) func() (metrics.DeviceStats, bool) {
	return func() (metrics.DeviceStats, bool) {
		dev, err := segment.DeviceOf(dir)
		if err != nil {
			return metrics.DeviceStats{}, false
		}
		major, minor := segment.DeviceNumbers(dev)
		s, err := metrics.ReadBlockDevice(filepath.Join(sys, fmt.Sprintf("%d:%d", major, minor)))
		return s, err == nil
	}
}
