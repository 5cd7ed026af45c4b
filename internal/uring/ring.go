package uring

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/internal/clocks"
)

var (
	// ErrClosed is returned by Submit and RegisterFile once Close has begun,
	// and by operations on a closed File.
	ErrClosed = errors.New("uring: closed")
	// ErrBusy is returned by Submit for an Op that is still in flight, and by
	// File.Close and Pool.Close while they are still in use.
	ErrBusy = errors.New("uring: busy")
	// ErrInvalid is returned by Submit for a malformed Op.
	ErrInvalid = errors.New("uring: invalid op")
	// ErrUnavailable wraps the reason io_uring cannot be used on this host;
	// it matches errors.ErrUnsupported.
	ErrUnavailable = fmt.Errorf("uring: io_uring unavailable: %w", errors.ErrUnsupported)
)

// Backend selects the engine behind a Ring.
type Backend string

const (
	// BackendAuto uses io_uring when the kernel offers it and pwrite otherwise.
	BackendAuto Backend = "auto"
	// BackendUring requires io_uring: New fails with ErrUnavailable without it.
	BackendUring Backend = "uring"
	// BackendPwrite uses pwrite/pread/fdatasync on a small worker pool.
	BackendPwrite Backend = "pwrite"
)

// ParseBackend parses a configuration value: "auto" (or ""), "uring" or
// "pwrite".
func ParseBackend(s string) (Backend, error) {
	switch Backend(s) {
	case "", BackendAuto:
		return BackendAuto, nil
	case BackendUring, BackendPwrite:
		return Backend(s), nil
	}
	return "", fmt.Errorf("uring: unknown backend %q (want auto, uring or pwrite)", s)
}

// Config configures New. The zero value is usable: auto backend, 128
// submission entries, 64 registered-file slots, 4 pwrite workers.
type Config struct {
	Backend Backend
	// Entries is the submission-queue size (rounded up to a power of two,
	// at most 4096); the completion queue gets twice as many, and at most
	// 2*Entries-1 ops are in flight in the kernel at once (more wait in the
	// Ring's queue). Default 128.
	Entries int
	// FileSlots is the size of the registered-file table (fixed files);
	// files registered beyond it use their plain descriptor. 0 means 64;
	// negative disables registered files.
	FileSlots int
	// Pools are registered as fixed buffers: reads and writes whose buffer
	// lies inside one use READ_FIXED/WRITE_FIXED. Each pool must outlive
	// the Ring (Pool.Close fails with ErrBusy until the Ring is closed).
	Pools []*Pool
	// Workers is the number of pwrite backend goroutines. Default 4.
	Workers int
	// MaxIOWorkers caps the kernel's io-wq worker threads for this ring
	// (bounded and unbounded) when > 0; buffered writes on ext4 and writes
	// that extend a file are executed by those workers.
	MaxIOWorkers int
	// BackgroundDepth, when > 0, is the most Background ops in the kernel
	// at once (see Op.Background); 0 leaves them unbounded.
	BackgroundDepth int
	// Logger receives the backend choice and fallbacks; nil means
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock of the io_uring owner's yield (yieldEvery); nil
	// means the wall clock (clocks.Or). The yield
	// paces a real goroutine against the runtime's sysmon, so it wants
	// the wall clock: only a test has reason to set this.
	Now func() time.Time
}

const (
	defaultEntries   = 128
	maxEntries       = 4096
	defaultFileSlots = 64
	defaultWorkers   = 4
	maxWorkers       = 256
)

// Opcode is the operation an Op performs.
type Opcode uint8

const (
	// OpNop completes without I/O (measures the ring's own cost).
	OpNop Opcode = iota
	// OpWrite writes all of Buf at Off (pwrite semantics; the file offset
	// is not used or moved).
	OpWrite
	// OpRead reads len(Buf) bytes at Off; a read that reaches end of file
	// completes with N < len(Buf) and Err == io.EOF.
	OpRead
	// OpFsync flushes File: fdatasync when Datasync, else fsync.
	OpFsync
	// OpFallocate allocates [Off, Off+Len) of File and raises its size to
	// cover it (fallocate(2) with mode 0). The kernel runs it on an io-wq
	// worker: the submitter never waits for the inode lock it takes nor for
	// the file's direct writes in flight, which fallocate waits out.
	OpFallocate

	opRegister     // internal: add File to the registered-file table
	opUnregister   // internal: remove it
	opRegisterPool // internal: add a Pool to the registered-buffer table
)

// Op is one asynchronous operation. The caller fills the request fields,
// passes the Op to Ring.Submit and must not touch it (nor Buf's bytes) until
// Done is called; then the result fields are valid and the Op may be reused
// or resubmitted, also from inside Done. Ops are meant to be allocated once
// and reused: Submit does not allocate.
type Op struct {
	// Request.
	Code     Opcode
	File     *File  // nil only for OpNop
	Buf      []byte // OpWrite/OpRead; stays referenced by the Ring until Done
	Off      int64  // file position for OpWrite/OpRead
	Datasync bool   // OpFsync: fdatasync instead of fsync
	Len      int64  // OpFallocate: bytes from Off
	// Done is called exactly once per successful Submit, on a goroutine
	// owned by the Ring, never concurrently with another Done of the same
	// Ring. It must not block (see the package doc).
	Done func(*Op)
	// Tag is the caller's; the Ring never reads or writes it.
	Tag uint64
	// Background marks a write that nothing waits for soon (write-behind):
	// with Config.BackgroundDepth set, at most that many are in the device
	// at once and the rest wait in the Ring, so a write someone waits for
	// is not queued behind them.
	Background bool

	// Result, valid inside and after Done.
	N   int   // bytes transferred
	Err error // nil, io.EOF (short read), or an *os.PathError

	state   atomic.Uint32 // 1 while submitted
	done    int           // bytes completed so far (continuations)
	slot    uint32        // in-flight table index (io_uring backend)
	retries uint8         // EINTR/EAGAIN resubmissions
	pool    *Pool         // opRegisterPool
}

// Stats are cumulative counters of a Ring.
type Stats struct {
	Submitted uint64 // ops accepted by Submit
	Completed uint64 // Done calls
	SQEs      uint64 // SQEs handed to the kernel, continuations included (io_uring)
	CQEs      uint64 // op completions reaped from the CQ (io_uring)
	Enters    uint64 // io_uring_enter calls
	Wakeups   uint64 // eventfd writes that woke a sleeping ring owner
	FixedBufs uint64 // SQEs that used a registered buffer
	FixedFile uint64 // SQEs that used a registered file
	Yields    uint64 // times a busy ring owner passed through the Go scheduler (io_uring)
}

type counters struct {
	submitted, completed, sqes, cqes, enters, wakeups, fixedBufs, fixedFile, yields atomic.Uint64
}

// engine is what a backend implements; Ring does validation and accounting.
type engine interface {
	submit(op *Op) error        // queue op; never blocks
	control(op *Op) error       // run a register/unregister op in order with submissions
	close()                     // drain everything accepted, then stop
	describe() string           // for the log line
	registeredBuffers() []*Pool // pools in use as fixed buffers
}

// Ring submits Ops to io_uring or to the pwrite fallback. All methods are
// safe for concurrent use.
type Ring struct {
	backend Backend // the one in use: BackendUring or BackendPwrite
	eng     engine
	log     *slog.Logger
	st      counters
	bg      bgGate

	closeOnce sync.Once
}

// New starts a Ring. With BackendAuto a host without usable io_uring (old
// kernel, seccomp, kernel.io_uring_disabled) gets the pwrite backend and a
// log line saying why; with BackendUring that is an error matching
// ErrUnavailable.
func New(cfg Config) (*Ring, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	r := &Ring{log: cfg.Logger}
	r.bg.limit = cfg.BackgroundDepth
	if cfg.Backend != BackendPwrite {
		eng, err := newUringEngine(r, cfg)
		if err == nil {
			r.backend, r.eng = BackendUring, eng
			r.log.Debug("uring: io_uring backend", "ring", eng.describe())
			return r, nil
		}
		if cfg.Backend == BackendUring || !errors.Is(err, ErrUnavailable) {
			return nil, err
		}
		r.log.Warn("uring: io_uring unavailable, falling back to pwrite", "reason", err.Error(), "workers", cfg.Workers)
	}
	r.backend, r.eng = BackendPwrite, newPwriteEngine(r, cfg.Workers)
	return r, nil
}

func (c Config) normalize() (Config, error) {
	b, err := ParseBackend(string(c.Backend))
	if err != nil {
		return c, err
	}
	c.Backend = b
	switch {
	case c.Entries == 0:
		c.Entries = defaultEntries
	case c.Entries < 0 || c.Entries > maxEntries:
		return c, fmt.Errorf("uring: Entries %d outside [1, %d]", c.Entries, maxEntries)
	}
	switch {
	case c.FileSlots == 0:
		c.FileSlots = defaultFileSlots
	case c.FileSlots < 0:
		c.FileSlots = 0
	case c.FileSlots > 1<<15:
		return c, fmt.Errorf("uring: FileSlots %d above %d", c.FileSlots, 1<<15)
	}
	switch {
	case c.Workers == 0:
		c.Workers = defaultWorkers
	case c.Workers < 0 || c.Workers > maxWorkers:
		return c, fmt.Errorf("uring: Workers %d outside [1, %d]", c.Workers, maxWorkers)
	}
	if c.MaxIOWorkers < 0 || c.MaxIOWorkers > math.MaxInt32 {
		return c, fmt.Errorf("uring: MaxIOWorkers %d out of range", c.MaxIOWorkers)
	}
	for i, p := range c.Pools {
		if p == nil {
			return c, fmt.Errorf("uring: Pools[%d] is nil", i)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Now = clocks.Or(c.Now)
	return c, nil
}

// Backend reports the engine in use: BackendUring or BackendPwrite.
func (r *Ring) Backend() Backend { return r.backend }

// String describes the engine for logs: ring sizes, setup flags, features,
// registered files and buffers, or the pwrite worker count.
func (r *Ring) String() string { return r.eng.describe() }

// Stats returns a snapshot of the Ring's counters.
func (r *Ring) Stats() Stats {
	return Stats{
		Submitted: r.st.submitted.Load(),
		Completed: r.st.completed.Load(),
		SQEs:      r.st.sqes.Load(),
		CQEs:      r.st.cqes.Load(),
		Enters:    r.st.enters.Load(),
		Wakeups:   r.st.wakeups.Load(),
		FixedBufs: r.st.fixedBufs.Load(),
		FixedFile: r.st.fixedFile.Load(),
		Yields:    r.st.yields.Load(),
	}
}

// Submit queues op and returns without blocking; op.Done reports the result.
// Errors (ErrInvalid, ErrBusy, ErrClosed) are returned only for ops that were
// not accepted, and then Done is not called. Submit may be called from Done.
func (r *Ring) Submit(op *Op) error {
	if err := r.validate(op); err != nil {
		return err
	}
	if !op.state.CompareAndSwap(0, 1) {
		return fmt.Errorf("%w: op submitted twice", ErrBusy)
	}
	op.N, op.Err, op.done, op.retries = 0, nil, 0, 0
	f := op.File
	if f != nil {
		f.inflight.Add(1)
		if f.closed.Load() {
			r.unaccept(op)
			return ErrClosed
		}
	}
	r.st.submitted.Add(1)
	if op.Background && r.bg.hold(op) {
		return nil
	}
	if err := r.eng.submit(op); err != nil {
		r.st.submitted.Add(^uint64(0))
		r.unaccept(op)
		return err
	}
	return nil
}

func (r *Ring) unaccept(op *Op) {
	if op.File != nil {
		op.File.inflight.Add(-1)
	}
	op.state.Store(0)
}

func (r *Ring) validate(op *Op) error {
	if op == nil || op.Done == nil {
		return fmt.Errorf("%w: nil op or nil Done", ErrInvalid)
	}
	switch op.Code {
	case OpNop:
		if op.File != nil && op.File.ring != r {
			return fmt.Errorf("%w: file registered with another ring", ErrInvalid)
		}
		return nil
	case OpWrite, OpRead:
		if op.Off < 0 || int64(len(op.Buf)) > math.MaxInt64-op.Off {
			return fmt.Errorf("%w: offset %d length %d", ErrInvalid, op.Off, len(op.Buf))
		}
	case OpFsync:
	case OpFallocate:
		if op.Off < 0 || op.Len <= 0 || op.Len > math.MaxInt64-op.Off {
			return fmt.Errorf("%w: fallocate offset %d length %d", ErrInvalid, op.Off, op.Len)
		}
	default:
		return fmt.Errorf("%w: opcode %d", ErrInvalid, op.Code)
	}
	if op.File == nil {
		return fmt.Errorf("%w: nil File", ErrInvalid)
	}
	if op.File.ring != r {
		return fmt.Errorf("%w: file registered with another ring", ErrInvalid)
	}
	return nil
}

// finish publishes op's result and calls its Done. Backends call it at most
// once per accepted op, one call at a time.
func (r *Ring) finish(op *Op, n int, err error) {
	op.N, op.Err = n, err
	if op.File != nil {
		op.File.inflight.Add(-1)
	}
	done := op.Done
	bg := op.Background
	r.st.completed.Add(1)
	op.state.Store(0) // op may be resubmitted from here on, also from done
	done(op)
	if bg {
		if next := r.bg.next(); next != nil {
			if err := r.eng.submit(next); err != nil {
				r.finish(next, 0, err)
			}
		}
	}
}

// bgGate holds Background writes past the Ring's BackgroundDepth, and all
// of them while paused.
type bgGate struct {
	mu       sync.Mutex
	limit    int
	inflight int
	paused   int
	q        opFIFO
}

// hold reports whether op waits in the gate (queued) rather than going to
// the engine now.
func (g *bgGate) hold(op *Op) bool {
	if g.limit <= 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight >= g.limit || g.paused > 0 {
		g.q.push(op)
		return true
	}
	g.inflight++
	return false
}

// next is called when a Background op completed: the queued op to submit
// in its place, or nil.
func (g *bgGate) next() *Op {
	if g.limit <= 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused == 0 && !g.q.empty() {
		return g.q.pop()
	}
	g.inflight--
	return nil
}

// PauseBackground holds every Background op submitted from now on (those
// in the kernel go on) until the matching ResumeBackground: a caller about
// to issue a write that someone waits for keeps write-behind from queueing
// in front of it. Pauses nest. No effect without BackgroundDepth.
func (r *Ring) PauseBackground() {
	g := &r.bg
	if g.limit <= 0 {
		return
	}
	g.mu.Lock()
	g.paused++
	g.mu.Unlock()
}

// ResumeBackground ends a PauseBackground: held ops go to the kernel up to
// BackgroundDepth.
func (r *Ring) ResumeBackground() {
	g := &r.bg
	if g.limit <= 0 {
		return
	}
	g.mu.Lock()
	if g.paused > 0 {
		g.paused--
	}
	g.mu.Unlock()
	for {
		g.mu.Lock()
		if g.paused > 0 || g.inflight >= g.limit || g.q.empty() {
			g.mu.Unlock()
			return
		}
		op := g.q.pop()
		g.inflight++
		g.mu.Unlock()
		if err := r.eng.submit(op); err != nil {
			r.finish(op, 0, err) // the ring is closing
		}
	}
}

// Close stops accepting ops, waits until every accepted op has completed
// (its Done has returned), then releases the ring. Later calls return nil at
// once. Close must not be called from a Done callback.
func (r *Ring) Close() error {
	r.closeOnce.Do(func() {
		r.eng.close()
		for _, p := range r.eng.registeredBuffers() {
			p.regs.Add(-1)
		}
	})
	return nil
}

// opFIFO is a queue of ops that reuses its backing array.
type opFIFO struct {
	buf  []*Op
	head int
}

func (q *opFIFO) len() int    { return len(q.buf) - q.head }
func (q *opFIFO) push(op *Op) { q.buf = append(q.buf, op) }
func (q *opFIFO) peek() *Op   { return q.buf[q.head] }
func (q *opFIFO) empty() bool { return q.head == len(q.buf) }
func (q *opFIFO) pushAll(ops []*Op) {
	q.buf = append(q.buf, ops...)
}

func (q *opFIFO) pop() *Op {
	op := q.buf[q.head]
	q.buf[q.head] = nil
	q.head++
	switch {
	case q.head == len(q.buf):
		q.buf, q.head = q.buf[:0], 0
	case q.head >= 256 && 2*q.head >= len(q.buf):
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	return op
}
