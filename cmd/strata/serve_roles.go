package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stratalog/strata/broker/cluster"
	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/server"
)

// roles is what a node runs (process.roles): a broker (log engine, Kafka
// listeners, a registration with the controller), a member of the metadata
// quorum's voters, or both.
type roles struct {
	broker, controller bool
}

// nodeRoles checks process.roles against the quorum as Kafka does
// (KafkaConfig's validation of KRaft roles):
//
//   - a node whose roles include controller must be in
//     controller.quorum.voters;
//   - a node with process.roles=broker must not be;
//   - process.roles=controller and process.roles=broker need a quorum;
//     broker,controller without one is a single broker (its own
//     controller), as the default.
//
// Not set, the roles come from the quorum: broker,controller for a voter,
// broker for any other node (an observer of the quorum) and for a single
// broker.
func nodeRoles(cfg config.Broker) (roles, error) {
	var voters map[int32]string
	if cfg.ControllerQuorum != "" {
		v, err := controller.ParseQuorum(cfg.ControllerQuorum)
		if err != nil {
			return roles{}, fmt.Errorf("controller.quorum.voters: %w", err)
		}
		voters = v
	}
	_, voter := voters[cfg.NodeID]
	if hasControllerListener(cfg) { // serve_listeners.go
		switch {
		case voters == nil:
			return roles{}, fmt.Errorf("controller.listener.names: a controller listener needs controller.quorum.voters (--controller-quorum)")
		case cfg.ProcessRoles == nil && !voter:
			return roles{}, fmt.Errorf("controller.listener.names: node id %d is not a voter of controller.quorum.voters, so it cannot serve a controller listener", cfg.NodeID)
		}
	}
	if cfg.ProcessRoles == nil {
		return roles{broker: true, controller: voter}, nil
	}
	r := roles{broker: slices.Contains(cfg.ProcessRoles, "broker"), controller: slices.Contains(cfg.ProcessRoles, "controller")}
	if !r.broker && !r.controller { // the key's parser allows nothing else; a caller's slice might
		return roles{}, fmt.Errorf("process.roles=%s: the roles are broker, controller or both", strings.Join(cfg.ProcessRoles, ","))
	}
	if hasControllerListener(cfg) && !r.controller {
		return roles{}, fmt.Errorf("controller.listener.names: a broker-only node (process.roles=broker) must not have a controller listener in listeners")
	}
	switch {
	case r.controller && r.broker && voters == nil:
		return r, nil // a single broker
	case voters == nil:
		return roles{}, fmt.Errorf("process.roles=%s needs controller.quorum.voters (--controller-quorum)", rolesText(r))
	case r.controller && !voter:
		return roles{}, fmt.Errorf("process.roles=%s: a node with the controller role must be in controller.quorum.voters, and node id %d is not in %s",
			rolesText(r), cfg.NodeID, cfg.ControllerQuorum)
	case !r.controller && voter:
		return roles{}, fmt.Errorf("process.roles=broker: a broker-only node must not be in controller.quorum.voters, and node id %d is in %s (give it process.roles=broker,controller, or another node id)",
			cfg.NodeID, cfg.ControllerQuorum)
	}
	return r, nil
}

func rolesText(r roles) string {
	switch {
	case r.broker && r.controller:
		return "broker,controller"
	case r.controller:
		return "controller"
	}
	return "broker"
}

// serveController runs a controller-only node (process.roles=controller):
// its voter of the metadata quorum, which brokers reach on its quorum
// address (Raft and the controller RPC share that port), and its
// controller listeners (controller.listener.names, KIP-919: ApiVersions,
// DescribeCluster, DescribeQuorum for controller clients); no log
// engine, no broker listener, no broker registration. It runs
// until SIGINT or SIGTERM. Its Raft state is in <data dir>/controller, as
// a combined node's.
func serveController(cfg config.Broker, logger *slog.Logger) error {
	absDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	if _, err := config.LoadOrCreateMeta(absDir, cfg.NodeID); err != nil {
		return err
	}
	// The controller port's security is the inter-broker listener's, as
	// on a broker (controllerSecurity): the same keys, stores and users.
	scram, err := openScramStore(cfg, absDir)
	if err != nil {
		return err
	}
	authz, err := openAuthorizer(cfg, absDir, logger)
	if err != nil {
		return err
	}
	// The metrics endpoint when metrics.listeners is set: /healthz,
	// /readyz (ready once a quorum leader is known) and the controller's
	// Raft series (strata_controller_role says which node leads).
	met, stopMetrics, err := startMetrics(cfg, absDir, logger) // serve_metrics.go
	if err != nil {
		return err
	}
	defer func() { stopMetrics() }() // on the error returns
	// Signals are caught before the ready line: a SIGTERM sent on reading
	// it stops the controller cleanly.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)
	// The controller listeners (controller.listener.names, KIP-919):
	// bound before the controller starts, served once it runs.
	var ctlLns []net.Listener
	var ctlCfgs []server.Listener
	var ctlEps []controller.Endpoint
	for _, l := range serverListeners(cfg, logger, scram) { // serve_listeners.go
		if !l.Controller {
			continue
		}
		ln, err := net.Listen("tcp", listenerAddr(cfg, l.Name))
		if err != nil {
			closeListeners(ctlLns)
			return err
		}
		host, port := server.AdvertisedEndpoint(l.AdvertisedHost, l.AdvertisedPort, ln.Addr())
		ctlLns, ctlCfgs = append(ctlLns, ln), append(ctlCfgs, l)
		ctlEps = append(ctlEps, controller.Endpoint{Name: l.Name, Host: host, Port: port})
	}
	ctl, err := startController(cfg, absDir, authz, scram, logger)
	if err != nil {
		closeListeners(ctlLns)
		return err
	}
	var srv *server.Server
	errc := make(chan error, len(ctlLns))
	if len(ctlLns) > 0 {
		ctl.SetKafkaEndpoints(ctlEps)
		srv = server.New(server.Config{
			NodeID: cfg.NodeID, ClusterID: quorumClusterID(cfg.ControllerQuorum), ControllerOnly: true,
			MaxRequestBytes: cfg.MaxRequestBytes, ConnectionsMaxIdle: time.Duration(cfg.MaxIdleMs) * time.Millisecond,
			Logger: logger, Scram: scram, Authorizer: authz,
			Cluster: server.ClusterConfig{Controller: ctl},
		}, nil)
		for i, l := range ctlCfgs {
			logger.Info("strata controller listener", "node", cfg.NodeID, "listener", l.Name, "protocol", l.Protocol,
				"listen", ctlLns[i].Addr().String(), "advertised", net.JoinHostPort(ctlEps[i].Host, strconv.Itoa(int(ctlEps[i].Port))))
			go func() { errc <- srv.ServeListener(ctlLns[i], l) }()
		}
	}
	if met != nil {
		met.SetController(func() (metrics.RaftStats, bool) {
			st := ctl.RaftStats()
			return metrics.RaftStats{Role: st.Role, Voter: st.Voter, Term: st.Term, CommitIndex: st.CommitIndex,
				AppliedIndex: st.AppliedIndex, LastIndex: st.LastIndex}, true
		})
		met.SetReady(func() error {
			if _, ok := ctl.Leader(); !ok {
				return errors.New("no leader of the metadata quorum known")
			}
			return nil
		})
	}
	// The replicated ACLs and SCRAM credentials, which check the
	// controller port's peers, follow the metadata as on a broker
	// (broker/cluster SecuritySync), without seeding it: a controller's
	// stores were never a broker's.
	syncCtx, stopSync := context.WithCancel(context.Background())
	syncDone := make(chan struct{})
	go func() { // owner: serveController; ends with stopSync
		defer close(syncDone)
		w := ctl.Watch()
		defer w.Close()
		caughtUp := make(chan struct{})
		go func() { // ends when caught up or with stopSync
			waitCaughtUp(syncCtx, ctl)
			close(caughtUp)
		}()
		cluster.NewSecuritySync(ctl, cluster.SecurityStores{Authorizer: authz, Scram: scram, NoSeed: true}, logger).Run(syncCtx, caughtUp, w)
	}()
	defer func() { stopSync(); <-syncDone }()
	logger.Info("strata controller listening", "node", cfg.NodeID, "process_roles", "controller",
		"listen", ctlAddr(cfg), "data_dir", absDir,
		"cluster_id", quorumClusterID(cfg.ControllerQuorum))
	select {
	case sig := <-sigc:
		logger.Info("shutting down", "signal", sig.String())
	case err := <-errc:
		logger.Error("controller listener failed", "err", err)
	}
	met.Stopping() // /readyz: not ready
	if srv != nil {
		if err := srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			logger.Warn("closing the controller listeners", "err", err)
		}
	}
	stopSync()
	<-syncDone
	if err := ctl.Close(); err != nil {
		return fmt.Errorf("closing controller: %w", err)
	}
	stopMetrics()
	stopMetrics = func() {}
	logger.Info("stopped cleanly", "data_dir", absDir)
	return nil
}

// waitCaughtUp returns once ctl knows a quorum leader and has applied
// what it knew committed, or when ctx ends.
func waitCaughtUp(ctx context.Context, ctl *controller.Controller) {
	for {
		if _, ok := ctl.Leader(); ok {
			if st := ctl.RaftStats(); st.CommitIndex > 0 && st.AppliedIndex >= st.CommitIndex {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ctlAddr is a voter's quorum address.
func ctlAddr(cfg config.Broker) string {
	voters, _ := controller.ParseQuorum(cfg.ControllerQuorum)
	return voters[cfg.NodeID]
}
