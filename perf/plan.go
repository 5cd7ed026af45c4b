package perf

import (
	"fmt"
	"math"
	"slices"
)

// Plan sizes a cluster for w. It is a pure function: no I/O, no clock, no
// randomness; the same workload always gives the same report. It returns
// an error only for invalid inputs (ErrInvalidWorkload) or a workload so
// large the plan would need more than a million brokers; a plan that runs
// but does not add up is reported through Report.Warnings.
func Plan(w Workload) (Report, error) {
	rw, assumed, err := resolve(w)
	if err != nil {
		return Report{}, err
	}
	m, err := run(rw, assumed)
	if err != nil {
		return Report{}, err
	}
	m.warn()
	if rw.CompressionRatio > 1 {
		// How the plan looks if records do not compress: the first thing
		// to check about any compression assumption.
		alt := rw
		alt.CompressionRatio = 1
		alt.ClaimedPeakMBps = 0
		if am, err := run(alt, assumed); err == nil {
			m.warnCompression(am)
		}
	}
	slices.SortStableFunc(m.rep.Warnings, func(a, b Warning) int { return a.Severity.rank() - b.Severity.rank() })
	return m.rep, nil
}

// model carries one plan's intermediate figures between sections.
type model struct {
	w   Workload
	rec recorder
	rep Report

	rf, compression, recordBytes, util float64
	failures                           int

	diskWriteTotal, diskDeviceTotal float64 // log bytes appended; bytes the disks write (journal copy included)
	netInTotal, netOutTotal         float64
	perCoreMBps, ceilingMBps        float64 // ceilingMBps: 0 unless calibrated by a capacity search
	amp                             float64 // disk_amp: given, assumed or calibrated
	uploadMBps, remoteReadMBps      float64 // tiered storage's rates; 0: not modelled
	localTB                         float64
}

func run(w Workload, assumed []string) (*model, error) {
	m := &model{
		w:           w,
		rf:          float64(w.ReplicationFactor),
		compression: w.CompressionRatio,
		recordBytes: float64(w.RecordBytes),
		util:        w.TargetUtilization,
		failures:    w.BrokersThatMayFail,
		perCoreMBps: w.Limits.PerCoreMBps,

		uploadMBps: w.Limits.UploadMBps, remoteReadMBps: w.Limits.RemoteReadMBps,
	}
	m.rep = Report{
		Title:    title(w),
		Units:    UnitsNote,
		Workload: w,
		Assumed:  assumed,
		Inputs:   inputs(w, assumed),
	}
	m.throughput()
	m.calibration()
	m.storage()
	if err := m.brokers(); err != nil {
		return nil, err
	}
	if err := m.partitions(); err != nil {
		return nil, err
	}
	m.perBroker()
	m.remoteReads() // remote.go
	m.rep.Sustained = m.batching("rate", w.SustainedRecordsPerSec, "")
	m.rep.Peak = m.batching("peak_rate", w.PeakRecordsPerSec, "_peak")
	m.limitTable()
	if m.rec.err != nil {
		return nil, m.rec.err
	}
	m.rep.Workload.Limits.PerCoreMBps = m.perCoreMBps
	m.rep.Workload.Limits.DiskWriteAmplification = m.amp
	m.rep.Workload.Limits.UploadMBps, m.rep.Workload.Limits.RemoteReadMBps = m.uploadMBps, m.remoteReadMBps
	m.rep.Steps = m.rec.steps
	return m, nil
}

func title(w Workload) string {
	name := w.Name
	if name == "" {
		name = "workload"
	}
	return fmt.Sprintf("%s: %s records/s sustained, %s/s peak, %s B records, RF %d",
		name, fmtShort(w.SustainedRecordsPerSec), fmtShort(w.PeakRecordsPerSec), fmtNum(float64(w.RecordBytes)), w.ReplicationFactor)
}

func inputs(w Workload, assumed []string) []Input {
	src := func(sym string) string {
		if slices.Contains(assumed, sym) {
			return "assumed"
		}
		return ""
	}
	in := []Input{
		{"rate", "sustained record rate", w.SustainedRecordsPerSec, "records/s", ""},
		{"peak_rate", "peak record rate", w.PeakRecordsPerSec, "records/s", ""},
		{"record_bytes", "record size (key + value + headers)", float64(w.RecordBytes), "B", ""},
		{"compression", "compression ratio (record bytes : stored bytes)", w.CompressionRatio, ":1", ""},
		{"rf", "replication factor", float64(w.ReplicationFactor), "", ""},
		{"min_isr", "min.insync.replicas", float64(w.MinISR), "", ""},
		{"failures", "brokers that may fail (N+k)", float64(w.BrokersThatMayFail), "brokers", ""},
		{"groups", "consumer groups reading everything", float64(w.ConsumerGroups), "", ""},
	}
	if w.ConsumersPerGroup > 0 {
		in = append(in, Input{"consumers_per_group", "consumers wanted per group", float64(w.ConsumersPerGroup), "", ""})
	}
	if w.ConsumerGroups > 0 {
		in = append(in, Input{"consumer_mbps", "one consumer instance's throughput", w.ConsumerMBps, "MB/s", src("consumer_mbps")})
	}
	in = append(in,
		Input{"partition_mbps", "one partition's planned write throughput", w.PartitionMBps, "MB/s", src("partition_mbps")},
		Input{"retention_h", "retention", w.RetentionHours, "h", ""},
	)
	if w.LocalHotHours > 0 {
		in = append(in, Input{"hot_h", "tiered storage: hours kept on broker disks", w.LocalHotHours, "h", ""})
	}
	in = append(in,
		Input{"producers", "producer instances", float64(w.Producers), "", ""},
		Input{"linger_ms", "linger.ms", w.LingerMs, "ms", ""},
		Input{"batch_bytes", "batch.size", float64(w.BatchBytes), "B", ""},
	)
	if w.Partitions > 0 {
		in = append(in, Input{"partitions", "partitions (given)", float64(w.Partitions), "", ""})
	}
	if w.FixedBrokers > 0 {
		in = append(in, Input{"brokers", "brokers (given)", float64(w.FixedBrokers), "", ""})
	}
	in = append(in,
		Input{"disk_write_mbps", "per-broker disk write", w.Limits.DiskWriteMBps, "MB/s", src("disk_write_mbps")},
	)
	if w.Limits.DiskWriteAmplification > 0 { // else calibrated: a step of the plan
		in = append(in, Input{"disk_amp", "disk bytes written per log byte (2: the journal and the segment each write it; ~1.2 with log.io.journal.ends once retention recycles files)", w.Limits.DiskWriteAmplification, "", src("disk_amp")})
	}
	in = append(in,
		Input{"net_mbps", "per-broker network, each direction", w.Limits.NetworkMBps, "MB/s", src("net_mbps")},
		Input{"cores", "per-broker cores", w.Limits.Cores, "", src("cores")},
	)
	if w.Calibration == nil || !w.Calibration.hasCPU() {
		in = append(in, Input{"core_mbps", "produce MB/s one core handles", w.Limits.PerCoreMBps, "MB/s", src("core_mbps")})
	}
	if w.Limits.UploadMBps > 0 {
		in = append(in, Input{"upload_mbps", "MB/s one broker copies to the object store", w.Limits.UploadMBps, "MB/s", ""})
	}
	if w.Limits.RemoteReadMBps > 0 {
		in = append(in, Input{"remote_read_mbps", "MB/s one remote reader reads from the object store", w.Limits.RemoteReadMBps, "MB/s", ""})
	}
	in = append(in,
		Input{"memory_gib", "per-broker memory", w.Limits.MemoryGiB, "GiB", src("memory_gib")},
		Input{"reserved_gib", "memory that is not page cache", w.Limits.ReservedMemoryGiB, "GiB", src("reserved_gib")},
		Input{"disk_gib", "per-broker log disk", w.Limits.DiskGiB, "GiB", src("disk_gib")},
		Input{"util", "target utilisation of every limit", w.TargetUtilization, "", src("util")},
		Input{"read_window_s", "page cache holds this much of recent writes", w.ReadWindowSec, "s", src("read_window_s")},
	)
	if w.ClaimedPeakMBps > 0 {
		in = append(in, Input{"claimed_peak_mbps", "peak ingest the plan under review quotes", w.ClaimedPeakMBps, "MB/s", "claim"})
	}
	if c := w.Calibration; c != nil {
		add := func(sym, name string, v float64, unit string) {
			if v > 0 {
				in = append(in, Input{sym, name, v, unit, "calibrated"})
			}
		}
		add("cal_mbps", "loadgen run: produce throughput", c.MBPerSec, "MB/s")
		add("cal_records_per_sec", "loadgen run: records/s", c.RecordsPerSec, "records/s")
		add("cal_record_bytes", "loadgen run: record size", float64(c.RecordBytes), "B")
		add("cal_rf", "loadgen run: replication factor", float64(c.ReplicationFactor), "")
		add("cal_brokers", "loadgen run: brokers spawned", float64(c.Brokers), "brokers")
		add("cal_cpu_s", "loadgen run: broker CPU time", c.BrokerCPUSeconds, "s")
		add("cal_duration_s", "loadgen run: duration", c.DurationSec, "s")
		add("cal_p99_ms", "loadgen run: produce p99 latency", c.ProduceP99Ms, "ms")
		add("cal_device_bpb", "loadgen run: device bytes written per record byte", c.DeviceBytesPerRecordByte, "")
		add("cal_copied_bytes", "tiered storage: bytes copied to the object store ("+MetricRemoteCopiedBytes+")", c.RemoteCopiedBytes, "B")
		add("cal_copy_s", "tiered storage: the store's time for those copies ("+MetricRemoteCopySeconds+")", c.RemoteCopySeconds, "s")
		add("cal_read_bytes", "tiered storage: bytes remote reads returned ("+MetricRemoteReadBytes+")", c.RemoteReadBytes, "B")
		add("cal_read_s", "tiered storage: the remote reads' time ("+MetricRemoteReadSeconds+")", c.RemoteReadSeconds, "s")
	}
	return in
}

// a collects a step's arithmetic operands.
func a(v ...float64) []float64 { return v }

func (m *model) throughput() {
	r, w := &m.rec, m.w
	r.section = "throughput (peak sizes the brokers, sustained sizes storage)"
	rate, peak, R, C, rf := w.SustainedRecordsPerSec, w.PeakRecordsPerSec, m.recordBytes, m.compression, m.rf

	m.rep.IngestSustainedMBps = r.add("ingest_sust", "sustained ingest of record bytes, before compression", "MB/s",
		"rate × record_bytes / 10^6", "%s × %s / 10^6", a(rate, R), rate*R/bytesPerMB)
	m.rep.IngestPeakMBps = r.add("ingest_peak", "peak ingest of record bytes, before compression", "MB/s",
		"peak_rate × record_bytes / 10^6", "%s × %s / 10^6", a(peak, R), peak*R/bytesPerMB)
	is, ip := m.rep.IngestSustainedMBps, m.rep.IngestPeakMBps
	m.rep.WriteSustainedMBps = r.add("write_sust", "sustained produce bytes on the wire and on disk", "MB/s",
		"ingest_sust / compression", "%s / %s", a(is, C), is/C)
	m.rep.WritePeakMBps = r.add("write_peak", "peak produce bytes on the wire and on disk", "MB/s",
		"ingest_peak / compression", "%s / %s", a(ip, C), ip/C)
	wp := m.rep.WritePeakMBps

	m.diskWriteTotal = r.add("disk_write_total", "cluster disk writes at peak: every replica appends", "MB/s",
		"write_peak × rf", "%s × %s", a(wp, rf), wp*rf)
	amp := w.Limits.DiskWriteAmplification
	if amp == 0 { // not given, and the calibration run measured its disk (resolve)
		c := w.Calibration
		amp = r.add("disk_amp", "disk bytes written per log byte, as the calibration run's disk wrote them (every replica on it)", "",
			"max(1, cal_device_bpb / cal_rf)", "max(1, %s / %s)", a(c.DeviceBytesPerRecordByte, c.rf()), max(1, c.DeviceBytesPerRecordByte/c.rf()))
	}
	m.amp = amp
	m.diskDeviceTotal = r.add("disk_device_total", "cluster bytes the log disks write at peak: the journal's copy writes each byte twice", "MB/s",
		"disk_write_total × disk_amp", "%s × %s", a(m.diskWriteTotal, amp), m.diskWriteTotal*amp)
	m.netInTotal = r.add("net_in_total", "cluster network in at peak: produce + replication to followers", "MB/s",
		"write_peak + write_peak × (rf - 1)", "%s + %s × (%s - 1)", a(wp, wp, rf), wp+wp*(rf-1))
	G := float64(w.ConsumerGroups)
	if w.LocalHotHours > 0 {
		m.netOutTotal = r.add("net_out_total", "cluster network out at peak: replication + consumer groups + upload to object storage", "MB/s",
			"write_peak × (rf - 1 + groups + 1)", "%s × (%s - 1 + %s + 1)", a(wp, rf, G), wp*(rf-1+G+1))
	} else {
		m.netOutTotal = r.add("net_out_total", "cluster network out at peak: replication to followers + consumer groups", "MB/s",
			"write_peak × (rf - 1 + groups)", "%s × (%s - 1 + %s)", a(wp, rf, G), wp*(rf-1+G))
	}
}

func (m *model) calibration() {
	c := m.w.Calibration
	if c == nil {
		return
	}
	r := &m.rec
	r.section = "calibration (from a loadgen run, or brokers' /metrics)"
	m.remoteCalibration(c) // remote.go
	if !c.hasCPU() && !c.hasCeiling() {
		return
	}
	mb := c.MBPerSec
	if mb == 0 {
		mb = r.add("cal_mbps", "the run's produce throughput", "MB/s",
			"cal_records_per_sec × cal_record_bytes / 10^6", "%s × %s / 10^6",
			a(c.RecordsPerSec, float64(c.RecordBytes)), c.RecordsPerSec*float64(c.RecordBytes)/bytesPerMB)
	}
	appended := mb
	if c.rf() != 1 {
		appended = r.add("cal_appended_mbps", "what the run's brokers appended: every replica writes", "MB/s",
			"cal_mbps × cal_rf", "%s × %s", a(mb, c.rf()), mb*c.rf())
	}
	if c.hasCPU() {
		busy := r.add("cal_cores_busy", "cores the brokers kept busy during the run", "cores",
			"cal_cpu_s / cal_duration_s", "%s / %s", a(c.BrokerCPUSeconds, c.DurationSec), c.BrokerCPUSeconds/c.DurationSec)
		sym := "cal_mbps"
		if c.rf() != 1 {
			sym = "cal_appended_mbps"
		}
		m.perCoreMBps = r.add("core_mbps", "appended MB/s one busy core handled", "MB/s",
			sym+" / cal_cores_busy", "%s / %s", a(appended, busy), appended/busy)
	}
	if c.hasCeiling() {
		sym := "cal_mbps"
		if c.rf() != 1 {
			sym = "cal_appended_mbps"
		}
		m.ceilingMBps = r.add("broker_ceiling_mbps", "the capacity search's highest healthy rate, per broker: a ceiling on appended MB/s", "MB/s",
			sym+" / cal_brokers", "%s / %s", a(appended, float64(c.Brokers)), appended/float64(c.Brokers))
	}
}

func (m *model) storage() {
	r, w := &m.rec, m.w
	r.section = "storage (at the sustained rate)"
	ws, rf := m.rep.WriteSustainedMBps, m.rf
	ret := w.RetentionHours
	m.rep.RetainedTB = r.add("retained_tb", "retained data, one copy", "TB",
		"write_sust × retention_h × 3600 / 10^6", "%s × %s × 3600 / 10^6", a(ws, ret), ws*ret*3600/bytesPerMB)
	if w.LocalHotHours > 0 {
		hot := w.LocalHotHours
		hotTB := r.add("hot_tb", "hot window, one copy", "TB",
			"write_sust × hot_h × 3600 / 10^6", "%s × %s × 3600 / 10^6", a(ws, hot), ws*hot*3600/bytesPerMB)
		m.localTB = r.add("local_disk_tb", "broker disks hold rf copies of the hot window", "TB",
			"hot_tb × rf", "%s × %s", a(hotTB, rf), hotTB*rf)
		m.rep.ObjectStorageTB = r.add("object_tb", "object storage holds one copy of everything retained", "TB",
			"retained_tb", "%s", a(m.rep.RetainedTB), m.rep.RetainedTB)
	} else {
		m.localTB = r.add("local_disk_tb", "broker disks hold rf copies of everything retained", "TB",
			"retained_tb × rf", "%s × %s", a(m.rep.RetainedTB, rf), m.rep.RetainedTB*rf)
	}
	m.rep.LocalDiskTB = m.localTB
	d := w.Limits.DiskGiB
	m.rep.DiskPerBrokerTB = r.add("disk_tb", "one broker's log disk", "TB",
		"disk_gib × 2^30 / 10^12", "%s × 2^30 / 10^12", a(d), d*bytesPerGiB/bytesPerTB)
}

// brokers computes each limit's broker count and the plan's.
func (m *model) brokers() error {
	r, w, U := &m.rec, m.w, m.util
	r.section = "brokers (each limit at the target utilisation, then + failures)"
	lim := w.Limits
	type limit struct {
		name, sym, unit string
		demand, per     float64
		formula, arith  string
		args            []float64
	}
	ls := []limit{
		{"disk write", "brokers_disk_write", "MB/s", m.diskDeviceTotal, lim.DiskWriteMBps,
			"ceil(disk_device_total / (disk_write_mbps × util))", "ceil(%s / (%s × %s))", a(m.diskDeviceTotal, lim.DiskWriteMBps, U)},
		{"network in", "brokers_net_in", "MB/s", m.netInTotal, lim.NetworkMBps,
			"ceil(net_in_total / (net_mbps × util))", "ceil(%s / (%s × %s))", a(m.netInTotal, lim.NetworkMBps, U)},
		{"network out", "brokers_net_out", "MB/s", m.netOutTotal, lim.NetworkMBps,
			"ceil(net_out_total / (net_mbps × util))", "ceil(%s / (%s × %s))", a(m.netOutTotal, lim.NetworkMBps, U)},
		{"cpu", "brokers_cpu", "MB/s", m.diskWriteTotal, lim.Cores * m.perCoreMBps,
			"ceil(disk_write_total / (cores × core_mbps × util))", "ceil(%s / (%s × %s × %s))", a(m.diskWriteTotal, lim.Cores, m.perCoreMBps, U)},
	}
	if m.ceilingMBps > 0 {
		ls = append(ls, limit{"measured ceiling", "brokers_measured", "MB/s", m.diskWriteTotal, m.ceilingMBps,
			"ceil(disk_write_total / (broker_ceiling_mbps × util))", "ceil(%s / (%s × %s))", a(m.diskWriteTotal, m.ceilingMBps, U)})
	}
	if w.LocalHotHours > 0 && m.uploadMBps > 0 {
		// Each byte is uploaded once, by its partition's leader.
		ls = append(ls, limit{"remote upload", "brokers_upload", "MB/s", m.rep.WritePeakMBps, m.uploadMBps,
			"ceil(write_peak / (upload_mbps × util))", "ceil(%s / (%s × %s))", a(m.rep.WritePeakMBps, m.uploadMBps, U)})
	}
	ls = append(ls, limit{"disk capacity", "brokers_disk", "TB", m.localTB, m.rep.DiskPerBrokerTB,
		"ceil(local_disk_tb / (disk_tb × util))", "ceil(%s / (%s × %s))", a(m.localTB, m.rep.DiskPerBrokerTB, U)})

	most, binding := 0.0, ""
	syms, vals := "", []float64{}
	for i, l := range ls {
		var n float64
		if len(l.args) == 4 {
			n = math.Ceil(l.args[0] / (l.args[1] * l.args[2] * l.args[3]))
		} else {
			n = math.Ceil(l.args[0] / (l.args[1] * l.args[2]))
		}
		n = r.add(l.sym, "brokers "+l.name+" alone needs", "brokers", l.formula, l.arith, l.args, n)
		if n > maxBrokersNeeded {
			return fmt.Errorf("perf: %s alone needs %s brokers; this model stops at %d", l.name, fmtNum(n), maxBrokersNeeded)
		}
		m.rep.Limits = append(m.rep.Limits, LimitUse{Name: l.name, Symbol: l.sym, Demand: l.demand, PerBroker: l.per,
			Unit: l.unit, BrokersNeeded: int(n)})
		if n > most {
			most, binding = n, l.name
		}
		if i > 0 {
			syms += ", "
		}
		syms += l.sym
		vals = append(vals, n)
	}
	k := float64(m.failures)
	needed := max(most+k, m.rf)
	if m.rf > most+k {
		binding = "replication factor"
	}
	tmpl := "max(max(" + repeatPct(len(vals)) + ") + %s, %s)"
	needed = r.add("brokers_needed", "the most any limit needs, + failures, and at least rf", "brokers",
		"max(max("+syms+") + failures, rf)", tmpl, append(vals, k, m.rf), needed)
	if needed > maxBrokersNeeded {
		return fmt.Errorf("perf: the plan needs %s brokers; this model stops at %d", fmtNum(needed), maxBrokersNeeded)
	}
	m.rep.BrokersNeeded = int(needed)
	m.rep.Binding = binding
	if w.FixedBrokers > 0 {
		m.rep.Brokers, m.rep.BrokersGiven = w.FixedBrokers, true
	} else {
		m.rep.Brokers = int(r.add("brokers", "brokers in the plan", "brokers", "brokers_needed", "%s", a(needed), needed))
	}
	return nil
}

// repeatPct returns "%s, %s, ..." with n verbs.
func repeatPct(n int) string {
	s := ""
	for i := range n {
		if i > 0 {
			s += ", "
		}
		s += "%s"
	}
	return s
}

func (m *model) partitions() error {
	r, w := &m.rec, m.w
	r.section = "partitions"
	wp, ip := m.rep.WritePeakMBps, m.rep.IngestPeakMBps
	B := float64(m.rep.Brokers)
	pt := r.add("partitions_throughput", "partitions for peak write throughput", "partitions",
		"ceil(write_peak / partition_mbps)", "ceil(%s / %s)", a(wp, w.PartitionMBps), math.Ceil(wp/w.PartitionMBps))
	pc := 0.0
	if w.ConsumerGroups > 0 {
		if w.ConsumersPerGroup > 0 {
			cpg := float64(w.ConsumersPerGroup)
			pc = r.add("partitions_consumers", "partitions for consumer parallelism: a group uses at most one consumer per partition", "partitions",
				"max(consumers_per_group, ceil(ingest_peak / consumer_mbps))", "max(%s, ceil(%s / %s))",
				a(cpg, ip, w.ConsumerMBps), max(cpg, math.Ceil(ip/w.ConsumerMBps)))
		} else {
			pc = r.add("partitions_consumers", "partitions for consumer parallelism: a group uses at most one consumer per partition", "partitions",
				"ceil(ingest_peak / consumer_mbps)", "ceil(%s / %s)", a(ip, w.ConsumerMBps), math.Ceil(ip/w.ConsumerMBps))
		}
	}
	if pt > maxPartitions || pc > maxPartitions {
		return fmt.Errorf("perf: the plan needs more than %d partitions", maxPartitions)
	}
	m.rep.PartitionsThroughput, m.rep.PartitionsConsumers = int(pt), int(pc)
	if w.Partitions > 0 {
		m.rep.Partitions, m.rep.PartitionsGiven = w.Partitions, true
	} else {
		var p float64
		if w.ConsumerGroups > 0 {
			p = r.add("partitions", "the larger need, rounded up to a multiple of brokers so leaders balance", "partitions",
				"ceil(max(partitions_throughput, partitions_consumers) / brokers) × brokers", "ceil(max(%s, %s) / %s) × %s",
				a(pt, pc, B, B), math.Ceil(max(pt, pc)/B)*B)
		} else {
			p = r.add("partitions", "partitions for throughput, rounded up to a multiple of brokers so leaders balance", "partitions",
				"ceil(partitions_throughput / brokers) × brokers", "ceil(%s / %s) × %s", a(pt, B, B), math.Ceil(pt/B)*B)
		}
		if p > maxPartitions {
			return fmt.Errorf("perf: the plan needs %s partitions; this model stops at %d", fmtNum(p), maxPartitions)
		}
		m.rep.Partitions = int(p)
	}
	P := float64(m.rep.Partitions)
	m.rep.PartitionReplicasPerBroker = r.add("replicas_per_broker", "partition replicas each broker hosts", "replicas",
		"partitions × rf / brokers", "%s × %s / %s", a(P, m.rf, B), P*m.rf/B)
	return nil
}

func (m *model) perBroker() {
	r, w := &m.rec, m.w
	r.section = "per broker (all brokers up, at peak)"
	B := float64(m.rep.Brokers)
	m.rep.DiskWritePerBrokerMBps = r.add("disk_write_broker", "log bytes each broker appends", "MB/s",
		"disk_write_total / brokers", "%s / %s", a(m.diskWriteTotal, B), m.diskWriteTotal/B)
	m.rep.DiskDevicePerBrokerMBps = r.add("disk_device_broker", "bytes each broker's log disks write, journal copy included", "MB/s",
		"disk_device_total / brokers", "%s / %s", a(m.diskDeviceTotal, B), m.diskDeviceTotal/B)
	m.rep.NetInPerBrokerMBps = r.add("net_in_broker", "network in per broker", "MB/s",
		"net_in_total / brokers", "%s / %s", a(m.netInTotal, B), m.netInTotal/B)
	m.rep.NetOutPerBrokerMBps = r.add("net_out_broker", "network out per broker", "MB/s",
		"net_out_total / brokers", "%s / %s", a(m.netOutTotal, B), m.netOutTotal/B)
	m.rep.CoresPerBroker = r.add("cores_broker", "busy cores per broker", "cores",
		"disk_write_total / core_mbps / brokers", "%s / %s / %s", a(m.diskWriteTotal, m.perCoreMBps, B), m.diskWriteTotal/m.perCoreMBps/B)
	m.rep.LocalDiskPerBrokerTB = r.add("local_disk_broker_tb", "log data on each broker's disk", "TB",
		"local_disk_tb / brokers", "%s / %s", a(m.localTB, B), m.localTB/B)
	dw := m.rep.DiskWritePerBrokerMBps
	m.rep.PageCachePerBrokerGiB = r.add("page_cache_gib", "page cache to keep every replica's last read_window_s of writes in memory", "GiB",
		"disk_write_broker × read_window_s × 10^6 / 2^30", "%s × %s × 10^6 / 2^30", a(dw, w.ReadWindowSec), dw*w.ReadWindowSec*bytesPerMB/bytesPerGiB)
	m.rep.PageCacheFreeGiB = r.add("page_cache_free_gib", "memory left for page cache", "GiB",
		"memory_gib - reserved_gib", "%s - %s", a(w.Limits.MemoryGiB, w.Limits.ReservedMemoryGiB), w.Limits.MemoryGiB-w.Limits.ReservedMemoryGiB)
}

// batching models the producers at one record rate; rateSym names the rate
// in formulas and suf distinguishes the peak figures' symbols.
//
// Keyed records spread every producer's traffic over all partitions. A
// Kafka producer keeps one open batch per partition; a batch is ready when
// it is full or has lingered linger.ms, and once any batch for a broker is
// ready the sender drains the head batch of every partition that broker
// leads into one produce request (RecordAccumulator.drainBatchesForOneNode).
// So per (producer, broker) a request cycle is: wait for the first record
// (mean 1/rate_pb), linger, drain; or a partition's batch fills first. With
// Poisson arrivals a request carries the record that opened the cycle plus
// rate_pb × linger more; its batches are the opening record's partition
// plus each of the leader's other k-1 partitions that received at least one
// record while the batch lingered (probability 1 - e^(-rate_pair × linger)).
// This is exact when batches close on linger (batching_sim_test.go checks it
// against a simulation of the accumulator); when they close on size it takes
// the fill time as the cycle, an approximation.
//
// Keyless records use the sticky partitioner: all of a producer's records go
// to one partition until its batch closes, on size or linger, and each
// request carries that one batch.
func (m *model) batching(rateSym string, rate float64, suf string) Batching {
	r, w := &m.rec, m.w
	r.section = "producer batching at " + rateSym
	R, C := m.recordBytes, m.compression
	N, P, B := float64(w.Producers), float64(m.rep.Partitions), float64(m.rep.Brokers)
	L, bb := w.LingerMs, float64(w.BatchBytes)
	var b Batching
	b.RecordsPerSec = rate
	if suf == "" {
		b.BatchCapRecords = r.add("batch_cap", "records that fit batch.size (the producer counts compressed bytes)", "records",
			"max(1, floor(batch_bytes × compression / record_bytes))", "max(1, floor(%s × %s / %s))", a(bb, C, R), max(1, math.Floor(bb*C/R)))
	} else {
		b.BatchCapRecords = m.rep.Sustained.BatchCapRecords
	}
	capR := b.BatchCapRecords
	if w.Keyless {
		lp := r.add("rate_producer"+suf, "records/s per producer", "records/s",
			rateSym+" / producers", "%s / %s", a(rate, N), rate/N)
		b.pairRate = lp
		b.RecordsPerBatch = r.add("records_per_batch"+suf, "records per batch: the sticky batch fills for linger after its first record", "records",
			"min(batch_cap, 1 + rate_producer"+suf+" × linger_ms / 1000)", "min(%s, 1 + %s × %s / 1000)", a(capR, lp, L), min(capR, 1+lp*L/1000))
		b.ClosesOn = "linger"
		if 1+lp*L/1000 >= capR {
			b.ClosesOn = "size"
		}
		b.BatchesPerSec = r.add("batches_per_sec"+suf, "batches/s, cluster", "batches/s",
			rateSym+" / records_per_batch"+suf, "%s / %s", a(rate, b.RecordsPerBatch), rate/b.RecordsPerBatch)
		b.RequestsPerSec = r.add("requests_per_sec"+suf, "produce requests/s, cluster: one sticky batch each", "requests/s",
			"batches_per_sec"+suf, "%s", a(b.BatchesPerSec), b.BatchesPerSec)
		b.RecordsPerRequest = b.RecordsPerBatch
	} else {
		leaders := min(P, B)
		pair := r.add("rate_pair"+suf, "records/s per (producer, partition)", "records/s",
			rateSym+" / (producers × partitions)", "%s / (%s × %s)", a(rate, N, P), rate/(N*P))
		pb := r.add("rate_pb"+suf, "records/s per (producer, broker)", "records/s",
			rateSym+" / (producers × min(partitions, brokers))", "%s / (%s × min(%s, %s))", a(rate, N, P, B), rate/(N*leaders))
		b.pairRate, b.brokerPairRate = pair, pb
		lingerCycle, sizeCycle := 1000/pb+L, capR/pair*1000
		cycle := r.add("cycle_ms"+suf, "one request cycle per (producer, broker): first record, then linger; or a batch fills", "ms",
			"min(1000 / rate_pb"+suf+" + linger_ms, batch_cap / rate_pair"+suf+" × 1000)", "min(1000 / %s + %s, %s / %s × 1000)",
			a(pb, L, capR, pair), min(lingerCycle, sizeCycle))
		b.ClosesOn = "linger"
		if sizeCycle < lingerCycle {
			b.ClosesOn = "size"
		}
		k := m.rep.Sustained.leadersK
		if suf == "" {
			k = r.add("partitions_per_leader", "partitions each leading broker leads", "partitions",
				"partitions / min(partitions, brokers)", "%s / min(%s, %s)", a(P, P, B), P/leaders)
		}
		b.RecordsPerRequest = r.add("records_per_request"+suf, "records per produce request", "records",
			"rate_pb"+suf+" × cycle_ms"+suf+" / 1000", "%s × %s / 1000", a(pb, cycle), pb*cycle/1000)
		window := min(L, cycle)
		perReq := r.add("batches_per_request"+suf, "batches per request: the first record's partition, plus each other partition that got a record while the batch lingered", "batches",
			"1 + (partitions_per_leader - 1) × (1 - exp(-rate_pair"+suf+" × min(linger_ms, cycle_ms"+suf+") / 1000))",
			"1 + (%s - 1) × (1 - exp(-%s × min(%s, %s) / 1000))", a(k, pair, L, cycle), 1+(k-1)*(1-math.Exp(-pair*window/1000)))
		b.RecordsPerBatch = r.add("records_per_batch"+suf, "records per batch", "records",
			"min(batch_cap, records_per_request"+suf+" / batches_per_request"+suf+")", "min(%s, %s / %s)",
			a(capR, b.RecordsPerRequest, perReq), min(capR, b.RecordsPerRequest/perReq))
		b.BatchesPerSec = r.add("batches_per_sec"+suf, "batches/s, cluster", "batches/s",
			rateSym+" / records_per_batch"+suf, "%s / %s", a(rate, b.RecordsPerBatch), rate/b.RecordsPerBatch)
		b.RequestsPerSec = r.add("requests_per_sec"+suf, "produce requests/s, cluster: one per (producer, broker) per cycle", "requests/s",
			"producers × min(partitions, brokers) × 1000 / cycle_ms"+suf, "%s × min(%s, %s) × 1000 / %s",
			a(N, P, B, cycle), N*leaders*1000/cycle)
		b.leadersK = k
	}
	b.RequestsPerSecPerBroker = r.add("requests_per_broker"+suf, "produce requests/s per broker", "requests/s",
		"requests_per_sec"+suf+" / brokers", "%s / %s", a(b.RequestsPerSec, B), b.RequestsPerSec/B)
	b.AvgBatchBytes = r.add("batch_bytes_avg"+suf, "mean batch on the wire", "B",
		"records_per_batch"+suf+" × record_bytes / compression", "%s × %s / %s", a(b.RecordsPerBatch, R, C), b.RecordsPerBatch*R/C)
	return b
}

// limitTable fills utilisation at the plan's broker count.
func (m *model) limitTable() {
	B := float64(m.rep.Brokers)
	up := B - float64(m.failures)
	worst := -1.0
	for i := range m.rep.Limits {
		l := &m.rep.Limits[i]
		l.Utilization = l.Demand / (B * l.PerBroker)
		l.UtilizationDegraded = l.Demand / (up * l.PerBroker)
		if m.rep.BrokersGiven && l.UtilizationDegraded > worst {
			worst = l.UtilizationDegraded
			m.rep.Binding = l.Name
		}
	}
	if m.rep.BrokersGiven && m.rf > B {
		m.rep.Binding = "replication factor"
	}
}
