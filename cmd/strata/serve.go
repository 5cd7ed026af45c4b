package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/internal/configkeys"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/stratalog/strata/server"
)

// runServe starts one broker and runs until SIGINT or SIGTERM, then shuts
// down cleanly: stop accepting, close connections, flush and checkpoint the
// logs so the next start walks nothing.
func runServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	keyFlags := addKeyFlags(fs) // --listen, --data-dir, --node-id, --controller-quorum, --rack, the rebalance flags
	configFile := fs.String("config", "", "Kafka-style properties file (server.properties key names)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	ctlListen := fs.String("controller-listen", "", "Raft listen address of a broker that is not a voter (default: listen host, any port)")
	blackhole := fs.Bool("blackhole", false, "benchmark baseline: acknowledge produce requests without storing them")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (pprof) of the whole run to this file at shutdown")
	memProfile := fs.String("memprofile", "", "write an allocation profile (pprof allocs: every allocation since start, sampled) to this file at shutdown")
	rest, err := parseFlags(fs, args, serveDoc, false, os.Stdout) // cli.go: --help exits 0
	if err != nil {
		return err
	}
	if len(rest) > 0 { // a broker started on a mistyped line would run with the defaults
		return usagef(serveDoc, "unexpected arguments %q", rest)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usagef(serveDoc, "--log-level: %w", err)
	}

	cfg := config.Defaults()
	var remoteProps map[string]string // serve_remote.go: tiered storage's object store
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
		remoteProps = remotePropsOf(props)
	}
	if err := applyKeyFlags(&cfg, keyFlags); err != nil { // flags win over the file
		return asUsage(serveDoc, err)
	}
	// The logger once log.format is known (the file, then --log-format).
	hopts := &slog.HandlerOptions{Level: level}
	var handler slog.Handler = slog.NewTextHandler(os.Stderr, hopts)
	if cfg.LogFormat == "json" {
		handler = slog.NewJSONHandler(os.Stderr, hopts)
	}
	logger := slog.New(handler)
	slog.SetDefault(logger)
	for _, k := range cfg.Unknown {
		if isRemoteKey(k) {
			continue
		}
		logger.Warn("ignoring unknown config key", "key", k, "file", *configFile)
	}
	cfg.ControllerListen = *ctlListen
	cfg.Blackhole = *blackhole
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		f, err := os.Create(*memProfile)
		if err != nil {
			return fmt.Errorf("--memprofile: %w", err)
		}
		defer func() {
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				logger.Error("--memprofile", "err", err)
			}
			f.Close()
		}()
	}
	if err := cfg.Finish(); err != nil {
		return err
	}
	r, err := nodeRoles(cfg) // serve_roles.go
	if err != nil {
		return asUsage(serveDoc, err)
	}
	if !r.broker {
		return serveController(cfg, logger)
	}
	return serve(cfg, remoteProps, logger)
}

// serve runs the broker; remoteProps are the object store's properties
// (serve_remote.go; empty: no tiered storage).
func serve(cfg config.Broker, remoteProps map[string]string, logger *slog.Logger) error {
	absDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	meta, err := config.LoadOrCreateMeta(absDir, cfg.NodeID)
	if err != nil {
		return err
	}
	scram, err := openScramStore(cfg, absDir) // serve_listeners.go
	if err != nil {
		return err
	}
	authz, err := openAuthorizer(cfg, absDir, logger) // serve_acls.go
	if err != nil {
		return err
	}
	quotas, err := openQuotas(absDir, logger) // serve_acls.go
	if err != nil {
		return err
	}
	limits, err := connLimits(cfg) // serve_listeners.go
	if err != nil {
		return err
	}
	raiseFileLimit(logger) // serve_rlimit.go
	setProcs(logger)       // serve_procs.go
	// serve_metrics.go: started first, so /readyz answers during recovery.
	met, stopMetrics, err := startMetrics(cfg, absDir, logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	start := time.Now()
	logDefaults, err := engine.DefaultLogConfig().Apply(cfg.TopicDefaults)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	// The dynamic broker configs kept in the data directory: the engine
	// opens with their topic defaults, so retention never runs under the
	// properties file's alone (server/dynconfig.go applies the rest).
	engDefaults := logDefaults
	if dyn, err := server.LoadDynamicConfigs(absDir); err != nil {
		logger.Error("reading the dynamic broker configs; starting without them", "err", err)
	} else if engDefaults, err = server.DynamicLogDefaults(logDefaults, dyn); err != nil {
		logger.Error("dynamic broker configs: topic defaults not applied", "err", err)
		engDefaults = logDefaults
	}
	eng, err := engine.Open(engine.Options{
		Dir:                    absDir,
		Log:                    engDefaults,
		Logger:                 logger,
		IOBackend:              cfg.IOBackend,
		DisableSharedFlush:     cfg.NoSharedFlush,
		NoZeroFill:             cfg.NoZeroFill,
		JournalBytes:           cfg.JournalBytes,
		JournalEnds:            cfg.JournalEnds,
		RollAhead:              cfg.RollAheadBytes,
		VerifyRecovery:         cfg.VerifyRecovery,
		ScrubBytesPerSecond:    cfg.ScrubBytesPerSec,
		RefetchCorrupt:         cfg.ControllerQuorum != "", // a corrupt replica re-fetches from its leader
		TailCacheBytes:         cfg.TailCacheBytes,
		PrefaultTailCache:      true,
		CopyCacheBytes:         cfg.RemoteCopyCacheBytes,
		MinFreeBytes:           cfg.MinFreeBytes,
		MinFreePercent:         cfg.MinFreePercent,
		RetentionCheckInterval: time.Duration(cfg.RetentionCheckIntervalMs) * time.Millisecond,
		Cleaner: engine.CleanerOptions{
			Disabled:            cfg.Cleaner.Disabled,
			IOMaxBytesPerSecond: cfg.Cleaner.IOMaxBytesPerSecond,
			Backoff:             cfg.Cleaner.Backoff,
		},
		ProducerIDExpirationMs: cfg.ProducerIDExpirationMs,
	})
	if err != nil {
		return fmt.Errorf("opening data directory %s: %w", absDir, err)
	}
	logger.Info("data directory ready", "dir", absDir, "topics", len(eng.Topics()), "took", time.Since(start).Round(time.Millisecond))

	lns, err := listen(cfg) // serve_listeners.go
	if err != nil {
		eng.Close()
		return err
	}
	ctl, err := startController(cfg, absDir, authz, scram, logger)
	if err != nil {
		closeListeners(lns)
		eng.Close()
		return err
	}
	clusterID := meta.ClusterID
	if ctl != nil {
		clusterID = quorumClusterID(cfg.ControllerQuorum)
		ctl.SetKafkaEndpoints(controllerEndpoints(cfg, lns)) // serve_listeners.go: KIP-919
	}
	srv := server.New(server.Config{
		NodeID:             cfg.NodeID,
		AdvertisedHost:     cfg.AdvertisedHost,
		AdvertisedPort:     cfg.AdvertisedPort,
		ClusterID:          clusterID,
		NumPartitions:      cfg.NumPartitions,
		DefaultReplication: cfg.DefaultRepl,
		AutoCreateTopics:   cfg.AutoCreateTopics,
		MaxRequestBytes:    cfg.MaxRequestBytes,
		FetchMaxBytes:      cfg.FetchMaxBytes,
		BrokerConfigs:      cfg.Static,  // DescribeConfigs' STATIC_BROKER_CONFIG
		LogDefaults:        logDefaults, // the properties file's topic defaults; the dynamic ones go over them
		ConnectionsMaxIdle: time.Duration(cfg.MaxIdleMs) * time.Millisecond,
		Logger:             logger,
		Cluster: server.ClusterConfig{
			Controller:        ctl,
			Rack:              cfg.Rack,
			HeartbeatInterval: time.Duration(cfg.HeartbeatIntervalMs) * time.Millisecond,
			MinInsyncReplicas: cfg.MinInsyncReplicas,
			ReplicaLagTimeMax: time.Duration(cfg.ReplicaLagTimeMaxMs) * time.Millisecond,
			ReplicaFetch:      server.ReplicaFetchConfig(cfg.ReplicaFetch),
			Dial:              interBrokerDial(cfg, logger),  // serve_listeners.go: TLS when the inter-broker listener is SSL
			Endpoints:         registeredEndpoints(cfg, lns), // serve_listeners.go: every listener's, for the controller
		},

		Groups:         server.GroupsConfig{Coordinator: groupConfig(cfg.Groups), Share: shareConfig(cfg.Groups)},
		Txn:            txnConfig(cfg),     // serve_txn.go
		MaxQueuedBytes: cfg.QueuedMaxBytes, // broker-wide; each connection's share is netpoll's default
		Blackhole:      cfg.Blackhole,
		Metrics:        met,
		Scram:          scram, // SASL SCRAM users; Describe/AlterUserScramCredentials
		Authorizer:     authz, // ACLs (nil: none)
		Quotas:         quotas,
		ConnLimits:     limits,                       // max.connections and the other connection limits
		Reconfigure:    dynamicReconfigure(cfg, eng), // serve_dynconfig.go: dynamic connection limits and SSL stores
	}, eng)
	rm, err := openRemote(cfg, remoteProps, absDir, eng, srv, logger) // serve_remote.go
	if err != nil {
		srv.Close()
		if ctl != nil {
			ctl.Close()
		}
		closeListeners(lns)
		eng.Close()
		return err
	}
	if cfg.Blackhole {
		logger.Warn("blackhole mode: produce requests are acknowledged and NOT stored (benchmark baseline only)")
	}
	// Signals are caught before the listening line: a SIGTERM sent on
	// reading it shuts down cleanly.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)
	for i, l := range cfg.Listeners {
		logger.Info("strata broker listening", "node", cfg.NodeID, "listener", l.Name, "protocol", l.Protocol,
			"listen", lns[i].Addr().String(), "advertised", advertisedAddr(l, lns[i].Addr()),
			"inter_broker", l.Name == cfg.InterBrokerListener && !l.Controller, "controller", l.Controller,
			"data_dir", absDir, "cluster_id", clusterID)
	}

	errc := make(chan error, len(lns))
	for i, l := range serverListeners(cfg, logger, scram) {
		go func() { errc <- srv.ServeListener(lns[i], l) }()
	}

	select {
	case sig := <-sigc:
		logger.Info("shutting down", "signal", sig.String())
	case err := <-errc:
		if err != nil {
			logger.Error("listener failed", "err", err)
		}
	}
	met.Stopping() // /readyz: not ready
	if ctl != nil {
		// Controlled shutdown: leadership moves to other replicas before
		// this broker stops serving, so clients fail over without waiting
		// for the session to expire.
		sctx, cancel := context.WithTimeout(context.Background(), controlledShutdownTimeout)
		if err := srv.ControlledShutdown(sctx); err != nil {
			logger.Warn("controlled shutdown did not complete; stopping anyway", "err", err)
		} else {
			logger.Info("controlled shutdown: leadership moved away")
		}
		cancel()
	}
	closeErr := srv.Close()
	closeRemote(rm, srv)
	if ctl != nil {
		if err := ctl.Close(); err != nil {
			logger.Warn("closing controller", "err", err)
		}
	}
	if err := eng.Close(); err != nil {
		return fmt.Errorf("closing engine: %w", err)
	}
	if closeErr != nil && !errors.Is(closeErr, net.ErrClosed) {
		return closeErr
	}
	logger.Info("stopped cleanly", "data_dir", absDir)
	return nil
}

// controlledShutdownTimeout bounds how long SIGTERM waits for the controller
// to move leadership away before the broker stops anyway.
const controlledShutdownTimeout = 30 * time.Second

// startController starts this node's member of the metadata quorum when
// cfg names one (nil, nil otherwise: a single broker). A voter listens for
// Raft on its own quorum entry; any other node is an observer listening on
// cfg.ControllerListen (default: the broker's listen host, any free port).
// Raft state lives in <data dir>/controller.
func startController(cfg config.Broker, dataDir string, authz *auth.Authorizer, scram *sasl.Store, logger *slog.Logger) (*controller.Controller, error) {
	if cfg.ControllerQuorum == "" {
		return nil, nil
	}
	voters, err := controller.ParseQuorum(cfg.ControllerQuorum)
	if err != nil {
		return nil, fmt.Errorf("--controller-quorum: %w", err)
	}
	ccfg := controller.Config{
		NodeID:         cfg.NodeID,
		Voters:         voters,
		DataDir:        filepath.Join(dataDir, engine.ControllerDirName),
		Logger:         logger,
		SessionTimeout: time.Duration(cfg.SessionTimeoutMs) * time.Millisecond,
	}
	applyRebalance(cfg, &ccfg) // serve_rebalance.go
	controllerSecurity(cfg, &ccfg, authz, scram, logger)
	if _, voter := voters[cfg.NodeID]; !voter {
		addr := cfg.ControllerListen
		if addr == "" {
			host, _, err := net.SplitHostPort(cfg.Listen)
			if err != nil {
				return nil, err
			}
			addr = net.JoinHostPort(host, "0")
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("controller listener: %w", err)
		}
		ccfg.Listener, ccfg.RaftAddr = ln, ln.Addr().String()
	}
	ctl, err := controller.New(ccfg)
	if err != nil {
		return nil, err
	}
	logger.Info("controller started", "node", cfg.NodeID, "voters", controller.FormatQuorum(voters),
		"voter", ccfg.Listener == nil, "dir", ccfg.DataDir)
	return ctl, nil
}

// controllerSecurity authenticates the controller's port (Raft and the
// controller RPC) as the inter-broker listener is secured:
//
//   - SSL or SASL_SSL: mutual TLS with the same key, certificate chain and
//     trust store (reloaded when the files change), a client certificate
//     required of every peer, the peers' names checked as
//     ssl.endpoint.identification.algorithm says; with an authorizer the
//     certificate's principal (ssl.principal.mapping.rules) also needs
//     ClusterAction on the cluster, as Kafka asks of controller requests
//     (the brokers are normally super.users);
//   - SASL_PLAINTEXT: SASL, as Kafka's SASL_PLAINTEXT controller listener
//     (sasl.mechanism.controller.protocol): each connection opens with
//     SaslHandshake and SaslAuthenticate in the inter-broker mechanism, as
//     the inter-broker login module's user (what the replica fetcher
//     presents), checked against that mechanism's PLAIN users or the
//     broker's SCRAM store; with an authorizer the principal needs
//     ClusterAction on the cluster (controller/sasl.go);
//   - PLAINTEXT: plain TCP, and a WARN when another listener is secured:
//     keep the port on a network only the brokers reach (docs/security.md).
func controllerSecurity(cfg config.Broker, ccfg *controller.Config, authz *auth.Authorizer, scram *sasl.Store, logger *slog.Logger) {
	clusterAction := func(p string, remote net.Addr) error {
		host, _, _ := net.SplitHostPort(remote.String())
		if !authz.Authorize(p, host, auth.OpClusterAction, auth.ResourceCluster, auth.ClusterName) {
			return fmt.Errorf("%s has no ClusterAction on the cluster", p)
		}
		return nil
	}
	l := cfg.InterBroker()
	if l != nil && l.SSL != nil {
		ccfg.ServerTLS = l.SSL.ServerTLS(logger)
		ccfg.ClientTLS = l.SSL.ClientTLS(logger)
		if authz != nil {
			ssl := l.SSL
			ccfg.AuthorizePeer = func(remote net.Addr, st tls.ConnectionState) error {
				if len(st.PeerCertificates) == 0 {
					return errors.New("no client certificate")
				}
				p, err := ssl.Principal(st.PeerCertificates[0])
				if err != nil {
					return err
				}
				return clusterAction(p, remote)
			}
		}
		return
	}
	if l != nil && l.SASL != nil && l.SASL.Client != nil {
		creds := *l.SASL.Client
		// Only the mechanism brokers use: the port serves brokers, not
		// clients (Kafka's sasl.mechanism.controller.protocol).
		server := &sasl.Config{Mechanisms: []string{creds.Mechanism}, PlainUsers: l.SASL.PlainUsers, Scram: scram}
		ccfg.AuthenticatePeer = func(conn net.Conn) (string, error) { return sasl.Serve(conn, server) }
		ccfg.AuthenticateSelf = func(ctx context.Context, conn net.Conn) error { return sasl.Authenticate(ctx, conn, creds) }
		if authz != nil {
			ccfg.AuthorizePrincipal = func(remote net.Addr, p string) error { return clusterAction(p, remote) }
		}
		return
	}
	for _, l := range cfg.Listeners {
		if l.SSL != nil || l.SASL != nil {
			logger.Warn("the controller port is not authenticated (plain TCP): make the inter-broker listener SSL, SASL_SSL or SASL_PLAINTEXT to authenticate it",
				"inter_broker_listener", cfg.InterBrokerListener, "controller_quorum", cfg.ControllerQuorum)
			return
		}
	}
}

// quorumClusterID is the cluster id every broker of a cluster reports: it
// is derived from the controller quorum (voter ids and addresses, in id
// order), which all brokers are given identically, so Metadata and
// DescribeCluster agree across brokers without a formatting step. Kafka's
// format: 16 bytes, base64url without padding.
func quorumClusterID(quorum string) string {
	voters, err := controller.ParseQuorum(quorum)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte("strata cluster " + controller.FormatQuorum(voters)))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// groupConfig is the group coordinator's settings from the broker's keys.
func groupConfig(g config.Groups) group.Config {
	return group.Config{
		MinSessionTimeoutMs:     g.MinSessionTimeoutMs,
		MaxSessionTimeoutMs:     g.MaxSessionTimeoutMs,
		InitialRebalanceDelayMs: g.InitialRebalanceDelayMs,
		MaxSize:                 g.MaxSize,
		OffsetMetadataMaxBytes:  g.OffsetMetadataMaxBytes,
		OffsetsPartitions:       g.OffsetsPartitions,
		OffsetsRetentionMs:      g.OffsetsRetentionMs,
	}
}

// keyFlag is a serve flag that sets a config key (configkeys.Key.Flag):
// its value is checked and applied as the same key in the properties file
// would be, after the file.
type keyFlag struct {
	key   *configkeys.Key
	value string
	set   bool
}

func (f *keyFlag) String() string {
	if f == nil {
		return ""
	}
	return f.value
}

func (f *keyFlag) Set(v string) error {
	f.value, f.set = v, true
	return nil
}

// IsBoolFlag lets a boolean key's flag stand alone (--auto-leader-rebalance).
func (f *keyFlag) IsBoolFlag() bool { return f.key != nil && f.key.Type == configkeys.Boolean }

// addKeyFlags registers a flag for every key of the table that has one.
func addKeyFlags(fs *flag.FlagSet) []*keyFlag {
	var out []*keyFlag
	for _, k := range configkeys.All() {
		if k.Flag == "" {
			continue
		}
		f := &keyFlag{key: k}
		def := k.Default
		if def == "" {
			def = k.Shown
		}
		// The flag package shows the first `quoted` word as the value's name.
		doc := strings.ReplaceAll(k.Doc, "`", "")
		article := "a"
		if t := k.Type.String(); t != "" && strings.ContainsRune("aeiou", rune(t[0])) {
			article = "an" // an int
		}
		fs.Var(f, k.Flag, fmt.Sprintf("sets %s, %s `%s`: %s (default %s)", k.Broker, article, k.Type, doc, def))
		out = append(out, f)
	}
	return out
}

// applyKeyFlags applies the flags given on the command line.
func applyKeyFlags(cfg *config.Broker, flags []*keyFlag) error {
	for _, f := range flags {
		if !f.set {
			continue
		}
		if err := cfg.Apply(map[string]string{f.key.Broker: f.value}); err != nil {
			return fmt.Errorf("--%s: %w", f.key.Flag, err)
		}
	}
	return nil
}
