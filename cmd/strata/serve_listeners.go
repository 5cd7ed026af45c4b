package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"github.com/stratalog/strata/internal/config"
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
func serverListeners(cfg config.Broker, logger *slog.Logger) []server.Listener {
	var out []server.Listener
	for _, l := range cfg.Listeners {
		sl := server.Listener{
			Name: l.Name, Protocol: l.Protocol,
			AdvertisedHost: l.AdvertisedHost, AdvertisedPort: l.AdvertisedPort,
			InterBroker: l.Name == cfg.InterBrokerListener,
		}
		if l.SSL != nil {
			sl.TLS = l.SSL.ServerTLS(logger)
			sl.Principal = l.SSL.Principal
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
func interBrokerDial(cfg config.Broker, logger *slog.Logger) func(ctx context.Context, addr string) (net.Conn, error) {
	l := cfg.InterBroker()
	if l == nil || l.SSL == nil {
		return nil
	}
	clientTLS := l.SSL.ClientTLS(logger)
	nd := &net.Dialer{Timeout: interBrokerDialTimeout}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		d := &tls.Dialer{NetDialer: nd, Config: clientTLS(host)}
		return d.DialContext(ctx, "tcp", addr)
	}
}
