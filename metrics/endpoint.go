package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

var (
	errNotStarted = errors.New("the broker has not started yet")
	errStopping   = errors.New("the broker is shutting down")
)

// Handler serves b: GET /metrics (Prometheus text format, or what the
// scraper negotiates), /healthz (200 while the process serves HTTP) and
// /readyz (200 once b's readiness check passes, else 503 with the reason).
func (b *Broker) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(b.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := b.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", err)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// Endpoint is the HTTP server of a Broker's metrics on its listeners. It
// owns one goroutine per listener; Close stops them.
type Endpoint struct {
	srv   *http.Server
	lns   []net.Listener
	wg    sync.WaitGroup
	close sync.Once
}

// Timeouts of the endpoint's connections: a scrape is small, a slow or
// stuck client must not hold a connection open.
const (
	readHeaderTimeout = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	shutdownTimeout   = 2 * time.Second
)

// Listen listens on every address (host:port: metrics.listeners, parsed
// by internal/configkeys.HTTPListeners) and
// serves b's Handler on each until Close. On error nothing is left
// listening.
func Listen(addrs []string, b *Broker, logger *slog.Logger) (*Endpoint, error) {
	if logger == nil {
		logger = slog.Default()
	}
	e := &Endpoint{srv: &http.Server{
		Handler:           b.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}}
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range e.lns {
				l.Close()
			}
			return nil, fmt.Errorf("metrics listener %s: %w", a, err)
		}
		e.lns = append(e.lns, ln)
	}
	for _, ln := range e.lns {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics endpoint stopped", "listen", ln.Addr().String(), "err", err)
			}
		}()
	}
	return e, nil
}

// Addrs returns the addresses the endpoint listens on (the ports chosen
// for ":0").
func (e *Endpoint) Addrs() []net.Addr {
	out := make([]net.Addr, len(e.lns))
	for i, ln := range e.lns {
		out[i] = ln.Addr()
	}
	return out
}

// Close stops listening, lets scrapes in flight finish for a moment
// (closing them after shutdownTimeout), and waits for the endpoint's
// goroutines. It may be called more than once.
func (e *Endpoint) Close() error {
	e.close.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := e.srv.Shutdown(ctx); err != nil {
			e.srv.Close()
		}
		e.wg.Wait()
	})
	return nil
}
