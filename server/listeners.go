package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/stratalog/strata/internal/sasl"
	"github.com/stratalog/strata/netpoll"
)

// Listeners (issue 20). A broker serves one or more named listeners
// (Kafka's listeners key: PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093),
// each with its own advertised address and, for SSL, its TLS
// configuration. Metadata, FindCoordinator and DescribeCluster answer a
// client with the advertised address of the listener it connected to, as
// Kafka does. The inter-broker listener's address is the one the broker
// registers with the controller (what followers fetch from and markers are
// sent to), and Advertised reports it.
//
// In cluster mode a broker registers every listener's advertised endpoint
// (ClusterConfig.Endpoints, Kafka's BrokerRegistration listeners), and a
// client is told each broker's address on the listener it connected to; a
// broker without that listener is left out of the brokers it is told of,
// and a partition it leads answers LISTENER_NOT_FOUND (Metadata v6+,
// LEADER_NOT_AVAILABLE before), as Kafka does.

// Listener is one of the broker's listeners.
type Listener struct {
	Name           string // PLAINTEXT, SSL, INTERNAL...
	AdvertisedHost string // "": the listener's address (a wildcard becomes the hostname)
	AdvertisedPort int32  // 0: the listener's port
	// Protocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, for DescribeConfigs.
	Protocol string
	// SASL makes it a SASL listener (SASL_PLAINTEXT, or SASL_SSL with TLS):
	// a connection authenticates with one of its mechanisms before any
	// request but ApiVersions is served (17_sasl_handshake.go).
	SASL *sasl.Config
	// TLS makes it an SSL listener (nil: PLAINTEXT).
	TLS *tls.Config
	// Principal maps a verified client certificate to the connection's
	// principal (nil: "User:" and the subject).
	Principal func(*x509.Certificate) (string, error)
	// InterBroker marks the listener other brokers reach this one on: its
	// address is registered with the controller and used for transaction
	// markers to this broker.
	InterBroker bool
	// Controller makes it a controller listener (controller.listener.names,
	// KIP-919): it serves controller clients only (controller_listener.go).
	Controller bool
}

// listenerSet holds the advertised endpoint of every listener served.
type listenerSet struct {
	mu     sync.Mutex
	byName map[string]*listenerEntry
}

type listenerEntry struct {
	ep       endpoint
	protocol string
}

// ServeListener accepts connections on ln for listener l until Close, as
// Serve does for the broker's only listener.
func (s *Server) ServeListener(ln net.Listener, l Listener) error {
	if l.Name == "" {
		return errors.New("server: a listener needs a name")
	}
	var ep endpoint
	ep.host, ep.port = AdvertisedEndpoint(l.AdvertisedHost, l.AdvertisedPort, ln.Addr())
	proto := l.Protocol
	if proto == "" {
		switch {
		case l.TLS != nil && l.SASL != nil:
			proto = "SASL_SSL"
		case l.SASL != nil:
			proto = "SASL_PLAINTEXT"
		case l.TLS != nil:
			proto = "SSL"
		default:
			proto = "PLAINTEXT"
		}
	}
	ls := &s.cluster.listeners
	ls.mu.Lock()
	if ls.byName == nil {
		ls.byName = map[string]*listenerEntry{}
	}
	if _, dup := ls.byName[l.Name]; dup {
		ls.mu.Unlock()
		return errors.New("server: listener " + l.Name + " served twice")
	}
	ls.byName[l.Name] = &listenerEntry{ep: ep, protocol: proto}
	ls.mu.Unlock()
	if l.Controller {
		s.noteControllerListener(l.Name)
	}
	if l.InterBroker && !s.cfg.ControllerOnly {
		s.advertised.Store(&ep)
		s.noteListener(ln) // txn_coord.go: the transaction host dials its own broker here
	}
	nl := netpoll.Listener{Name: l.Name, TLS: l.TLS, Principal: l.Principal}
	if l.SASL != nil {
		nl.Context = l.SASL
		nl.UnauthenticatedMaxFrameBytes = sasl.MaxTokenBytes
	}
	return s.np.ServeListener(s.meterListener(ln, l.Name), nl) // metrics.go: counts accepted connections
}

// AdvertisedEndpoint is what a listener bound to bound advertises when
// configured with host and port: each of them, or the bound address's
// where it is empty or 0 (a wildcard address becomes the host name).
func AdvertisedEndpoint(host string, port int32, bound net.Addr) (string, int32) {
	if host == "" || port == 0 {
		h, p := listenerEndpoint(bound)
		if host == "" {
			host = h
		}
		if port == 0 {
			port = p
		}
	}
	return host, port
}

// connListener is what a connection tells of its listener (*netpoll.Conn).
type connListener interface{ Listener() string }

// listenerOf returns the name of the listener c arrived on; "" when it
// has none (a connection of Serve, or a test's peer).
func listenerOf(c peer) string {
	if cl, ok := c.(connListener); ok {
		return cl.Listener()
	}
	return ""
}

// advertisedFor returns the advertised address of the listener c arrived
// on; the inter-broker listener's (Advertised) when c's listener is not
// known (Serve, tests).
func (s *Server) advertisedFor(c peer) (string, int32) {
	if cl, ok := c.(connListener); ok {
		if name := cl.Listener(); name != "" {
			ls := &s.cluster.listeners
			ls.mu.Lock()
			e := ls.byName[name]
			ls.mu.Unlock()
			if e != nil {
				return e.ep.host, e.ep.port
			}
		}
	}
	return s.Advertised()
}

// advertisedListeners renders advertised.listeners as DescribeConfigs
// reports it: NAME://host:port for every listener served, by name (the
// listeners start serving concurrently).
func (s *Server) advertisedListeners() string {
	ls := &s.cluster.listeners
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.byName) == 0 {
		host, port := s.Advertised()
		return "PLAINTEXT://" + net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	var parts []string
	names := slices.Sorted(maps.Keys(ls.byName))
	for _, name := range names {
		e := ls.byName[name]
		parts = append(parts, name+"://"+net.JoinHostPort(e.ep.host, strconv.Itoa(int(e.ep.port))))
	}
	return strings.Join(parts, ",")
}
