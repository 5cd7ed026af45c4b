package config

import (
	"maps"
	"slices"

	"github.com/stratalog/strata/internal/configkeys"
)

// WithDynamic returns the configuration b (as Finish left it) with the
// dynamic broker configs dyn applied over it (broker names or
// per-listener names to values, the ones in force: a broker's over the
// cluster-wide default) and resolved again: Apply then Finish, so the
// dynamic values are checked exactly as the properties file's are and win
// over them. b is not changed. The caller checks which keys may be
// changed at runtime (configkeys.CheckBrokerAlter).
func (b *Broker) WithDynamic(dyn map[string]string) (Broker, error) {
	next := *b
	next.TopicDefaults = maps.Clone(b.TopicDefaults)
	next.Static = maps.Clone(b.Static)
	next.Unknown = slices.Clone(b.Unknown)
	next.MaxConnectionsPerIPOvr = maps.Clone(b.MaxConnectionsPerIPOvr)
	next.sec.ssl = maps.Clone(b.sec.ssl)
	next.sec.perListener = maps.Clone(b.sec.perListener)
	next.sec.sasl = maps.Clone(b.sec.sasl)
	next.Listeners = nil // Finish rebuilds them (never in b's array)
	next.keepSASL = map[string]*SASL{}
	for _, l := range b.Listeners {
		if l.SASL != nil {
			next.keepSASL[l.Name] = l.SASL
		}
	}
	if err := next.Apply(dyn); err != nil {
		return Broker{}, err
	}
	if next.sec.listeners != "" {
		// Finish left Listen at the inter-broker listener's address; the
		// listeners key is what it resolves again.
		next.Listen, _ = configkeys.FirstListener(next.sec.listeners)
	}
	if err := next.Finish(); err != nil {
		return Broker{}, err
	}
	next.keepSASL = nil
	return next, nil
}
