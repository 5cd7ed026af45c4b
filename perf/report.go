package perf

import (
	"fmt"
	"math"
	"strings"
)

// Unit sizes. MB and TB are decimal, as disk and network vendors quote
// them; KiB and GiB are binary, as record sizes, batch.size and RAM are.
const (
	bytesPerMB  = 1e6
	bytesPerTB  = 1e12
	bytesPerGiB = 1 << 30
)

// UnitsNote is printed at the top of every plan.
const UnitsNote = "MB = 10^6 bytes, TB = 10^12 bytes; KiB = 2^10 bytes, GiB = 2^30 bytes; rates are per second"

// Step is one derived figure with its working: Formula in symbols (names of
// inputs and earlier steps), Arithmetic with the numbers substituted, and
// Value in Unit. Eval(Arithmetic) reproduces Value (Verify checks it).
type Step struct {
	Section    string  `json:"section"`
	Symbol     string  `json:"symbol"`
	Name       string  `json:"name"`
	Formula    string  `json:"formula"`
	Arithmetic string  `json:"arithmetic"`
	Value      float64 `json:"value"`
	Unit       string  `json:"unit"`
}

// Verify evaluates the step's arithmetic and compares it with its value:
// exactly when the arithmetic rounds (ceil, floor), else to 0.1 %.
func (s Step) Verify() error {
	got, err := Eval(s.Arithmetic)
	if err != nil {
		return err
	}
	if !agrees(got, s.Value, strings.Contains(s.Arithmetic, "ceil(") || strings.Contains(s.Arithmetic, "floor(")) {
		return fmt.Errorf("perf: step %s: %s evaluates to %v, not %v", s.Symbol, s.Arithmetic, got, s.Value)
	}
	return nil
}

// agrees is Verify's comparison.
func agrees(got, want float64, exact bool) bool {
	if exact {
		return got == want
	}
	return math.Abs(got-want) <= 1e-3*math.Max(math.Abs(got), math.Abs(want))+1e-12
}

// Input is one figure the plan starts from, printed before the steps.
type Input struct {
	Symbol string  `json:"symbol"`
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Source string  `json:"source,omitempty"` // "", "assumed", "calibrated", "derived"
}

// Severity orders warnings: errors are plans that do not add up, warnings
// are risks, notes explain an assumption.
type Severity string

// Severities.
const (
	SeverityError Severity = "error"
	SeverityWarn  Severity = "warn"
	SeverityNote  Severity = "note"
)

func (s Severity) rank() int {
	switch s {
	case SeverityError:
		return 0
	case SeverityWarn:
		return 1
	}
	return 2
}

// Warning says where a plan does not add up. Code is stable (tests and
// scripts match on it); Message is for people.
type Warning struct {
	Severity Severity `json:"severity"`
	Code     string   `json:"code"`
	Message  string   `json:"message"`
}

// LimitUse is one per-broker limit: the cluster's demand on it at peak, one
// broker's capacity, the brokers it alone needs at the target utilisation
// (before adding failures), and the utilisation at the plan's broker count
// with all brokers up and with BrokersThatMayFail down.
type LimitUse struct {
	Name                string  `json:"name"`
	Symbol              string  `json:"symbol"` // the step that computed BrokersNeeded
	Demand              float64 `json:"demand"`
	PerBroker           float64 `json:"per_broker"`
	Unit                string  `json:"unit"`
	BrokersNeeded       int     `json:"brokers_needed"`
	Utilization         float64 `json:"utilization"`
	UtilizationDegraded float64 `json:"utilization_degraded"`
}

// Batching is the producer side at one record rate.
type Batching struct {
	RecordsPerSec           float64 `json:"records_per_sec"`
	BatchCapRecords         float64 `json:"batch_cap_records"` // records that fit batch.size
	RecordsPerBatch         float64 `json:"records_per_batch"`
	ClosesOn                string  `json:"closes_on"` // "linger" or "size"
	BatchesPerSec           float64 `json:"batches_per_sec"`
	RequestsPerSec          float64 `json:"requests_per_sec"`
	RequestsPerSecPerBroker float64 `json:"requests_per_sec_per_broker"`
	RecordsPerRequest       float64 `json:"records_per_request"`
	AvgBatchBytes           float64 `json:"avg_batch_bytes"` // on the wire, after compression

	// For advice: per (producer, partition) and per (producer, broker)
	// record rates (keyed), or per producer (keyless).
	pairRate, brokerPairRate, leadersK float64
}

// Report is a capacity plan: the resolved inputs, every step, the limits
// table, the headline figures and the warnings. All MB/s figures are at
// peak; storage is at the sustained rate.
type Report struct {
	Title    string     `json:"title"`
	Units    string     `json:"units"`
	Workload Workload   `json:"workload"` // as resolved: defaults filled
	Assumed  []string   `json:"assumed"`  // input symbols Plan defaulted
	Inputs   []Input    `json:"inputs"`
	Steps    []Step     `json:"steps"`
	Limits   []LimitUse `json:"limits"`

	Brokers       int    `json:"brokers"`        // the count the per-broker figures use
	BrokersGiven  bool   `json:"brokers_given"`  // Brokers came from the workload
	BrokersNeeded int    `json:"brokers_needed"` // what the limits ask for, with failures
	Binding       string `json:"binding"`        // the limit that decides BrokersNeeded

	Partitions                 int     `json:"partitions"`
	PartitionsGiven            bool    `json:"partitions_given"`
	PartitionsThroughput       int     `json:"partitions_throughput"`
	PartitionsConsumers        int     `json:"partitions_consumers"`
	PartitionReplicasPerBroker float64 `json:"partition_replicas_per_broker"`

	IngestSustainedMBps    float64 `json:"ingest_sustained_mbps"` // record bytes, before compression
	IngestPeakMBps         float64 `json:"ingest_peak_mbps"`
	WriteSustainedMBps     float64 `json:"write_sustained_mbps"` // after compression
	WritePeakMBps          float64 `json:"write_peak_mbps"`
	DiskWritePerBrokerMBps float64 `json:"disk_write_per_broker_mbps"` // log bytes appended
	// DiskDevicePerBrokerMBps is what the log disks write: the log bytes
	// times the disk write amplification (the journal's copy).
	DiskDevicePerBrokerMBps float64 `json:"disk_device_per_broker_mbps"`
	NetInPerBrokerMBps      float64 `json:"net_in_per_broker_mbps"`
	NetOutPerBrokerMBps     float64 `json:"net_out_per_broker_mbps"`
	CoresPerBroker          float64 `json:"cores_per_broker"`

	Sustained Batching `json:"sustained"`
	Peak      Batching `json:"peak"`

	RetainedTB            float64 `json:"retained_tb"`   // one logical copy
	LocalDiskTB           float64 `json:"local_disk_tb"` // all replicas on broker disks
	LocalDiskPerBrokerTB  float64 `json:"local_disk_per_broker_tb"`
	ObjectStorageTB       float64 `json:"object_storage_tb"`
	DiskPerBrokerTB       float64 `json:"disk_per_broker_tb"` // capacity
	PageCachePerBrokerGiB float64 `json:"page_cache_per_broker_gib"`
	PageCacheFreeGiB      float64 `json:"page_cache_free_gib"`
	// RemoteCatchupHours is how long a consumer group takes to read the
	// data only the object store holds at the remote read rate, one
	// reader per partition (tiered plans with a remote read rate).
	RemoteCatchupHours float64 `json:"remote_catchup_hours,omitempty"`

	Warnings []Warning `json:"warnings"`
}

// Step returns the step with the given symbol.
func (r *Report) Step(symbol string) (Step, bool) {
	for _, s := range r.Steps {
		if s.Symbol == symbol {
			return s, true
		}
	}
	return Step{}, false
}

// HasWarning reports whether a warning with the code was raised.
func (r *Report) HasWarning(code string) bool {
	for _, w := range r.Warnings {
		if w.Code == code {
			return true
		}
	}
	return false
}

// Verify re-evaluates every step (see Step.Verify).
func (r *Report) Verify() error {
	for _, s := range r.Steps {
		if err := s.Verify(); err != nil {
			return err
		}
	}
	return nil
}
