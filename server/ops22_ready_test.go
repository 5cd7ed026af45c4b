package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/metrics"
	"github.com/twmb/franz-go/pkg/kgo"
)

// /readyz follows the log directory: a single broker answers 200 ready
// while its directory is online; once an fsync fails (EIO, through the
// engine's SyncFault hook) the directory goes offline and /readyz answers
// 503 naming it, as docs/operations.md says ("not ready ... after the log
// directory went offline").
func TestOps22ReadyzOfflineDirectory(t *testing.T) {
	var fail atomic.Bool
	m := metrics.New()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig(), Logger: logger,
		SyncFault: func(string) error {
			if fail.Load() {
				return syscall.EIO
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{ClusterID: "ops22-ready", NumPartitions: 1, AutoCreateTopics: true, Logger: logger, Metrics: m}, eng)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	defer func() {
		s.Close()
		select {
		case <-served:
		case <-time.After(testTimeout):
			t.Error("Serve did not return after Close")
		}
		if err := eng.Close(); err != nil && !errors.Is(err, engine.ErrOffline) {
			t.Errorf("engine.Close: %v", err)
		}
	}()
	readyz := func() (int, string) {
		w := httptest.NewRecorder()
		m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return w.Code, w.Body.String()
	}
	if code, body := readyz(); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz with the directory online: %d %q", code, body)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.AllowAutoTopicCreation(),
		kgo.DefaultProduceTopic("ops22-ready"), kgo.RecordRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("durable")).FirstErr(); err != nil {
		t.Fatalf("produce while online: %v", err)
	}
	if code, _ := readyz(); code != 200 {
		t.Fatalf("/readyz after a produce: %d", code)
	}

	fail.Store(true)
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	err = cl.ProduceSync(pctx, kgo.StringRecord("lost")).FirstErr() // its fsync fails: the directory goes offline
	pcancel()
	if err == nil {
		t.Fatal("produce acknowledged although its fsync failed")
	}
	if eng.Offline() == nil {
		t.Fatalf("directory not offline after a failed fsync (produce: %v)", err)
	}
	code, body := readyz()
	if code != 503 || !strings.HasPrefix(body, "not ready: ") || !strings.Contains(body, engine.ErrOffline.Error()) {
		t.Fatalf("/readyz with the directory offline: %d %q (engine: %v)", code, body, eng.Offline())
	}
}
