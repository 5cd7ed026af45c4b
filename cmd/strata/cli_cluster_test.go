package main

import (
	"bytes"
	"net"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Which partitions need attention, on metadata made up to have each ill.
func TestClusterHealth(t *testing.T) {
	rack := "r1"
	md := kadm.Metadata{Cluster: "c", Controller: 2,
		Brokers: kadm.BrokerDetails{{NodeID: 2, Host: "h2", Port: 9, Rack: &rack}, {NodeID: 1, Host: "h1", Port: 9}},
		Topics: kadm.TopicDetails{
			"ok": {Topic: "ok", Partitions: kadm.PartitionDetails{
				0: {Partition: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}}},
			"ill": {Topic: "ill", Partitions: kadm.PartitionDetails{
				0: {Partition: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}, // under-replicated and under min ISR 2
				1: {Partition: 1, Leader: -1, Replicas: []int32{1, 2}, ISR: []int32{}}, // offline too
				2: {Partition: 2, Leader: 2, Replicas: []int32{2}, ISR: []int32{2}}}},  // in sync, but one replica under min ISR 2
		}}
	out, problems := clusterHealth(md, map[string]int{"ill": 2, "ok": 2})
	if out.Topics != 2 || out.Partitions != 4 || len(out.Brokers) != 2 || out.Brokers[0].ID != 1 || *out.Brokers[1].Rack != "r1" {
		t.Errorf("counts and brokers: %+v", out)
	}
	parts := func(ps []problemJSON) (s []string) {
		for _, p := range ps {
			s = append(s, p.Topic+"/"+strconv.Itoa(int(p.Partition)))
		}
		return s
	}
	if got := parts(out.UnderReplicated); !reflect.DeepEqual(got, []string{"ill/0", "ill/1"}) {
		t.Errorf("under-replicated %v", got)
	}
	if got := parts(out.Offline); !reflect.DeepEqual(got, []string{"ill/1"}) {
		t.Errorf("offline %v", got)
	}
	if got := parts(out.UnderMinISR); !reflect.DeepEqual(got, []string{"ill/0", "ill/1", "ill/2"}) {
		t.Errorf("under min ISR %v", got)
	}
	if len(problems) != 6 {
		t.Errorf("%d problem rows: %+v", len(problems), problems)
	}
}

// The cluster verbs against a broker.
func TestClusterCommands(t *testing.T) {
	addr := startGroupsBroker(t)
	createTopic(t, addr, "c1", 2)
	cluster := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := clusterMainEnv(args, &out, &errb, brokerEnv(addr))
		return out.String() + errb.String(), err
	}
	_, port, _ := net.SplitHostPort(addr)
	out, err := cluster("describe")
	if err != nil || !strings.Contains(out, "controller 0, 1 brokers") || !strings.Contains(out, "Under-replicated: 0, under min ISR: 0, offline: 0") ||
		!regexpLine(out, `^0\s+127\.0\.0\.1\s+`+port+`\s+-\s+yes$`) {
		t.Errorf("describe: %v\n%s", err, out)
	}
	out, err = cluster("describe", "--format", "json")
	c := decodeJSON[clusterJSON](t, out)
	if err != nil || c.ClusterID != "groups-cli" || c.Controller != 0 || len(c.Brokers) != 1 || strconv.Itoa(int(c.Brokers[0].Port)) != port ||
		c.Partitions < 2 || len(c.UnderReplicated)+len(c.Offline)+len(c.UnderMinISR) != 0 {
		t.Errorf("describe --format json: %v\n%s", err, out)
	}

	out, err = cluster("describe-config", "--all", "--format", "json")
	cfg := decodeJSON[[]configJSON](t, out)
	found := false
	for _, k := range cfg {
		if k.Key == "auto.create.topics.enable" && k.Value != nil && *k.Value == "true" && k.Source == "DEFAULT_CONFIG" {
			found = true
		}
	}
	if err != nil || !found {
		t.Errorf("describe-config --all: %v\n%s", err, out)
	}
	out, err = cluster("describe-config", "--broker", "0")
	if err != nil || !strings.HasPrefix(out, "KEY") || strings.Contains(out, "DEFAULT_CONFIG") {
		t.Errorf("describe-config (defaults left out): %v\n%s", err, out)
	}
	if _, err := cluster("describe-config", "--broker", "7"); err == nil {
		t.Error("describe-config of a broker that does not exist succeeded")
	}
	// A key that is not dynamic: the broker's refusal, naming it, is the error.
	if _, err := cluster("alter-config", "--set", "num.partitions=3"); err == nil || !strings.Contains(err.Error(), "num.partitions") ||
		!strings.Contains(err.Error(), "cannot be updated dynamically") {
		t.Errorf("alter-config num.partitions: %v", err)
	}
	// A dynamic one: the cluster-wide default, then broker 0's own.
	out, err = cluster("alter-config", "--set", "log.retention.ms=3600000", "--set", "log.segment.bytes=2097152")
	if err != nil || !strings.Contains(out, "Altered the configuration of the cluster-wide broker default.") {
		t.Fatalf("alter-config: %v\n%s", err, out)
	}
	out, err = cluster("describe-config", "--default")
	if err != nil || !regexpLine(out, `^log\.retention\.ms\s+3600000\s+DYNAMIC_DEFAULT_BROKER_CONFIG$`) {
		t.Errorf("describe-config --default: %v\n%s", err, out)
	}
	if _, err := cluster("alter-config", "--broker", "0", "--set", "log.retention.ms=7200000"); err != nil {
		t.Fatal(err)
	}
	out, err = cluster("describe-config", "--broker", "0")
	if err != nil || !regexpLine(out, `^log\.retention\.ms\s+7200000\s+DYNAMIC_BROKER_CONFIG$`) ||
		!regexpLine(out, `^log\.segment\.bytes\s+2097152\s+DYNAMIC_DEFAULT_BROKER_CONFIG$`) {
		t.Errorf("describe-config after alter-config: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--broker", "0", "--delete", "log.retention.ms"}, {"--delete", "log.retention.ms", "--delete", "log.segment.bytes"}} {
		if _, err := cluster(append([]string{"alter-config"}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	out, err = cluster("describe-config", "--broker", "0")
	if err != nil || strings.Contains(out, "DYNAMIC") {
		t.Errorf("describe-config after --delete: %v\n%s", err, out)
	}
}

// regexpLine reports whether some line of s matches the pattern.
func regexpLine(s, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, l := range strings.Split(s, "\n") {
		if re.MatchString(strings.TrimRight(l, " ")) {
			return true
		}
	}
	return false
}
