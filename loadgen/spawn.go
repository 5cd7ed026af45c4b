package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster is a set of local strata brokers started for a run, each a child
// process (`strata serve`) on a free 127.0.0.1 port with its own temporary
// data directory and node id. N > 1 brokers form one cluster with a
// controller quorum (see cluster.go).
type Cluster struct {
	dir     string
	Brokers []*SpawnedBroker
	// Controllers are the controller-only nodes (SpawnOptions.Controllers;
	// nil without): Addr and ListenAddr are their quorum addresses.
	Controllers []*SpawnedBroker
	dev         *blockDevice // dir's block device; nil when it has none (runTarget)
	// proxies stand in front of the brokers (SpawnOptions.Proxy; nil
	// without): what the partition faults cut (proxy.go).
	proxies *proxySet
	// lagTime is the brokers' replica.lag.time.max.ms when loadgen or the
	// user's properties set it; 0: the broker's default.
	lagTime time.Duration

	// Metrics scraping (brokermetrics.go), by runOnce's goroutine only.
	log        io.Writer // where the first scrape failure is told (runTarget)
	http       *http.Client
	metricsOff bool // a scrape failed, or the brokers serve no metrics
}

// SpawnedBroker is one child broker.
type SpawnedBroker struct {
	NodeID int
	// Addr is where clients and the other brokers connect: the broker's
	// advertised address, its proxy's when the cluster is proxied.
	Addr string
	// ListenAddr is the broker's own listener (Addr without a proxy):
	// the clients' listener when the properties name several.
	ListenAddr string
	// Listeners are the addresses of the listeners the user's properties
	// name (listeners=), by name; nil without.
	Listeners map[string]string
	// MetricsAddr is the broker's metrics listener (host:port, serving
	// /metrics); "" when the user's properties set metrics.listeners.
	MetricsAddr string
	DataDir     string
	LogPath     string
	// smallFS: DataDir is a filesystem of its own (SpawnOptions.DiskBytes),
	// unmounted by Cluster.Stop.
	smallFS bool
	// bin and args start the broker again (restart: same data directory,
	// same ports).
	bin  string
	args []string
	// holds are the addresses picked for this node (freeLoopbackAddr)
	// that its first launch releases, just before the process starts.
	holds []string
	// mu guards cmd and exited, which a restart replaces while the
	// sampler reads the process's CPU (faults.go).
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	// pastCPU is the CPU time of the broker's earlier processes (before
	// restarts), so its CPU keeps adding up.
	pastCPU time.Duration
}

const (
	spawnStartTimeout = 30 * time.Second
	// spawnStopTimeout is more than a broker's own bound on its controlled
	// shutdown (30 s: serve's controlledShutdownTimeout) plus closing.
	spawnStopTimeout = 45 * time.Second
)

// SpawnOptions configures Spawn.
type SpawnOptions struct {
	// Bin is the strata executable; "" = this executable.
	Bin string
	// Brokers is how many to start, 1..MaxSpawn.
	Brokers int
	// SegmentBytes is the brokers' log.segment.bytes; 0 = the broker's
	// default (1 GiB, reserved on disk a step at a time as data arrives).
	SegmentBytes int64
	// ConfigFile is a server.properties file whose settings the brokers get
	// as well (log.segment.bytes in it wins over SegmentBytes).
	ConfigFile string
	// Blackhole starts the brokers with --blackhole (a baseline that
	// acknowledges produce requests without storing them).
	Blackhole bool
	// CPUProfile, if set, is where the first broker writes its CPU profile
	// (serve --cpuprofile) when it stops.
	CPUProfile string
	// Proxy puts a TCP proxy of loadgen's in front of each broker, which
	// the broker advertises (advertised.listeners): the network-partition
	// faults cut its connections (proxy.go). The user's properties must
	// then leave listeners and advertised.listeners unset.
	Proxy bool
	// ReplicaLagTimeMax, if set, is the brokers' replica.lag.time.max.ms
	// (unless the user's properties set it).
	ReplicaLagTimeMax time.Duration
	// DiskBytes, if set, gives each broker a data directory on a
	// filesystem of its own of this size (smallfs.go: --faults disk-full;
	// needs root).
	DiskBytes int64
	// When ConfigFile sets listeners, every broker gets each of its
	// listeners (same names, so the file's listener.name.* and ssl.*
	// keys apply) on a free 127.0.0.1 port of its own; the clients use
	// Listener ("" = the one whose security protocol is Protocol, which
	// must be the only one). Without listeners in the file the brokers
	// have one PLAINTEXT listener and Protocol must be PLAINTEXT.
	Listener string
	Protocol string // "" = PLAINTEXT
	// ClientOpts are the security options of loadgen's clients (TLS,
	// SASL), for the clients Spawn itself runs (waitFormed).
	ClientOpts []kgo.Opt
	// Controllers, when > 0, starts that many controller-only nodes
	// (process.roles=controller, node ids Brokers..Brokers+Controllers-1)
	// as the controller quorum's voters before the brokers, which then
	// run as broker-only nodes (process.roles=broker): Kafka's separate
	// controllers. See cluster.go.
	Controllers int
}

// Spawn starts the brokers and waits until each accepts TCP connections.
// On failure everything started so far is stopped and removed.
func Spawn(ctx context.Context, opts SpawnOptions) (*Cluster, error) {
	n, bin := opts.Brokers, opts.Bin
	if n < 1 || n > MaxSpawn {
		return nil, fmt.Errorf("loadgen: spawn %d brokers: out of range 1..%d", n, MaxSpawn)
	}
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("loadgen: finding the strata executable: %w", err)
		}
		bin = exe
	}
	dir, err := os.MkdirTemp(spawnParentDir(), "strata-loadgen-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	props, userMetrics, lag, lst, err := spawnProperties(dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.lagTime = lag
	if opts.Proxy {
		c.proxies = newProxySet()
	}
	quorum, ctlAddrs, raftAddrs, err := spawnQuorum(n, opts.Controllers) // cluster.go
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer releaseAddrs(append(ctlAddrs, raftAddrs...)...) // those of nodes not started, after an error
	for i, addr := range ctlAddrs {
		ctl, err := startControllerNode(ctx, bin, dir, props, !userMetrics, n+i, addr, quorum)
		if ctl != nil {
			c.Controllers = append(c.Controllers, ctl)
		}
		if err != nil {
			c.Stop()
			return nil, err
		}
	}
	for i := range n {
		var extra []string
		if opts.Blackhole {
			extra = append(extra, "--blackhole")
		}
		if quorum != "" {
			extra = append(extra, "--controller-quorum", quorum)
		}
		if len(ctlAddrs) > 0 {
			extra = append(extra, "--process-roles", "broker")
		}
		if i == 0 && opts.CPUProfile != "" {
			extra = append(extra, "--cpuprofile", opts.CPUProfile)
		}
		b, err := startBroker(ctx, bin, dir, props, !userMetrics, c.proxies, opts.DiskBytes, lst, i, raftAddrs[i], extra...)
		if b != nil {
			c.Brokers = append(c.Brokers, b)
		}
		if err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.waitFormed(ctx, opts.ClientOpts); err != nil { // cluster.go
		c.Stop()
		return nil, err
	}
	return c, nil
}

// spawnParentDir is where Spawn creates the brokers' temporary directory,
// and where the --compare-device probe writes (the spawned data is gone by
// then).
func spawnParentDir() string { return os.TempDir() }

// spawnProperties writes the brokers' server.properties: the user's file,
// then log.segment.bytes and replica.lag.time.max.ms unless the user's
// file sets them. userMetrics says the user's file sets
// metrics.listeners (startBroker then adds none); lag is the brokers'
// replica.lag.time.max.ms when the file or opts sets it.
func spawnProperties(dir string, opts SpawnOptions) (path string, userMetrics bool, lag time.Duration, lst spawnListeners, err error) {
	var user []byte
	if opts.ConfigFile != "" {
		if user, err = os.ReadFile(opts.ConfigFile); err != nil {
			return "", false, 0, lst, fmt.Errorf("loadgen: spawn config: %w", err)
		}
	}
	if lst, err = clientListener(user, opts); err != nil {
		return "", false, 0, lst, err
	}
	userMetrics = bytes.Contains(user, []byte(metricsListenersKey))
	if opts.Proxy {
		for _, k := range []string{"listeners", "advertised.listeners"} {
			if _, ok := propertyValue(user, k); ok {
				return "", false, 0, lst, fmt.Errorf("loadgen: spawn config sets %s: the partition faults need loadgen's own (a proxy in front of each broker)", k)
			}
		}
	}
	seg := opts.SegmentBytes
	props := append([]byte(nil), user...)
	if len(props) > 0 && props[len(props)-1] != '\n' {
		props = append(props, '\n')
	}
	if seg > 0 && !bytes.Contains(user, []byte("log.segment.bytes")) {
		props = fmt.Appendf(props, "# written by strata loadgen --spawn\nlog.segment.bytes=%d\n", seg)
	}
	if v, ok := propertyValue(user, lagTimeKey); ok {
		if ms, perr := strconv.ParseInt(v, 10, 64); perr == nil && ms > 0 {
			lag = time.Duration(ms) * time.Millisecond
		}
	} else if opts.ReplicaLagTimeMax > 0 {
		lag = opts.ReplicaLagTimeMax
		props = fmt.Appendf(props, "# written by strata loadgen --spawn (partition faults)\n%s=%d\n", lagTimeKey, lag.Milliseconds())
	}
	path = filepath.Join(dir, "server.properties")
	return path, userMetrics, lag, lst, os.WriteFile(path, props, 0o644)
}

// lagTimeKey is the broker setting after which a follower that has not
// caught up leaves the ISR.
const lagTimeKey = "replica.lag.time.max.ms"

// propertyValue is the value of key in a properties file's text (the last
// one set), and whether it is set.
func propertyValue(props []byte, key string) (string, bool) {
	var v string
	var ok bool
	for line := range strings.Lines(string(props)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, val, found := strings.Cut(line, "=")
		if !found {
			k, val, found = strings.Cut(line, ":")
		}
		if found && strings.TrimSpace(k) == key {
			v, ok = strings.TrimSpace(val), true
		}
	}
	return v, ok
}

// metricsListenersKey is the broker setting of its metrics endpoint.
const metricsListenersKey = "metrics.listeners"

// startBroker starts broker id with the properties file props; with
// metrics, on a properties file of its own that adds a metrics listener
// on a free loopback port; with proxies, behind a proxy of its own that
// it advertises.
func startBroker(ctx context.Context, bin, dir, props string, withMetrics bool, proxies *proxySet, diskBytes int64, lst spawnListeners, id int, raftAddr string, extra ...string) (*SpawnedBroker, error) {
	holds := []string{raftAddr}               // "" without a quorum address: ignored
	defer func() { releaseAddrs(holds...) }() // after a failed start; launch releases them first
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	holds = append(holds, addr)
	listen := addr // one PLAINTEXT listener
	var own map[string]string
	if len(lst.names) > 0 {
		own = make(map[string]string, len(lst.names))
		var ls []string
		for _, name := range lst.names {
			a := addr
			if name != lst.client {
				if a, err = freeLoopbackAddr(); err != nil {
					return nil, err
				}
				holds = append(holds, a)
			}
			own[name] = a
			ls = append(ls, name+"://"+a)
		}
		listen = strings.Join(ls, ",") // --listen sets listeners
	}
	b := &SpawnedBroker{
		NodeID:     id,
		Addr:       addr,
		ListenAddr: addr,
		Listeners:  own,
		DataDir:    filepath.Join(dir, "node-"+strconv.Itoa(id)),
		LogPath:    filepath.Join(dir, "node-"+strconv.Itoa(id)+".log"),
	}
	if proxies != nil {
		if b.Addr, err = proxies.add(id, addr); err != nil {
			return nil, err
		}
	}
	if withMetrics || proxies != nil {
		shared, err := os.ReadFile(props)
		if err != nil {
			return nil, err
		}
		own := fmt.Appendf(shared, "# written by strata loadgen --spawn for node %d\n", id)
		if withMetrics {
			if b.MetricsAddr, err = freeLoopbackAddr(); err != nil {
				return nil, err
			}
			holds = append(holds, b.MetricsAddr)
			own = fmt.Appendf(own, "%s=http://%s\n", metricsListenersKey, b.MetricsAddr)
		}
		if proxies != nil {
			// --listen names the PLAINTEXT listener; clients and the
			// other brokers are told the proxy's address.
			own = fmt.Appendf(own, "advertised.listeners=PLAINTEXT://%s\n", b.Addr)
		}
		props = filepath.Join(dir, "node-"+strconv.Itoa(id)+".properties")
		if err := os.WriteFile(props, own, 0o644); err != nil {
			return nil, err
		}
	}
	if diskBytes > 0 {
		if err := mountSmallFS(ctx, b.DataDir, b.DataDir+".img", diskBytes); err != nil {
			return nil, fmt.Errorf("loadgen: broker %d's filesystem: %w", id, err)
		}
		b.smallFS = true
	}
	b.bin, b.holds = bin, holds
	b.args = append([]string{"serve", "--listen", listen, "--data-dir", b.DataDir, "--node-id", strconv.Itoa(id), "--config", props}, extra...)
	if err := b.launch(os.O_TRUNC); err != nil {
		if b.smallFS {
			err = errors.Join(err, unmountSmallFS(b.DataDir))
		}
		return nil, err
	}
	return b, b.waitListening(ctx, spawnStartTimeout)
}

// launch starts the broker's process with its arguments, its output
// appended to its log (truncated first with os.O_TRUNC).
func (b *SpawnedBroker) launch(logFlag int) error {
	logf, err := os.OpenFile(b.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND|logFlag, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child keeps its own descriptor
	releaseAddrs(b.holds...)
	b.holds = nil
	cmd := exec.Command(b.bin, b.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("loadgen: starting broker %d (%s): %w", b.NodeID, b.bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() // owned by this process; ends when the child exits
	b.mu.Lock()
	if old := b.cmd; old != nil && old.ProcessState != nil { // reaped: its exited was closed after Wait
		b.pastCPU += old.ProcessState.UserTime() + old.ProcessState.SystemTime()
	}
	b.cmd, b.exited = cmd, exited
	b.mu.Unlock()
	return nil
}

// proc is the broker's current process and the channel closed when it
// has exited.
func (b *SpawnedBroker) proc() (*exec.Cmd, chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd, b.exited
}

// waitListening waits until the broker accepts TCP connections.
func (b *SpawnedBroker) waitListening(ctx context.Context, timeout time.Duration) error {
	_, exited := b.proc()
	deadline := wallClock().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", b.ListenAddr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("loadgen: broker %d exited during start:\n%s", b.NodeID, tailFile(b.LogPath, 2000))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if wallClock().After(deadline) {
			return fmt.Errorf("loadgen: broker %d not listening on %s after %v:\n%s", b.NodeID, b.ListenAddr, timeout, tailFile(b.LogPath, 2000))
		}
	}
}

// Addrs are the addresses clients connect to (the proxies' when proxied).
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Brokers))
	for i, b := range c.Brokers {
		out[i] = b.Addr
	}
	return out
}

// controllerAddrs are the controller-only nodes' quorum addresses.
func (c *Cluster) controllerAddrs() []string {
	out := make([]string, len(c.Controllers))
	for i, b := range c.Controllers {
		out[i] = b.Addr
	}
	return out
}

// usage sums CPU time and memory over the brokers still running.
func (c *Cluster) usage() (cpu time.Duration, rss, peak int64) {
	for _, b := range c.Brokers {
		cmd, _ := b.proc()
		if cmd == nil || cmd.Process == nil {
			continue
		}
		bc, br, bp, err := procStats(cmd.Process.Pid)
		if err != nil {
			continue
		}
		b.mu.Lock()
		bc += b.pastCPU
		b.mu.Unlock()
		cpu += bc
		rss += br
		peak += bp
	}
	return cpu, rss, peak
}

// deviceSample reads the data directories' device counters; nil when they
// are not measured.
func (c *Cluster) deviceSample() *devSample {
	if c == nil || c.dev == nil {
		return nil
	}
	s, err := c.dev.sample()
	if err != nil {
		return nil
	}
	return &s
}

// Stop sends SIGTERM to every broker, waits for them to exit (SIGKILL after
// spawnStopTimeout) and removes their data. It reports brokers that had to
// be killed or did not exit cleanly.
func (c *Cluster) Stop() error {
	// The brokers first: their controlled shutdown needs the quorum,
	// which separate controllers (c.Controllers) keep until then.
	errs := stopNodes(c.Brokers, "broker")
	errs = append(errs, stopNodes(c.Controllers, "controller")...)
	if c.proxies != nil {
		c.proxies.close()
	}
	for _, b := range c.Brokers {
		if b.smallFS {
			if err := unmountSmallFS(b.DataDir); err != nil {
				errs = append(errs, err)
				continue
			}
			b.smallFS = false
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// stopNodes sends SIGTERM to every node still running and waits for them
// to exit (SIGKILL after spawnStopTimeout); what is returns are the nodes
// that had exited before or had to be killed.
func stopNodes(nodes []*SpawnedBroker, what string) []error {
	var errs []error
	for _, b := range nodes {
		cmd, exited := b.proc()
		select {
		case <-exited:
			errs = append(errs, fmt.Errorf("%s %d had exited before the end of the run:\n%s", what, b.NodeID, tailFile(b.LogPath, 2000)))
			continue
		default:
		}
		cmd.Process.Signal(syscall.SIGCONT) // a --faults pause cut short
		cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, b := range nodes {
		cmd, exited := b.proc()
		select {
		case <-exited:
		case <-time.After(spawnStopTimeout):
			errs = append(errs, b.stuckStop(cmd, exited))
		}
	}
	return errs
}

// tailFile is the last n bytes of a log file, for error messages.
func tailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-n, 0)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, n))
	return string(b)
}

// stuckStop handles a broker that did not exit within spawnStopTimeout of
// SIGTERM: SIGQUIT makes the Go runtime write every goroutine's stack to
// the broker's log (and exit), SIGKILL follows if even that does not end
// it, and the log is copied out of the run's directory (removed next) so
// the hang can be read. The returned error names the copy.
func (b *SpawnedBroker) stuckStop(cmd *exec.Cmd, exited chan struct{}) error {
	cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
	err := fmt.Errorf("broker %d did not stop within %v of SIGTERM", b.NodeID, spawnStopTimeout)
	kept := filepath.Join(os.TempDir(), fmt.Sprintf("strata-loadgen-stuck-node-%d-%d.log", b.NodeID, cmd.Process.Pid))
	if data, rerr := os.ReadFile(b.LogPath); rerr == nil && os.WriteFile(kept, data, 0o644) == nil {
		return fmt.Errorf("%w: its log with every goroutine's stack (SIGQUIT) is kept in %s", err, kept)
	}
	return err
}

// spawnListeners are the listeners of the user's properties (names in
// order; none when it sets no listeners) and the one the clients use.
type spawnListeners struct {
	names  []string
	client string
}

// kafkaDefaultProtocols is listener.security.protocol.map's default: each
// protocol's own name.
var kafkaDefaultProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// clientListener reads the listeners of the user's properties and picks
// the clients' (SpawnOptions.Listener, or the one of SpawnOptions.Protocol).
// Loadgen gives each listener a port of its own per broker, so the file's
// ports and advertised.listeners cannot be used.
func clientListener(user []byte, opts SpawnOptions) (spawnListeners, error) {
	var out spawnListeners
	proto := strings.ToUpper(opts.Protocol)
	if proto == "" {
		proto = ProtocolPlaintext
	}
	v, ok := propertyValue(user, "listeners")
	if !ok || opts.Proxy {
		// No listeners of the user's (with Proxy, spawnProperties refuses
		// them): one PLAINTEXT listener.
		if opts.Listener != "" {
			return out, fmt.Errorf("loadgen: --spawn-listener %s: --spawn-config sets no listeners", opts.Listener)
		}
		if proto != ProtocolPlaintext {
			return out, fmt.Errorf("loadgen: --security-protocol %s with --spawn needs a --spawn-config whose listeners has a %s listener (and its ssl.*/sasl.* keys)", proto, proto)
		}
		return out, nil
	}
	if _, ok := propertyValue(user, "advertised.listeners"); ok {
		return out, errors.New("loadgen: --spawn-config sets advertised.listeners: spawned brokers get their listeners on free 127.0.0.1 ports of their own, which they advertise; leave it out")
	}
	protos := map[string]string{}
	if m, ok := propertyValue(user, "listener.security.protocol.map"); ok {
		for _, e := range strings.Split(m, ",") {
			if name, p, found := strings.Cut(strings.TrimSpace(e), ":"); found {
				protos[strings.ToUpper(strings.TrimSpace(name))] = strings.ToUpper(strings.TrimSpace(p))
			}
		}
	} else {
		for _, p := range kafkaDefaultProtocols {
			protos[p] = p
		}
	}
	var match []string
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		name, _, found := strings.Cut(e, "://")
		if !found {
			name = ProtocolPlaintext
		}
		name = strings.ToUpper(name)
		out.names = append(out.names, name)
		if protos[name] == proto {
			match = append(match, name)
		}
	}
	switch {
	case opts.Listener != "":
		want := strings.ToUpper(opts.Listener)
		for _, n := range out.names {
			if n == want {
				out.client = n
				return out, nil
			}
		}
		return out, fmt.Errorf("loadgen: --spawn-listener %s: not among --spawn-config's listeners (%s)", opts.Listener, strings.Join(out.names, ", "))
	case len(match) == 1:
		out.client = match[0]
		return out, nil
	case len(match) == 0:
		return out, fmt.Errorf("loadgen: --spawn-config's listeners (%s) have no %s listener for the clients (--security-protocol %s); name one with --spawn-listener", strings.Join(out.names, ", "), proto, proto)
	}
	return out, fmt.Errorf("loadgen: --spawn-config's listeners %s are all %s: choose the clients' with --spawn-listener", strings.Join(match, ", "), proto)
}
