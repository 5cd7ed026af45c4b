package e2e

// The strata binary is built once per test run, in TestMain.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratalog/strata/internal/stratatest"
)

var strataBin string

func TestMain(m *testing.M) {
	if spec := os.Getenv(copierEnv); spec != "" {
		os.Exit(runCopier(spec)) // a copier process of TestClusterTransactionalCopyExactlyOnce
	}
	bin, cleanup, err := stratatest.BuildBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	strataBin = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// broker is one `strata serve` child process.
type broker struct {
	t       *testing.T
	addr    string
	dataDir string
	args    []string
	// ownListeners: the listeners come from the properties file in args,
	// not from a --listen flag (addr is one of them).
	ownListeners bool
	cmd          *exec.Cmd
	logs         *syncBuffer
	exited       chan struct{}
}

type syncBuffer = stratatest.LogBuffer

// picked are the ports freeAddr handed out (or found taken) in this process.
var (
	pickedMu sync.Mutex
	picked   = map[int]bool{}
)

// freeAddr returns a loopback address free now, for a process started
// later to listen on. Its port is below Linux's ephemeral range
// (net.ipv4.ip_local_port_range, 32768-60999 by default): a port the
// kernel picks for :0 can be handed to another test's outgoing connection
// or listener before the broker binds it (a controller failed to start
// with "address already in use" in CI that way).
// A port is never handed out twice in this process: a test picks its
// cluster's quorum addresses before it starts the first node, and a
// listener picked meanwhile could otherwise get one of them.
func freeAddr(t *testing.T) string {
	t.Helper()
	for i := 0; i < 200; i++ {
		port := 20000 + rand.IntN(12000)
		pickedMu.Lock()
		taken := picked[port]
		picked[port] = true
		pickedMu.Unlock()
		if taken {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken: try another
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	t.Fatal("no free loopback port in 20000-31999 after 200 tries")
	return ""
}

// startBroker runs a broker on a free loopback port with its data in dataDir
// ("" = a new temporary directory) and waits until it accepts connections.
func startBroker(t *testing.T, dataDir string, extraArgs ...string) *broker {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	b := &broker{t: t, addr: freeAddr(t), dataDir: dataDir, args: extraArgs}
	b.start()
	if !slices.Contains(extraArgs, "--controller-quorum") {
		t.Cleanup(b.stop)
		return b
	}
	quorumMu.Lock()
	quorumBrokers[t] = append(quorumBrokers[t], b)
	quorumMu.Unlock()
	t.Cleanup(func() { stopCluster(t) })
	return b
}

// The brokers t started with --controller-quorum, for stopCluster.
var (
	quorumMu      sync.Mutex
	quorumBrokers = map[*testing.T][]*broker{}
)

// stopCluster ends the brokers of t's cluster: every running one but the
// last stopped with SIGTERM (stop: a clean exit within 30 s), newest
// first, and the last one killed. Alone, the last voter's controlled
// shutdown finds no quorum and gives up only after 3 s
// (broker/cluster controlledShutdownNoQuorum), which every cluster test
// paid at its end; TestClusterLastVoterStops checks that exit once. The
// first of t's cleanups does it all; the others find nothing to do.
func stopCluster(t *testing.T) {
	quorumMu.Lock()
	brokers := quorumBrokers[t]
	delete(quorumBrokers, t)
	quorumMu.Unlock()
	var running []*broker
	for _, b := range brokers {
		if b.cmd != nil {
			running = append(running, b)
		}
	}
	for i := len(running) - 1; i > 0; i-- {
		running[i].stop()
	}
	if len(running) > 0 {
		running[0].kill()
	}
}

func (b *broker) start() {
	t := b.t
	t.Helper()
	args := []string{"serve", "--listen", b.addr, "--data-dir", b.dataDir}
	if b.ownListeners {
		args = []string{"serve", "--data-dir", b.dataDir}
	}
	b.cmd = exec.Command(strataBin, append(args, b.args...)...)
	b.logs = &syncBuffer{}
	b.cmd.Stdout, b.cmd.Stderr = b.logs, b.logs
	dieWithTest(b.cmd)
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(b.cmd, b.exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-b.exited:
			t.Fatalf("broker exited during start:\n%s", b.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker did not listen on %s within 30s:\n%s", b.addr, b.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (b *broker) stop() {
	if b.cmd == nil {
		return
	}
	select {
	case <-b.exited:
	default:
		b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.exited:
		case <-time.After(30 * time.Second):
			b.cmd.Process.Kill()
			<-b.exited
			b.t.Errorf("broker did not stop within 30s of SIGTERM:\n%s", b.logs)
		}
	}
	b.cmd = nil
}

// kill sends SIGKILL: no flush, no checkpoint.
func (b *broker) kill() {
	b.cmd.Process.Kill()
	<-b.exited
	b.cmd = nil
}

func (b *broker) restart() {
	b.stop()
	b.start()
}

func (b *broker) client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

func (b *broker) admin() *kadm.Client {
	return kadm.NewClient(b.client())
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestServeLogsWhereItListensAndStores(t *testing.T) {
	b := startBroker(t, "")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.logs.String(), "listening") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	logs := b.logs.String()
	if !strings.Contains(logs, b.addr) || !strings.Contains(logs, b.dataDir) {
		t.Fatalf("start log lines do not name the listen address %s and data dir %s:\n%s", b.addr, b.dataDir, logs)
	}
	b.stop()
	if !strings.Contains(b.logs.String(), "stopped cleanly") {
		t.Fatalf("no clean shutdown on SIGTERM:\n%s", b.logs)
	}
	if _, err := os.Stat(filepath.Join(b.dataDir, "meta.properties")); err != nil {
		t.Fatal(err)
	}
}
