package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Consumers in their own process. With --consumers the run's consumers do
// not share a Go runtime with its producers unless ConsumersInProcess is
// set: runOnce re-executes the strata binary as
//
//	strata loadgen _consumers
//
// and talks to it in JSON lines. Its stdin carries two messages from the
// parent, childSetup (what the consumers need: topic layout, start offsets,
// the run clock's zero as Unix ns) and, once the producers are built and
// the schedule is fixed, childStart (where the schedule and the
// measurement start on the run clock); closing its stdin tells it to stop.
// Its stdout carries childReports: one "ready" after its consumers are
// built (or an "error"), then one every consumerReportEvery with its
// counters (records consumed, consume errors, its CPU time) and, every
// consumerHistEvery reports and in the last one, the end-to-end latencies
// recorded since the previous histogram (HdrHistogram V2, compressed,
// base64). The last report is marked final and carries the distinct error
// messages. The parent folds each report into the run's own counters and
// into one recorder of its e2e set, so the sampler, the timeline, the
// progress lines and the result treat them as it treats in-process
// consumers'; per-second end-to-end figures lag by up to a second.
//
// End-to-end latency crosses the process boundary through the wall clock:
// the child reads it once at setup and places its run clock's zero at the
// parent's (base = its now shifted by parent base − its now as Unix ns),
// then measures on its monotonic clock like the parent.
//
// The child dies with the parent: the parent-death signal (Linux), and
// end of file on its stdin (the parent closed it or died) cancels its
// consumers; a signal to it does the same. The parent bounds the start
// (consumerProcStartTimeout) and the stop (consumerProcStopTimeout, then
// SIGKILL), and counts the child's CPU (/proc/<pid>/stat, else its last
// report) in the client CPU.

// ConsumerProcessArg is the hidden `strata loadgen` argument that runs the
// consumer process (RunConsumerProcess).
const ConsumerProcessArg = "_consumers"

const (
	consumerProcStartTimeout = 60 * time.Second
	consumerProcStopTimeout  = 10 * time.Second
	consumerReportEvery      = 100 * time.Millisecond
	consumerHistEvery        = 10 // reports: the histogram goes once a second
	maxChildLineBytes        = 16 << 20
	childStderrTail          = 4096
)

// childSetup is the parent's first message.
type childSetup struct {
	Topic           string           `json:"topic"`
	Partitions      int32            `json:"partitions"`
	Consumers       int              `json:"consumers"`
	Group           string           `json:"group,omitempty"`
	ShareGroup      string           `json:"share_group,omitempty"`
	Engine          string           `json:"engine"` // the consumers' engine
	ConsumerDelayNs int64            `json:"consumer_delay_ns"`
	Seeds           []string         `json:"seeds"`
	Leaders         []int32          `json:"leaders"`
	Addrs           map[int32]string `json:"addrs"`
	MaxFetch        map[int32]int16  `json:"max_fetch"`
	StartOffsets    map[int32]int64  `json:"start_offsets,omitempty"` // direct assignment
	BaseUnixNs      int64            `json:"base_unix_ns"`
	// Security is the clients' (the password too: the setup goes
	// through the child's stdin, never its arguments).
	Security Security `json:"security"`
	// Profile is a file for the process's CPU profile (Config.ConsumerProfile).
	Profile string `json:"profile,omitempty"`
}

// childStart is the parent's second message: the schedule's start and the
// measurement's, on the run clock.
type childStart struct {
	StartOffNs   int64 `json:"start_off_ns"`
	MeasureOffNs int64 `json:"measure_off_ns"`
}

// childReport is one line from the child. Counters are totals since the
// child started.
type childReport struct {
	Ready         bool         `json:"ready,omitempty"`
	PID           int          `json:"pid,omitempty"`
	GCPercent     int          `json:"gc_percent,omitempty"` // with Ready: the process's GOGC
	Error         string       `json:"error,omitempty"`
	Final         bool         `json:"final,omitempty"`
	Consumed      int64        `json:"consumed"`
	ConsumeErrors int64        `json:"consume_errors"`
	Redelivered   int64        `json:"redelivered,omitempty"`
	CPUNs         int64        `json:"cpu_ns"`
	Clamped       int64        `json:"clamped,omitempty"`
	E2E           string       `json:"e2e,omitempty"`
	Errors        []ErrorCount `json:"errors,omitempty"`
}

// consumerBin is the executable of the consumer process: StrataBin, or
// this executable.
func consumerBin(cfg *Config) (string, error) {
	if cfg.StrataBin != "" {
		return cfg.StrataBin, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("loadgen: finding the strata executable for the consumer process: %w", err)
	}
	return exe, nil
}

// consumerProc is the parent's handle on the consumer process. Its reader
// goroutine (read) owns the child's stdout and ends when the child closes
// it (exits or is killed); its waiter goroutine reaps the child after
// that. stop ends both.
type consumerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	st     *runStats
	rec    *recorder // the child's latencies, in st.e2e
	stderr *tailBuffer

	ready     chan error    // one value: nil once the consumers are built, else why not
	readDone  chan struct{} // closed when the reader has ended
	exited    chan struct{} // closed when the child has been reaped
	readErr   error         // written by the reader before readDone
	gcPercent int           // the child's GOGC, from its ready report (before ready)
	waitErr   error         // written by the waiter before exited
	final     atomic.Bool
	cpuNs     atomic.Int64

	stopOnce sync.Once
	stopErr  error
}

// startConsumerProc starts the consumer process for env's consumers and
// waits until they are built. On failure the child is killed and reaped.
func startConsumerProc(ctx context.Context, env *runEnv, start map[int32]int64) (*consumerProc, error) {
	bin, err := consumerBin(env.cfg)
	if err != nil {
		return nil, err
	}
	cfg, ti := env.cfg, env.topic
	setup := childSetup{
		Topic: cfg.Topic, Partitions: ti.partitions, Consumers: cfg.Consumers, Group: cfg.Group, ShareGroup: cfg.ShareGroup,
		Engine: cfg.consumerEngine(), ConsumerDelayNs: int64(cfg.ConsumerDelay), Seeds: env.seeds,
		Leaders: ti.leaders, Addrs: ti.addrs, MaxFetch: ti.maxFetch, StartOffsets: start, BaseUnixNs: env.baseUnix,
		Security: cfg.Security, Profile: cfg.ConsumerProfile,
	}
	p := &consumerProc{
		cmd:      exec.Command(bin, "loadgen", ConsumerProcessArg),
		st:       env.st,
		rec:      env.st.e2e.add(),
		stderr:   &tailBuffer{max: childStderrTail},
		ready:    make(chan error, 1),
		readDone: make(chan struct{}),
		exited:   make(chan struct{}),
	}
	p.cmd.Stderr = p.stderr
	setParentDeathSignal(p.cmd)
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("loadgen: starting the consumer process (%s): %w", bin, err)
	}
	go p.read(out)
	go func() { <-p.readDone; p.waitErr = p.cmd.Wait(); close(p.exited) }()
	if err := json.NewEncoder(p.stdin).Encode(&setup); err != nil {
		p.kill()
		return nil, fmt.Errorf("loadgen: consumer process: sending its setup: %w%s", err, p.stderrNote())
	}
	t := time.NewTimer(consumerProcStartTimeout)
	defer t.Stop()
	select {
	case err = <-p.ready:
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = fmt.Errorf("not ready after %v", consumerProcStartTimeout)
	}
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("loadgen: consumer process: %w%s", err, p.stderrNote())
	}
	return p, nil
}

// pid is the child's process id.
func (p *consumerProc) pid() int { return p.cmd.Process.Pid }

// begin sends the schedule's start and the measurement's.
func (p *consumerProc) begin(startOff, measureOff time.Duration) error {
	err := json.NewEncoder(p.stdin).Encode(childStart{StartOffNs: int64(startOff), MeasureOffNs: int64(measureOff)})
	if err != nil {
		return fmt.Errorf("loadgen: consumer process: starting it: %w%s", err, p.stderrNote())
	}
	return nil
}

// running reports whether the child still reports.
func (p *consumerProc) running() bool {
	select {
	case <-p.readDone:
		return false
	default:
		return true
	}
}

// cpu is the child's CPU time so far: /proc/<pid>/stat, or what it last
// reported where that cannot be read.
func (p *consumerProc) cpu() time.Duration {
	if c, _, _, err := procStats(p.pid()); err == nil {
		return c
	}
	return time.Duration(p.cpuNs.Load())
}

// stop tells the child to stop (closes its stdin), waits for its final
// report and its exit (at most consumerProcStopTimeout, then SIGKILL), and
// says how it ended. It is idempotent.
func (p *consumerProc) stop() error {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		t := time.NewTimer(consumerProcStopTimeout)
		defer t.Stop()
		var errs []error
		select {
		case <-p.readDone:
		case <-t.C:
			errs = append(errs, fmt.Errorf("still running %v after it was told to stop; killed", consumerProcStopTimeout))
			p.cmd.Process.Kill()
		}
		<-p.exited // the reader has ended: the child's stdout is closed, it exits or has been killed
		if p.readErr != nil {
			errs = append(errs, p.readErr)
		}
		if p.waitErr != nil {
			errs = append(errs, p.waitErr)
		}
		if !p.final.Load() {
			errs = append(errs, errors.New("ended without its final report"))
		}
		if len(errs) > 0 {
			p.stopErr = fmt.Errorf("loadgen: consumer process %d: %w%s", p.pid(), errors.Join(errs...), p.stderrNote())
		}
	})
	return p.stopErr
}

// kill ends a child that failed to start, and reaps it.
func (p *consumerProc) kill() {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		p.cmd.Process.Kill()
		<-p.exited
		p.stopErr = errors.New("loadgen: consumer process killed")
	})
}

func (p *consumerProc) stderrNote() string {
	if s := bytes.TrimSpace(p.stderr.bytes()); len(s) > 0 {
		return "; its stderr:\n" + string(s)
	}
	return ""
}

// read folds the child's reports into the run until the child closes its
// stdout.
func (p *consumerProc) read(out io.Reader) {
	defer close(p.readDone)
	sent := false
	signal := func(err error) {
		if !sent {
			sent = true
			p.ready <- err
		}
	}
	defer func() { signal(errors.New("exited before its consumers were ready")) }()
	var last childReport // totals already counted
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), maxChildLineBytes)
loop:
	for sc.Scan() {
		var m childReport
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			p.readErr = fmt.Errorf("unreadable report: %w", err)
			break
		}
		switch {
		case m.Error != "" && !sent:
			signal(errors.New(m.Error))
		case m.Error != "":
			p.st.consumeErrors.Add(1)
			p.st.noteError("consumer process: "+m.Error, 1)
		case m.Ready:
			if m.PID != p.pid() {
				p.readErr = fmt.Errorf("ready from pid %d, want %d", m.PID, p.pid())
				signal(p.readErr)
				break loop
			}
			p.gcPercent = m.GCPercent
			signal(nil)
		default:
			if err := p.apply(&m, &last); err != nil {
				p.readErr = err
				break loop
			}
		}
	}
	if err := sc.Err(); err != nil && p.readErr == nil {
		p.readErr = fmt.Errorf("reading its reports: %w", err)
	}
	io.Copy(io.Discard, out) // let it finish writing whatever follows a bad line
}

// apply folds one report into the run's counters and e2e recorder.
func (p *consumerProc) apply(m, last *childReport) error {
	if m.E2E != "" {
		h, err := decodeHist(m.E2E)
		if err != nil {
			return fmt.Errorf("report's histogram: %w", err)
		}
		p.rec.merge(h, m.Clamped)
	}
	p.st.consumed.Add(m.Consumed - last.Consumed)
	p.st.consumeErrors.Add(m.ConsumeErrors - last.ConsumeErrors)
	p.st.redelivered.Add(m.Redelivered - last.Redelivered)
	last.Consumed, last.ConsumeErrors, last.Redelivered = m.Consumed, m.ConsumeErrors, m.Redelivered
	p.cpuNs.Store(m.CPUNs)
	if m.Final {
		for _, e := range m.Errors {
			p.st.noteError(e.Error, e.Count)
		}
		p.final.Store(true)
	}
	return nil
}

func decodeHist(s string) (*hdrhistogram.Histogram, error) {
	if len(s) < 16 {
		return nil, errors.New("too short")
	}
	h, err := hdrhistogram.Decode([]byte(s))
	if err != nil {
		return nil, err
	}
	if h.LowestTrackableValue() != 1 || h.HighestTrackableValue() < histMaxMicros || h.SignificantFigures() != histSigFigs {
		return nil, fmt.Errorf("histogram of %d..%d, %d digits; want 1..%d, %d", h.LowestTrackableValue(),
			h.HighestTrackableValue(), h.SignificantFigures(), histMaxMicros, histSigFigs)
	}
	return h, nil
}

// tailBuffer keeps the last max bytes written to it (a child's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	t.mu.Unlock()
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.b...)
}

// RunConsumerProcess is the consumer process (`strata loadgen _consumers`):
// it reads its setup from in, builds the consumers, reports ready on out,
// waits for the start, runs them until in ends or ctx is done, and writes
// its reports to out (see the protocol above). now is the wall clock, read
// once to place the run clock.
func RunConsumerProcess(ctx context.Context, in io.Reader, out io.Writer, now func() time.Time) error {
	gcPercent := SetClientGC()
	dec := json.NewDecoder(in)
	w := &childWriter{enc: json.NewEncoder(out)}
	var setup childSetup
	if err := dec.Decode(&setup); err != nil {
		return fmt.Errorf("loadgen consumer process: reading its setup: %w", err)
	}
	env, err := setup.env(now)
	if err != nil {
		w.send(&childReport{Error: err.Error()})
		return err
	}
	var consumers []tailConsumer
	for k := range setup.Consumers {
		c, err := newTailConsumer(env, k, setup.StartOffsets, env.st.e2e.add())
		if err != nil {
			for _, c := range consumers {
				c.close()
			}
			err = fmt.Errorf("consumer %d: %w", k, err)
			w.send(&childReport{Error: err.Error()})
			return err
		}
		if c != nil {
			consumers = append(consumers, c)
		}
	}
	if err := w.send(&childReport{Ready: true, PID: os.Getpid(), GCPercent: gcPercent}); err != nil {
		for _, c := range consumers {
			c.close()
		}
		return err
	}
	var start childStart
	if err := dec.Decode(&start); err != nil {
		for _, c := range consumers {
			c.close()
		}
		if errors.Is(err, io.EOF) {
			return nil // stopped before the start
		}
		return fmt.Errorf("loadgen consumer process: reading its start: %w", err)
	}
	env.startOff, env.measureOff = time.Duration(start.StartOffNs), time.Duration(start.MeasureOffNs)
	if setup.Profile != "" {
		f, err := os.Create(setup.Profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			w.send(&childReport{Error: fmt.Sprintf("consumer profile: %v", err)})
			return fmt.Errorf("loadgen consumer process: %w", err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The end of stdin is the parent's stop (or its death). This goroutine
	// ends with stdin; if ctx ends first, it ends when the process exits.
	go func() {
		io.Copy(io.Discard, io.MultiReader(dec.Buffered(), in))
		cancel()
	}()
	var cwg sync.WaitGroup
	for _, c := range consumers {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			if !waitConsumerDelay(cctx, env) {
				c.close()
				return
			}
			c.run(cctx)
		}()
	}
	hist := newHist()
	tick := time.NewTicker(consumerReportEvery)
	defer tick.Stop()
	var werr error
	for n := 1; werr == nil && cctx.Err() == nil; n++ {
		select {
		case <-cctx.Done():
		case <-tick.C:
			werr = w.report(env.st, hist, n%consumerHistEvery == 0, false)
		}
	}
	cancel()
	cwg.Wait()
	if werr != nil {
		return fmt.Errorf("loadgen consumer process: reporting: %w", werr)
	}
	return w.report(env.st, hist, true, true)
}

// env builds the child's run environment: the parent's run clock, placed
// through the wall clock.
func (s *childSetup) env(now func() time.Time) (*runEnv, error) {
	n := s.Partitions
	switch {
	case s.Consumers < 1 || s.Consumers > MaxConsumers:
		return nil, fmt.Errorf("setup: %d consumers", s.Consumers)
	case n < 1 || int(n) != len(s.Leaders):
		return nil, fmt.Errorf("setup: %d partitions, %d leaders", n, len(s.Leaders))
	case s.Engine != EngineKgo && s.Engine != EngineNative:
		return nil, fmt.Errorf("setup: consumer engine %q", s.Engine)
	case s.Group == "" && s.ShareGroup == "" && len(s.StartOffsets) == 0:
		return nil, errors.New("setup: no start offsets")
	case s.ShareGroup != "" && (s.Group != "" || s.Engine != EngineKgo):
		return nil, fmt.Errorf("setup: share group %q with group %q, engine %s", s.ShareGroup, s.Group, s.Engine)
	}
	cfg := DefaultConfig()
	cfg.Topic, cfg.Partitions, cfg.Consumers, cfg.Group, cfg.ShareGroup = s.Topic, n, s.Consumers, s.Group, s.ShareGroup
	cfg.Engine, cfg.ConsumerEngine = s.Engine, s.Engine
	cfg.ConsumerDelay = time.Duration(s.ConsumerDelayNs)
	cfg.Security = s.Security
	base := now()
	base = base.Add(time.Duration(s.BaseUnixNs - base.UnixNano())) // keeps the monotonic reading
	return &runEnv{
		cfg: &cfg, base: base, baseUnix: s.BaseUnixNs, st: newRunStats(), seeds: s.Seeds,
		topic: &topicInfo{partitions: n, leaders: s.Leaders, addrs: s.Addrs, maxFetch: s.MaxFetch},
	}, nil
}

// childWriter writes the child's reports, one JSON line each.
type childWriter struct {
	enc *json.Encoder
}

func (w *childWriter) send(m *childReport) error { return w.enc.Encode(m) }

// report sends the counters, with the histogram of the latencies recorded
// since the last one if withHist, and the error list if final.
func (w *childWriter) report(st *runStats, hist *hdrhistogram.Histogram, withHist, final bool) error {
	m := childReport{Final: final, Consumed: st.consumed.Load(), ConsumeErrors: st.consumeErrors.Load(), Redelivered: st.redelivered.Load(),
		CPUNs: int64(clientCPU())}
	if withHist {
		hist.Reset()
		m.Clamped = st.e2e.collect(hist)
		if hist.TotalCount() > 0 {
			b, err := hist.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
			if err != nil {
				return err
			}
			m.E2E = string(b)
		}
	}
	if final {
		m.Errors = st.errorList()
	}
	return w.send(&m)
}
