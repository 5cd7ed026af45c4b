package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stratalog/strata/internal/configkeys"
)

// metrics.listeners: off by default; http://host:port items (the scheme
// may be left out) become host:port; anything else is refused with the
// key's name and changes nothing.
func TestMetricsListeners(t *testing.T) {
	if d := Defaults(); d.MetricsListeners != nil {
		t.Fatalf("default metrics listeners %q, want none", d.MetricsListeners)
	}
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" ", nil},
		{"http://127.0.0.1:9644", []string{"127.0.0.1:9644"}},
		{"HTTP://0.0.0.0:9644, :9645", []string{"0.0.0.0:9644", ":9645"}},
		{"http://[::1]:9644", []string{"[::1]:9644"}},
	} {
		b := Defaults()
		if err := b.Apply(map[string]string{"metrics.listeners": c.in}); err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if !slices.Equal(b.MetricsListeners, c.want) {
			t.Errorf("%q: %q, want %q", c.in, b.MetricsListeners, c.want)
		}
	}
	for _, bad := range []string{"https://127.0.0.1:9644", "127.0.0.1", "http://h:99999", "http://h:x", "http://a:1,b"} {
		b := Defaults()
		b.MetricsListeners = []string{"kept:1"}
		err := b.Apply(map[string]string{"metrics.listeners": bad})
		if !errors.Is(err, configkeys.ErrInvalid) || !strings.Contains(err.Error(), "metrics.listeners") {
			t.Errorf("%q: %v, want an invalid-value error naming the key", bad, err)
		}
		if !slices.Equal(b.MetricsListeners, []string{"kept:1"}) {
			t.Errorf("%q: a refused value changed the listeners to %q", bad, b.MetricsListeners)
		}
	}
	k, ok := configkeys.BrokerKey("metrics.listeners")
	if !ok || k.Flag != "metrics-listeners" || k.Dynamic != 0 || !k.Strata {
		t.Fatalf("key %+v", k)
	}
}

// metrics.partition.labels: off by default, a boolean.
func TestMetricsPartitionLabels(t *testing.T) {
	if Defaults().MetricsPartitionLabels {
		t.Fatal("partition labels on by default")
	}
	b := Defaults()
	if err := b.Apply(map[string]string{"metrics.partition.labels": "true"}); err != nil || !b.MetricsPartitionLabels {
		t.Fatalf("true: %v %v", err, b.MetricsPartitionLabels)
	}
	if err := b.Apply(map[string]string{"metrics.partition.labels": "yes"}); !errors.Is(err, configkeys.ErrInvalid) || !b.MetricsPartitionLabels {
		t.Fatalf("yes: %v, labels %v", err, b.MetricsPartitionLabels)
	}
	if k, ok := configkeys.BrokerKey("metrics.partition.labels"); !ok || k.Dynamic != 0 || !k.Strata {
		t.Fatalf("key %+v %v", k, ok)
	}
}
