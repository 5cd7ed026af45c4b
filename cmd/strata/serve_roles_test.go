package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/internal/stratatest"
)

// process.roles against the quorum, as Kafka checks it.
func TestNodeRoles(t *testing.T) {
	const quorum = "0@127.0.0.1:19090,1@127.0.0.1:19091,2@127.0.0.1:19092"
	cases := []struct {
		roles  string // "" = not set
		quorum string
		node   int32
		want   roles
		err    string // "" = accepted
	}{
		{"", "", 0, roles{broker: true}, ""},
		{"", quorum, 1, roles{broker: true, controller: true}, ""},
		{"", quorum, 5, roles{broker: true}, ""},
		{"broker,controller", "", 0, roles{broker: true, controller: true}, ""},
		{"controller,broker", quorum, 2, roles{broker: true, controller: true}, ""},
		{"controller", quorum, 0, roles{controller: true}, ""},
		{"broker", quorum, 3, roles{broker: true}, ""},
		{"controller", quorum, 3, roles{}, "process.roles=controller: a node with the controller role must be in controller.quorum.voters, and node id 3 is not in"},
		{"broker,controller", quorum, 3, roles{}, "process.roles=broker,controller: a node with the controller role must be in"},
		{"broker", quorum, 1, roles{}, "process.roles=broker: a broker-only node must not be in controller.quorum.voters, and node id 1 is in"},
		{"controller", "", 0, roles{}, "process.roles=controller needs controller.quorum.voters"},
		{"broker", "", 0, roles{}, "process.roles=broker needs controller.quorum.voters"},
	}
	for _, c := range cases {
		cfg := config.Defaults()
		props := map[string]string{"node.id": strconv.Itoa(int(c.node))}
		if c.roles != "" {
			props["process.roles"] = c.roles
		}
		if c.quorum != "" {
			props["controller.quorum.voters"] = c.quorum
		}
		if err := cfg.Apply(props); err != nil {
			t.Fatalf("%v: %v", props, err)
		}
		got, err := nodeRoles(cfg)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%v: %v", props, err)
		case c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)):
			t.Errorf("%v: error %v, want %q", props, err, c.err)
		case c.err == "" && got != c.want:
			t.Errorf("%v: %+v, want %+v", props, got, c.want)
		}
	}
	// The key's parser refuses anything but the two roles, each once.
	for _, bad := range []string{"", "broker,broker", "zookeeper", "broker,"} {
		cfg := config.Defaults()
		if err := cfg.Apply(map[string]string{"process.roles": bad}); err == nil {
			t.Errorf("process.roles=%q accepted: %v", bad, cfg.ProcessRoles)
		}
	}
}

// A bad combination stops `strata serve` before anything starts, as a
// usage error (exit 1, the message, the usage lines).
func TestServeRejectsBadRoles(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args  []string
		first string
	}{
		{[]string{"--node-id", "3", "--process-roles", "controller", "--controller-quorum", "0@127.0.0.1:19090"},
			"strata serve: process.roles=controller: a node with the controller role must be in controller.quorum.voters, and node id 3 is not in 0@127.0.0.1:19090"},
		{[]string{"--node-id", "0", "--process-roles", "broker", "--controller-quorum", "0@127.0.0.1:19090"},
			"strata serve: process.roles=broker: a broker-only node must not be in controller.quorum.voters"},
		{[]string{"--process-roles", "controller"}, "strata serve: process.roles=controller needs controller.quorum.voters"},
		{[]string{"--process-roles", "observer"}, `strata serve: --process-roles: config: process.roles="observer": items are broker, controller`},
	} {
		args := append([]string{"serve", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0"}, c.args...)
		code, out, errOut := runCLI(args...)
		lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
		if code != 1 || out != "" || len(lines) < 3 || !strings.HasPrefix(lines[0], c.first) || !strings.HasPrefix(lines[1], "Usage: strata serve") {
			t.Errorf("%q: exit %d (want 1), stdout %q, stderr:\n%s", c.args, code, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("a refused node touched its data directory: %v", err)
	}
}

// process.roles=controller runs the node's voter and nothing else: it
// logs its quorum address, answers there, opens no Kafka listener (its
// --listen address is held by the test), keeps
// only meta.properties and controller/ in its data directory, and stops
// cleanly on SIGTERM.
func TestServeControllerOnly(t *testing.T) {
	const hangGuard = 2 * time.Minute // not a performance threshold
	bin, cleanup, err := stratatest.BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	raftAddr := freeLoopbackAddr(t)
	// The Kafka listen address stays held by this test: a node that
	// opened a Kafka listener would fail to start (address in use).
	kafkaLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer kafkaLn.Close()
	kafkaAddr := kafkaLn.Addr().String()
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(bin, "serve", "--node-id", "0", "--process-roles", "controller",
		"--controller-quorum", "0@"+raftAddr, "--listen", kafkaAddr, "--data-dir", data,
		"--metrics-listeners", "http://127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	var log []string
	var metricsAddr string
	deadline := time.After(hangGuard)
	for ready := false; !ready; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("exited before its ready line:\n%s", strings.Join(log, "\n"))
			}
			log = append(log, line)
			if m := serveMetricsRe.FindStringSubmatch(line); m != nil {
				metricsAddr = m[1]
			}
			ready = strings.Contains(line, `msg="strata controller listening"`) && strings.Contains(line, "listen="+raftAddr)
		case <-deadline:
			t.Fatalf("no ready line within %v:\n%s", hangGuard, strings.Join(log, "\n"))
		}
	}
	c, err := net.DialTimeout("tcp", raftAddr, 10*time.Second)
	if err != nil {
		t.Fatalf("quorum address: %v", err)
	}
	c.Close()
	// /readyz once the node leads its quorum of one; the Raft series say
	// it leads.
	if metricsAddr == "" {
		t.Fatalf("no metrics endpoint logged:\n%s", strings.Join(log, "\n"))
	}
	var body string
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + metricsAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if i == 600 {
			t.Fatalf("/readyz not 200 after 600 tries: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
	}
	for _, want := range []string{`strata_controller_role{role="leader"} 1`, "strata_controller_voter 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	ents, err := os.ReadDir(data)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"controller", "meta.properties"}; !slices.Equal(names, want) {
		t.Errorf("data directory holds %v, want %v", names, want)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for line := range lines {
		log = append(log, line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, strings.Join(log, "\n"))
	}
	if !strings.Contains(log[len(log)-1], `msg="stopped cleanly"`) {
		t.Errorf("last line %q", log[len(log)-1])
	}
	for _, l := range log {
		if strings.Contains(l, "strata broker listening") || strings.Contains(l, "data directory ready") {
			t.Errorf("a controller-only node started a broker: %s", l)
		}
	}
}

// freeLoopbackAddr is a 127.0.0.1 address free now, below Linux's
// ephemeral port range (32768-60999), so that no outgoing connection
// takes it before the process under test binds it.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	start := os.Getpid() % 12000
	for i := range 12000 {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(20000+(start+i)%12000))
		if err == nil {
			addr := ln.Addr().String()
			ln.Close()
			return addr
		}
	}
	t.Fatal("no free loopback port in 20000-31999")
	return ""
}
