package perf

import (
	"fmt"
	"math"
	"strings"
)

// Thresholds for warnings.
const (
	claimTolerance          = 0.05 // a quoted figure within 5 % of the arithmetic is fine
	tinyBatchRecords        = 2    // fewer records per batch than this: per-batch costs dominate
	adviceBatchRecords      = 10   // linger advice aims for this many records per batch
	maxReplicasPerBroker    = 4000 // Kafka's long-standing guidance per broker
	lingerSmallBatchPortion = 0.5  // a linger-closed batch under half of batch.size is worth a note
)

func (m *model) add(sev Severity, code, format string, args ...any) {
	m.rep.Warnings = append(m.rep.Warnings, Warning{Severity: sev, Code: code, Message: fmt.Sprintf(format, args...)})
}

// warn finds where the plan does not add up.
func (m *model) warn() {
	m.warnClaim()
	m.warnReplication()
	m.warnStorage()
	m.warnBrokers()
	m.warnPartitions()
	m.warnBatching()
	m.warnMemory()
	m.warnRemote() // remote.go
	m.warnInputs()
}

func (m *model) warnClaim() {
	w, rep := m.w, &m.rep
	claim := w.ClaimedPeakMBps
	if claim == 0 || math.Abs(claim-rep.WritePeakMBps) <= claimTolerance*rep.WritePeakMBps {
		return
	}
	need := rep.IngestPeakMBps / claim
	how := fmt.Sprintf("%s MB/s holds only if records compress %s:1 on the wire and on disk", fmtShort(claim), fmtShort(need))
	if need < 1 {
		how = fmt.Sprintf("%s MB/s is more than the records' own bytes", fmtShort(claim))
	}
	compressed := ""
	if m.compression > 1 {
		compressed = fmt.Sprintf(", %s MB/s after the assumed %s:1 compression", fmtShort(rep.WritePeakMBps), fmtShort(m.compression))
	}
	m.add(SeverityError, "claimed-ingest",
		"peak ingest is %s MB/s (%s records/s × %s B = %s B/s%s), not the %s MB/s quoted; %s",
		fmtShort(rep.IngestPeakMBps), fmtNum(w.PeakRecordsPerSec), fmtNum(m.recordBytes),
		fmtNum(w.PeakRecordsPerSec*m.recordBytes), compressed, fmtShort(claim), how)
}

// warnCompression compares with the same plan for incompressible records.
func (m *model) warnCompression(alt *model) {
	rep := &m.rep
	m.add(SeverityWarn, "compression-assumed",
		"the plan assumes %s:1 compression: peak ingest of %s MB/s of records is %s MB/s on the wire and on disk. "+
			"Records that do not compress (already compressed, encrypted, random) need the full %s MB/s: "+
			"%d brokers (bound by %s) instead of %d, and %s TB of local disk instead of %s TB",
		fmtShort(m.compression), fmtShort(rep.IngestPeakMBps), fmtShort(rep.WritePeakMBps), fmtShort(rep.IngestPeakMBps),
		alt.rep.BrokersNeeded, alt.bindingNeeded(), rep.BrokersNeeded, fmtShort(alt.localTB), fmtShort(m.localTB))
}

// bindingNeeded names the limit behind BrokersNeeded (not the most utilised
// at a given count).
func (m *model) bindingNeeded() string {
	most, name := 0, ""
	for _, l := range m.rep.Limits {
		if l.BrokersNeeded > most {
			most, name = l.BrokersNeeded, l.Name
		}
	}
	if m.w.ReplicationFactor > most+m.failures {
		return "replication factor"
	}
	return name
}

func (m *model) warnReplication() {
	w := m.w
	rf, isr, k := w.ReplicationFactor, w.MinISR, w.BrokersThatMayFail
	switch {
	case rf == 1:
		m.add(SeverityWarn, "rf-one",
			"RF 1: a broker that stops takes its partitions offline, and a lost disk loses their data")
	case isr == 1:
		m.add(SeverityWarn, "min-isr-one",
			"min ISR 1 with RF %d: an acks=all write can be acknowledged with one copy; losing that broker loses it", rf)
	}
	if k > rf-isr {
		m.add(SeverityError, "failures-exceed-isr",
			"RF %d with min ISR %d keeps acks=all writes going with %d broker(s) down, but the plan allows %d: "+
				"partitions with %d replicas on the failed brokers refuse acks=all produce (NOT_ENOUGH_REPLICAS)",
			rf, isr, rf-isr, k, rf-isr+1)
	} else if isr == rf && rf > 1 {
		m.add(SeverityWarn, "min-isr-equals-rf",
			"min ISR = RF = %d: any one broker down stops acks=all writes to every partition it hosts", rf)
	}
	if rf > m.rep.Brokers {
		m.add(SeverityError, "rf-exceeds-brokers", "RF %d needs at least %d brokers; the plan has %d", rf, rf, m.rep.Brokers)
	}
}

func (m *model) warnStorage() {
	w, rep := m.w, &m.rep
	if w.ReplicationFactor == 1 {
		return
	}
	if w.LocalHotHours > 0 {
		m.add(SeverityNote, "rf-local-copies",
			"local disks hold RF=%d copies of the %s h hot window: %s TB (%s TB per broker over %d); "+
				"object storage holds one copy of all %s h: %s TB",
			w.ReplicationFactor, fmtShort(w.LocalHotHours), fmtShort(rep.LocalDiskTB), fmtShort(rep.LocalDiskPerBrokerTB),
			rep.Brokers, fmtShort(w.RetentionHours), fmtShort(rep.ObjectStorageTB))
		return
	}
	m.add(SeverityNote, "rf-local-copies",
		"local disks hold RF=%d copies: %s TB retained over %s h is %s TB of broker disk, %s TB per broker over %d brokers",
		w.ReplicationFactor, fmtShort(rep.RetainedTB), fmtShort(w.RetentionHours), fmtShort(rep.LocalDiskTB),
		fmtShort(rep.LocalDiskPerBrokerTB), rep.Brokers)
}

func (m *model) warnBrokers() {
	w, rep := m.w, &m.rep
	if !rep.BrokersGiven || rep.Brokers >= rep.BrokersNeeded {
		return
	}
	B, k := rep.Brokers, m.failures
	var short []string
	for _, l := range rep.Limits {
		if l.BrokersNeeded+k <= B {
			continue
		}
		short = append(short, l.Name)
		msg := fmt.Sprintf("%s: %d brokers (%d with %d down) run at %s of %s %s each, above the %s target; "+
			"this limit alone needs %d brokers + %d for failures",
			l.Name, B, B-k, k, fmtPct(l.UtilizationDegraded), fmtShort(l.PerBroker), l.Unit,
			fmtPct(m.util), l.BrokersNeeded, k)
		if l.Name == "disk capacity" {
			msg += m.diskAdvice()
		}
		m.add(SeverityError, "limit-"+strings.ReplaceAll(l.Name, " ", "-"), "%s", msg)
	}
	also := ""
	if len(short) > 1 {
		also = "; short on " + strings.Join(short, ", ")
	}
	m.add(SeverityError, "brokers-insufficient", "%d brokers are not enough: the plan needs %d, bound by %s%s",
		w.FixedBrokers, rep.BrokersNeeded, rep.Binding, also)
}

// diskAdvice says what would make the local disks fit at the plan's broker
// count: a tiered hot window or bigger disks.
func (m *model) diskAdvice() string {
	rep, w := &m.rep, m.w
	up := float64(rep.Brokers - m.failures)
	usableTB := up * rep.DiskPerBrokerTB * m.util
	perHourTB := rep.WriteSustainedMBps * 3600 / bytesPerMB * m.rf
	hot := usableTB / perHourTB
	need := m.localTB / (up * m.util)
	s := fmt.Sprintf(". Each broker would hold %s TB (RF %d copies of %s TB over %d brokers) on %s TB disks; ",
		fmtShort(rep.LocalDiskPerBrokerTB), w.ReplicationFactor, fmtShort(m.localTB/m.rf), rep.Brokers, fmtShort(rep.DiskPerBrokerTB))
	if hot < w.RetentionHours {
		s += fmt.Sprintf("tiered storage keeping at most %s h locally (%s TB usable / %s TB per hour of RF copies) fits, ",
			fmtShort(hot), fmtShort(usableTB), fmtShort(perHourTB))
	}
	return s + fmt.Sprintf("or disks of %s TB per broker", fmtShort(need))
}

func (m *model) warnPartitions() {
	w, rep := m.w, &m.rep
	P, B := rep.Partitions, rep.Brokers
	if rep.PartitionsGiven {
		if P < rep.PartitionsThroughput {
			m.add(SeverityWarn, "partitions-throughput",
				"%d partitions carry %s MB/s each at peak, above the %s MB/s planned per partition; throughput needs %d",
				P, fmtShort(rep.WritePeakMBps/float64(P)), fmtShort(w.PartitionMBps), rep.PartitionsThroughput)
		}
		if w.ConsumerGroups > 0 && P < rep.PartitionsConsumers {
			m.add(SeverityWarn, "partitions-consumers",
				"a group runs at most %d consumers (one per partition); reading %s MB/s at %s MB/s per consumer needs %d partitions",
				P, fmtShort(rep.IngestPeakMBps), fmtShort(w.ConsumerMBps), rep.PartitionsConsumers)
		}
	}
	switch {
	case P < B:
		m.add(SeverityWarn, "partitions-below-brokers",
			"%d partitions over %d brokers: %d brokers lead nothing and take no produce traffic", P, B, B-P)
	case P%B != 0:
		m.add(SeverityNote, "partitions-uneven",
			"%d partitions over %d brokers: some lead %d, others %d; a multiple of %d balances leaders", P, B, P/B+1, P/B, B)
	}
	if rep.PartitionReplicasPerBroker > maxReplicasPerBroker {
		m.add(SeverityWarn, "replicas-per-broker",
			"%s partition replicas per broker, above the ~%d per broker Kafka operators plan for (open files, recovery time, controller load)",
			fmtShort(rep.PartitionReplicasPerBroker), maxReplicasPerBroker)
	}
}

func (m *model) warnBatching() {
	w, rep := m.w, &m.rep
	s, p := rep.Sustained, rep.Peak
	spread := fmt.Sprintf("keyed traffic from %d producers over %d partitions gives each (producer, partition) %s records/s",
		w.Producers, rep.Partitions, fmtShort(s.pairRate))
	if w.Keyless {
		spread = fmt.Sprintf("keyless traffic from %d producers gives each producer %s records/s", w.Producers, fmtShort(s.pairRate))
	}
	if s.ClosesOn == "linger" && s.AvgBatchBytes < lingerSmallBatchPortion*float64(w.BatchBytes) {
		m.add(SeverityNote, "batches-close-on-linger",
			"%s: batches close on the %s ms linger with %s records (%s B), not on the %s B batch.size",
			spread, fmtShort(w.LingerMs), fmtShort(s.RecordsPerBatch), fmtShort(s.AvgBatchBytes), fmtNum(float64(w.BatchBytes)))
	}
	if s.RecordsPerBatch >= tinyBatchRecords {
		return
	}
	msg := fmt.Sprintf("%s records per batch at the sustained rate: %s batches/s and %s produce requests/s (%s per broker), "+
		"%s requests/s (%s per broker) at peak; per-batch and per-request costs (CRC, append, index, request handling) dominate",
		fmtShort(s.RecordsPerBatch), fmtShort(s.BatchesPerSec), fmtShort(s.RequestsPerSec), fmtShort(s.RequestsPerSecPerBroker),
		fmtShort(p.RequestsPerSec), fmtShort(p.RequestsPerSecPerBroker))
	target := math.Min(adviceBatchRecords, s.BatchCapRecords)
	var lingerMs float64
	if w.Keyless {
		lingerMs = (target - 1) / s.pairRate * 1000
	} else {
		lingerMs = lingerFor(target, s)
	}
	if target > tinyBatchRecords && lingerMs > w.LingerMs && !math.IsInf(lingerMs, 0) {
		msg += fmt.Sprintf(". About %s records per batch needs linger ≈ %s ms, or fewer producers or partitions",
			fmtShort(target), fmtShort(lingerMs))
	}
	m.add(SeverityWarn, "tiny-batches", "%s", msg)
}

func (m *model) warnMemory() {
	rep, w := &m.rep, m.w
	if rep.PageCachePerBrokerGiB <= rep.PageCacheFreeGiB {
		return
	}
	m.add(SeverityWarn, "page-cache",
		"each broker writes %s MB/s at peak; holding the last %s s in page cache needs %s GiB but %s GiB is free: "+
			"consumers reading that far behind hit the disks",
		fmtShort(rep.DiskWritePerBrokerMBps), fmtShort(w.ReadWindowSec), fmtShort(rep.PageCachePerBrokerGiB), fmtShort(rep.PageCacheFreeGiB))
}

func (m *model) warnInputs() {
	w := m.w
	if c := w.Calibration; c != nil {
		src := c.Source
		if src == "" {
			src = "a loadgen run"
		}
		switch {
		case !c.hasCPU() && !c.hasCeiling():
			// Only tiered storage's rates (a /metrics scrape): warnRemote.
		case !c.CapacitySearch:
			m.add(SeverityNote, "calibration-not-ceiling",
				"%s was not a --find-max capacity search: its throughput is what it was asked for, so only its CPU per MB is used", src)
		case c.Brokers == 0:
			m.add(SeverityNote, "calibration-not-ceiling",
				"%s ran against brokers it did not spawn: their number is unknown, so its throughput is not used as a per-broker ceiling", src)
		}
		if c.RecordBytes > 0 && c.RecordBytes != w.RecordBytes {
			m.add(SeverityNote, "calibration-record-size",
				"%s used %d B records, this plan %d B: per-core MB/s shifts with record size (per-record and per-batch costs)",
				src, c.RecordBytes, w.RecordBytes)
		}
		if rb := m.rep.Sustained.RecordsPerBatch; c.hasCPU() && c.RecordsPerBatch > 2*rb {
			m.add(SeverityWarn, "calibration-batching",
				"%s batched %s records per batch, this plan's producers %s: its MB/s per core leaves out the per-batch "+
					"and per-request work of smaller batches, so expect more CPU than the cpu limit shows; "+
					"calibrate with a run that batches like the plan (--producers, --partitions, --keys, --linger)",
				src, fmtShort(c.RecordsPerBatch), fmtShort(rb))
		}
		if c.ProduceP99Ms > 0 {
			m.add(SeverityNote, "calibration-latency", "%s measured produce p99 %s ms at %s MB/s",
				src, fmtShort(c.ProduceP99Ms), fmtShort(c.mbps()))
		}
	}
	var parts []string
	for _, in := range m.rep.Inputs {
		if in.Source == "assumed" {
			parts = append(parts, in.Symbol+" "+withUnit(fmtNum(in.Value), in.Unit))
		}
	}
	if len(parts) > 0 {
		m.add(SeverityNote, "assumed-inputs",
			"assumed, not measured: %s. Measure with `strata loadgen` and pass --calibrate, or set the flags",
			strings.Join(parts, ", "))
	}
}

// keyedRecordsPerBatch is the keyed batching model (see model.batching) as
// a function of linger, for advice.
func keyedRecordsPerBatch(s Batching, lingerMs float64) float64 {
	cycle := min(1000/s.brokerPairRate+lingerMs, s.BatchCapRecords/s.pairRate*1000)
	perRequest := 1 + (s.leadersK-1)*(1-math.Exp(-s.pairRate*min(lingerMs, cycle)/1000))
	return min(s.BatchCapRecords, s.brokerPairRate*cycle/1000/perRequest)
}

// lingerFor finds, by bisection, the linger that gives target records per
// keyed batch (the model rises with linger). It returns +Inf if even an
// hour's linger falls short.
func lingerFor(target float64, s Batching) float64 {
	lo, hi := 0.0, 3_600_000.0
	if keyedRecordsPerBatch(s, hi) < target {
		return math.Inf(1)
	}
	for range 100 {
		mid := (lo + hi) / 2
		if keyedRecordsPerBatch(s, mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}
