package perf

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Assumed defaults for figures a planner rarely knows. Plan fills a zero
// field with these and lists every one it used in Report.Assumed, so a plan
// never silently rests on a number nobody chose.
const (
	DefaultDiskWriteMBps = 500 // one NVMe drive, sustained sequential write
	// DefaultDiskWriteAmplification: with the broker's defaults every
	// acks=all append is written to the journal and to its segment
	// (log.io.journal.bytes), so its disks write every log byte twice.
	DefaultDiskWriteAmplification = 2
	DefaultNetworkMBps            = 1250 // 10 GbE, per direction
	DefaultCores                  = 8
	DefaultPerCoreMBps            = 100 // produce MB/s one core validates and appends
	DefaultMemoryGiB              = 64
	DefaultReservedMemoryGiB      = 4    // broker heap, OS, everything that is not page cache
	DefaultDiskGiB                = 4096 // 4 TiB = 4.4 TB
	DefaultTargetUtilization      = 0.6
	DefaultPartitionMBps          = 10 // write throughput one partition is planned for
	DefaultConsumerMBps           = 20 // what one consumer instance processes
	DefaultReadWindowSec          = 30 // how far behind the log end consumers read
)

// Bounds on inputs: beyond them a plan is meaningless, and inside them every
// derived figure is finite and fits an int.
const (
	minRecordsPerSec     = 0.001
	maxRecordsPerSec     = 1e10
	maxRecordBytes       = 1 << 30
	maxCount             = 1_000_000 // producers, brokers, groups, consumers
	maxPartitions        = 10_000_000
	maxReplication       = 100
	maxCompression       = 100
	maxDiskAmplification = 10
	maxHours             = 1e6
	maxLimit             = 1e9 // any per-broker limit, in its own unit
	maxBrokersNeeded     = 1_000_000
)

// BrokerLimits are one broker's capacities. A zero field means "not
// measured": Plan uses the Default* constant and says so.
type BrokerLimits struct {
	DiskWriteMBps float64 `json:"disk_write_mbps"` // sustained write to the log disks
	// DiskWriteAmplification is bytes the log disks write per log byte
	// appended: 2 with the journal (the broker's default), about 1.2 with
	// log.io.journal.ends=true once retention recycles files, 1 with
	// log.io.flush.shared=false and log.io.journal.bytes=0.
	DiskWriteAmplification float64 `json:"disk_write_amplification"`
	NetworkMBps            float64 `json:"network_mbps"`        // per direction (full duplex)
	Cores                  float64 `json:"cores"`               // cores the broker may use
	PerCoreMBps            float64 `json:"per_core_mbps"`       // produce MB/s one core handles (--calibrate measures it)
	MemoryGiB              float64 `json:"memory_gib"`          // RAM
	ReservedMemoryGiB      float64 `json:"reserved_memory_gib"` // RAM that is not page cache
	DiskGiB                float64 `json:"disk_gib"`            // usable log disk capacity
	// UploadMBps is what one broker copies to the object store per
	// second while copying, RemoteReadMBps what one remote reader reads
	// from it (tiered storage; --calibrate measures both from /metrics).
	// 0: not modelled.
	UploadMBps     float64 `json:"upload_mbps,omitempty"`
	RemoteReadMBps float64 `json:"remote_read_mbps,omitempty"`
}

// Workload is everything a capacity plan starts from. Units are in the
// names; MB is 10^6 bytes, KiB/GiB are 2^10/2^30 bytes.
type Workload struct {
	Name string `json:"name,omitempty"` // a preset's name, for the report title

	RecordBytes            int     `json:"record_bytes"`              // key + value + headers as produced
	SustainedRecordsPerSec float64 `json:"sustained_records_per_sec"` // the average that retention stores
	PeakRecordsPerSec      float64 `json:"peak_records_per_sec"`      // what brokers must absorb; 0 = sustained
	CompressionRatio       float64 `json:"compression_ratio"`         // record bytes : bytes on disk; 0 or 1 = none

	ReplicationFactor  int `json:"replication_factor"`
	MinISR             int `json:"min_isr"`
	BrokersThatMayFail int `json:"brokers_that_may_fail"` // N+k: the plan holds its targets with k brokers down

	ConsumerGroups    int     `json:"consumer_groups"`     // groups that each read the whole stream
	ConsumersPerGroup int     `json:"consumers_per_group"` // wanted parallelism; 0 = derive from ConsumerMBps only
	ConsumerMBps      float64 `json:"consumer_mbps"`       // one consumer instance; 0 = DefaultConsumerMBps
	PartitionMBps     float64 `json:"partition_mbps"`      // one partition; 0 = DefaultPartitionMBps

	RetentionHours float64 `json:"retention_hours"`
	LocalHotHours  float64 `json:"local_hot_hours"` // tiered storage: hours kept on broker disks; 0 = no tiering

	Producers  int     `json:"producers"`   // producer clients (instances), each writing to every partition
	LingerMs   float64 `json:"linger_ms"`   // linger.ms
	BatchBytes int     `json:"batch_bytes"` // batch.size
	Keyless    bool    `json:"keyless"`     // sticky partitioner instead of keys spread over all partitions

	Partitions   int `json:"partitions"` // 0 = derive
	FixedBrokers int `json:"brokers"`    // 0 = derive

	Limits            BrokerLimits `json:"limits"`
	TargetUtilization float64      `json:"target_utilization"` // 0 = DefaultTargetUtilization
	ReadWindowSec     float64      `json:"read_window_sec"`    // page cache must hold this much of every replica's writes; 0 = default

	// ClaimedPeakMBps is a peak ingest figure someone else's plan states;
	// Plan checks it against the arithmetic. 0 = none.
	ClaimedPeakMBps float64 `json:"claimed_peak_mbps,omitempty"`

	// Calibration, when set, replaces assumed per-broker limits with
	// figures measured by `strata loadgen` (see ParseCalibration).
	Calibration *Calibration `json:"calibration,omitempty"`
}

// Defaults is a workload with the usual producer and topic settings and no
// rate: Kafka's replication defaults for production (RF 3, min ISR 2), one
// consumer group, 7 days' retention, 10 keyed producers with a 5 ms linger
// and 64 KiB batches, one broker allowed to fail.
func Defaults() Workload {
	return Workload{
		RecordBytes:        1024,
		CompressionRatio:   1,
		ReplicationFactor:  3,
		MinISR:             2,
		BrokersThatMayFail: 1,
		ConsumerGroups:     1,
		RetentionHours:     7 * 24,
		Producers:          10,
		LingerMs:           5,
		BatchBytes:         64 << 10,
	}
}

// PresetInfo describes one named workload.
type PresetInfo struct {
	Name        string
	Description string
	// Assumptions lists what the preset had to choose because its source
	// did not say; the report prints them.
	Assumptions []string
}

var presets = map[string]struct {
	info PresetInfo
	make func() Workload
}{
	"reference": {
		info: PresetInfo{
			Name: "reference",
			Description: "the reference workload: 1 KiB records, 200,000/s sustained and 600,000/s peak, " +
				"RF 3, min ISR 2, 7 days, 96 partitions, 12 brokers, 5 ms / 64 KiB batching; " +
				"its plan quotes 240 MB/s peak ingest",
			Assumptions: []string{
				"10 keyed producers, 1 consumer group, incompressible records (the reference does not say)",
			},
		},
		make: func() Workload {
			w := Defaults()
			w.Name = "reference"
			w.SustainedRecordsPerSec = 200_000
			w.PeakRecordsPerSec = 600_000
			w.Partitions = 96
			w.FixedBrokers = 12
			w.ClaimedPeakMBps = 240
			return w
		},
	},
}

// Preset returns a named workload and its description.
func Preset(name string) (Workload, PresetInfo, error) {
	p, ok := presets[name]
	if !ok {
		return Workload{}, PresetInfo{}, fmt.Errorf("perf: unknown preset %q (have %v)", name, PresetNames())
	}
	return p.make(), p.info, nil
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ErrInvalidWorkload wraps every input validation failure.
var ErrInvalidWorkload = errors.New("perf: invalid workload")

// resolve validates w and fills zero-means-default fields, returning the
// names of the inputs it assumed.
func resolve(w Workload) (Workload, []string, error) {
	bad := func(format string, args ...any) (Workload, []string, error) {
		return Workload{}, nil, fmt.Errorf("%w: %s", ErrInvalidWorkload, fmt.Sprintf(format, args...))
	}
	floats := []struct {
		name string
		v    float64
	}{
		{"sustained rate", w.SustainedRecordsPerSec}, {"peak rate", w.PeakRecordsPerSec},
		{"compression ratio", w.CompressionRatio}, {"consumer MB/s", w.ConsumerMBps},
		{"partition MB/s", w.PartitionMBps}, {"retention", w.RetentionHours},
		{"hot window", w.LocalHotHours}, {"linger", w.LingerMs},
		{"target utilisation", w.TargetUtilization}, {"read window", w.ReadWindowSec},
		{"claimed peak MB/s", w.ClaimedPeakMBps},
		{"disk write MB/s", w.Limits.DiskWriteMBps}, {"disk write amplification", w.Limits.DiskWriteAmplification},
		{"network MB/s", w.Limits.NetworkMBps},
		{"cores", w.Limits.Cores}, {"per-core MB/s", w.Limits.PerCoreMBps},
		{"memory GiB", w.Limits.MemoryGiB}, {"reserved memory GiB", w.Limits.ReservedMemoryGiB},
		{"disk GiB", w.Limits.DiskGiB},
		{"upload MB/s", w.Limits.UploadMBps}, {"remote read MB/s", w.Limits.RemoteReadMBps},
	}
	for _, f := range floats {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return bad("%s must be a finite number >= 0, got %v", f.name, f.v)
		}
		if f.v > maxLimit*10 {
			return bad("%s %v is beyond any plan this model can make", f.name, f.v)
		}
	}
	switch {
	case w.RecordBytes < 1 || w.RecordBytes > maxRecordBytes:
		return bad("record bytes must be in [1, %d], got %d", maxRecordBytes, w.RecordBytes)
	case w.SustainedRecordsPerSec < minRecordsPerSec || w.SustainedRecordsPerSec > maxRecordsPerSec:
		return bad("sustained rate must be in [%g, %g] records/s, got %v", minRecordsPerSec, float64(maxRecordsPerSec), w.SustainedRecordsPerSec)
	case w.PeakRecordsPerSec > maxRecordsPerSec:
		return bad("peak rate above %g records/s", float64(maxRecordsPerSec))
	case w.PeakRecordsPerSec != 0 && w.PeakRecordsPerSec < w.SustainedRecordsPerSec:
		return bad("peak rate %v is below the sustained rate %v", w.PeakRecordsPerSec, w.SustainedRecordsPerSec)
	case w.CompressionRatio != 0 && (w.CompressionRatio < 1 || w.CompressionRatio > maxCompression):
		return bad("compression ratio must be in [1, %d] (1 = none), got %v", maxCompression, w.CompressionRatio)
	case w.ReplicationFactor < 1 || w.ReplicationFactor > maxReplication:
		return bad("replication factor must be in [1, %d], got %d", maxReplication, w.ReplicationFactor)
	case w.MinISR < 1 || w.MinISR > w.ReplicationFactor:
		return bad("min ISR must be in [1, RF=%d], got %d", w.ReplicationFactor, w.MinISR)
	case w.BrokersThatMayFail < 0 || w.BrokersThatMayFail > maxCount:
		return bad("brokers that may fail must be in [0, %d], got %d", maxCount, w.BrokersThatMayFail)
	case w.FixedBrokers != 0 && w.BrokersThatMayFail >= w.FixedBrokers:
		return bad("%d brokers cannot tolerate %d failures", w.FixedBrokers, w.BrokersThatMayFail)
	case w.ConsumerGroups < 0 || w.ConsumerGroups > maxCount:
		return bad("consumer groups must be in [0, %d], got %d", maxCount, w.ConsumerGroups)
	case w.ConsumersPerGroup < 0 || w.ConsumersPerGroup > maxPartitions:
		return bad("consumers per group must be in [0, %d], got %d", maxPartitions, w.ConsumersPerGroup)
	case w.RetentionHours <= 0 || w.RetentionHours > maxHours:
		return bad("retention must be in (0, %g] hours, got %v", float64(maxHours), w.RetentionHours)
	case w.LocalHotHours > w.RetentionHours:
		return bad("hot window %v h is longer than retention %v h", w.LocalHotHours, w.RetentionHours)
	case w.Producers < 1 || w.Producers > maxCount:
		return bad("producers must be in [1, %d], got %d", maxCount, w.Producers)
	case w.LingerMs > 3_600_000:
		return bad("linger above one hour")
	case w.BatchBytes < 1 || w.BatchBytes > maxRecordBytes:
		return bad("batch bytes must be in [1, %d], got %d", maxRecordBytes, w.BatchBytes)
	case w.Partitions < 0 || w.Partitions > maxPartitions:
		return bad("partitions must be in [0, %d], got %d", maxPartitions, w.Partitions)
	case w.FixedBrokers < 0 || w.FixedBrokers > maxBrokersNeeded:
		return bad("brokers must be in [0, %d], got %d", maxBrokersNeeded, w.FixedBrokers)
	case w.TargetUtilization > 1:
		return bad("target utilisation is a fraction in (0, 1], got %v", w.TargetUtilization)
	case w.ReadWindowSec > 86_400:
		return bad("read window above one day")
	case w.Limits.DiskWriteAmplification != 0 && (w.Limits.DiskWriteAmplification < 1 || w.Limits.DiskWriteAmplification > maxDiskAmplification):
		return bad("disk write amplification must be in [1, %d] (1 = every log byte written once), got %v", maxDiskAmplification, w.Limits.DiskWriteAmplification)
	}
	if w.Calibration != nil {
		if err := w.Calibration.validate(); err != nil {
			return Workload{}, nil, fmt.Errorf("%w: %v", ErrInvalidWorkload, err)
		}
	}

	var assumed []string
	def := func(name string, p *float64, v float64) {
		if *p == 0 {
			*p = v
			assumed = append(assumed, name)
		}
	}
	if w.PeakRecordsPerSec == 0 {
		w.PeakRecordsPerSec = w.SustainedRecordsPerSec
	}
	if w.CompressionRatio == 0 {
		w.CompressionRatio = 1
	}
	def("disk_write_mbps", &w.Limits.DiskWriteMBps, DefaultDiskWriteMBps)
	if !w.Calibration.hasDeviceAmp() {
		def("disk_amp", &w.Limits.DiskWriteAmplification, DefaultDiskWriteAmplification)
	} // else 0 until throughput derives it from the run's disk (plan.go)
	def("net_mbps", &w.Limits.NetworkMBps, DefaultNetworkMBps)
	def("cores", &w.Limits.Cores, DefaultCores)
	if w.Calibration == nil || !w.Calibration.hasCPU() {
		def("core_mbps", &w.Limits.PerCoreMBps, DefaultPerCoreMBps)
	}
	def("memory_gib", &w.Limits.MemoryGiB, DefaultMemoryGiB)
	def("reserved_gib", &w.Limits.ReservedMemoryGiB, DefaultReservedMemoryGiB)
	def("disk_gib", &w.Limits.DiskGiB, DefaultDiskGiB)
	def("util", &w.TargetUtilization, DefaultTargetUtilization)
	def("partition_mbps", &w.PartitionMBps, DefaultPartitionMBps)
	if w.ConsumerGroups > 0 {
		def("consumer_mbps", &w.ConsumerMBps, DefaultConsumerMBps)
	}
	def("read_window_s", &w.ReadWindowSec, DefaultReadWindowSec)
	if w.Limits.ReservedMemoryGiB >= w.Limits.MemoryGiB {
		return bad("reserved memory %v GiB leaves no page cache in %v GiB", w.Limits.ReservedMemoryGiB, w.Limits.MemoryGiB)
	}
	return w, assumed, nil
}
