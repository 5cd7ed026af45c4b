package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/server"
)

// runServe starts one broker and runs until SIGINT or SIGTERM, then shuts
// down cleanly: stop accepting, close connections, flush and checkpoint the
// logs so the next start walks nothing.
func runServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", "", "host:port to listen on (default 127.0.0.1:9092)")
	dataDir := fs.String("data-dir", "", "data directory (default ./strata-data)")
	nodeID := fs.Int("node-id", -1, "this broker's node id (default 0)")
	configFile := fs.String("config", "", "Kafka-style properties file (server.properties key names)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)

	cfg := config.Defaults()
	if *configFile != "" {
		f, err := os.Open(*configFile)
		if err != nil {
			return err
		}
		props, err := config.ParseProperties(f)
		f.Close()
		if err != nil {
			return err
		}
		if err := cfg.Apply(props); err != nil {
			return err
		}
		for _, k := range cfg.Unknown {
			logger.Warn("ignoring unknown config key", "key", k, "file", *configFile)
		}
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	if *nodeID >= 0 {
		cfg.NodeID = int32(*nodeID)
	}
	if err := cfg.Finish(); err != nil {
		return err
	}
	return serve(cfg, logger)
}

func serve(cfg config.Broker, logger *slog.Logger) error {
	absDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	meta, err := config.LoadOrCreateMeta(absDir, cfg.NodeID)
	if err != nil {
		return err
	}
	start := time.Now()
	eng, err := engine.Open(engine.Options{Dir: absDir, Log: cfg.Log, Logger: logger})
	if err != nil {
		return fmt.Errorf("opening data directory %s: %w", absDir, err)
	}
	logger.Info("data directory ready", "dir", absDir, "topics", len(eng.Topics()), "took", time.Since(start).Round(time.Millisecond))

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		eng.Close()
		return err
	}
	srv := server.New(server.Config{
		NodeID:             cfg.NodeID,
		AdvertisedHost:     cfg.AdvertisedHost,
		AdvertisedPort:     cfg.AdvertisedPort,
		ClusterID:          meta.ClusterID,
		NumPartitions:      cfg.NumPartitions,
		DefaultReplication: cfg.DefaultRepl,
		AutoCreateTopics:   cfg.AutoCreateTopics,
		MaxRequestBytes:    cfg.MaxRequestBytes,
		FetchMaxBytes:      cfg.FetchMaxBytes,
		LogDefaults:        cfg.Log,
		ConnectionsMaxIdle: time.Duration(cfg.MaxIdleMs) * time.Millisecond,
		Logger:             logger,
	}, eng)
	logger.Info("strata broker listening", "node", cfg.NodeID, "listen", ln.Addr().String(),
		"advertised", net.JoinHostPort(cfg.AdvertisedHost, fmt.Sprint(cfg.AdvertisedPort)),
		"data_dir", absDir, "cluster_id", meta.ClusterID)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case <-ctx.Done():
		logger.Info("shutting down", "signal", "received")
	case err := <-errc:
		if err != nil {
			logger.Error("listener failed", "err", err)
		}
	}
	closeErr := srv.Close()
	if err := eng.Close(); err != nil {
		return fmt.Errorf("closing engine: %w", err)
	}
	if closeErr != nil && !errors.Is(closeErr, net.ErrClosed) {
		return closeErr
	}
	logger.Info("stopped cleanly", "data_dir", absDir)
	return nil
}
