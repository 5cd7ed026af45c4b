package config

import (
	"fmt"
	"sort"
	"strings"
)

// Security keys Strata cannot honour yet (TLS, SASL: issue 20). A broker
// configured for them must not start as a plaintext broker that clients
// and operators believe is protected, so such a configuration is a
// start-up error that names the key, never a warning.
var securityPrefixes = []string{"ssl.", "sasl.", "listener.name.", "security.", "ssl_", "principal.builder.class", "authorizer.class.name", "super.users"}

// checkSecurity refuses listeners whose security protocol is not
// PLAINTEXT (a scheme SSL, SASL_PLAINTEXT or SASL_SSL, or a listener name
// that listener.security.protocol.map maps to one) and any key of the
// TLS, SASL or authorization families, unless it says PLAINTEXT.
func checkSecurity(props map[string]string) error {
	protoMap := map[string]string{"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}
	if m, ok := props["listener.security.protocol.map"]; ok {
		for _, pair := range strings.Split(m, ",") {
			name, proto, ok := strings.Cut(strings.TrimSpace(pair), ":")
			if !ok {
				return fmt.Errorf("config: listener.security.protocol.map: %q is not NAME:PROTOCOL", pair)
			}
			protoMap[strings.ToUpper(strings.TrimSpace(name))] = strings.ToUpper(strings.TrimSpace(proto))
		}
	}
	for _, key := range []string{"listeners", "advertised.listeners"} {
		v, ok := props[key]
		if !ok {
			continue
		}
		for _, l := range strings.Split(v, ",") {
			l = strings.TrimSpace(l)
			name, _, found := strings.Cut(l, "://")
			if !found || l == "" {
				continue
			}
			proto, known := protoMap[strings.ToUpper(name)]
			if !known {
				return fmt.Errorf("config: %s: listener %q: no security protocol for %s (listener.security.protocol.map)", key, l, name)
			}
			if proto != "PLAINTEXT" {
				return fmt.Errorf("config: %s: listener %q uses %s, which this broker does not support yet (only PLAINTEXT); refusing to start rather than serve it in plaintext", key, l, proto)
			}
		}
	}
	var names []string
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k == "listener.security.protocol.map" {
			continue
		}
		for _, p := range securityPrefixes {
			if !strings.HasPrefix(k, p) {
				continue
			}
			if strings.EqualFold(strings.TrimSpace(props[k]), "PLAINTEXT") {
				break // security.inter.broker.protocol=PLAINTEXT says what happens anyway
			}
			return fmt.Errorf("config: %s: TLS, SASL and authorization settings are not supported yet; refusing to start rather than ignore it", k)
		}
	}
	return nil
}
