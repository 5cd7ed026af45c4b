package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/stratalog/strata/netpoll"
	"github.com/stratalog/strata/server"
)

// listen opens every listener of cfg (listeners, in order).
func listen(cfg config.Broker) ([]net.Listener, error) {
	var lns []net.Listener
	for _, l := range cfg.Listeners {
		ln, err := net.Listen("tcp", l.Listen)
		if err != nil {
			closeListeners(lns)
			return nil, err
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

func closeListeners(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}

// serverListeners are cfg's listeners as the server serves them: an SSL
// listener's TLS configuration reloads its files on each handshake.
func serverListeners(cfg config.Broker, logger *slog.Logger, scram *sasl.Store) []server.Listener {
	var out []server.Listener
	for _, l := range cfg.Listeners {
		sl := server.Listener{
			Name: l.Name, Protocol: l.Protocol,
			AdvertisedHost: l.AdvertisedHost, AdvertisedPort: l.AdvertisedPort,
			InterBroker: l.Name == cfg.InterBrokerListener && !l.Controller,
			Controller:  l.Controller, // controller.listener.names (KIP-919)
		}
		if l.SSL != nil {
			sl.TLS = l.SSL.ServerTLS(logger)
			sl.Principal = l.SSL.Principal
		}
		if l.SASL != nil {
			sl.SASL = &sasl.Config{Mechanisms: l.SASL.Mechanisms, PlainUsers: l.SASL.PlainUsers, Scram: scram, OAuth: l.SASL.OAuth,
				ReauthMs: cfg.MaxReauthMs, FailedAuthDelayMs: cfg.FailedAuthDelayMs}
			if o := l.SASL.OAuth; o != nil {
				o.Now = time.Now
				if o.Unsecured {
					logger.Warn("OAUTHBEARER accepts unsecured (unsigned) tokens: Kafka's default validator, for development and tests only; set listener.name."+
						strings.ToLower(l.Name)+".oauthbearer.sasl.server.callback.handler.class and sasl.oauthbearer.jwks.endpoint.url", "listener", l.Name)
				}
			}
		}
		out = append(out, sl)
	}
	return out
}

// interBrokerDialTimeout bounds a connection to another broker (Kafka's
// replica.socket.timeout.ms default).
const interBrokerDialTimeout = 30 * time.Second

// interBrokerDial is how this broker connects to others (follower
// fetches, transaction markers): TLS with the inter-broker listener's
// ssl.* keys (keystore as the client certificate, trust store as the
// roots) when that listener is SSL; nil (plain TCP) otherwise.
//
// When the inter-broker listener is SASL_PLAINTEXT or SASL_SSL, each new
// connection authenticates first (SaslHandshake and SaslAuthenticate with
// sasl.mechanism.inter.broker.protocol and its login module's username and
// password) before it is handed to the replica fetcher or the marker
// client, and re-authenticates on the same connection before its session
// ends when the other broker sets connections.max.reauth.ms.
func interBrokerDial(cfg config.Broker, logger *slog.Logger) func(ctx context.Context, addr string) (net.Conn, error) {
	l := cfg.InterBroker()
	if l == nil || (l.SSL == nil && l.SASL == nil) {
		return nil
	}
	nd := &net.Dialer{Timeout: interBrokerDialTimeout}
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		return nd.DialContext(ctx, "tcp", addr)
	}
	if l.SSL != nil {
		clientTLS := l.SSL.ClientTLS(logger)
		dial = func(ctx context.Context, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			d := &tls.Dialer{NetDialer: nd, Config: clientTLS(host)}
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	if l.SASL == nil || l.SASL.Client == nil {
		return dial
	}
	creds := *l.SASL.Client
	return func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		// With connections.max.reauth.ms on the other broker, the
		// connection re-authenticates before its session ends (KIP-368)
		// instead of being closed and redialled at every expiry.
		sc, err := sasl.AuthenticateSession(ctx, c, creds, time.Now)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("authenticating to broker %s: %w", addr, err)
		}
		return sc, nil
	}
}

// scramFile keeps the broker's SCRAM credentials in its data directory.
const scramFile = engine.ScramCredentialsFile

// openScramStore opens the SCRAM credential store in dir and adds the
// credentials of strata.scram.credentials it does not hold yet (the
// first admin, as kafka-storage format --add-scram does).
func openScramStore(cfg config.Broker, dir string) (*sasl.Store, error) {
	store, err := sasl.OpenStore(filepath.Join(dir, scramFile))
	if err != nil {
		return nil, err
	}
	if len(cfg.ScramBootstrap) == 0 {
		return store, nil
	}
	err = store.Update(func(tx *sasl.StoreTx) error {
		for _, b := range cfg.ScramBootstrap {
			if !tx.Has(b.User, b.Mechanism) {
				tx.Set(b.User, b.Mechanism, b.Credential)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.ScramCredentialsKey, err)
	}
	return store, nil
}

// connLimits are cfg's connection limits as netpoll applies them:
// max.connections, max.connections.per.ip (its overrides' hosts resolved
// now, as Kafka resolves them when it reads the key),
// max.connection.creation.rate, and each listener's own.
func connLimits(cfg config.Broker) (*netpoll.ConnLimits, error) {
	l := netpoll.DefaultConnLimits()
	l.MaxConnections = cfg.MaxConnections
	l.MaxConnectionsPerIP = cfg.MaxConnectionsPerIP
	l.MaxConnectionCreationRate = cfg.MaxConnectionCreationRate
	l.InterBrokerListener = cfg.InterBrokerListener
	l.MaxConnectionsPerIPByAddr = map[string]int{}
	for host, n := range cfg.MaxConnectionsPerIPOvr {
		addrs := []string{host}
		if net.ParseIP(host) == nil {
			var err error
			if addrs, err = net.LookupHost(host); err != nil {
				return nil, fmt.Errorf("max.connections.per.ip.overrides: %s: %w", host, err)
			}
		}
		for _, a := range addrs {
			l.MaxConnectionsPerIPByAddr[a] = n
		}
	}
	l.Listeners = map[string]netpoll.ListenerLimits{}
	for _, ln := range cfg.Listeners {
		if ln.MaxConnections != netpoll.Unlimited || ln.MaxConnectionCreationRate != netpoll.Unlimited {
			l.Listeners[ln.Name] = netpoll.ListenerLimits{MaxConnections: ln.MaxConnections, MaxConnectionCreationRate: ln.MaxConnectionCreationRate}
		}
	}
	return &l, nil
}

// advertisedAddr is what listener l advertises once bound to bound, as the
// server resolves it (server.ServeListener): the configured advertised
// port, or the bound one when that is 0 (a listener on port 0 advertises
// the port it got, and the listening line should say so).
func advertisedAddr(l config.Listener, bound net.Addr) string {
	if l.AdvertisedPort != 0 {
		return l.Advertised()
	}
	if _, port, err := net.SplitHostPort(bound.String()); err == nil {
		if p, err := strconv.Atoi(port); err == nil {
			return net.JoinHostPort(l.AdvertisedHost, strconv.Itoa(p))
		}
	}
	return l.Advertised()
}

// registeredEndpoints are the advertised endpoints of the bound listeners
// lns (in cfg.Listeners' order) but the controller listeners, which a
// broker of a cluster registers with the controller; nil for a single
// broker (it answers from its own listeners).
func registeredEndpoints(cfg config.Broker, lns []net.Listener) []controller.Endpoint {
	if cfg.ControllerQuorum == "" {
		return nil
	}
	return endpointsOf(cfg, lns, false)
}

// controllerEndpoints are the advertised endpoints of the bound
// controller listeners (controller.listener.names), which the node's
// controller tells the others (controller.SetKafkaEndpoints).
func controllerEndpoints(cfg config.Broker, lns []net.Listener) []controller.Endpoint {
	return endpointsOf(cfg, lns, true)
}

func endpointsOf(cfg config.Broker, lns []net.Listener, ctl bool) []controller.Endpoint {
	eps := []controller.Endpoint{}
	for i, l := range cfg.Listeners {
		if l.Controller != ctl {
			continue
		}
		host, port := server.AdvertisedEndpoint(l.AdvertisedHost, l.AdvertisedPort, lns[i].Addr())
		eps = append(eps, controller.Endpoint{Name: l.Name, Host: host, Port: port})
	}
	return eps
}

// hasControllerListener reports whether cfg names a controller listener.
func hasControllerListener(cfg config.Broker) bool {
	for _, l := range cfg.Listeners {
		if l.Controller {
			return true
		}
	}
	return false
}

// listenerAddr is the address listener name binds (cfg.Listeners).
func listenerAddr(cfg config.Broker, name string) string {
	for _, l := range cfg.Listeners {
		if l.Name == name {
			return l.Listen
		}
	}
	return ""
}
