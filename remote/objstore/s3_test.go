package objstore

import (
	"context"
	"errors"
	"fmt"
	"go/build"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The S3 store against a real S3-compatible server: SeaweedFS's weed
// (module github.com/seaweedfs/seaweedfs, the pseudo-version in
// weedVersion), which ./scripts/test builds into $(go env GOPATH)/bin.
// The test starts `weed server -s3` on 127.0.0.1 ports in a temporary
// directory with one static identity, waits until S3 answers, runs the
// conformance suite, then stops it and checks that the store, now down,
// fails with Transient errors.

const weedVersion = "v0.0.0-20261109003541-7506e5f91cd6"

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
	return "", fmt.Errorf("weed (SeaweedFS %s) not found on PATH, $STRATA_WEED or in %v: ./scripts/test builds and installs it (its S3 gateway is the real S3 server these tests use)", weedVersion, dirs)
}

func freePorts(t *testing.T, n int) []int {
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

type weedServer struct {
	cmd      *exec.Cmd
	endpoint string
	done     chan struct{}
	log      string
}

const (
	weedAccessKey = "strataTestKey"
	weedSecretKey = "strataTestSecret0123456789"
)

// startWeed starts weed server with the S3 gateway; Cleanup stops it.
func startWeed(t *testing.T) *weedServer {
	t.Helper()
	bin, err := findWeed()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"identities":[{"name":"strata","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","List","Tagging","Write"]}]}`, weedAccessKey, weedSecretKey)), 0o600); err != nil {
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
	logPath := filepath.Join(dir, "weed.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	w := &weedServer{cmd: cmd, endpoint: fmt.Sprintf("http://127.0.0.1:%d", p[6]), done: make(chan struct{}), log: logPath}
	go func() { cmd.Wait(); logf.Close(); close(w.done) }()
	t.Cleanup(func() {
		w.stop()
		// weed puts its gRPC Unix sockets at fixed /tmp paths named by
		// port and a kill leaves them: remove those of our ports.
		for _, port := range p {
			socks, _ := filepath.Glob(fmt.Sprintf("/tmp/seaweedfs-*-%d.sock", port))
			for _, s := range socks {
				os.Remove(s)
			}
		}
		if t.Failed() {
			t.Logf("weed's log ends:\n%s", w.tail())
		}
	})
	return w
}

// stop kills weed (its data is a temporary directory: no need for a
// graceful stop, and a kill is what an outage looks like) and waits for it.
func (w *weedServer) stop() {
	select {
	case <-w.done:
		return
	default:
	}
	w.cmd.Process.Kill()
	<-w.done
}

func (w *weedServer) tail() string {
	b, _ := os.ReadFile(w.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

var bucketSeq atomic.Int64

// newWeedStore makes a fresh bucket on w, retrying while weed starts.
func newWeedStore(t *testing.T, w *weedServer, partSize int64) *S3 {
	t.Helper()
	s, err := NewS3(S3Config{
		Endpoint: w.endpoint, Bucket: fmt.Sprintf("strata-test-%d", bucketSeq.Add(1)),
		Region: "us-east-1", PathStyle: true,
		AccessKeyID: weedAccessKey, SecretAccessKey: weedSecretKey, PartSize: partSize,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.CreateBucket(cctx)
		ccancel()
		if err == nil {
			return s
		}
		select {
		case <-w.done:
			t.Fatalf("weed exited: %v\n%s", err, w.tail())
		case <-ctx.Done():
			t.Fatalf("weed's S3 gateway not ready: %v\n%s", err, w.tail())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func TestS3ConformanceSeaweedFS(t *testing.T) {
	w := startWeed(t)
	const part = minPartSize
	runConformance(t, suite{
		newStore: func(t *testing.T) ObjectStore { return newWeedStore(t, w, part) },
		bigSize:  2*part + part/2, // three parts
	})

	t.Run("WrongCredentialsArePermanent", func(t *testing.T) {
		good := newWeedStore(t, w, part)
		s, err := NewS3(S3Config{Endpoint: w.endpoint, Bucket: good.bucket, PathStyle: true,
			AccessKeyID: weedAccessKey, SecretAccessKey: "wrong-secret"})
		if err != nil {
			t.Fatal(err)
		}
		data := []byte("x")
		_, err = s.Put(testCtx(t), "k", strings.NewReader("x"), 1, SumOf(data))
		wantKind(t, "put with a wrong secret", err, Permanent, nil)
	})

	t.Run("StoreDownIsTransient", func(t *testing.T) {
		s := newWeedStore(t, w, part)
		data := []byte("before the outage")
		put(t, s, "k", data)
		w.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.Put(ctx, "k2", strings.NewReader("x"), 1, SumOf([]byte("x")))
		wantKind(t, "put to a stopped store", err, Transient, nil)
		_, _, err = s.Get(ctx, "k")
		wantKind(t, "get from a stopped store", err, Transient, nil)
		if errors.Is(err, ErrNotFound) {
			t.Fatal("a stopped store reported NotFound")
		}
		if ctx.Err() != nil {
			t.Fatal("calls to a stopped store waited for their deadline")
		}
	})
}
