package controller

import (
	"bytes"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AlterBrokerConfigs sets, deletes and replaces the configs of the
// cluster-wide default and of one broker; malformed commands are refused
// and change nothing; the State's snapshot and Clone carry them; truncated
// encodings do not decode.
func TestAlterBrokerConfigs(t *testing.T) {
	s := NewState()
	secApply(t, s, AlterBrokerConfigs{Broker: DefaultBrokerConfigs, Set: map[string]string{"log.retention.ms": "1000", "max.connections": "5"}}, 0)
	secApply(t, s, AlterBrokerConfigs{Broker: 2, Set: map[string]string{"log.retention.ms": "2000"}}, 0)
	secApply(t, s, AlterBrokerConfigs{Broker: DefaultBrokerConfigs, Set: map[string]string{"log.cleanup.policy": "compact"}, Delete: []string{"max.connections"}}, 0)
	if got := s.BrokerConfigs(DefaultBrokerConfigs); !maps.Equal(got, map[string]string{"log.retention.ms": "1000", "log.cleanup.policy": "compact"}) {
		t.Fatalf("default configs %v", got)
	}
	if got := s.BrokerConfigs(2); !maps.Equal(got, map[string]string{"log.retention.ms": "2000"}) {
		t.Fatalf("broker 2 configs %v", got)
	}
	if s.BrokerConfigs(1) != nil {
		t.Fatal("broker 1 has configs")
	}
	secApply(t, s, AlterBrokerConfigs{Broker: -2, Set: map[string]string{"a": "1"}}, kerr.InvalidRequest.Code)
	secApply(t, s, AlterBrokerConfigs{Broker: 2, Set: map[string]string{"a": "1"}, Delete: []string{"a"}}, kerr.InvalidRequest.Code)
	secApply(t, s, AlterBrokerConfigs{Broker: 2, Set: map[string]string{"": "1"}}, kerr.InvalidConfig.Code)

	enc := s.AppendTo(nil)
	d, err := DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.AppendTo(nil), enc) || !maps.Equal(d.BrokerConfigs(2), s.BrokerConfigs(2)) {
		t.Fatal("snapshot does not restore the broker configs")
	}
	c := s.Clone()
	secApply(t, s, AlterBrokerConfigs{Broker: 2, Replace: true, Set: map[string]string{"max.connections": "9"}}, 0)
	if got := s.BrokerConfigs(2); !maps.Equal(got, map[string]string{"max.connections": "9"}) {
		t.Fatalf("replaced: %v", got)
	}
	if got := c.BrokerConfigs(2); got["log.retention.ms"] != "2000" {
		t.Fatalf("the clone changed with the original: %v", got)
	}
	// Deleting the last key removes the entity.
	secApply(t, s, AlterBrokerConfigs{Broker: 2, Delete: []string{"max.connections"}}, 0)
	if s.BrokerConfigs(2) != nil {
		t.Fatal("empty entity kept")
	}
	if d, err := DecodeState(s.AppendTo(nil)); err != nil || d.BrokerConfigs(2) != nil {
		t.Fatalf("after deletion: %v", err)
	}
	b := EncodeCommand(AlterBrokerConfigs{Broker: 3, Set: map[string]string{"k": "v"}, Delete: []string{"x"}})
	for n := 2; n < len(b); n++ {
		if _, err := DecodeCommand(b[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes decoded", n, len(b))
		}
	}
	if TypeAlterBrokerConfigs.String() != "AlterBrokerConfigs" {
		t.Fatal(TypeAlterBrokerConfigs.String())
	}
}

// Through Raft: proposed on a follower, applied on every node.
func TestAlterBrokerConfigsThroughRaft(t *testing.T) {
	c := newCluster(t, 3)
	r := mustPropose(t, c.follower(), AlterBrokerConfigs{Broker: DefaultBrokerConfigs, Set: map[string]string{"log.retention.ms": "1000"}})
	st, err := DecodeState(c.converged(r.Offset))
	if err != nil {
		t.Fatal(err)
	}
	if st.BrokerConfigs(DefaultBrokerConfigs)["log.retention.ms"] != "1000" {
		t.Fatalf("converged state: %v", st.BrokerConfigs(DefaultBrokerConfigs))
	}
}
