package loadgen

// --faults: while the producers run, a fault driver injects faults into
// the spawned brokers, one at a time:
//
//   - kill: SIGKILL a random broker, wait for it to exit, start it again
//     with the same arguments (same data directory, same ports, same node
//     id), and wait until it listens;
//   - pause: SIGSTOP a random broker for --fault-pause, then SIGCONT.
//
// The broker is drawn in rounds: every broker once per round, in a random
// order (the kind at random among --faults), so a campaign faults each
// broker about as often.
//
// After each fault the driver waits (at most faultRecoverTimeout) until
// the cluster has recovered: every broker listed in Metadata and every
// partition of the topic with all its replicas in sync. The next fault
// starts --fault-interval after the previous one started, or once the
// cluster has recovered if that took longer. --fault-count bounds the
// faults (0: as many as the run's duration allows). When the producers
// are done the driver is stopped: a pause in progress ends at once, a
// killed broker is always started again, so the read-back of --verify
// sees every broker.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fault kinds.
const (
	FaultKill  = "kill"
	FaultPause = "pause"
)

// FaultKinds are the faults --faults knows.
var FaultKinds = []string{FaultKill, FaultPause}

const (
	// faultRecoverTimeout bounds the wait for the cluster to recover after
	// one fault.
	faultRecoverTimeout = 60 * time.Second
	// faultExitTimeout bounds the wait for a SIGKILLed broker to exit.
	faultExitTimeout = 10 * time.Second
	// faultRestartAttempts bounds the starts of a killed broker that
	// exit at once.
	faultRestartAttempts = 3
	// maxFaultEvents bounds the events the report keeps one by one.
	maxFaultEvents = 10_000
	// FaultsVersion is the version of the report's "faults" object.
	FaultsVersion = 1
)

// ParseFaults parses a comma-separated list of fault kinds.
func ParseFaults(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(strings.ToLower(f))
		if f == "" {
			continue
		}
		if !slices.Contains(FaultKinds, f) {
			return nil, fmt.Errorf("fault %q: want %s (partition, disk-full and power-loss faults are not implemented yet)", f, strings.Join(FaultKinds, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// FaultEvent is one injected fault.
type FaultEvent struct {
	Kind   string  `json:"kind"`
	Broker int     `json:"broker"` // node id
	AtS    float64 `json:"at_s"`   // since the run's start
	// DownS is how long the broker was dead or stopped (kill: SIGKILL to
	// listening again; pause: SIGSTOP to SIGCONT).
	DownS float64 `json:"down_s"`
	// RecoveredS is from the fault's start until the cluster listed every
	// broker and every partition was fully in sync again; absent if it did
	// not within the bound (or the run ended first).
	RecoveredS *float64 `json:"recovered_s,omitempty"`
	// CutShort: the run ended before the cluster had recovered.
	CutShort bool   `json:"cut_short,omitempty"`
	Error    string `json:"error,omitempty"`
}

// FaultCount is how many faults of one kind ran.
type FaultCount struct {
	Kind   string `json:"kind"`
	Count  int    `json:"count"`
	Failed int    `json:"failed"` // could not be injected or undone (Error in its event)
	// NotRecovered counts faults after which the cluster did not recover
	// within the bound (faults the end of the run cut short aside).
	NotRecovered int `json:"not_recovered"`
}

// FaultsResult is what the fault driver did: the report's "faults" object.
type FaultsResult struct {
	Version    int          `json:"version"`
	Kinds      []string     `json:"kinds"`
	IntervalS  float64      `json:"interval_s"`
	PauseS     float64      `json:"pause_s,omitempty"`
	CountLimit int          `json:"count_limit"` // 0: bounded by the run's duration
	Total      int          `json:"total"`
	Ran        []FaultCount `json:"ran"`
	// MaxRecoveredS is the longest recovery of the run.
	MaxRecoveredS float64      `json:"max_recovered_s"`
	Events        []FaultEvent `json:"events"`
	// ClientDataLoss counts the producer client's own data-loss
	// detections (franz-go: a partition's sequence went backwards).
	ClientDataLoss int64 `json:"client_data_loss"`
}

// faultDriver injects the faults of one run. run is its goroutine; stop
// ends it and waits for it.
type faultDriver struct {
	cluster  *Cluster
	admin    *kgo.Client
	topic    string
	kinds    []string
	interval time.Duration
	pause    time.Duration
	count    int
	rng      *rand.Rand
	clock    func() time.Duration // run clock
	logw     io.Writer

	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	events []FaultEvent
	counts map[string]*FaultCount
	maxRec float64
}

func newFaultDriver(cfg *Config, cluster *Cluster, admin *kgo.Client, clock func() time.Duration, logw io.Writer) *faultDriver {
	return &faultDriver{
		cluster: cluster, admin: admin, topic: cfg.Topic, kinds: cfg.Faults,
		interval: cfg.FaultInterval, pause: cfg.FaultPause, count: cfg.FaultCount,
		rng:   rand.New(rand.NewPCG(cfg.Seed, 0xfa017)),
		clock: clock, logw: logw, counts: map[string]*FaultCount{},
	}
}

// start runs the driver on a goroutine of its own until stop.
func (d *faultDriver) start(ctx context.Context) {
	ctx, d.cancel = context.WithCancel(ctx)
	d.done = make(chan struct{})
	go func() {
		defer close(d.done)
		d.run(ctx)
	}()
}

// stop ends the driver (undoing a fault in progress) and returns what it
// did.
func (d *faultDriver) stop() *FaultsResult {
	d.cancel()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	r := &FaultsResult{Version: FaultsVersion, Kinds: d.kinds, IntervalS: d.interval.Seconds(), CountLimit: d.count,
		MaxRecoveredS: d.maxRec, Events: d.events}
	if slices.Contains(d.kinds, FaultPause) {
		r.PauseS = d.pause.Seconds()
	}
	for _, k := range d.kinds {
		c := FaultCount{Kind: k}
		if fc := d.counts[k]; fc != nil {
			c = *fc
		}
		r.Ran = append(r.Ran, c)
		r.Total += c.Count
	}
	if r.Events == nil {
		r.Events = []FaultEvent{}
	}
	return r
}

func (d *faultDriver) run(ctx context.Context) {
	next := d.clock() + d.interval
	var order []int // brokers still to fault in this round, in random order
	for i := 0; d.count == 0 || i < d.count; i++ {
		t := time.NewTimer(next - d.clock())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		next = d.clock() + d.interval
		kind := d.kinds[d.rng.IntN(len(d.kinds))]
		if len(order) == 0 {
			order = d.rng.Perm(len(d.cluster.Brokers))
		}
		b := d.cluster.Brokers[order[0]]
		order = order[1:]
		ev := FaultEvent{Kind: kind, Broker: b.NodeID, AtS: d.clock().Seconds()}
		began := d.clock()
		var err error
		switch kind {
		case FaultKill:
			err = d.kill(b)
		case FaultPause:
			err = d.pauseBroker(ctx, b)
		}
		ev.DownS = (d.clock() - began).Seconds()
		if err != nil {
			ev.Error = err.Error()
			fmt.Fprintf(d.logw, "fault %s broker %d: %v\n", kind, b.NodeID, err)
		} else if rerr := d.waitRecovered(ctx, int32(b.NodeID)); rerr == nil {
			rec := (d.clock() - began).Seconds()
			ev.RecoveredS = &rec
		} else if ctx.Err() != nil {
			ev.CutShort = true
		}
		d.note(ev)
		if err != nil && kind == FaultKill {
			return // a broker that cannot be started again ends the campaign
		}
	}
}

// note records one event.
func (d *faultDriver) note(ev FaultEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.counts[ev.Kind]
	if c == nil {
		c = &FaultCount{Kind: ev.Kind}
		d.counts[ev.Kind] = c
	}
	c.Count++
	switch {
	case ev.Error != "":
		c.Failed++
	case ev.RecoveredS != nil:
		d.maxRec = max(d.maxRec, *ev.RecoveredS)
	case !ev.CutShort:
		c.NotRecovered++
	}
	if len(d.events) < maxFaultEvents {
		d.events = append(d.events, ev)
	}
}

// kill SIGKILLs b, waits for it to exit and starts it again. It runs to
// its end even when the run stops meanwhile: the broker must be back for
// the read-back.
func (d *faultDriver) kill(b *SpawnedBroker) error {
	cmd, exited := b.proc()
	select {
	case <-exited:
		return fmt.Errorf("broker %d had exited before the fault", b.NodeID)
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL: %w", err)
	}
	select {
	case <-exited:
	case <-time.After(faultExitTimeout):
		return fmt.Errorf("broker %d did not exit within %v of SIGKILL", b.NodeID, faultExitTimeout)
	}
	// A restart can fail for a moment (a port of the broker's taken as
	// the local port of some outgoing connection meanwhile): try again a
	// few times before the campaign gives up.
	var err error
	for attempt := range faultRestartAttempts {
		if attempt > 0 {
			fmt.Fprintf(d.logw, "fault kill: broker %d did not start again (%v); retrying\n", b.NodeID, err)
			time.Sleep(time.Second)
		}
		if err = b.launch(0); err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), spawnStartTimeout)
		err = b.waitListening(ctx, spawnStartTimeout)
		cancel()
		if err == nil {
			return nil
		}
		if _, exited := b.proc(); !isClosed(exited) {
			return err // running but not listening in time: not worth another process
		}
	}
	return err
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// pauseBroker stops b for d.pause (less if ctx ends first), then lets it
// go on.
func (d *faultDriver) pauseBroker(ctx context.Context, b *SpawnedBroker) error {
	cmd, exited := b.proc()
	select {
	case <-exited:
		return fmt.Errorf("broker %d had exited before the fault", b.NodeID)
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP: %w", err)
	}
	t := time.NewTimer(d.pause)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT: %w", err)
	}
	return nil
}

// waitRecovered waits until Metadata, asked of any broker and of the
// faulted one, lists every spawned broker and every partition of the topic
// with all its replicas in sync, at most faultRecoverTimeout (or until ctx
// ends).
func (d *faultDriver) waitRecovered(ctx context.Context, faulted int32) error {
	ctx, cancel := context.WithTimeout(ctx, faultRecoverTimeout)
	defer cancel()
	for {
		if d.recovered(ctx, d.admin) && d.recovered(ctx, d.admin.Broker(int(faulted))) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (d *faultDriver) recovered(ctx context.Context, via kmsg.Requestor) bool {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(d.topic)
	req.Topics = append(req.Topics, t)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, via)
	if err != nil || len(resp.Brokers) != len(d.cluster.Brokers) || len(resp.Topics) != 1 {
		return false
	}
	td := resp.Topics[0]
	if td.ErrorCode != 0 || len(td.Partitions) == 0 {
		return false
	}
	for _, p := range td.Partitions {
		if p.ErrorCode != 0 || p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
			return false
		}
	}
	return true
}

// writeFaults prints the faults section of the table.
func writeFaults(b *strings.Builder, r *FaultsResult) {
	limit := "until the producers were done"
	if r.CountLimit > 0 {
		limit = fmt.Sprintf("at most %d", r.CountLimit)
	}
	pause := ""
	if r.PauseS > 0 {
		pause = fmt.Sprintf(", pauses of %.1f s", r.PauseS)
	}
	fmt.Fprintf(b, "\nfaults: %s, one every %.1f s (%s)%s\n", strings.Join(r.Kinds, ","), r.IntervalS, limit, pause)
	for _, c := range r.Ran {
		fmt.Fprintf(b, "  %-6s %d ran, %d failed, %d without recovery", c.Kind, c.Count, c.Failed, c.NotRecovered)
		fmt.Fprintln(b)
	}
	fmt.Fprintf(b, "  longest recovery (fault → every broker listed, every partition fully in sync) %.2f s\n", r.MaxRecoveredS)
	if r.ClientDataLoss > 0 {
		fmt.Fprintf(b, "  the producer client detected data loss %d times\n", r.ClientDataLoss)
	}
	for _, e := range r.Events {
		if e.Error != "" {
			fmt.Fprintf(b, "  %s broker %d at %.1f s failed: %s\n", e.Kind, e.Broker, e.AtS, e.Error)
		}
	}
}
