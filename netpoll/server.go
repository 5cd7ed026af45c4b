package netpoll

import (
	"errors"
	"github.com/stratalog/strata/internal/clocks"
	"github.com/stratalog/strata/internal/ratelog"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stratalog/strata/internal/kframe"
)

// Defaults for zero Config fields.
const (
	DefaultMaxFrameBytes = 104857600 // socket.request.max.bytes
	DefaultMaxInFlight   = 64
	// DefaultQueuedMaxRequestBytes bounds the request bytes read but not yet
	// answered on one connection (see Config.QueuedMaxRequestBytes).
	DefaultQueuedMaxRequestBytes = 100 << 20
	// DefaultMaxQueuedBytes is the broker-wide request budget
	// (Config.MaxQueuedBytes). Kafka's queued.max.request.bytes defaults to
	// -1 (unbounded); Strata bounds it: five maximal (socket.request.max.bytes)
	// requests at once, and with the decoded requests charged too (at most
	// the same again, see server's decode bound) about 1 GiB of heap in the
	// worst case, 4% of the 24 GiB development machine.
	DefaultMaxQueuedBytes = 512 << 20
	// DefaultIdleTimeout is Kafka's connections.max.idle.ms. Config's zero
	// value means no idle timeout; brokers pass this explicitly.
	DefaultIdleTimeout = 10 * time.Minute
)

// Config configures a Server. Zero fields take the defaults above.
type Config struct {
	// MaxFrameBytes is socket.request.max.bytes: a request frame larger than
	// this, or with a negative size, is refused before allocating (log line
	// with the remote address, then close).
	MaxFrameBytes int32
	// MaxInFlight bounds the requests read but not yet answered on one
	// connection; when reached, the reader stops reading (back-pressure).
	MaxInFlight int
	// QueuedMaxRequestBytes (queued.max.request.bytes) bounds the request
	// bytes read but not yet answered on one connection: a frame whose
	// payload would take the connection past it is not read until earlier
	// replies are written and their frames freed, so the client's writes
	// block (TCP flow control) instead of the broker's memory growing. A
	// frame is always admitted when nothing is queued on its connection, so
	// a frame larger than the bound (up to MaxFrameBytes) still makes
	// progress. 0 = DefaultQueuedMaxRequestBytes; negative = unbounded
	// (Kafka's -1).
	QueuedMaxRequestBytes int64
	// MaxQueuedBytes (queued.max.request.bytes, KIP-72) is the broker-wide
	// budget of request bytes read and not yet answered, over every
	// connection: the frames, plus what handlers add with Reply.Reserve
	// (decoded requests). A reader takes a frame's size from it after the
	// size prefix and before reading the payload, waiting (so the socket is
	// not read and the client's writes block) while it does not fit; the
	// bytes come back when the slot is freed (response written, or dropped
	// with its connection). A frame larger than the whole budget is refused
	// like one larger than MaxFrameBytes. 0 = DefaultMaxQueuedBytes;
	// negative = unbounded (Kafka's -1).
	MaxQueuedBytes int64
	// IdleTimeout (connections.max.idle.ms) closes a connection on which
	// nothing arrived for this long while no request was in flight, and one
	// whose response write made no progress for this long. 0 = never.
	IdleTimeout time.Duration
	// Logger receives connection-level log lines; nil = slog.Default().
	// Refused frames log at most refusedLogBurst lines per
	// refusedLogWindow, the next line counting those held back.
	Logger *slog.Logger
	// Now is the clock of those log limits, of the connection rates and
	// of the connections' deadlines (TLS handshake, IdleTimeout; a
	// deadline is a wall-clock instant, so a clock injected together with
	// IdleTimeout must keep near the wall clock); nil = clocks.Wall.
	Now clocks.Clock
	// Limits are the connection limits (limits.go); nil:
	// DefaultConnLimits, nothing limited. SetConnLimits changes them.
	Limits *ConnLimits
	// SumFramesFrom: a pooled frame of at least this many bytes is read a
	// piece at a time and its 1 KiB blocks checksummed (CRC-32C) as they
	// arrive, while they are in the CPU's cache (Reply.Sums, package
	// crcsum); 0 = never.
	SumFramesFrom int

	// copyFiles makes file parts take the pread + write fallback instead of
	// sendfile; tests and benchmarks compare the two.
	copyFiles bool
}

// ConnCloseHandler is an optional interface of a Handler: ConnClosed is
// called exactly once per connection whose reader started (every connection
// Serve registered; one refused because the Server was closing never
// reaches the Handler and gets no call), after it closed
// (Done is closed and replies completed from now on are dropped), on the
// goroutine that closed it. It must not block. Handlers use it to end work
// parked for the connection (a long poll) without a goroutine watching Done.
type ConnCloseHandler interface {
	ConnClosed(c *Conn)
}

// Handler serves frames. Serve is called on the connection's read goroutine,
// sequentially and in arrival order for one connection. It must complete r
// exactly once (Send, SendParts, Skip or Close), inline or later from any
// goroutine, and must not block indefinitely (long waits belong on another
// goroutine, watching c.Done()). frame (the request without its size prefix)
// stays valid and unmodified until r's response is written or dropped, which
// is after r completes; netpoll reuses it afterwards.
type Handler interface {
	Serve(c *Conn, frame []byte, r *Reply)
}

// Server accepts connections and runs their readers and writers.
type Server struct {
	cfg    Config
	h      Handler
	log    *slog.Logger
	nextID atomic.Uint64
	// refused limits the "refusing frame" log lines.
	refused *ratelog.Shared
	// budget is the broker-wide request budget; nil when unbounded.
	budget *budget
	// limits counts connections and applies the connection limits.
	limits *limiter

	// File bytes written by sendfile and by the copy fallback (tests check
	// which path ran).
	sendfileBytes atomic.Int64
	copiedBytes   atomic.Int64

	// wg counts Serve loops and every connection goroutine. Add happens under
	// mu while !closed, so it never races Close's Wait.
	wg sync.WaitGroup
	// done is closed by Close; it cuts accept back-off sleeps short.
	done chan struct{}

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*Conn]struct{}
}

// Refused-frame log lines: at most refusedLogBurst per refusedLogWindow.
const (
	refusedLogWindow = 10 * time.Second
	refusedLogBurst  = 20
)

// NewServer returns a Server that passes frames to h.
func NewServer(cfg Config, h Handler) *Server {
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.QueuedMaxRequestBytes == 0 {
		cfg.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if cfg.MaxQueuedBytes == 0 {
		cfg.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	var b *budget
	if cfg.MaxQueuedBytes > 0 {
		b = newBudget(cfg.MaxQueuedBytes)
	}
	if cfg.IdleTimeout < 0 {
		cfg.IdleTimeout = 0
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Now = clocks.Or(cfg.Now)
	lim := DefaultConnLimits()
	if cfg.Limits != nil {
		lim = *cfg.Limits
	}
	return &Server{
		limits:    newLimiter(lim),
		cfg:       cfg,
		h:         h,
		log:       cfg.Logger,
		refused:   ratelog.NewShared(refusedLogWindow, refusedLogBurst),
		budget:    b,
		done:      make(chan struct{}),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*Conn]struct{}),
	}
}

// Config returns the effective configuration (defaults filled in).
func (s *Server) Config() Config { return s.cfg }

// QueuedBytes returns the bytes of the broker-wide request budget in use:
// frames read and not yet answered plus what handlers reserved for them
// (0 when the budget is unbounded).
func (s *Server) QueuedBytes() int64 {
	if s.budget == nil {
		return 0
	}
	return s.budget.inUse()
}

// checkFrame judges a request's size prefix: negative, larger than
// MaxFrameBytes (socket.request.max.bytes), or larger than the whole
// broker-wide budget (it could never be admitted) is refused.
func (s *Server) checkFrame(size int32) error {
	if err := kframe.CheckSize(size, s.cfg.MaxFrameBytes); err != nil {
		return err
	}
	if s.budget != nil && int64(size) > s.budget.limit {
		return ErrFrameOverBudget
	}
	return nil
}

// giveBack returns n bytes to the broker-wide budget.
func (s *Server) giveBack(n int64) {
	if s.budget != nil {
		s.budget.release(n)
	}
}

// NumConns returns the number of open connections.
func (s *Server) NumConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Accept back-off after a resource error (out of file descriptors, ...),
// doubling from min to max, as net/http does.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// Serve accepts connections on ln until Close and returns nil after Close.
// It returns ln's error if ln fails for another reason. Serve may be called
// for several listeners at once; Close closes them all.
func (s *Server) Serve(ln net.Listener) error {
	return s.serve(ln, &plaintext)
}

// plaintext is the listener of Serve: unnamed, no TLS.
var plaintext = Listener{}

func (s *Server) serve(ln net.Listener, l *Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.limits.serving(l.Name, 1)
	defer func() {
		s.limits.serving(l.Name, -1)
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		s.wg.Done()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if !retryableAcceptError(err) {
				return err
			}
			backoff = min(max(2*backoff, minAcceptBackoff), maxAcceptBackoff)
			s.log.Warn("netpoll: accept failed; retrying", "err", err, "backoff", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
				return nil
			}
			continue
		}
		backoff = 0
		ip := remoteIP(nc.RemoteAddr())
		if !s.admit(nc, l, ip) { // limits.go
			continue
		}
		s.startConn(nc, l, ip)
	}
}

// retryableAcceptError reports whether Accept may succeed if tried again.
func retryableAcceptError(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS,
		syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// startConn registers nc (admitted: counted under ip) and starts its
// reader and writer, or closes nc if the Server is closed.
func (s *Server) startConn(nc net.Conn, l *Listener, ip string) {
	c := newConn(s, nc, l)
	c.ip = ip
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		s.limits.release(l.Name, ip)
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(2)
	s.mu.Unlock()
	go c.readLoop()
	go c.writeLoop()
}

// removeConn forgets c (called once, when c closes).
func (s *Server) removeConn(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.limits.release(c.l.Name, c.ip)
}

// Close closes every listener and connection and waits for the Serve loops
// and connection goroutines to end. Replies completed afterwards are dropped
// (their done callbacks still run). Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	lns := make([]net.Listener, 0, len(s.listeners))
	for ln := range s.listeners {
		lns = append(lns, ln)
	}
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	var err error
	for _, ln := range lns {
		if cerr := ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
			err = cerr
		}
	}
	for _, c := range conns {
		c.Close()
	}
	s.wg.Wait()
	return err
}
