package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/config"
)

// TestPrintQuorum: the text form names the leader, the voters and
// observers, the largest voter lag, the controllers when known, and one
// row per member with its lag and how long ago it fetched.
func TestPrintQuorum(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	q := quorumJSON{ClusterID: "c1", LeaderID: 1, LeaderEpoch: 4, HighWatermark: 90,
		Voters: []quorumMemberJSON{
			{ID: 0, Status: "Follower", LogEndOffset: 95, Lag: 5, LastFetchTimestamp: 999_000, LastCaughtUpTimestamp: 998_000},
			{ID: 1, Status: "Leader", LogEndOffset: 100, LastFetchTimestamp: 1_000_000, LastCaughtUpTimestamp: 1_000_000},
		},
		Observers:   []quorumMemberJSON{{ID: 7, Status: "Observer", LogEndOffset: -1, LastFetchTimestamp: -1, LastCaughtUpTimestamp: -1}},
		Controllers: []brokerJSON{{ID: 0, Host: "127.0.0.1", Port: 9193}, {ID: 1, Host: "127.0.0.1", Port: 9194}},
	}
	var sb strings.Builder
	if err := printQuorum(&sb, q, now); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	for _, want := range []string{"ClusterId:        c1\n", "LeaderId:         1\n", "LeaderEpoch:      4\n", "HighWatermark:    90\n",
		"MaxFollowerLag:   5\n", "CurrentVoters:    [0,1]\n", "CurrentObservers: [7]\n",
		"Controllers:      0@127.0.0.1:9193,1@127.0.0.1:9194\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if _, err := strconv.Atoi(f[0]); err == nil && len(f) > 3 {
				rows[f[0]] = f
			}
		}
	}
	if r := rows["0"]; strings.Join(r, " ") != "0 95 5 1000 ms ago 2000 ms ago Follower" {
		t.Fatalf("row 0: %q\n%s", r, out)
	}
	if r := rows["7"]; strings.Join(r, " ") != "7 -1 0 unknown unknown Observer" {
		t.Fatalf("row 7: %q\n%s", r, out)
	}
}

// TestNodeRolesControllerListener: a controller listener needs the
// controller role and a quorum.
func TestNodeRolesControllerListener(t *testing.T) {
	const quorum = "0@127.0.0.1:19090"
	for _, c := range []struct {
		props map[string]string
		err   string
	}{
		{map[string]string{"node.id": "0", "process.roles": "controller", "controller.quorum.voters": quorum}, ""},
		{map[string]string{"node.id": "0", "controller.quorum.voters": quorum, "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"}, ""},
		{map[string]string{"node.id": "3", "process.roles": "broker", "controller.quorum.voters": quorum,
			"listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"}, "controller.listener.names: a broker-only node"},
		{map[string]string{"node.id": "3", "controller.quorum.voters": quorum,
			"listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"}, "controller.listener.names: node id 3 is not a voter"},
		{map[string]string{"node.id": "0", "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"}, "controller.listener.names: a controller listener needs controller.quorum.voters"},
	} {
		c.props["controller.listener.names"] = "CONTROLLER"
		if c.props["listeners"] == "" {
			c.props["listeners"] = "CONTROLLER://127.0.0.1:19093"
		}
		cfg := config.Defaults()
		if err := cfg.Apply(c.props); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Finish(); err != nil {
			t.Fatal(err)
		}
		_, err := nodeRoles(cfg)
		if (c.err == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), c.err)) {
			t.Errorf("%v: error %v, want %q", c.props, err, c.err)
		}
	}
}
