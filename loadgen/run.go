package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stratalog/strata/internal/clocks"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runEnv is what every producer and consumer of one run shares. It is
// written before their goroutines start and read-only afterwards.
type runEnv struct {
	cfg      *Config
	rate     float64       // this run's target (a --find-max step's own)
	duration time.Duration // this run's bound
	records  int64         // this run's bound
	base     time.Time     // the run clock's zero (monotonic)
	baseUnix int64         // base as Unix ns: stamps are baseUnix + scheduled offset
	startOff time.Duration // record 0's scheduled time on the run clock
	// measureOff is where the measurement starts on the run clock: records
	// scheduled before it (the lead-in) are produced and consumed but not
	// counted, so the measured window starts with producers, consumers and
	// broker already in their steady state.
	measureOff time.Duration
	st         *runStats
	seeds      []string
	admin      *kgo.Client
	topic      *topicInfo
	// ver records acknowledged records for --verify (nil: off); dataLoss
	// counts the kgo producers' own data-loss detections.
	ver      *verifier
	dataLoss atomic.Int64
}

// wallClock is the load generator's wall clock (clocks.Wall), and it
// must be the wall clock: the load generator measures real latency and
// throughput against a real broker, and its socket deadlines are
// wall-clock instants.
var wallClock = clocks.Wall

// now is the run clock: the time since the run's base, by its monotonic
// reading. It is clocks.Since because it runs for every record and
// time.Since reads only the monotonic clock, where wallClock().Sub would
// read both.
func (e *runEnv) now() time.Duration { return clocks.Since(e.base) }

// measured reports whether a record scheduled at t (run clock) counts.
func (e *runEnv) measured(t time.Duration) bool { return t >= e.measureOff }

// measuredTags counts the scheduled times in ts (run clock, ns) that count.
func (e *runEnv) measuredTags(ts []int64) int64 {
	n := int64(0)
	for _, t := range ts {
		if t >= int64(e.measureOff) {
			n++
		}
	}
	return n
}

// topicInfo is the topic's layout as metadata reported it before the run.
type topicInfo struct {
	partitions int32
	leaders    []int32          // by partition; -1 = none
	addrs      map[int32]string // broker node id → host:port
	maxProduce map[int32]int16  // broker node id → newest Produce version it serves
	maxFetch   map[int32]int16  // broker node id → newest Fetch version it serves
}

// produceVersion is the Produce version the native producer speaks to node.
func (t *topicInfo) produceVersion(node int32, codec record.Codec) (int16, error) {
	v, ok := t.maxProduce[node]
	if !ok {
		return 0, fmt.Errorf("broker %d did not report its API versions", node)
	}
	v = min(v, produceMaxVersion)
	if v < produceMinVersion {
		return 0, fmt.Errorf("broker %d serves Produce up to v%d; the native engine needs v%d (RecordBatch v2)", node, v, produceMinVersion)
	}
	if codec == record.CodecZstd && v < produceZstdMinVersion {
		return 0, fmt.Errorf("broker %d serves Produce up to v%d; zstd needs v%d", node, v, produceZstdMinVersion)
	}
	return v, nil
}

func errorForCode(code int16) error { return kerr.ErrorForCode(code) }

// metadataTimeout bounds topic creation and the wait for its leaders, plus
// metadataPerPartition per partition (creating 10,000 partitions' files
// takes tens of seconds on a busy machine).
const (
	metadataTimeout      = 30 * time.Second
	metadataPerPartition = 20 * time.Millisecond
)

// ensureTopic creates the topic unless it exists, waits until every
// partition has a leader with a known address and collects the leaders'
// Produce versions.
func ensureTopic(ctx context.Context, admin *kgo.Client, cfg *Config, logw io.Writer) (*topicInfo, error) {
	timeout := metadataTimeout + time.Duration(cfg.Partitions)*metadataPerPartition
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	adm := kadm.NewClient(admin)
	adm.SetTimeoutMillis(int32(timeout / time.Millisecond))
	tcfg, err := cfg.topicConfigs() // remotemetrics.go
	if err != nil {
		return nil, err
	}
	_, err = adm.CreateTopic(ctx, cfg.Partitions, cfg.ReplicationFactor, tcfg, cfg.Topic)
	switch {
	case err == nil:
		fmt.Fprintf(logw, "created topic %s with %d partitions, replication factor %d\n", cfg.Topic, cfg.Partitions, cfg.ReplicationFactor)
		if tcfg != nil {
			fmt.Fprintf(logw, "with remote.storage.enable=true (the spawn config names an object store)\n")
		}
	case errors.Is(err, kerr.TopicAlreadyExists):
	default:
		return nil, fmt.Errorf("creating topic %s: %w", cfg.Topic, err)
	}
	for attempt := 0; ; attempt++ {
		ti, err := describeTopic(ctx, adm, cfg.Topic)
		if err == nil {
			// Metadata may name a leader before that broker hosts the
			// partition (a fresh cluster): ask each leader for its end.
			err = leadersServe(ctx, adm, cfg.Topic, ti.partitions)
		}
		if err == nil {
			if ti.partitions != cfg.Partitions {
				fmt.Fprintf(logw, "note: topic %s exists with %d partitions (not %d); using it as it is\n", cfg.Topic, ti.partitions, cfg.Partitions)
			}
			return ti, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("topic %s not ready within %v: %w", cfg.Topic, timeout, err)
		case <-time.After(time.Duration(min(attempt+1, 10)) * 50 * time.Millisecond):
		}
	}
}

// leadersServe asks every partition's leader for its end offset (a
// ListOffsets each leader answers only for a partition it hosts): nil once
// all n answer without an error.
func leadersServe(ctx context.Context, adm *kadm.Client, topic string, n int32) error {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	for p := range n {
		o, ok := ends.Lookup(topic, p)
		if !ok {
			return fmt.Errorf("partition %d: no end offset yet", p)
		}
		if o.Err != nil {
			return fmt.Errorf("partition %d: %w", p, o.Err)
		}
	}
	return nil
}

func describeTopic(ctx context.Context, adm *kadm.Client, topic string) (*topicInfo, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok {
		return nil, fmt.Errorf("metadata does not list the topic")
	}
	if td.Err != nil {
		return nil, td.Err
	}
	n := int32(len(td.Partitions))
	if n == 0 {
		return nil, fmt.Errorf("topic has no partitions")
	}
	ti := &topicInfo{partitions: n, leaders: make([]int32, n), addrs: map[int32]string{}, maxProduce: map[int32]int16{}, maxFetch: map[int32]int16{}}
	for _, b := range md.Brokers {
		ti.addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	for p := range n {
		pd, ok := td.Partitions[p]
		if !ok || pd.Err != nil || pd.Leader < 0 {
			return nil, fmt.Errorf("partition %d has no leader yet", p)
		}
		if _, ok := ti.addrs[pd.Leader]; !ok {
			return nil, fmt.Errorf("partition %d's leader %d is not in the broker list", p, pd.Leader)
		}
		ti.leaders[p] = pd.Leader
	}
	versions, err := adm.ApiVersions(ctx)
	if err != nil {
		return nil, err
	}
	for node, v := range versions {
		if v.Err != nil {
			continue
		}
		if mx, ok := v.KeyMaxVersion(produceKey); ok {
			ti.maxProduce[node] = mx
		}
		if mx, ok := v.KeyMaxVersion(fetchKey); ok {
			ti.maxFetch[node] = mx
		}
	}
	return ti, nil
}

// producer is one producing engine instance.
type producer interface {
	setSchedule(s schedule)
	run(ctx context.Context) error
}

// runOutcome is one measured run.
type runOutcome struct {
	result   Result
	timeline []Sample
	produce  *hdrhistogram.Histogram
	e2e      *hdrhistogram.Histogram
	verify   *VerifyResult // --verify
	faults   *FaultsResult // --faults
}

// consumerCatchUpPoll is how often the end of a run checks whether the
// consumers have caught up with the acknowledged records.
const consumerCatchUpPoll = 20 * time.Millisecond

// waitConsumerDelay waits until cfg.ConsumerDelay after the producers'
// start; false if ctx ended first.
func waitConsumerDelay(ctx context.Context, env *runEnv) bool {
	d := env.cfg.ConsumerDelay
	if d <= 0 {
		return true
	}
	t := time.NewTimer(max(env.startOff+d-env.now(), 0))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// runOnce runs one load: start consumers, build producers, run the
// schedule, wait for acks and for consumers to catch up, and measure.
func runOnce(ctx context.Context, cfg *Config, admin *kgo.Client, ti *topicInfo, seeds []string, cluster *Cluster,
	rate float64, duration time.Duration, records int64, lead time.Duration) (*runOutcome, error) {
	st := newRunStats()
	base := wallClock()
	env := &runEnv{
		cfg: cfg, rate: rate, duration: duration, records: records,
		base: base, baseUnix: base.UnixNano(), st: st, seeds: seeds, admin: admin, topic: ti,
	}
	if cfg.Verify {
		// A nonce of this run's own tells its records from any other's in
		// the topic.
		env.ver = newVerifier(cfg.Producers, uint32(base.UnixNano())^rand.Uint32())
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}

	// Consumers first, positioned at the end offsets, so they see every
	// record of the run and nothing older.
	var consumers []tailConsumer // in this process
	var cproc *consumerProc      // or in their own
	defer func() {
		for _, c := range consumers {
			c.close()
		}
	}()
	if cfg.Consumers > 0 {
		var start map[int32]int64
		if cfg.Group == "" { // direct assignment, or a share group
			ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, cfg.Topic)
			if err != nil {
				return nil, fmt.Errorf("listing end offsets for the consumers: %w", err)
			}
			if err := ends.Error(); err != nil {
				return nil, fmt.Errorf("listing end offsets for the consumers: %w", err)
			}
			start = map[int32]int64{}
			ends.Each(func(lo kadm.ListedOffset) {
				if lo.Topic == cfg.Topic {
					start[lo.Partition] = lo.Offset
				}
			})
		}
		if cfg.ShareGroup != "" {
			if err := setShareStart(ctx, admin, cfg.ShareGroup, cfg.Topic, start); err != nil {
				return nil, err
			}
		}
		if cfg.ConsumersInProcess {
			for k := range cfg.Consumers {
				c, err := newTailConsumer(env, k, start, st.e2e.add())
				if err != nil {
					return nil, fmt.Errorf("consumer %d: %w", k, err)
				}
				if c != nil {
					consumers = append(consumers, c)
				}
			}
		} else {
			var err error
			if cproc, err = startConsumerProc(ctx, env, start); err != nil {
				return nil, err
			}
			defer cproc.stop() // runs after a failed start too: the child never outlives runOnce
		}
	}

	// Producers: connections and metadata before the clock starts, so set-up
	// is not measured as latency.
	prods := make([]producer, 0, cfg.Producers)
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for k := range cfg.Producers {
		rec := st.produce.add()
		switch cfg.Engine {
		case EngineNative:
			p, err := newNativeProducer(ctx, env, k, rec)
			if err != nil {
				return nil, err
			}
			closers = append(closers, func() { p.closeConns(time.Second) })
			prods = append(prods, p)
		default:
			p, err := newKgoProducer(ctx, env, k, rec)
			if err != nil {
				return nil, err
			}
			closers = append(closers, p.cl.Close)
			prods = append(prods, p)
		}
	}

	if cfg.Consumers > 0 && cfg.groupType() != GroupTypeNone {
		waitGroupReady(ctx, admin, cfg, ti.partitions, logw)
	}
	if duration <= 0 || records > 0 {
		lead = 0 // a lead-in would take from the record count
	}
	env.startOff = env.now() + 10*time.Millisecond
	env.measureOff = env.startOff + lead
	for k, p := range prods {
		p.setSchedule(newSchedule(k, cfg.Producers, rate, env.startOff, lead+duration, records))
	}
	usageNow := func() usage {
		u := usage{clientCPU: clientCPU()}
		if cproc != nil {
			u.consumerCPU, u.consumerProc = cproc.cpu(), true
		}
		if cluster != nil {
			u.brokerCPU, u.brokerRSS, u.brokerPeak = cluster.usage()
			u.brokers = true
		}
		return u
	}
	if cproc != nil {
		if err := cproc.begin(env.startOff, env.measureOff); err != nil {
			return nil, err
		}
	}
	cctx, stopConsumers := context.WithCancel(ctx)
	var cwg sync.WaitGroup
	for _, c := range consumers {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			if !waitConsumerDelay(cctx, env) {
				c.close() // stopped before its start: run would have closed it
				return
			}
			c.run(cctx)
		}()
	}
	consumers = nil // their run closes them

	var (
		pwg    sync.WaitGroup
		errMu  sync.Mutex
		runErr error
	)
	for _, p := range prods {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			if err := p.run(ctx); err != nil {
				errMu.Lock()
				runErr = errors.Join(runErr, err)
				errMu.Unlock()
			}
		}()
	}
	var faults *faultDriver
	if len(cfg.Faults) > 0 && cluster != nil {
		faults = newFaultDriver(cfg, cluster, admin, env.now, logw)
		faults.start(ctx)
		defer func() {
			if faults != nil {
				faults.stop() // an early return: undo a fault in progress
			}
		}()
	}
	if wait := env.measureOff - env.now(); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	st.markMeasured()
	smp := newSampler(st, env.now, env.measureOff, usageNow, cfg.Progress, cfg.RecordBytes)
	u0, d0 := smp.last.usage, cluster.deviceSample()
	h0, rd0 := cluster.brokerProduceSample(ctx)
	j0 := cluster.brokerJournalSample(ctx)
	r0 := cluster.brokerRemoteSample(ctx)
	smp.start()
	pwg.Wait()
	closers = nil // every producer closed itself in run
	prodEnd := env.now()
	lagEnd := st.acked.Load() - st.consumed.Load() // the consumers' lag when producing ended
	var faultsRes *FaultsResult
	if faults != nil {
		faultsRes = faults.stop() // every broker runs again
		faults = nil
		faultsRes.ClientDataLoss = env.dataLoss.Load()
		fmt.Fprintf(logw, "faults: %d injected\n", faultsRes.Total)
	}
	u1, d1 := usageNow(), cluster.deviceSample()
	h1, rd1 := cluster.brokerProduceSample(ctx)
	j1 := cluster.brokerJournalSample(ctx)

	if cfg.Consumers > 0 {
		deadline := wallClock().Add(cfg.DrainTimeout)
		for ctx.Err() == nil && st.consumed.Load() < st.acked.Load() && wallClock().Before(deadline) &&
			(cproc == nil || cproc.running()) {
			time.Sleep(consumerCatchUpPoll)
		}
	}
	caughtUp := env.now() - prodEnd // an upper bound: the loop starts after the samples above
	if lagEnd <= 0 {
		caughtUp = 0
	}
	stopConsumers()
	cwg.Wait()
	if cproc != nil {
		// Its final report lands before the sampler's last sample.
		if err := cproc.stop(); err != nil {
			errMu.Lock()
			runErr = errors.Join(runErr, err)
			errMu.Unlock()
		}
	}
	smp.stop()
	r1 := cluster.brokerRemoteSample(ctx) // after the consumers: their remote reads count
	if faultsRes != nil {
		faultsRes.setWindows(smp.timeline, env.measureOff)
	}

	out := &runOutcome{timeline: smp.timeline, produce: smp.produceTotal, e2e: smp.e2eTotal, faults: faultsRes}
	if env.ver != nil {
		out.verify = verifyRun(ctx, cfg, env, logw)
		if out.verify.Failed() {
			errMu.Lock()
			runErr = errors.Join(runErr, errors.New(out.verify.Summary()))
			errMu.Unlock()
		}
	}
	out.result = buildResult(cfg, env, rate, prodEnd-env.measureOff, u0, u1, smp)
	out.result.GCPercent = processGCPercent()
	if cproc != nil {
		out.result.ConsumerPID = cproc.pid()
		out.result.ConsumerGCPercent = cproc.gcPercent
	}
	if cfg.Consumers > 0 {
		out.result.ConsumerLagAtEnd = &lagEnd
		if st.consumed.Load() >= st.acked.Load() {
			s := caughtUp.Seconds()
			out.result.CatchUpS = &s
		}
	}
	if slices.Contains(cfg.Faults, FaultKill) {
		// A restarted broker's metrics start from zero: differences over
		// the window would mean nothing.
		h0, h1, j0, j1, r0, r1, rd0, rd1 = nil, nil, nil, nil, nil, nil, nil, nil
	}
	if err := out.result.setBrokerProduce(h0, h1); err != nil {
		cluster.metricsFailed(err)
	}
	if err := out.result.setBrokerReader(rd0, rd1); err != nil {
		cluster.metricsFailed(err)
	}
	if err := out.result.setBrokerJournal(j0, j1); err != nil {
		cluster.metricsFailed(err)
	}
	if err := out.result.setBrokerRemote(r0, r1); err != nil {
		cluster.metricsFailed(err)
	}
	if d0 != nil && d1 != nil {
		out.result.Device = deviceTraffic(cluster.dev.name, *d0, *d1, st.ackedBytes.Load())
	}
	if runErr == nil && ctx.Err() != nil {
		runErr = ctx.Err()
	}
	return out, runErr
}

// verifyRun reads the topic back and accounts every acknowledged record.
func verifyRun(ctx context.Context, cfg *Config, env *runEnv, logw io.Writer) *VerifyResult {
	c := env.ver.newCheck(env.topic.partitions, !cfg.Idempotent, !cfg.Idempotent && cfg.MaxInflight > 1)
	if cfg.beforeReadBack != nil {
		if err := cfg.beforeReadBack(ctx, env.admin); err != nil {
			r := c.res
			r.Verdict, r.Error = "error", err.Error()
			return &r
		}
	}
	fmt.Fprintf(logw, "verify: reading topic %s back from its first offsets\n", cfg.Topic)
	sec, err := cfg.clientOpts()
	if err != nil {
		r := c.res
		r.Verdict, r.Error = "error", err.Error()
		return &r
	}
	if err := readBack(ctx, func() time.Time { return env.base.Add(env.now()) }, env.seeds, sec, env.admin, cfg.Topic, env.topic.partitions, c, cfg.VerifyTimeout, logw); err != nil {
		r := c.res
		r.Verdict, r.Error = "error", err.Error()
		return &r
	}
	return c.finish()
}

// buildResult turns a run's counters and histograms into its figures.
func buildResult(cfg *Config, env *runEnv, rate float64, elapsed time.Duration, u0, u1 usage, smp *sampler) Result {
	st := env.st
	secs := max(elapsed.Seconds(), 1e-9)
	r := Result{
		Engine:          cfg.Engine,
		Brokers:         env.seeds,
		TargetRate:      rate,
		DurationS:       elapsed.Seconds(),
		RecordBytes:     cfg.RecordBytes,
		RecordsSent:     st.sent.Load(),
		RecordsAcked:    st.acked.Load(),
		RecordsFailed:   st.failed.Load(),
		RecordsConsumed: st.consumed.Load(),
		ConsumeErrors:   st.consumeErrors.Load(),
		GroupType:       cfg.groupType(),
		Batches:         st.batches.Load() - st.base.batches,
		Requests:        st.requests.Load() - st.base.requests,
		LatencyClamped:  smp.clamped,
		Errors:          st.errorList(),
	}
	switch r.GroupType {
	case GroupTypeShare:
		n := st.redelivered.Load()
		r.Group, r.RecordsRedelivered = cfg.ShareGroup, &n
	case GroupTypeConsumer:
		r.Group = cfg.Group
	}
	r.RecordsPerSec = float64(r.RecordsAcked) / secs
	r.MBPerSec = float64(st.ackedBytes.Load()) / secs / 1e6
	r.ConsumedPerSec = float64(r.RecordsConsumed) / secs
	r.BatchesPerSec = float64(r.Batches) / secs
	r.RequestsPerSec = float64(r.Requests) / secs
	if r.Batches > 0 {
		r.RecordsPerBatch = float64(st.batchRecords.Load()-st.base.batchRecords) / float64(r.Batches)
	}
	if r.RecordsSent > 0 {
		r.ErrorRate = float64(r.RecordsFailed) / float64(r.RecordsSent)
	}
	p := summarize(smp.produceTotal)
	r.ProduceMeanMs, r.ProduceP50Ms, r.ProduceP90Ms, r.ProduceP99Ms, r.ProduceP999Ms, r.ProduceMaxMs = p.MeanMs, p.P50Ms, p.P90Ms, p.P99Ms, p.P999Ms, p.MaxMs
	e := summarize(smp.e2eTotal)
	r.E2EMeanMs, r.E2EP50Ms, r.E2EP90Ms, r.E2EP99Ms, r.E2EP999Ms, r.E2EMaxMs = e.MeanMs, e.P50Ms, e.P90Ms, e.P99Ms, e.P999Ms, e.MaxMs
	r.ClientCPUMainSeconds = (u1.clientCPU - u0.clientCPU).Seconds()
	r.ClientCPUSeconds = r.ClientCPUMainSeconds
	if u1.consumerProc {
		c := (u1.consumerCPU - u0.consumerCPU).Seconds()
		r.ClientCPUConsumerProcessSeconds = &c
		r.ClientCPUSeconds += c
	}
	if r.RecordsAcked > 0 {
		r.ClientCPUUsPerRecord = 1e6 * r.ClientCPUSeconds / float64(r.RecordsAcked)
	}
	if u1.brokers {
		cpu := (u1.brokerCPU - u0.brokerCPU).Seconds()
		r.BrokerCPUSeconds = &cpu
		r.BrokerRSSBytes, r.BrokerPeakRSSBytes = u1.brokerRSS, u1.brokerPeak
		if r.RecordsAcked > 0 {
			r.BrokerCPUUsPerRecord = 1e6 * cpu / float64(r.RecordsAcked)
		}
	}
	return r
}

// Run executes cfg: starts the brokers if asked, creates the topic, runs
// the load (or the --find-max search) and returns the report. The spawned
// brokers are stopped and their data removed before Run returns; an error
// stopping them is returned with the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep, err := runTarget(ctx, cfg)
	if rep == nil || err != nil || ctx.Err() != nil {
		return rep, err
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	if bcfg, mode, ok := baselineConfig(cfg); ok {
		switch mode {
		case BaselineBinary:
			fmt.Fprintf(logw, "baseline: the same workload against brokers spawned from %s\n", cfg.CompareBinary)
		case BaselinePlaintext:
			fmt.Fprintf(logw, "baseline: the same workload over the PLAINTEXT listener of brokers spawned from the same --spawn-config\n")
		default:
			fmt.Fprintln(logw, "baseline: the same workload against a --blackhole broker (no consumers)")
		}
		brep, berr := runTarget(ctx, bcfg)
		if brep != nil {
			rep.Baseline = newBaseline(rep, brep, mode, cfg.CompareBinary)
		}
		err = berr
	}
	if cfg.CompareDevice && ctx.Err() == nil {
		var derr error
		rep.DeviceBaseline, derr = compareDevice(ctx, cfg, rep, logw)
		err = errors.Join(err, derr)
	}
	return rep, err
}

// compareDevice is --compare-device: the durable sequential ceiling of
// the spawn directory's filesystem, compared with rep's acknowledged
// bytes.
func compareDevice(ctx context.Context, cfg Config, rep *Report, logw io.Writer) (*DeviceBaseline, error) {
	dir := spawnParentDir()
	fmt.Fprintf(logw, "device ceiling: writing %s MiB with O_DIRECT into a fresh file in %s (at most %v)\n",
		commas(float64(cfg.DeviceProbeBytes)/(1<<20), 0), dir, DeviceProbeMaxTime)
	db, err := probeDevice(ctx, dir, cfg.DeviceProbeBytes, DeviceProbeMaxTime, logw)
	if db != nil {
		db.Ratio = ackedMBPerSec(rep) / max(db.MBPerSec, 1e-9)
	}
	if err != nil {
		err = fmt.Errorf("--compare-device: %w", err)
	}
	return db, err
}

// ackedMBPerSec is the acknowledged record MB/s the device ceiling is
// compared with: the max healthy rate's with --find-max, the run's
// otherwise.
func ackedMBPerSec(rep *Report) float64 {
	if rep.FindMax != nil {
		return rep.FindMax.MaxHealthyRate * float64(rep.Config.RecordBytes) / 1e6
	}
	return rep.Result.MBPerSec
}

// newBaseline compares a run with its baseline (mode BaselineBlackhole or
// BaselineBinary, bin the latter's executable): max healthy rates for
// --find-max, achieved records/s otherwise.
func newBaseline(rep, brep *Report, mode, bin string) *Baseline {
	b := &Baseline{Mode: mode, Result: brep.Result, FindMax: brep.FindMax}
	if mode == BaselineBinary {
		b.Binary = bin
	}
	ours, theirs := rep.Result.RecordsPerSec, brep.Result.RecordsPerSec
	if mode == BaselineConsumerGroup {
		ours, theirs = rep.Result.ConsumedPerSec, brep.Result.ConsumedPerSec
	}
	if rep.FindMax != nil && brep.FindMax != nil {
		ours, theirs = rep.FindMax.MaxHealthyRate, brep.FindMax.MaxHealthyRate
	}
	if theirs > 0 {
		b.Ratio = ours / theirs
	}
	return b
}

// runTarget is one Run against one target (spawned or given).
func runTarget(ctx context.Context, cfg Config) (rep *Report, err error) {
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	rep = &Report{Config: cfg.json(), Workload: cfg.describe()}
	seeds := cfg.Brokers
	var cluster *Cluster
	if cfg.Spawn > 0 {
		bin := cfg.StrataBin
		if cfg.brokerBin != "" {
			bin = cfg.brokerBin
		}
		sec, err := cfg.clientOpts()
		if err != nil {
			return nil, err
		}
		if cluster, err = Spawn(ctx, SpawnOptions{Bin: bin, Brokers: cfg.Spawn,
			Listener: cfg.SpawnListener, Protocol: cfg.Security.protocol(), ClientOpts: sec,
			SegmentBytes: cfg.SpawnSegmentBytes, ConfigFile: cfg.SpawnConfig,
			Blackhole: cfg.SpawnBlackhole, CPUProfile: cfg.Profile,
			Proxy: needsProxy(cfg.Faults), ReplicaLagTimeMax: faultLagTime(&cfg), DiskBytes: faultDiskBytes(&cfg),
			Controllers: cfg.SpawnControllers}); err != nil {
			return nil, err
		}
		defer func() {
			if serr := cluster.Stop(); serr != nil {
				err = errors.Join(err, fmt.Errorf("spawned brokers: %w", serr))
			}
		}()
		seeds = cluster.Addrs() // N > 1: one cluster (cluster.go)
		cluster.log = logw
		fmt.Fprintf(logw, "spawned %d broker(s): %v\n", cfg.Spawn, cluster.Addrs())
		if len(cluster.Controllers) > 0 {
			fmt.Fprintf(logw, "spawned %d controller-only node(s) as the quorum: %v\n", len(cluster.Controllers), cluster.controllerAddrs())
		}
		if cluster.dev, err = lookupDevice(cluster.dir); err != nil {
			if !cfg.quietDevice {
				fmt.Fprintf(logw, "device traffic not measured: %v\n", err)
			}
			err = nil
		}
		rep.Target.Spawned = cfg.Spawn
	}
	rep.Target.Brokers = seeds
	if cluster != nil {
		rep.Host = hostFacts(cluster.dir)
	} else {
		rep.Host = hostFacts("")
	}

	aopts, err := cfg.clientOpts(kgo.SeedBrokers(seeds...), kgo.ClientID(loadgenClientID+"-admin"))
	if err != nil {
		return nil, err
	}
	admin, err := kgo.NewClient(aopts...)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	ti, err := ensureTopic(ctx, admin, &cfg, logw)
	if err != nil {
		return nil, err
	}
	if ti.partitions != cfg.Partitions {
		rep.Config.Partitions = ti.partitions
		cfg.Partitions = ti.partitions
	}

	// After a warm-up every measured run (each --find-max step too) starts
	// with a lead-in (stepLead): its producers and consumers run that long
	// before the measurement starts, so the measurement does not include
	// their start (restarting them after the warm-up cost the first measured
	// second of a kgo run at 200,000 records/s a produce p99 of 130-390 ms
	// against 20-40 ms in the seconds after it).
	lead := time.Duration(0)
	switch {
	case cfg.consumersWarmUp():
		// The warm-up is the measured run's lead-in: producers and
		// consumers start together and run on into the measurement.
		lead = cfg.Warmup
		fmt.Fprintf(logw, "warming up for %v with the consumers (not measured)\n", cfg.Warmup)
	case cfg.Warmup > 0:
		lead = stepLead(cfg.Duration)
		fmt.Fprintf(logw, "warming up for %v (not measured)\n", cfg.Warmup)
		wcfg := cfg
		wcfg.Consumers, wcfg.Group, wcfg.ShareGroup, wcfg.CompareShareGroup, wcfg.ConsumerDelay, wcfg.Progress = 0, "", "", false, 0, nil
		wcfg.Verify, wcfg.Faults = false, nil // the warm-up is neither verified nor faulted
		rate := cfg.Rate
		if cfg.FindMax {
			rate = cfg.StartRate
		}
		if _, err := runOnce(ctx, &wcfg, admin, ti, seeds, cluster, rate, cfg.Warmup, 0, 0); err != nil {
			return rep, fmt.Errorf("warm-up: %w", err)
		}
	}
	if cfg.CompareShareGroup {
		return rep, compareShareGroups(ctx, &cfg, admin, ti, seeds, cluster, rep, lead, logw)
	}
	if !cfg.FindMax {
		out, err := runOnce(ctx, &cfg, admin, ti, seeds, cluster, cfg.Rate, cfg.Duration, cfg.Records, lead)
		if out == nil {
			return nil, err
		}
		rep.setOutcome(out)
		rep.Verify, rep.Faults = out.verify, out.faults
		if out.faults != nil && slices.Contains(cfg.Faults, FaultKill) {
			rep.Notes = append(rep.Notes, "brokers were killed and restarted: broker CPU includes the killed processes', RSS is the running ones', and the broker-side latency and journal figures are left out (a restarted broker's metrics start from zero)")
		}
		return rep, err
	}
	return rep, findMax(ctx, &cfg, admin, ti, seeds, cluster, rep, logw)
}

// consumersWarmUp reports whether the run has a warm-up and its consumers
// run through it, as in the OpenMessaging Benchmark: the warm-up is then the measured
// run's lead-in instead of a run of its own, so the measurement starts
// with consumers that have been reading for the whole warm-up rather than
// ones started a second before it. A consumer started at the log's end
// while producing runs at full rate (a new process, new connections, its
// first fetches turning the broker's tail cache on) can fall behind by
// more than a partition's share of the tail cache (then 64 MiB, about
// 0.3 s at 200,000 records/s over 96 partitions; 256 MiB since) and then
// reads from the device until it
// catches up: keyed at 200,000 records/s, end-to-end p99 over 20 s was
// 496 ms (its first two seconds 636-826 ms, the rest 14-53), and 73 ms in
// a run with a 3 s lead-in (docs/performance.md, "Session 32"). Runs whose
// consumers are meant to start late (--consumer-delay), count records,
// search for a maximum, inject faults, verify or compare share groups
// keep the warm-up of their own (producers only).
func (c *Config) consumersWarmUp() bool {
	return c.Warmup > 0 && c.Consumers > 0 && c.ConsumerDelay == 0 && c.Records == 0 && c.Duration > 0 &&
		!c.FindMax && !c.CompareShareGroup && len(c.Faults) == 0 && !c.Verify
}

// stepLead is the lead-in of a measured run of duration d after a warm-up
// (see runTarget): a quarter of it, at most a second.
func stepLead(step time.Duration) time.Duration { return min(time.Second, step/4) }

// stepHealth judges one --find-max step.
func stepHealth(cfg *Config, r *Result) (bool, string) {
	switch {
	case r.RecordsSent == 0:
		return false, "nothing was sent"
	case r.ErrorRate > cfg.MaxErrorRate:
		return false, fmt.Sprintf("error rate %.4f%% over %.4f%%", 100*r.ErrorRate, 100*cfg.MaxErrorRate)
	case r.ProduceP99Ms > ms(cfg.MaxP99):
		return false, fmt.Sprintf("produce p99 %.2f ms over %.2f ms", r.ProduceP99Ms, ms(cfg.MaxP99))
	case r.RecordsPerSec < 0.9*r.TargetRate:
		return false, fmt.Sprintf("achieved %s rec/s, under 90%% of the target", commas(r.RecordsPerSec, 0))
	}
	return true, fmt.Sprintf("p99 %.2f ms, error rate %.4f%%", r.ProduceP99Ms, 100*r.ErrorRate)
}

// searchIncomplete says why a --find-max search stopped early and what its
// maximum means then.
func searchIncomplete(cfg *Config, interrupted bool, runs int, good, bad float64) string {
	why := fmt.Sprintf("stopped by --max-steps %d", cfg.MaxSteps)
	if interrupted {
		why = "interrupted"
	}
	why += fmt.Sprintf(" after %d runs", runs)
	switch {
	case math.IsInf(bad, 1):
		return why + fmt.Sprintf(" before any rate was unhealthy: the maximum is above %s rec/s (raise --max-steps or --start-rate)", commas(good, 0))
	default:
		return why + fmt.Sprintf(" while bisecting: the maximum lies between %s and %s rec/s", commas(good, 0), commas(bad, 0))
	}
}

// findMax ramps the rate (×1.5 from StartRate) until a step is unhealthy,
// then bisects between the last healthy and the first unhealthy rate for
// BisectSteps steps; MaxSteps bounds the whole search (retries aside). An
// unhealthy step is run again at the same rate up to StepRetries times and
// the rate counts as unhealthy only if every run was: on a shared machine
// one second of a stalled disk or a descheduled process otherwise ends the
// climb, for the strata broker and the blackhole baseline alike. The
// report's result is the last healthy step's (or the last step's if none
// was healthy).
func findMax(ctx context.Context, cfg *Config, admin *kgo.Client, ti *topicInfo, seeds []string, cluster *Cluster, rep *Report, logw io.Writer) error {
	fm := &FindMax{MaxP99Ms: ms(cfg.MaxP99), MaxErrorRate: cfg.MaxErrorRate}
	rep.FindMax = fm
	var best, last *runOutcome
	good, bad := 0.0, math.Inf(1)
	rate := cfg.StartRate
	bisected := 0
	offset := 0.0
	retry := 0        // runs of rate so far beyond its first
	complete := false // the loop ended the search itself (not --max-steps, not ctx)
	for step := 0; step < cfg.MaxSteps; step++ {
		if retry > 0 {
			fmt.Fprintf(logw, "find-max step %d: %s rec/s for %v (retry %d)\n", step+1, commas(rate, 0), cfg.StepDuration, retry)
		} else {
			fmt.Fprintf(logw, "find-max step %d: %s rec/s for %v\n", step+1, commas(rate, 0), cfg.StepDuration)
		}
		lead := time.Duration(0)
		if cfg.Warmup > 0 {
			lead = stepLead(cfg.StepDuration)
		}
		out, err := runOnce(ctx, cfg, admin, ti, seeds, cluster, rate, cfg.StepDuration, 0, lead)
		if out == nil {
			return err
		}
		healthy, reason := stepHealth(cfg, &out.result)
		if err != nil {
			healthy, reason = false, err.Error()
		}
		out.result.Healthy = &healthy
		fm.Steps = append(fm.Steps, Step{Rate: rate, Retry: retry, Healthy: healthy, Reason: reason, Result: out.result})
		for _, s := range out.timeline {
			s.TS += offset
			rep.Timeline = append(rep.Timeline, s)
		}
		if n := len(out.timeline); n > 0 {
			offset += out.timeline[n-1].TS
		}
		fmt.Fprintf(logw, "  → %s: %s rec/s achieved, %s\n", map[bool]string{true: "healthy", false: "unhealthy"}[healthy],
			commas(out.result.RecordsPerSec, 0), reason)
		last = out
		if ctx.Err() != nil {
			break
		}
		if !healthy && err == nil && retry < cfg.StepRetries {
			retry++
			step-- // a retry is not a step of the search: MaxSteps*(1+StepRetries) runs at most
			continue
		}
		retry = 0
		if healthy {
			good = rate
			best = out
		} else {
			bad = min(bad, rate)
		}
		if !math.IsInf(bad, 1) {
			if bisected >= cfg.BisectSteps {
				complete = true
				break
			}
			bisected++
			rate = (good + bad) / 2
			if good == 0 {
				rate = bad / 2 // the start rate was already too much: halve
			}
		} else {
			rate *= 1.5
		}
		if rate < 1 {
			complete = true
			break
		}
	}
	fm.MaxHealthyRate = good
	fm.SearchComplete = complete && ctx.Err() == nil
	if !fm.SearchComplete {
		fm.Incomplete = searchIncomplete(cfg, ctx.Err() != nil, len(fm.Steps), good, bad)
	}
	if best == nil {
		best = last
	}
	if best != nil {
		tl := rep.Timeline
		rep.setOutcome(best)
		rep.Timeline = tl
	}
	return ctx.Err()
}
