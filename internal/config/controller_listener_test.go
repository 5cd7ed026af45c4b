package config

import (
	"strings"
	"testing"
)

// TestControllerListenerNames: a listener named in controller.listener.names
// is a controller listener, PLAINTEXT without a map entry, never the
// inter-broker listener; a controller-only node's lone controller
// listener stands for it; naming it inter.broker.listener.name is refused.
func TestControllerListenerNames(t *testing.T) {
	b, err := finish(map[string]string{
		"listeners":                      "INTERNAL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"listener.security.protocol.map": "INTERNAL:PLAINTEXT",
		"controller.listener.names":      "controller",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Listeners) != 2 || b.Listeners[0].Controller || !b.Listeners[1].Controller || b.Listeners[1].Protocol != "PLAINTEXT" ||
		b.InterBrokerListener != "INTERNAL" || b.Listen != "127.0.0.1:9092" {
		t.Fatalf("%+v inter %s", b.Listeners, b.InterBrokerListener)
	}
	b, err = finish(map[string]string{"listeners": "CONTROLLER://127.0.0.1:9093", "controller.listener.names": "CONTROLLER"})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Listeners) != 1 || !b.Listeners[0].Controller || b.InterBrokerListener != "CONTROLLER" {
		t.Fatalf("controller only: %+v inter %s", b.Listeners, b.InterBrokerListener)
	}
	_, err = finish(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "CONTROLLER"})
	if err == nil || !strings.Contains(err.Error(), "controller listener") {
		t.Fatalf("inter-broker controller listener: %v", err)
	}
}
