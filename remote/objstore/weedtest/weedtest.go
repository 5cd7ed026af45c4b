// Package weedtest starts a real S3-compatible server for tests:
// SeaweedFS's weed (module github.com/seaweedfs/seaweedfs at Version),
// which ./scripts/test builds into $(go env GOPATH)/bin. Start runs `weed
// server -s3` on 127.0.0.1 ports in a temporary directory with one static
// identity (AccessKey, SecretKey). Used by remote/objstore's S3
// conformance test and remote/rlm's tiered-storage test.
package weedtest

import (
	"fmt"
	"go/build"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Version is the SeaweedFS pseudo-version ./scripts/test builds.
const Version = "v0.0.0-20261109003541-7506e5f91cd6"

// findWeed looks for the weed binary: $STRATA_WEED, then $GOBIN and
// $(go env GOPATH)/bin (where ./scripts/test puts the pinned build), then
// PATH.
func findWeed() (string, error) {
	if p := os.Getenv("STRATA_WEED"); p != "" {
		return p, nil
	}
	var dirs []string
	if gb := os.Getenv("GOBIN"); gb != "" {
		dirs = append(dirs, gb)
	}
	gp := os.Getenv("GOPATH")
	if gp == "" {
		gp = build.Default.GOPATH
	}
	for _, d := range filepath.SplitList(gp) {
		dirs = append(dirs, filepath.Join(d, "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "weed")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("weed"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("weed (SeaweedFS %s) not found on PATH, $STRATA_WEED or in %v: ./scripts/test builds and installs it (its S3 gateway is the real S3 server these tests use)", Version, dirs)
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// Server is a running weed server with its S3 gateway.
type Server struct {
	// Endpoint is the S3 gateway's URL (http://127.0.0.1:port).
	Endpoint string

	bin  string
	args []string
	dir  string
	log  string

	mu   sync.Mutex // guards cmd and done, replaced by Restart
	cmd  *exec.Cmd
	done chan struct{}
}

// The static identity the server accepts.
const (
	AccessKey = "strataTestKey"
	SecretKey = "strataTestSecret0123456789"
)

// Start starts weed server with the S3 gateway on 127.0.0.1 ports in a
// temporary directory; t's Cleanup stops it. It fails t, naming
// ./scripts/test, when weed is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := findWeed()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"identities":[{"name":"strata","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","List","Tagging","Write"]}]}`, AccessKey, SecretKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	p := freePorts(t, 8)
	args := []string{"server",
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + data,
		fmt.Sprintf("-master.port=%d", p[0]), fmt.Sprintf("-master.port.grpc=%d", p[1]),
		"-master.volumeSizeLimitMB=64", "-master.telemetry=false",
		fmt.Sprintf("-volume.port=%d", p[2]), fmt.Sprintf("-volume.port.grpc=%d", p[3]), "-volume.max=0",
		"-filer", fmt.Sprintf("-filer.port=%d", p[4]), fmt.Sprintf("-filer.port.grpc=%d", p[5]),
		"-s3", fmt.Sprintf("-s3.port=%d", p[6]), fmt.Sprintf("-s3.port.grpc=%d", p[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config=" + cfg,
		"-filer.localSocket=" + filepath.Join(dir, "filer.sock"), "-s3.localSocket=" + filepath.Join(dir, "s3.sock"),
	}
	w := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", p[6]), bin: bin, args: args, dir: dir, log: filepath.Join(dir, "weed.log")}
	if err := w.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Stop()
		// weed puts its gRPC Unix sockets at fixed /tmp paths named by
		// port and a kill leaves them: remove those of our ports.
		for _, port := range p {
			socks, _ := filepath.Glob(fmt.Sprintf("/tmp/seaweedfs-*-%d.sock", port))
			for _, s := range socks {
				os.Remove(s)
			}
		}
		if t.Failed() {
			t.Logf("weed's log ends:\n%s", w.Tail())
		}
	})
	return w
}

// start runs weed with the server's arguments, its output appended to
// the log.
func (w *Server) start() error {
	logf, err := os.OpenFile(w.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(w.bin, w.args...)
	cmd.Dir = w.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", w.bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	w.mu.Lock()
	w.cmd, w.done = cmd, done
	w.mu.Unlock()
	return nil
}

// Stop kills weed (its data is a temporary directory: no need for a
// graceful stop, and a kill is what an outage looks like) and waits for it.
func (w *Server) Stop() {
	w.mu.Lock()
	cmd, done := w.cmd, w.done
	w.mu.Unlock()
	select {
	case <-done:
		return
	default:
	}
	cmd.Process.Kill()
	<-done
}

// Restart starts weed again after Stop, on the same ports and data (the
// objects put before the outage are there again once it answers).
func (w *Server) Restart() error {
	w.Stop()
	return w.start()
}

// Done is closed when weed has exited.
func (w *Server) Done() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done
}

// Tail is the end of weed's log.
func (w *Server) Tail() string {
	b, _ := os.ReadFile(w.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}
