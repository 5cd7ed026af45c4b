package main

import (
	"fmt"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/netpoll"
)

// dynamicReconfigure is server.Config.Reconfigure for a broker started
// with cfg: the dynamic broker configs in force are applied over cfg as
// the properties file's keys are (config.Broker.WithDynamic, so a bad
// value is refused with the same message), and give the connection
// limits the server puts in force and, for each SSL listener whose
// ssl.keystore.location or ssl.truststore.location they change, the new
// stores: loaded first (a check refuses stores that do not load), then
// used by new handshakes and inter-broker dials, and the log cleaner's
// I/O rate and backoff and the free-space floor, set on eng (nil: none). cfg's listeners are the
// ones being served (their SSL settings are changed in place).
func dynamicReconfigure(cfg config.Broker, eng *engine.Engine) func(dyn map[string]string, apply bool) (*netpoll.ConnLimits, error) {
	return func(dyn map[string]string, apply bool) (*netpoll.ConnLimits, error) {
		next, err := cfg.WithDynamic(dyn)
		if err != nil {
			return nil, err
		}
		limits, err := connLimits(next) // serve_listeners.go
		if err != nil {
			return nil, err
		}
		type stores struct {
			live               *config.SSL
			keystore, trustore string
		}
		var changed []stores
		for _, l := range next.Listeners {
			var live *config.SSL
			for _, cur := range cfg.Listeners {
				if cur.Name == l.Name {
					live = cur.SSL
				}
			}
			if l.SSL == nil || live == nil {
				continue
			}
			ks, ts := l.SSL.Locations()
			if cks, cts := live.Locations(); ks == cks && ts == cts {
				continue
			}
			if err := l.SSL.CheckStores(); err != nil {
				return nil, err
			}
			changed = append(changed, stores{live, ks, ts})
		}
		if !apply {
			return nil, nil
		}
		for _, c := range changed {
			if err := c.live.SetStores(c.keystore, c.trustore); err != nil {
				return nil, fmt.Errorf("listener %s: %w", c.live.Listener, err)
			}
		}
		if eng != nil {
			eng.SetCleanerThrottle(next.Cleaner.IOMaxBytesPerSecond, next.Cleaner.Backoff)
			eng.SetMinFreeSpace(next.MinFreeBytes, next.MinFreePercent)
		}
		return limits, nil
	}
}
