package main

import (
	"strings"
	"testing"

	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/internal/tlstest"
)

// strata serve's Reconfigure: dynamic connection limits come back as
// netpoll limits; a listener's keystore changed at runtime is checked,
// then put in force on the listener being served (apply only); a store
// that does not load or a bad value is refused naming the key.
func TestDynamicReconfigure(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	first, second := ca.Server(t, dir, "first"), ca.Server(t, dir, "second")
	cfg := config.Defaults()
	if err := cfg.Apply(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.location": first.Path,
		"max.connections": "100"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Finish(); err != nil {
		t.Fatal(err)
	}
	live := cfg.Listeners[1].SSL
	reconf := dynamicReconfigure(cfg)
	dyn := map[string]string{"max.connections": "5", "listener.name.ssl.max.connections": "2", "ssl.keystore.location": second.Path}
	if l, err := reconf(dyn, false); err != nil || l != nil {
		t.Fatalf("check: %v %v", l, err)
	}
	if ks, _ := live.Locations(); ks != first.Path {
		t.Fatal("a check changed the keystore")
	}
	l, err := reconf(dyn, true)
	if err != nil {
		t.Fatal(err)
	}
	if l.MaxConnections != 5 || l.Listeners["SSL"].MaxConnections != 2 {
		t.Fatalf("limits %+v", l)
	}
	if ks, _ := live.Locations(); ks != second.Path {
		t.Fatalf("keystore in force %s, want %s", ks, second.Path)
	}
	for k, v := range map[string]string{"ssl.keystore.location": ca.Path, "max.connections": "-5"} {
		if _, err := reconf(map[string]string{k: v}, false); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v, want an error naming the key", k, v, err)
		}
	}
	// Back to the properties file's keystore when the dynamic one goes.
	if _, err := reconf(map[string]string{}, true); err != nil {
		t.Fatal(err)
	}
	if ks, _ := live.Locations(); ks != first.Path {
		t.Fatalf("keystore after the dynamic one is deleted: %s", ks)
	}
}
