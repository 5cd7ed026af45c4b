package loadgen

// --faults: while the producers run, a fault driver injects faults into
// the spawned brokers, one at a time:
//
//   - kill: SIGKILL a random broker, wait for it to exit, start it again
//     with the same arguments (same data directory, same ports, same node
//     id), and wait until it listens;
//   - pause: SIGSTOP a random broker for --fault-pause, then SIGCONT;
//   - partition: cut a random broker off from the other brokers for
//     --fault-partition (its proxy blackholes their connections both ways,
//     proxy.go), then heal: the leaders shrink the ISR, and the follower
//     catches up and rejoins after the healing;
//   - client-partition: cut a random broker off from the clients for
//     --fault-partition, then heal;
//   - disk-full: fill a random broker's filesystem (each spawned broker's
//     data directory is a small filesystem of its own, smallfs.go) until
//     half its free-space floor is left, for --fault-disk-full, then free
//     it: the broker refuses produce (KAFKA_STORAGE_ERROR, retriable)
//     while below the floor and accepts it again by itself. The fault
//     fails unless the broker logged crossing below its floor;
//   - powerloss: cut the power of every broker at once. Each broker's
//     small filesystem is shut down as a power cut leaves it
//     (vfs.ShutdownFS: what was not on its device, dirty pages and the
//     uncommitted metadata journal, is lost; xfstests' "godown"), the
//     brokers are SIGKILLed, the filesystems mounted again (ext4 replays
//     its journal) and the brokers started on them. Only what a broker
//     made durable survives, on every replica at once: the test of
//     acks=all's fsync before the acknowledgement.
//
// The broker is drawn in rounds: every broker once per round, in a random
// order, and so is the kind (every kind of --faults once per round), so a
// campaign faults each broker about as often, with each kind about as
// often.
//
// After each fault the driver waits (at most faultRecoverTimeout) until
// the cluster has recovered: every broker listed in Metadata and every
// partition of the topic with all its replicas in sync. The next fault
// starts --fault-interval after the previous one started, or once the
// cluster has recovered if that took longer. --fault-count bounds the
// faults (0: as many as the run's duration allows). When the producers
// are done the driver is stopped: a pause in progress ends at once, a
// killed broker is always started again and a partition healed, and the
// recovery of that fault is still waited for (bounded as above), so the
// read-back of --verify sees every broker and the event its recovery.
//
// Meanwhile an ISR watcher reads every partition's ISR from Metadata
// (isrWatchInterval) through a client that bypasses the proxies, and
// counts shrinks (a partition's ISR lost a member) and expands (it gained
// one).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fault kinds.
const (
	FaultKill            = "kill"
	FaultPause           = "pause"
	FaultPartition       = "partition"
	FaultClientPartition = "client-partition"
	FaultDiskFull        = "disk-full"
	FaultPowerLoss       = "powerloss"
)

// FaultKinds are the faults --faults knows.
var FaultKinds = []string{FaultKill, FaultPause, FaultPartition, FaultClientPartition, FaultDiskFull, FaultPowerLoss,
	FaultControllerKill, FaultControllerPause}

// AllBrokers is FaultEvent.Broker for a fault of every broker at once.
const AllBrokers = -1

// faultDiskBytes is the size of the filesystem each spawned broker gets
// for cfg's faults: FaultDiskBytes with disk-full or powerloss, 0 (the
// machine's own) otherwise.
func faultDiskBytes(cfg *Config) int64 {
	if !slices.Contains(cfg.Faults, FaultDiskFull) && !slices.Contains(cfg.Faults, FaultPowerLoss) {
		return 0
	}
	return cfg.FaultDiskBytes
}

// needsProxy reports whether faults include a network partition, which
// needs the spawned brokers behind loadgen's proxies.
func needsProxy(faults []string) bool {
	return slices.Contains(faults, FaultPartition) || slices.Contains(faults, FaultClientPartition)
}

// faultLagTime is the replica.lag.time.max.ms loadgen gives spawned
// brokers for cfg's faults: with partition faults a quarter of
// --fault-partition (500 ms to Kafka's default of 30 s), so a partition
// shrinks the ISR; 0 (the broker's default) otherwise.
func faultLagTime(cfg *Config) time.Duration {
	if !slices.Contains(cfg.Faults, FaultPartition) {
		return 0
	}
	return min(max(cfg.FaultPartition/4, 500*time.Millisecond), 30*time.Second)
}

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
	// isrWatchInterval is how often the ISR watcher reads Metadata.
	isrWatchInterval = 250 * time.Millisecond
	// defaultLagTime is the broker's replica.lag.time.max.ms default.
	defaultLagTime = 30 * time.Second
	// FaultsVersion is the version of the report's "faults" object
	// (fields are only added within a version).
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
			return nil, fmt.Errorf("fault %q: want %s", f, strings.Join(FaultKinds, ", "))
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
	Broker int     `json:"broker"` // node id; AllBrokers (-1) for powerloss
	AtS    float64 `json:"at_s"`   // since the run's start
	// DownS is how long the broker was dead, stopped or cut off (kill:
	// SIGKILL to listening again; pause: SIGSTOP to SIGCONT; partitions:
	// cut to healed).
	DownS float64 `json:"down_s"`
	// Held is the most connections a partition held at once (its proxy
	// forwarding nothing for them).
	Held int `json:"held,omitempty"`
	// FilledBytes is what a disk-full fault reserved in the broker's
	// filesystem.
	FilledBytes int64 `json:"filled_bytes,omitempty"`
	// MetadataS is, for a controller fault, the seconds from its start
	// until a metadata change (a probe topic created and deleted through
	// another broker) was committed while the stopped controller was
	// down; NewController is the controller that broker named then (with
	// controller-only nodes: the one that logged leading the quorum).
	MetadataS     *float64 `json:"metadata_s,omitempty"`
	NewController *int32   `json:"new_controller,omitempty"`
	// ControllerOnly: Broker is a controller-only node's id
	// (--spawn-controllers), not a broker's.
	ControllerOnly bool `json:"controller_only,omitempty"`
	// ISRShrinks and ISRExpands are the ISR changes the watcher saw from
	// this fault's start to the next one's (or the end of the faults).
	ISRShrinks int `json:"isr_shrinks"`
	ISRExpands int `json:"isr_expands"`
	// RecoveredS is from the fault's start until the cluster listed every
	// broker and every partition was fully in sync again; absent if it did
	// not within the bound (or the run ended first).
	RecoveredS *float64 `json:"recovered_s,omitempty"`
	// CutShort: the run ended before the cluster had recovered.
	CutShort bool   `json:"cut_short,omitempty"`
	Error    string `json:"error,omitempty"`
	// Window is what the producers saw from the fault's start until the
	// cluster recovered (or the next fault, or the end of the run), from
	// the per-second timeline; absent when no sample overlaps it.
	Window *FaultWindow `json:"window,omitempty"`
}

// FaultWindow is the producers' view of one fault: the timeline's samples
// (one a second) whose middle lies in [FromS, ToS] (or, for a window
// shorter than that, the one that overlaps it most), in the run's seconds
// as AtS.
type FaultWindow struct {
	FromS   float64 `json:"from_s"`
	ToS     float64 `json:"to_s"`
	Samples int     `json:"samples"`
	// Errors are the records that failed in those samples.
	Errors int64 `json:"errors"`
	// MinRecordsPerSec is the lowest acknowledged rate of a sample.
	MinRecordsPerSec float64 `json:"min_records_per_sec"`
	// MaxProduceP99Ms and MaxProduceMaxMs are the highest per-second
	// produce (send→ack) p99 and maximum.
	MaxProduceP99Ms float64 `json:"max_produce_p99_ms"`
	MaxProduceMaxMs float64 `json:"max_produce_max_ms"`
}

// setWindows gives every event its FaultWindow from timeline, whose
// sample times count from measureOff on the run's clock; a sample covers
// the second (or less, the first and the last) before its time. A sample
// belongs to a window when its middle lies in it (a sample mostly before
// or after the fault says nothing about it); a window no middle falls in
// takes the sample that overlaps it most.
func (r *FaultsResult) setWindows(timeline []Sample, measureOff time.Duration) {
	off := measureOff.Seconds()
	for i := range r.Events {
		e := &r.Events[i]
		end := e.AtS + e.DownS
		if e.RecoveredS != nil {
			end = max(end, e.AtS+*e.RecoveredS)
		}
		if i+1 < len(r.Events) {
			end = min(end, r.Events[i+1].AtS)
		}
		w := FaultWindow{FromS: e.AtS, ToS: end}
		add := func(smp Sample) {
			if w.Samples == 0 || smp.RecordsPerSec < w.MinRecordsPerSec {
				w.MinRecordsPerSec = smp.RecordsPerSec
			}
			w.Samples++
			w.Errors += smp.Errors
			w.MaxProduceP99Ms = max(w.MaxProduceP99Ms, smp.ProduceP99Ms)
			w.MaxProduceMaxMs = max(w.MaxProduceMaxMs, smp.ProduceMaxMs)
		}
		prev, best, bestOver := 0.0, -1, 0.0
		for j, smp := range timeline {
			from, to := off+prev, off+smp.TS
			prev = smp.TS
			if over := min(to, w.ToS) - max(from, w.FromS); over > bestOver {
				best, bestOver = j, over
			}
			if mid := (from + to) / 2; mid >= w.FromS && mid <= w.ToS {
				add(smp)
			}
		}
		if w.Samples == 0 && best >= 0 {
			add(timeline[best])
		}
		if w.Samples > 0 {
			e.Window = &w
		}
	}
}

// maxFaultLines bounds the events the table prints one by one.
const maxFaultLines = 20

// FaultCount is how many faults of one kind ran.
type FaultCount struct {
	Kind   string `json:"kind"`
	Count  int    `json:"count"`
	Failed int    `json:"failed"` // could not be injected or undone (Error in its event)
	// NotRecovered counts faults after which the cluster did not recover
	// within the bound (faults the end of the run cut short aside).
	NotRecovered int `json:"not_recovered"`
	// ISRShrunk counts faults during which the ISR shrank.
	ISRShrunk int `json:"isr_shrunk"`
}

// ISRWatch is what the ISR watcher saw: the report's "faults"."isr".
type ISRWatch struct {
	IntervalS   float64 `json:"interval_s"`
	Polls       int     `json:"polls"`
	FailedPolls int     `json:"failed_polls"`
	// Shrinks and Expands count a partition's ISR losing or gaining
	// members between two polls.
	Shrinks int `json:"shrinks"`
	Expands int `json:"expands"`
	// MinISR is the smallest ISR seen (-1: none read).
	MinISR int `json:"min_isr"`
	// LagTimeS is the brokers' replica.lag.time.max.ms.
	LagTimeS float64 `json:"lag_time_s"`
}

// FaultsResult is what the fault driver did: the report's "faults" object.
type FaultsResult struct {
	Version    int          `json:"version"`
	Kinds      []string     `json:"kinds"`
	IntervalS  float64      `json:"interval_s"`
	PauseS     float64      `json:"pause_s,omitempty"`
	PartitionS float64      `json:"partition_s,omitempty"`
	DiskFullS  float64      `json:"disk_full_s,omitempty"`
	CountLimit int          `json:"count_limit"` // 0: bounded by the run's duration
	Total      int          `json:"total"`
	Ran        []FaultCount `json:"ran"`
	// MaxRecoveredS is the longest recovery of the run.
	MaxRecoveredS float64      `json:"max_recovered_s"`
	Events        []FaultEvent `json:"events"`
	// ClientDataLoss counts the producer client's own data-loss
	// detections (franz-go: a partition's sequence went backwards).
	ClientDataLoss int64     `json:"client_data_loss"`
	ISR            *ISRWatch `json:"isr"`
	// Verdict is "ok" when every fault was injected and undone, the
	// cluster recovered after each, and each partition longer than the
	// lag time (plus a second) was seen to shrink the ISR; "failed"
	// otherwise, with Problems saying why.
	Verdict  string   `json:"verdict"`
	Problems []string `json:"problems,omitempty"`
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
	cutFor   time.Duration // a partition's length
	fullFor  time.Duration // a full disk's length
	count    int
	probes   int // controller probes so far (each probe topic's number)
	rng      *rand.Rand
	clock    func() time.Duration // run clock
	logw     io.Writer

	cancel context.CancelFunc
	// runCtx is the run's context, which stop does not end: a fault in
	// progress when the producers finish is still waited out (its
	// recovery bounded by faultRecoverTimeout), so its event says how
	// long the cluster took rather than that the run ended first.
	runCtx context.Context
	done   chan struct{}
	mu     sync.Mutex
	events []FaultEvent
	counts map[string]*FaultCount
	maxRec float64
	// open is the last fault, whose ISR changes are counted until the
	// next one starts.
	open struct {
		kind             string
		idx              int // in events; -1: not kept
		shrinks, expands int // the watcher's counts at its start
		set              bool
	}
	watch      *isrWatcher
	watchStop  context.CancelFunc
	watchDone  chan struct{}
	watchClose func()
}

func newFaultDriver(cfg *Config, cluster *Cluster, admin *kgo.Client, clock func() time.Duration, logw io.Writer) *faultDriver {
	return &faultDriver{
		cluster: cluster, admin: admin, topic: cfg.Topic, kinds: cfg.Faults,
		interval: cfg.FaultInterval, pause: cfg.FaultPause, cutFor: cfg.FaultPartition, fullFor: cfg.FaultDiskFull, count: cfg.FaultCount,
		rng:   rand.New(rand.NewPCG(cfg.Seed, 0xfa017)),
		clock: clock, logw: logw, counts: map[string]*FaultCount{},
	}
}

// start runs the driver on a goroutine of its own until stop.
func (d *faultDriver) start(ctx context.Context) {
	d.runCtx = ctx
	ctx, d.cancel = context.WithCancel(ctx)
	d.done = make(chan struct{})
	d.startWatch(ctx)
	go func() {
		defer close(d.done)
		d.run(ctx)
	}()
}

// startWatch starts the ISR watcher with a client of its own, which
// connects to the brokers' own listeners (the proxies' faults never cut
// it).
func (d *faultDriver) startWatch(ctx context.Context) {
	d.watch = &isrWatcher{topic: d.topic, last: map[int32][]int32{}, minISR: -1}
	var direct map[string]string
	if d.cluster.proxies != nil {
		direct = d.cluster.proxies.upstreams()
	}
	seeds := make([]string, 0, len(d.cluster.Brokers))
	for _, b := range d.cluster.Brokers {
		seeds = append(seeds, b.ListenAddr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID(loadgenClientID+"-isr"),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if up, ok := direct[host]; ok {
				host = up
			}
			var nd net.Dialer
			return nd.DialContext(ctx, network, host)
		}))
	if err != nil {
		fmt.Fprintf(d.logw, "faults: ISR watcher not started: %v\n", err)
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	d.watchStop, d.watchDone, d.watchClose = cancel, make(chan struct{}), cl.Close
	go func() { // owned by the driver: stop ends it
		defer close(d.watchDone)
		d.watch.run(wctx, cl)
	}()
}

// stop ends the driver (undoing a fault in progress) and returns what it
// did.
func (d *faultDriver) stop() *FaultsResult {
	d.cancel()
	<-d.done
	if d.watchDone != nil {
		d.watchStop()
		<-d.watchDone
		d.watchClose()
	}
	d.closeOpen()
	d.mu.Lock()
	defer d.mu.Unlock()
	r := &FaultsResult{Version: FaultsVersion, Kinds: d.kinds, IntervalS: d.interval.Seconds(), CountLimit: d.count,
		MaxRecoveredS: d.maxRec, Events: d.events}
	if slices.Contains(d.kinds, FaultPause) || slices.Contains(d.kinds, FaultControllerPause) {
		r.PauseS = d.pause.Seconds()
	}
	if needsProxy(d.kinds) {
		r.PartitionS = d.cutFor.Seconds()
	}
	if slices.Contains(d.kinds, FaultDiskFull) {
		r.DiskFullS = d.fullFor.Seconds()
	}
	r.ISR = d.watch.result(d.lagTime())
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
	r.judge(d.lagTime())
	return r
}

// lagTime is the brokers' replica.lag.time.max.ms.
func (d *faultDriver) lagTime() time.Duration {
	if d.cluster.lagTime > 0 {
		return d.cluster.lagTime
	}
	return defaultLagTime
}

// judge sets the verdict.
func (r *FaultsResult) judge(lag time.Duration) {
	var problems []string
	for _, c := range r.Ran {
		if c.Failed > 0 {
			problems = append(problems, fmt.Sprintf("%d %s faults failed", c.Failed, c.Kind))
		}
		if c.NotRecovered > 0 {
			problems = append(problems, fmt.Sprintf("the cluster did not recover after %d %s faults", c.NotRecovered, c.Kind))
		}
	}
	// A partition longer than the lag time (a second of slack for the
	// leader's check and the watcher's polls) must shrink an ISR: the
	// cut-off broker follows some partition, whose leader drops it.
	missed := 0
	for _, e := range r.Events {
		if e.Kind == FaultPartition && e.Error == "" && !e.CutShort && e.DownS >= (lag+time.Second).Seconds() && e.ISRShrinks == 0 {
			missed++
		}
	}
	if missed > 0 {
		problems = append(problems, fmt.Sprintf("%d partitions longer than the lag time (%v) shrank no ISR", missed, lag))
	}
	if r.ISR != nil && r.Total > 0 && r.ISR.Polls == 0 {
		problems = append(problems, "the ISR watcher read no Metadata")
	}
	r.Verdict, r.Problems = "ok", problems
	if len(problems) > 0 {
		r.Verdict = "failed"
	}
}

// closeOpen counts the ISR changes of the last fault (see open).
func (d *faultDriver) closeOpen() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.open.set {
		return
	}
	d.open.set = false
	if d.watch == nil {
		return
	}
	sh, ex := d.watch.counts()
	sh -= d.open.shrinks
	ex -= d.open.expands
	if d.open.idx >= 0 {
		d.events[d.open.idx].ISRShrinks, d.events[d.open.idx].ISRExpands = sh, ex
	}
	if c := d.counts[d.open.kind]; c != nil && sh > 0 {
		c.ISRShrunk++
	}
}

func (d *faultDriver) run(ctx context.Context) {
	next := d.clock() + d.interval
	var order []int // brokers still to fault in this round, in random order
	var kinds []int // kinds still to inject in this round, in random order
	for i := 0; d.count == 0 || i < d.count; i++ {
		t := time.NewTimer(next - d.clock())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		next = d.clock() + d.interval
		d.closeOpen()
		var sh0, ex0 int
		if d.watch != nil {
			sh0, ex0 = d.watch.counts()
		}
		if len(kinds) == 0 {
			kinds = d.rng.Perm(len(d.kinds))
		}
		kind := d.kinds[kinds[0]]
		kinds = kinds[1:]
		if len(order) == 0 {
			order = d.rng.Perm(len(d.cluster.Brokers))
		}
		b := d.cluster.Brokers[order[0]]
		order = order[1:]
		var err error
		if isControllerFault(kind) {
			// Aimed at the quorum's leader, whichever broker it is.
			var c *SpawnedBroker
			if c, err = d.activeController(ctx); err == nil {
				b = c
			}
		}
		ev := FaultEvent{Kind: kind, Broker: b.NodeID, AtS: d.clock().Seconds(), ControllerOnly: !d.isBroker(int32(b.NodeID))}
		began := d.clock()
		switch {
		case err != nil:
		case isControllerFault(kind):
			var metaS float64
			var named int32
			metaS, named, err = d.controllerFault(ctx, kind, b, began)
			if metaS > 0 {
				ev.MetadataS = &metaS
			}
			if named >= 0 {
				ev.NewController = &named
			}
		default:
			err = d.inject(ctx, kind, b, &ev)
		}
		ev.DownS = (d.clock() - began).Seconds()
		if err != nil {
			ev.Error = err.Error()
			fmt.Fprintf(d.logw, "fault %s broker %d: %v\n", kind, b.NodeID, err)
		} else if rerr := d.waitRecovered(d.runCtx, int32(b.NodeID)); rerr == nil {
			rec := (d.clock() - began).Seconds()
			ev.RecoveredS = &rec
		} else if d.runCtx.Err() != nil {
			ev.CutShort = true
		}
		d.note(ev, sh0, ex0)
		if err != nil && (kind == FaultKill || kind == FaultPowerLoss) {
			return // a broker that cannot be started again ends the campaign
		}
		if _, exited := b.proc(); err != nil && kind == FaultControllerKill && isClosed(exited) {
			return // so does a controller that cannot
		}
	}
}

// inject runs one fault of the kinds aimed at broker b (every broker for
// powerloss).
func (d *faultDriver) inject(ctx context.Context, kind string, b *SpawnedBroker, ev *FaultEvent) error {
	var err error
	switch kind {
	case FaultKill:
		err = d.kill(b)
	case FaultPause:
		err = d.pauseBroker(ctx, b)
	case FaultPartition, FaultClientPartition:
		ev.Held, err = d.partition(ctx, b, kind == FaultClientPartition)
	case FaultDiskFull:
		ev.FilledBytes, err = d.diskFull(ctx, b)
	case FaultPowerLoss:
		ev.Broker = AllBrokers
		err = d.powerLoss()
	}
	return err
}

// note records one event; shrinks and expands are the ISR watcher's counts
// at its start.
func (d *faultDriver) note(ev FaultEvent, shrinks, expands int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.open.kind, d.open.idx, d.open.shrinks, d.open.expands, d.open.set = ev.Kind, -1, shrinks, expands, true
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
		d.open.idx = len(d.events)
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
	return d.restart(b)
}

// restart starts the exited broker b again with its arguments and waits
// until it listens.
func (d *faultDriver) restart(b *SpawnedBroker) error {
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

// partition cuts b off from the other brokers (clients false) or from
// the clients for d.cutFor (less if ctx ends first), then heals, and
// returns the most connections it held at once.
func (d *faultDriver) partition(ctx context.Context, b *SpawnedBroker, clients bool) (int, error) {
	px := d.cluster.proxies
	if px == nil {
		return 0, fmt.Errorf("broker %d has no proxy", b.NodeID)
	}
	px.resetHeld()
	px.cut(b.NodeID, clients)
	t := time.NewTimer(d.cutFor)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	held := px.resetHeld()
	px.heal(b.NodeID, clients)
	return held, nil
}

// waitRecovered waits until Metadata, asked of any broker and of the
// faulted one, lists every spawned broker and every partition of the topic
// with all its replicas in sync, at most faultRecoverTimeout (or until ctx
// ends: the run's, not the driver's, so the end of producing does not cut
// the wait short).
func (d *faultDriver) waitRecovered(ctx context.Context, faulted int32) error {
	ctx, cancel := context.WithTimeout(ctx, faultRecoverTimeout)
	defer cancel()
	for {
		if d.recovered(ctx, d.admin) && (!d.isBroker(faulted) || d.recovered(ctx, d.admin.Broker(int(faulted)))) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// isBroker says whether id is a spawned broker's (not a controller-only
// node's).
func (d *faultDriver) isBroker(id int32) bool {
	for _, b := range d.cluster.Brokers {
		if int32(b.NodeID) == id {
			return true
		}
	}
	return false
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
	if r.PartitionS > 0 {
		pause += fmt.Sprintf(", partitions of %.1f s", r.PartitionS)
	}
	if r.DiskFullS > 0 {
		pause += fmt.Sprintf(", full disks of %.1f s", r.DiskFullS)
	}
	fmt.Fprintf(b, "\nfaults: %s, one every %.1f s (%s)%s\n", strings.Join(r.Kinds, ","), r.IntervalS, limit, pause)
	width := 6
	for _, c := range r.Ran {
		width = max(width, len(c.Kind))
	}
	for _, c := range r.Ran {
		fmt.Fprintf(b, "  %-*s %d ran, %d failed, %d without recovery, %d shrank the ISR\n", width, c.Kind, c.Count, c.Failed, c.NotRecovered, c.ISRShrunk)
	}
	fmt.Fprintf(b, "  longest recovery (fault → every broker listed, every partition fully in sync) %.2f s\n", r.MaxRecoveredS)
	if w := r.ISR; w != nil {
		fmt.Fprintf(b, "  ISR (Metadata every %.2f s, %d reads, %d failed; replica.lag.time.max.ms %.1f s): %d shrinks, %d expands, smallest ISR %d\n",
			w.IntervalS, w.Polls, w.FailedPolls, w.LagTimeS, w.Shrinks, w.Expands, w.MinISR)
	}
	if r.Verdict != "" {
		fmt.Fprintf(b, "  faults %s", strings.ToUpper(r.Verdict))
		if len(r.Problems) > 0 {
			fmt.Fprintf(b, ": %s", strings.Join(r.Problems, "; "))
		}
		fmt.Fprintln(b)
	}
	if r.ClientDataLoss > 0 {
		fmt.Fprintf(b, "  the producer client detected data loss %d times\n", r.ClientDataLoss)
	}
	for i, e := range r.Events {
		if i == maxFaultLines {
			fmt.Fprintf(b, "  … %d more faults in the JSON report\n", len(r.Events)-i)
			break
		}
		switch {
		case e.Broker == AllBrokers:
			fmt.Fprintf(b, "  %.1f s %s of every broker: down %.1f s", e.AtS, e.Kind, e.DownS)
		case isControllerFault(e.Kind) && e.ControllerOnly:
			fmt.Fprintf(b, "  %.1f s %s of the active controller, controller-only node %d: down %.1f s", e.AtS, e.Kind, e.Broker, e.DownS)
		case isControllerFault(e.Kind):
			fmt.Fprintf(b, "  %.1f s %s of the active controller, broker %d: down %.1f s", e.AtS, e.Kind, e.Broker, e.DownS)
		default:
			fmt.Fprintf(b, "  %.1f s %s broker %d: down %.1f s", e.AtS, e.Kind, e.Broker, e.DownS)
		}
		if e.Held > 0 {
			fmt.Fprintf(b, ", held %d connection(s)", e.Held)
		}
		if e.FilledBytes > 0 {
			fmt.Fprintf(b, ", filled %s", bytesString(e.FilledBytes))
		}
		if e.MetadataS != nil {
			fmt.Fprintf(b, ", metadata written after %.1f s", *e.MetadataS)
			if e.NewController != nil {
				fmt.Fprintf(b, " (new controller %d)", *e.NewController)
			}
		}
		fmt.Fprintf(b, ", ISR -%d/+%d", e.ISRShrinks, e.ISRExpands)
		switch {
		case e.RecoveredS != nil:
			fmt.Fprintf(b, ", recovered after %.1f s", *e.RecoveredS)
		case e.CutShort:
			b.WriteString(", run ended before recovery")
		case e.Error == "":
			b.WriteString(", not recovered")
		}
		if w := e.Window; w != nil {
			fmt.Fprintf(b, "; %.1f–%.1f s: %s errors, slowest second %s rec/s, produce p99 up to %s ms, max %s ms",
				w.FromS, w.ToS, commas(float64(w.Errors), 0), commas(w.MinRecordsPerSec, 0), f2(w.MaxProduceP99Ms), f2(w.MaxProduceMaxMs))
		}
		if e.Error != "" {
			fmt.Fprintf(b, "; failed: %s", e.Error)
		}
		b.WriteString("\n")
	}
}

// isrWatcher counts the ISR changes of a topic's partitions.
type isrWatcher struct {
	topic string

	mu               sync.Mutex
	last             map[int32][]int32 // ISR by partition, as last read
	shrinks, expands int
	polls, failed    int
	minISR           int
}

func (w *isrWatcher) run(ctx context.Context, cl *kgo.Client) {
	t := time.NewTicker(isrWatchInterval)
	defer t.Stop()
	for {
		w.poll(ctx, cl)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *isrWatcher) poll(ctx context.Context, cl *kgo.Client) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(w.topic)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	resp, err := req.RequestWith(rctx, cl)
	cancel()
	if ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		w.failed++
		return
	}
	w.polls++
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			continue
		}
		w.observe(p.Partition, p.ISR)
	}
}

// observe accounts one partition's ISR as read. w.mu held.
func (w *isrWatcher) observe(partition int32, isr []int32) {
	if w.minISR < 0 || len(isr) < w.minISR {
		w.minISR = len(isr)
	}
	prev, seen := w.last[partition]
	w.last[partition] = slices.Clone(isr)
	if !seen {
		return
	}
	for _, id := range prev {
		if !slices.Contains(isr, id) {
			w.shrinks++
			break
		}
	}
	for _, id := range isr {
		if !slices.Contains(prev, id) {
			w.expands++
			break
		}
	}
}

// counts are the shrinks and expands seen so far (0, 0 for a nil
// watcher).
func (w *isrWatcher) counts() (shrinks, expands int) {
	if w == nil {
		return 0, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.shrinks, w.expands
}

func (w *isrWatcher) result(lag time.Duration) *ISRWatch {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return &ISRWatch{IntervalS: isrWatchInterval.Seconds(), Polls: w.polls, FailedPolls: w.failed,
		Shrinks: w.shrinks, Expands: w.expands, MinISR: w.minISR, LagTimeS: lag.Seconds()}
}

// floorCrossedLine is what a broker logs when its data directory drops
// below the free-space floor (engine/diskfloor.go).
const floorCrossedLine = "log directory below its free-space floor"

// diskFull fills b's filesystem to half its free-space floor for
// d.fullFor (less if ctx ends first), then frees it, and returns the bytes
// it reserved. It fails when b did not log crossing below its floor
// meanwhile (the fault would have tested nothing).
func (d *faultDriver) diskFull(ctx context.Context, b *SpawnedBroker) (int64, error) {
	if !b.smallFS {
		return 0, fmt.Errorf("broker %d's data directory is not a filesystem of its own", b.NodeID)
	}
	_, total, err := fsSpace(b.DataDir)
	if err != nil {
		return 0, err
	}
	before := strings.Count(tailFile(b.LogPath, 1<<20), floorCrossedLine)
	filled, err := fillDisk(b.DataDir, floorOf(total)/2)
	if err != nil {
		return 0, err
	}
	t := time.NewTimer(d.fullFor)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	if err := unfillDisk(b.DataDir); err != nil {
		return filled, fmt.Errorf("freeing broker %d's filesystem: %w", b.NodeID, err)
	}
	if ctx.Err() == nil && strings.Count(tailFile(b.LogPath, 1<<20), floorCrossedLine) == before {
		return filled, fmt.Errorf("broker %d never logged %q while %s of its %s filesystem were filled",
			b.NodeID, floorCrossedLine, bytesString(filled), bytesString(total))
	}
	return filled, nil
}

// powerLoss cuts every broker's power at once (see the package comment
// above): their filesystems shut down without writing anything back, the
// processes SIGKILLed, the filesystems mounted again and the brokers
// started on them. Like kill, it runs to its end even when the run stops
// meanwhile: the brokers must be back for the read-back.
func (d *faultDriver) powerLoss() error {
	bs := d.cluster.Brokers
	for _, b := range bs {
		if !b.smallFS {
			return fmt.Errorf("broker %d's data directory is not a filesystem of its own", b.NodeID)
		}
		if _, exited := b.proc(); isClosed(exited) {
			return fmt.Errorf("broker %d had exited before the fault", b.NodeID)
		}
	}
	// The power goes everywhere at once: every filesystem first, so no
	// broker writes anything more than the others had.
	var errs []error
	for _, b := range bs {
		if err := vfs.ShutdownFS(b.DataDir); err != nil {
			errs = append(errs, err)
		}
	}
	for _, b := range bs {
		cmd, _ := b.proc()
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			errs = append(errs, fmt.Errorf("SIGKILL broker %d: %w", b.NodeID, err))
		}
	}
	for _, b := range bs {
		_, exited := b.proc()
		select {
		case <-exited:
		case <-time.After(faultExitTimeout):
			return errors.Join(append(errs, fmt.Errorf("broker %d did not exit within %v of SIGKILL", b.NodeID, faultExitTimeout))...)
		}
	}
	if len(errs) > 0 { // a filesystem not shut down: the fault is not what it says
		return errors.Join(errs...)
	}
	for _, b := range bs {
		if err := remountSmallFS(b.DataDir); err != nil {
			return fmt.Errorf("broker %d's filesystem after the power loss: %w", b.NodeID, err)
		}
	}
	for _, b := range bs {
		if err := d.restart(b); err != nil {
			return err
		}
	}
	return nil
}
