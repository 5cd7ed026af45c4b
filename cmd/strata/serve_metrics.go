package main

import (
	"log/slog"
	"time"

	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/metrics"
)

// startMetrics starts the metrics endpoint (/metrics, /healthz, /readyz)
// on cfg.MetricsListeners, before the data directory is opened, so /readyz
// answers "not ready" while the logs recover. It returns the metrics the
// server feeds and the endpoint's stop, which serve defers; with no
// listener, nil metrics (the server then measures nothing) and a stop that
// does nothing.
func startMetrics(cfg config.Broker, logger *slog.Logger) (*metrics.Broker, func(), error) {
	if len(cfg.MetricsListeners) == 0 {
		return nil, func() {}, nil
	}
	m := metrics.NewWithOptions(metrics.Options{PartitionLabels: cfg.MetricsPartitionLabels, Now: time.Now})
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
