package config

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/stratalog/strata/internal/configkeys"
)

// Listeners and their security (issue 20). Kafka's keys, with Kafka's
// meaning:
//
//	listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093
//	listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SSL
//	advertised.listeners=SSL://broker1.example.com:9093
//	inter.broker.listener.name=INTERNAL     (or security.inter.broker.protocol=SSL)
//	ssl.keystore.location=/etc/strata/broker.pem
//	listener.name.external.ssl.client.auth=required
//
// A listener's name is its scheme, upper-cased; its security protocol is
// the name's entry in listener.security.protocol.map (Kafka's default map
// names each protocol after itself). PLAINTEXT, SSL, SASL_PLAINTEXT and
// SASL_SSL are served (sasl.go: PLAIN and SCRAM); every key Strata cannot
// honour (other sasl.* keys, authorizer classes other than Kafka's
// StandardAuthorizer, principal builder classes, JKS
// or PKCS12 stores, Java provider settings) is a start-up error that names
// the listener or the key: never a broker that is less protected than its
// configuration says.
//
// Apply may run several times (the file, then each flag); it only records
// the raw values (securityProps). Finish resolves them into
// Broker.Listeners, once.

// Protocols.
const (
	ProtocolPlaintext = "PLAINTEXT"
	ProtocolSSL       = "SSL"
)

// Listener is one entry of listeners, resolved.
type Listener struct {
	Name           string // the listener name, upper-cased (PLAINTEXT, SSL, INTERNAL)
	Protocol       string // ProtocolPlaintext or ProtocolSSL
	Listen         string // host:port to bind
	AdvertisedHost string // what Metadata gives clients connected to this listener
	AdvertisedPort int32
	SSL            *SSL  // the listener's ssl.* settings; nil unless Protocol is SSL or SASL_SSL
	SASL           *SASL // the listener's SASL settings (sasl.go); nil unless Protocol is SASL_*
	// listener.name.<listener>.max.connections and
	// .max.connection.creation.rate; 2147483647 (unlimited) when not set.
	MaxConnections, MaxConnectionCreationRate int
	// Controller: the listener is named in controller.listener.names
	// (KIP-919): it serves controller clients only, never brokers' (never
	// the inter-broker listener); PLAINTEXT unless
	// listener.security.protocol.map says otherwise, as in Kafka.
	Controller bool
}

// Advertised returns the advertised host:port.
func (l *Listener) Advertised() string {
	return net.JoinHostPort(l.AdvertisedHost, strconv.Itoa(int(l.AdvertisedPort)))
}

// securityProps are the raw security keys seen by Apply, resolved by
// Finish.
type securityProps struct {
	listeners   string // listeners, as given
	advertised  string // advertised.listeners, as given
	protoMap    string // listener.security.protocol.map
	interName   string // inter.broker.listener.name
	interProto  string // security.inter.broker.protocol
	ctlNames    string // controller.listener.names
	ssl         map[string]string
	perListener map[string]string // listener.name.<name>.<key> → value
	sasl        map[string]string // SASL keys by their full name (sasl.go)
}

// refusedPrefixes are key families Strata cannot honour yet: a start-up
// error naming the key.
var refusedPrefixes = []struct{ prefix, why string }{
	{"principal.builder.class", "a custom principal builder cannot be loaded; the SSL principal is the certificate subject (ssl.principal.mapping.rules)"},
	{"ssl_", "not a key (did you mean ssl.?)"},
}

// sslJavaDefaults are Java-only ssl.* keys: accepted at Kafka's default
// (a copied server.properties still starts), refused otherwise.
var sslJavaDefaults = map[string]string{
	"ssl.keymanager.algorithm":         "SunX509",
	"ssl.trustmanager.algorithm":       "PKIX",
	"ssl.secure.random.implementation": "",
	"ssl.provider":                     "",
	"ssl.engine.factory.class":         "",
}

// securityKey records key=value if it is a security key and reports
// whether it was; an error names a key Strata refuses.
func (b *Broker) securityKey(key, value string) (bool, error) {
	for _, r := range refusedPrefixes {
		if strings.HasPrefix(key, r.prefix) {
			return true, fmt.Errorf("config: %s: %s; refusing to start rather than ignore it", key, r.why)
		}
	}
	if handled, err := b.saslKey(key, value); handled || err != nil {
		return true, err
	}
	if rest, ok := strings.CutPrefix(key, "listener.name."); ok {
		name, sub, ok := strings.Cut(rest, ".")
		if !ok || name == "" {
			return true, fmt.Errorf("config: %s: expected listener.name.<listener>.<key>", key)
		}
		if listenerLimitKeys[sub] {
			if _, _, _, err := configkeys.ParseBroker(sub, value); err != nil {
				return true, fmt.Errorf("config: %s: %w", key, err)
			}
		} else if !strings.HasPrefix(sub, "ssl.") {
			return true, fmt.Errorf("config: %s: only ssl.*, SASL keys, max.connections and max.connection.creation.rate can be set per listener; refusing to start rather than ignore it", key)
		} else if err := checkSSLKey(key, sub, value); err != nil {
			return true, err
		}
		if b.sec.perListener == nil {
			b.sec.perListener = map[string]string{}
		}
		b.sec.perListener[strings.ToUpper(name)+"\x00"+sub] = value
		return true, nil
	}
	if strings.HasPrefix(key, "ssl.") {
		if err := checkSSLKey(key, key, value); err != nil {
			return true, err
		}
		return false, nil // a table key: Apply parses it and its setter records it
	}
	if strings.HasPrefix(key, "security.") && key != "security.inter.broker.protocol" {
		return true, fmt.Errorf("config: %s: not a broker key Strata knows (security.inter.broker.protocol is); refusing to start rather than ignore it", key)
	}
	return false, nil
}

// checkSSLKey checks one ssl.* key (named name in the file, sub without
// a listener prefix): it must be a table key, and the Java-only ones must
// hold Kafka's default.
func checkSSLKey(name, sub, value string) error {
	if def, ok := sslJavaDefaults[sub]; ok {
		if strings.TrimSpace(value) != def {
			return fmt.Errorf("config: %s=%s: a Java security provider setting Strata cannot honour (TLS is Go's crypto/tls); remove it", name, value)
		}
		return nil
	}
	if _, ok := configkeys.BrokerKey(sub); !ok {
		return fmt.Errorf("config: %s: not an ssl key Strata knows; refusing to start rather than ignore it", name)
	}
	if _, _, _, err := configkeys.ParseBroker(sub, value); err != nil {
		if name != sub {
			return fmt.Errorf("config: %s: %w", name, err)
		}
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// securitySetters bind the security keys of the table to securityProps.
// They join fields (config.go) during package initialization: this
// initializer reads fields, so it runs after fields is built and before
// any init function checks it.
var _ = func() bool {
	set := func(f func(s *securityProps, v string)) setter {
		return func(b *Broker, v configkeys.Value) { f(&b.sec, v.Text) }
	}
	fields["listener.security.protocol.map"] = set(func(s *securityProps, v string) { s.protoMap = v })
	fields["inter.broker.listener.name"] = set(func(s *securityProps, v string) { s.interName = v })
	fields["security.inter.broker.protocol"] = set(func(s *securityProps, v string) { s.interProto = v })
	fields["controller.listener.names"] = set(func(s *securityProps, v string) { s.ctlNames = v })
	for _, k := range configkeys.All() {
		if strings.HasPrefix(k.Broker, "ssl.") {
			name := k.Broker
			fields[name] = set(func(s *securityProps, v string) {
				if s.ssl == nil {
					s.ssl = map[string]string{}
				}
				s.ssl[name] = v
			})
		}
	}
	return true
}()

// defaultProtocolMap is Kafka's listener.security.protocol.map default.
const defaultProtocolMap = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

// parseProtocolMap parses listener.security.protocol.map.
func parseProtocolMap(v string) (map[string]string, error) {
	if strings.TrimSpace(v) == "" {
		v = defaultProtocolMap
	}
	out := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		name, proto, ok := strings.Cut(strings.TrimSpace(pair), ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("config: listener.security.protocol.map: %q is not NAME:PROTOCOL", pair)
		}
		switch proto {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
		default:
			return nil, fmt.Errorf("config: listener.security.protocol.map: %s: unknown security protocol %q (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", name, proto)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("config: listener.security.protocol.map: listener %s mapped twice", name)
		}
		out[name] = proto
	}
	return out, nil
}

// listenerEntry is one NAME://host:port of listeners or advertised.listeners.
type listenerEntry struct {
	name, host, port string
}

// parseListeners splits a listeners value. A bare host:port (the
// --listen flag) is a PLAINTEXT listener.
func parseListeners(key, v string) ([]listenerEntry, error) {
	var out []listenerEntry
	for _, l := range strings.Split(v, ",") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		name, addr, found := strings.Cut(l, "://")
		if !found {
			name, addr = ProtocolPlaintext, l
		}
		name = strings.ToUpper(name)
		host, port, err := net.SplitHostPort(addr)
		if err != nil || name == "" {
			return nil, fmt.Errorf("config: %s: %q is not NAME://host:port", key, l)
		}
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || (p == 0 && key == "advertised.listeners") {
			return nil, fmt.Errorf("config: %s: %q: bad port", key, l)
		}
		for _, e := range out {
			if e.name == name {
				return nil, fmt.Errorf("config: %s: listener name %s appears twice", key, name)
			}
		}
		out = append(out, listenerEntry{name, host, port})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("config: %s: no listener", key)
	}
	return out, nil
}

// finishListeners resolves listeners, their protocols, advertised
// addresses and ssl.* settings, and the inter-broker listener. Listen,
// AdvertisedHost and AdvertisedPort become the inter-broker listener's
// (what the broker registers with the controller).
func (b *Broker) finishListeners() error {
	protos, err := parseProtocolMap(b.sec.protoMap)
	if err != nil {
		return err
	}
	text := b.sec.listeners
	if text == "" {
		text = b.Listen
	}
	entries, err := parseListeners("listeners", text)
	if err != nil {
		return err
	}
	var adv []listenerEntry
	if b.sec.advertised != "" {
		if adv, err = parseListeners("advertised.listeners", b.sec.advertised); err != nil {
			return err
		}
	} else if b.AdvertisedHost != "" && len(entries) == 1 {
		// Set by a caller without advertised.listeners (tests, embedders).
		adv = []listenerEntry{{entries[0].name, b.AdvertisedHost, strconv.Itoa(int(b.AdvertisedPort))}}
	}
	b.Listeners = b.Listeners[:0]
	ctlNames := map[string]bool{}
	for _, n := range strings.Split(b.sec.ctlNames, ",") {
		if n = strings.ToUpper(strings.TrimSpace(n)); n != "" {
			ctlNames[n] = true
		}
	}
	for _, e := range entries {
		proto, ok := protos[e.name]
		if !ok && ctlNames[e.name] {
			proto, ok = ProtocolPlaintext, true // Kafka's default for a controller listener
		}
		if !ok {
			return fmt.Errorf("config: listeners: listener %s has no security protocol (add %s:PROTOCOL to listener.security.protocol.map)", e.name, e.name)
		}
		switch proto {
		case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		default:
			return fmt.Errorf("config: listeners: listener %s uses %s, which this broker does not support", e.name, proto)
		}
		l := Listener{Name: e.name, Protocol: proto, Listen: net.JoinHostPort(e.host, e.port), Controller: ctlNames[e.name]}
		l.AdvertisedHost = e.host
		if ip := net.ParseIP(e.host); e.host == "" || (ip != nil && ip.IsUnspecified()) {
			l.AdvertisedHost = "127.0.0.1"
		}
		p, _ := strconv.ParseUint(e.port, 10, 16)
		l.AdvertisedPort = int32(p)
		if proto == ProtocolSSL || proto == ProtocolSASLSSL {
			ssl, err := b.sslFor(e.name)
			if err != nil {
				return err
			}
			l.SSL = ssl
		}
		if sc := b.keepSASL[e.name]; sc != nil && IsSASL(proto) {
			l.SASL = sc // WithDynamic: SASL keys are not dynamic (no key set fetched again)
		} else if IsSASL(proto) {
			sc, err := b.saslFor(e.name)
			if err != nil {
				return err
			}
			l.SASL = sc
		}
		b.Listeners = append(b.Listeners, l)
	}
	for _, a := range adv {
		i := slices.IndexFunc(b.Listeners, func(l Listener) bool { return l.Name == a.name })
		if i < 0 {
			return fmt.Errorf("config: advertised.listeners: listener %s is not in listeners", a.name)
		}
		p, _ := strconv.ParseUint(a.port, 10, 16)
		if a.host == "" || a.host == "0.0.0.0" || a.host == "::" {
			return fmt.Errorf("config: advertised.listeners: listener %s: %q is not an address clients can connect to", a.name, a.host)
		}
		b.Listeners[i].AdvertisedHost, b.Listeners[i].AdvertisedPort = a.host, int32(p)
	}
	for i := range b.Listeners {
		b.Listeners[i].MaxConnections = b.listenerLimit(b.Listeners[i].Name, "max.connections")
		b.Listeners[i].MaxConnectionCreationRate = b.listenerLimit(b.Listeners[i].Name, "max.connection.creation.rate")
	}
	for k := range b.sec.perListener {
		name, sub, _ := strings.Cut(k, "\x00")
		i := slices.IndexFunc(b.Listeners, func(l Listener) bool { return l.Name == name })
		if listenerLimitKeys[sub] {
			if i < 0 {
				return fmt.Errorf("config: listener.name.%s.%s: %s is not a listener in listeners", strings.ToLower(name), sub, name)
			}
			continue
		}
		if i < 0 || b.Listeners[i].SSL == nil {
			return fmt.Errorf("config: listener.name.%s.ssl.*: %s is not an SSL or SASL_SSL listener in listeners", strings.ToLower(name), name)
		}
	}
	if b.sec.interName != "" && b.sec.interProto != "" {
		return fmt.Errorf("config: inter.broker.listener.name and security.inter.broker.protocol are both set; set only one (as Kafka requires)")
	}
	inter := strings.ToUpper(b.sec.interName)
	key := "inter.broker.listener.name"
	if inter == "" && b.sec.interProto != "" {
		inter, key = strings.ToUpper(b.sec.interProto), "security.inter.broker.protocol"
		if _, err := parseProtocolMap(inter + ":" + inter); err != nil {
			return fmt.Errorf("config: security.inter.broker.protocol=%s: not a security protocol", b.sec.interProto)
		}
	}
	// The brokers' listeners: a controller listener is never the
	// inter-broker one (a controller-only node's listeners may all be
	// controller listeners: then the first stands for it, whose
	// security the quorum port's follows).
	var brokerLns []Listener
	for _, l := range b.Listeners {
		if !l.Controller {
			brokerLns = append(brokerLns, l)
		}
	}
	switch {
	case inter != "":
		if !slices.ContainsFunc(b.Listeners, func(l Listener) bool { return l.Name == inter }) {
			return fmt.Errorf("config: %s: listener %s is not in listeners", key, inter)
		}
		if ctlNames[inter] {
			return fmt.Errorf("config: %s: listener %s is a controller listener (controller.listener.names)", key, inter)
		}
	case slices.ContainsFunc(brokerLns, func(l Listener) bool { return l.Name == ProtocolPlaintext }):
		inter = ProtocolPlaintext // Kafka's default, security.inter.broker.protocol=PLAINTEXT
	case len(brokerLns) == 0:
		inter = b.Listeners[0].Name
	default:
		// Kafka would refuse to start; one listener is the only choice.
		if len(brokerLns) > 1 {
			return fmt.Errorf("config: inter.broker.listener.name: no PLAINTEXT listener, so name the listener brokers use among %s", listenerNames(brokerLns))
		}
		inter = brokerLns[0].Name
	}
	b.InterBrokerListener = inter
	if err := b.finishSASL(); err != nil { // sasl.go
		return err
	}
	l := b.InterBroker()
	b.Listen, b.AdvertisedHost, b.AdvertisedPort = l.Listen, l.AdvertisedHost, l.AdvertisedPort
	return nil
}

func listenerNames(ls []Listener) string {
	var names []string
	for _, l := range ls {
		names = append(names, l.Name)
	}
	return strings.Join(names, ", ")
}

// InterBroker returns the inter-broker listener (after Finish).
func (b *Broker) InterBroker() *Listener {
	for i := range b.Listeners {
		if b.Listeners[i].Name == b.InterBrokerListener {
			return &b.Listeners[i]
		}
	}
	return nil
}

// listenerLimitKeys are the connection limits a listener may set for
// itself (listener.name.<listener>.<key>, KIP-402 and KIP-612).
var listenerLimitKeys = map[string]bool{"max.connections": true, "max.connection.creation.rate": true}

// listenerLimit is listener name's value of a listenerLimitKeys key;
// 2147483647 (unlimited, Kafka's default) when not set.
func (b *Broker) listenerLimit(name, key string) int {
	v, ok := b.sec.perListener[name+"\x00"+key]
	if !ok {
		return math.MaxInt32
	}
	_, _, val, _ := configkeys.ParseBroker(key, v) // checked by securityKey
	return int(val.Int)
}

// sslFor resolves the ssl.* settings of listener name: each key's
// listener.name.<name>. override, else the global key, else the default.
func (b *Broker) sslFor(name string) (*SSL, error) {
	get := func(key string) (value, from string) {
		if v, ok := b.sec.perListener[name+"\x00"+key]; ok {
			_, _, val, _ := configkeys.ParseBroker(key, v) // checked by securityKey
			return val.Text, "listener.name." + strings.ToLower(name) + "." + key
		}
		if v, ok := b.sec.ssl[key]; ok {
			return v, key
		}
		return sslDefaults[key], key
	}
	return newSSL(name, get)
}

// sslDefaults are the Kafka defaults of ssl.* keys that are not empty and
// that the table does not give (a table default would show every ssl key
// as set on a broker without SSL).
var sslDefaults = map[string]string{
	"ssl.endpoint.identification.algorithm": "https",
}
