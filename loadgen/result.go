package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
)

// Result is a run's figures. MB are 10^6 bytes of record values
// (record_bytes × records), as Kafka sizing is usually quoted.
type Result struct {
	Engine      string   `json:"engine"`
	Brokers     []string `json:"brokers"`
	TargetRate  float64  `json:"target_rate"` // records/s; 0 = closed loop
	DurationS   float64  `json:"duration_s"`  // first scheduled send → last acknowledgement
	RecordBytes int      `json:"record_bytes"`

	RecordsSent     int64   `json:"records_sent"`
	RecordsAcked    int64   `json:"records_acked"`
	RecordsFailed   int64   `json:"records_failed"`
	ErrorRate       float64 `json:"error_rate"` // failed / sent
	RecordsConsumed int64   `json:"records_consumed"`
	ConsumeErrors   int64   `json:"consume_errors"`
	// GroupType is how the consumers consumed: GroupTypeShare (a share
	// group), GroupTypeConsumer (a consumer group) or GroupTypeNone
	// (direct partition assignment); absent without consumers. Group is
	// the group's id.
	GroupType string `json:"group_type,omitempty"`
	Group     string `json:"group,omitempty"`
	// RecordsRedelivered counts, for a share group, the records consumed
	// with a delivery count over 1 (delivered before, then released or
	// their lock expired); they are in RecordsConsumed too. Absent
	// without a share group.
	RecordsRedelivered *int64 `json:"records_redelivered,omitempty"`
	// ConsumerLagAtEnd is how many acknowledged records the consumers had
	// not consumed yet when producing ended, and CatchUpS how long after
	// that they had consumed as many as were acknowledged (null if not
	// within the drain timeout; 0 without a lag; otherwise an upper bound
	// by the time the end's CPU, device and metrics samples take); both to
	// within the consumer process's 100 ms reports. Absent without consumers. A lag of more than a
	// fraction of a second's records says the consumers did not keep up,
	// and the consumed records/s then include the catch-up's.
	ConsumerLagAtEnd *int64   `json:"consumer_lag_at_end,omitempty"`
	CatchUpS         *float64 `json:"catch_up_s,omitempty"`

	RecordsPerSec   float64 `json:"records_per_sec"`
	MBPerSec        float64 `json:"mb_per_sec"`
	ConsumedPerSec  float64 `json:"consumed_per_sec"`
	Batches         int64   `json:"batches"`
	Requests        int64   `json:"requests"`
	BatchesPerSec   float64 `json:"batches_per_sec"`
	RequestsPerSec  float64 `json:"requests_per_sec"`
	RecordsPerBatch float64 `json:"records_per_batch"`

	// Produce latency: scheduled send → acknowledgement.
	ProduceMeanMs float64 `json:"produce_mean_ms"`
	ProduceP50Ms  float64 `json:"produce_p50_ms"`
	ProduceP90Ms  float64 `json:"produce_p90_ms"`
	ProduceP99Ms  float64 `json:"produce_p99_ms"`
	ProduceP999Ms float64 `json:"produce_p999_ms"`
	ProduceMaxMs  float64 `json:"produce_max_ms"`
	// End-to-end latency: scheduled send → consumer poll.
	E2EMeanMs float64 `json:"e2e_mean_ms"`
	E2EP50Ms  float64 `json:"e2e_p50_ms"`
	E2EP90Ms  float64 `json:"e2e_p90_ms"`
	E2EP99Ms  float64 `json:"e2e_p99_ms"`
	E2EP999Ms float64 `json:"e2e_p999_ms"`
	E2EMaxMs  float64 `json:"e2e_max_ms"`
	// LatencyClamped counts latencies over the histograms' one hour range.
	LatencyClamped int64 `json:"latency_clamped"`

	// Client CPU: the loadgen process (producers, sampler, and consumers
	// with ConsumersInProcess) plus the consumer process when the
	// consumers run in their own; both parts are reported too (the
	// consumer process's is null when there is none).
	ClientCPUSeconds                float64  `json:"client_cpu_seconds"`
	ClientCPUUsPerRecord            float64  `json:"client_cpu_us_per_record"`
	ClientCPUMainSeconds            float64  `json:"client_cpu_main_seconds"`
	ClientCPUConsumerProcessSeconds *float64 `json:"client_cpu_consumer_process_seconds"`
	// ConsumerPID is the consumer process's id (0: consumers in process or
	// none).
	ConsumerPID int `json:"consumer_pid,omitempty"`
	// ConsumerGCPercent is the consumer process's GOGC (clientGC unless
	// the environment sets one).
	ConsumerGCPercent int `json:"consumer_gc_percent,omitempty"`
	// GCPercent is the GOGC of the process that ran the producers
	// (SetClientGC: clientGC unless the environment sets one; Go's
	// default of 100 when the caller did not set it).
	GCPercent int `json:"gc_percent,omitempty"`
	// Broker figures exist for spawned brokers only (null otherwise).
	BrokerCPUSeconds     *float64 `json:"broker_cpu_seconds"`
	BrokerCPUUsPerRecord float64  `json:"broker_cpu_us_per_record,omitempty"`
	BrokerRSSBytes       int64    `json:"broker_rss_bytes,omitempty"`
	BrokerPeakRSSBytes   int64    `json:"broker_peak_rss_bytes,omitempty"`
	// Broker-side Produce latency (spawned brokers; brokermetrics.go): the
	// brokers' request-time histogram over the measured window, per request
	// (frame read → response handed to the connection), percentiles
	// interpolated within a bucket, the maximum known only as the upper
	// bound of the highest bucket holding a request (its lower bound when
	// past the last one, BrokerProducePastLastBucket). Absent when not
	// measured.
	BrokerProduceRequests       int64   `json:"broker_produce_requests,omitempty"`
	BrokerProduceMeanMs         float64 `json:"broker_produce_mean_ms,omitempty"`
	BrokerProduceP50Ms          float64 `json:"broker_produce_p50_ms,omitempty"`
	BrokerProduceP90Ms          float64 `json:"broker_produce_p90_ms,omitempty"`
	BrokerProduceP99Ms          float64 `json:"broker_produce_p99_ms,omitempty"`
	BrokerProduceP999Ms         float64 `json:"broker_produce_p999_ms,omitempty"`
	BrokerProduceMaxBucketMs    float64 `json:"broker_produce_max_bucket_ms,omitempty"`
	BrokerProducePastLastBucket bool    `json:"broker_produce_past_last_bucket,omitempty"`
	// BrokerReader* are the same for the time the brokers' Produce
	// handlers held their connection's reader (the appends; the
	// connection reads no further request meanwhile):
	// strata_request_reader_time_seconds. Absent where not measured.
	BrokerReaderRequests    int64   `json:"broker_reader_requests,omitempty"`
	BrokerReaderMeanMs      float64 `json:"broker_reader_mean_ms,omitempty"`
	BrokerReaderP50Ms       float64 `json:"broker_reader_p50_ms,omitempty"`
	BrokerReaderP90Ms       float64 `json:"broker_reader_p90_ms,omitempty"`
	BrokerReaderP99Ms       float64 `json:"broker_reader_p99_ms,omitempty"`
	BrokerReaderP999Ms      float64 `json:"broker_reader_p999_ms,omitempty"`
	BrokerReaderMaxBucketMs float64 `json:"broker_reader_max_bucket_ms,omitempty"`
	// The spawned brokers' journal over the window (journalmetrics.go):
	// groups written, a group's write + fdatasync and an append's wait
	// for its group (first append staged → durable). Absent without a
	// journal or metrics.
	BrokerJournalGroups       int64   `json:"broker_journal_groups,omitempty"`
	BrokerJournalWriteP50Ms   float64 `json:"broker_journal_write_p50_ms,omitempty"`
	BrokerJournalWriteP99Ms   float64 `json:"broker_journal_write_p99_ms,omitempty"`
	BrokerJournalWriteMeanMs  float64 `json:"broker_journal_write_mean_ms,omitempty"`
	BrokerJournalFlushes      int64   `json:"broker_journal_flushes,omitempty"`
	BrokerJournalFlushP50Ms   float64 `json:"broker_journal_flush_p50_ms,omitempty"`
	BrokerJournalFlushP99Ms   float64 `json:"broker_journal_flush_p99_ms,omitempty"`
	BrokerJournalCommitP50Ms  float64 `json:"broker_journal_commit_p50_ms,omitempty"`
	BrokerJournalCommitP99Ms  float64 `json:"broker_journal_commit_p99_ms,omitempty"`
	BrokerJournalCommitMeanMs float64 `json:"broker_journal_commit_mean_ms,omitempty"`
	// The journal writer's waits for a checkpoint before reusing a file:
	// how many, and their total time.
	BrokerJournalCkptWaits  int64   `json:"broker_journal_checkpoint_waits,omitempty"`
	BrokerJournalCkptWaitMs float64 `json:"broker_journal_checkpoint_wait_ms,omitempty"`
	// Device is the spawned brokers' data directory's block device over
	// the measured window (nil for external brokers or without a block
	// device).
	Device *DeviceTraffic `json:"device,omitempty"`
	// Remote is the spawned brokers' tiered storage over the run
	// (remotemetrics.go); absent without an object store or metrics.
	Remote *RemoteResult `json:"remote,omitempty"`

	Errors  []ErrorCount `json:"errors,omitempty"`
	Healthy *bool        `json:"healthy,omitempty"` // --find-max steps
}

// Report is everything a run produced: the JSON file's schema.
type Report struct {
	// StrataVersion is the binary's version and revision and StartedAt
	// when the run began (RFC 3339, UTC): the command fills both in
	// (cmd/strata), Run leaves them empty.
	StrataVersion string `json:"strata_version,omitempty"`
	StartedAt     string `json:"started_at,omitempty"`
	Host          Host   `json:"host"`

	Config   configJSON `json:"config"`
	Workload string     `json:"workload"`
	Target   struct {
		Brokers []string `json:"brokers"`
		Spawned int      `json:"spawned"`
	} `json:"target"`
	Result       Result       `json:"result"`
	Timeline     []Sample     `json:"timeline"`
	Distribution Distribution `json:"distribution"`
	FindMax      *FindMax     `json:"find_max,omitempty"`
	Baseline     *Baseline    `json:"baseline,omitempty"`
	Rounds       *Rounds      `json:"rounds,omitempty"` // --compare-rounds (rounds.go)
	Notes        []string     `json:"notes,omitempty"`

	// Verify is --verify's read-back (verify.go), Faults what --faults
	// injected (faults.go); both versioned objects.
	Verify *VerifyResult `json:"verify,omitempty"`
	Faults *FaultsResult `json:"faults,omitempty"`

	// DeviceBaseline is the --compare-device probe.
	DeviceBaseline *DeviceBaseline `json:"device_baseline,omitempty"`
}

// Baseline is the same workload measured, in the same run, against a
// broker that acks without storing (--compare-blackhole, mode "blackhole")
// against brokers spawned from another strata executable
// (--compare-binary, mode "binary"), or over the PLAINTEXT listener of
// brokers spawned from the same properties (--compare-plaintext, mode
// "plaintext").
type Baseline struct {
	Mode    string   `json:"mode"`             // BaselineBlackhole, BaselineBinary or BaselinePlaintext
	Binary  string   `json:"binary,omitempty"` // mode "binary": the baseline's executable
	Result  Result   `json:"result"`
	FindMax *FindMax `json:"find_max,omitempty"`
	// Ratio is this run over the baseline: max healthy rates with
	// --find-max, achieved records/s otherwise.
	Ratio float64 `json:"ratio"`
}

// Baseline modes.
const (
	BaselineBlackhole = "blackhole"
	BaselineBinary    = "binary"
	// BaselinePlaintext: the same brokers' PLAINTEXT listener, clients
	// without TLS or SASL (--compare-plaintext).
	BaselinePlaintext = "plaintext"
	// BaselineConsumerGroup: the same workload on the same brokers and
	// topic, its consumers in a consumer group instead of the run's share
	// group (--compare-share-group); the ratio is consumed records/s.
	BaselineConsumerGroup = "consumer-group"
)

// side names the baseline in tables: "blackhole", or "baseline" for
// another build.
func baselineSide(mode string) string {
	switch mode {
	case BaselineBinary:
		return "baseline"
	case BaselinePlaintext:
		return BaselinePlaintext
	case BaselineConsumerGroup:
		return sideConsumerGroup
	}
	return BaselineBlackhole
}

// mainSide names the run itself in the comparison tables: "secured" when
// the baseline is PLAINTEXT, "strata" otherwise.
func mainSide(mode string) string {
	switch mode {
	case BaselinePlaintext:
		return "secured"
	case BaselineConsumerGroup:
		return sideShareGroup
	}
	return "strata"
}

// Distribution is the latency percentile distribution of the result.
type Distribution struct {
	Produce []PercentilePoint `json:"produce"`
	E2E     []PercentilePoint `json:"e2e,omitempty"`
}

// FindMax is a capacity search: every step and the highest healthy rate.
type FindMax struct {
	MaxHealthyRate float64 `json:"max_healthy_rate"`
	MaxP99Ms       float64 `json:"max_p99_ms"`
	MaxErrorRate   float64 `json:"max_error_rate"`
	// SearchComplete is false when the search stopped before it had
	// bracketed the maximum and bisected it BisectSteps times: cut short by
	// --max-steps or interrupted. MaxHealthyRate is then only a lower bound
	// (no unhealthy rate seen yet) or a coarse one; Incomplete says which.
	SearchComplete bool   `json:"search_complete"`
	Incomplete     string `json:"incomplete,omitempty"`
	Steps          []Step `json:"steps"`
}

// Step is one --find-max step.
type Step struct {
	Rate    float64 `json:"rate"`
	Retry   int     `json:"retry,omitempty"` // 0: the rate's first run; n: its n-th retry
	Healthy bool    `json:"healthy"`
	Reason  string  `json:"reason"`
	Result  Result  `json:"result"`
}

func (r *Report) setOutcome(o *runOutcome) {
	r.Result = o.result
	r.Timeline = o.timeline
	r.Distribution = Distribution{Produce: distribution(o.produce), E2E: distribution(o.e2e)}
}

// WriteJSONFile writes the report as indented JSON.
func (r *Report) WriteJSONFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteTable writes the human summary.
func (r *Report) WriteTable(w io.Writer) error {
	res := &r.Result
	var b strings.Builder
	where := fmt.Sprintf("brokers %s", strings.Join(r.Target.Brokers, ","))
	if r.Target.Spawned > 0 {
		where = fmt.Sprintf("%d spawned strata broker(s) (%s)", r.Target.Spawned, strings.Join(r.Target.Brokers, ","))
	}
	fmt.Fprintf(&b, "strata loadgen: %s engine against %s\n", res.Engine, where)
	fmt.Fprintf(&b, "workload: %s\n", r.Workload)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if fm := r.FindMax; fm != nil {
		fmt.Fprintf(&b, "\ncapacity search (healthy: produce p99 <= %.2f ms, error rate <= %.4f%%, >= 90%% of target achieved)\n",
			fm.MaxP99Ms, 100*fm.MaxErrorRate)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		dev := fm.stepsHaveDevice()
		head := "step\ttarget rec/s\tachieved rec/s\tp99 ms\terrors\t"
		if dev {
			head += "dev MB/s\tdev B/rec B\tdev busy\t"
		}
		fmt.Fprintln(tw, head+"verdict\t")
		for i, s := range fm.Steps {
			v := "healthy"
			if !s.Healthy {
				v = "unhealthy: " + s.Reason
			}
			if s.Retry > 0 {
				v = fmt.Sprintf("retry %d, %s", s.Retry, v)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.2f\t%d\t", i+1, commas(s.Rate, 0), commas(s.Result.RecordsPerSec, 0),
				s.Result.ProduceP99Ms, s.Result.RecordsFailed)
			if dev {
				d, mbs, per, busy := s.Result.Device, "-", "-", "-"
				if d != nil {
					per, busy = fmt.Sprintf("%.2f", d.BytesPerRecordByte), fmt.Sprintf("%.0f%%", 100*d.BusyShare)
					if s.Result.DurationS > 0 {
						mbs = fmt.Sprintf("%.1f", float64(d.WriteBytes)/1e6/s.Result.DurationS)
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t", mbs, per, busy)
			}
			fmt.Fprintf(tw, "%s\t\n", v)
		}
		tw.Flush()
		if !fm.SearchComplete {
			fmt.Fprintf(&b, "SEARCH INCOMPLETE: %s\n", fm.Incomplete)
		}
		if fm.MaxHealthyRate > 0 {
			bound := ""
			if !fm.SearchComplete {
				bound = "at least "
			}
			fmt.Fprintf(&b, "max healthy rate: %s%s rec/s (%.1f MB/s); figures below are from that step\n",
				bound, commas(fm.MaxHealthyRate, 0), fm.MaxHealthyRate*float64(res.RecordBytes)/1e6)
		} else {
			fmt.Fprintf(&b, "no step was healthy; figures below are from the last step\n")
		}
	}

	fmt.Fprintln(&b)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
	fmt.Fprintln(tw, "throughput")
	row("duration", fmt.Sprintf("%.2f s", res.DurationS))
	row("records sent / acked", fmt.Sprintf("%s / %s  (%s failed, error rate %.4f%%)", commas(float64(res.RecordsSent), 0),
		commas(float64(res.RecordsAcked), 0), commas(float64(res.RecordsFailed), 0), 100*res.ErrorRate))
	target := "closed loop"
	if res.TargetRate > 0 {
		target = commas(res.TargetRate, 0) + " target"
	}
	row("records/s", fmt.Sprintf("%s  (%s)", commas(res.RecordsPerSec, 1), target))
	row("MB/s", fmt.Sprintf("%.2f  (%d B values)", res.MBPerSec, res.RecordBytes))
	row("batches/s", fmt.Sprintf("%s  (%.1f records/batch)", commas(res.BatchesPerSec, 1), res.RecordsPerBatch))
	row("requests/s", commas(res.RequestsPerSec, 1))
	if r.Config.Consumers > 0 {
		row("consumed", fmt.Sprintf("%s  (%s/s, %d consume errors)%s", commas(float64(res.RecordsConsumed), 0), commas(res.ConsumedPerSec, 1), res.ConsumeErrors, res.groupNote()))
		if res.ConsumerLagAtEnd != nil {
			row("consumer lag", fmt.Sprintf("%s records when producing ended, caught up after %s s", commas(float64(*res.ConsumerLagAtEnd), 0), res.catchUp()))
		}
	}
	tw.Flush()

	fmt.Fprintln(&b)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency ms\tp50\tp90\tp99\tp99.9\tmax\tmean\t")
	fmt.Fprintf(tw, "produce (send→ack)\t%s\t%s\t%s\t%s\t%s\t%s\t\n", f2(res.ProduceP50Ms), f2(res.ProduceP90Ms), f2(res.ProduceP99Ms),
		f2(res.ProduceP999Ms), f2(res.ProduceMaxMs), f2(res.ProduceMeanMs))
	if res.BrokerProduceRequests > 0 {
		fmt.Fprintf(tw, "broker produce (request→response)\t%s\t%s\t%s\t%s\t%s\t%s\t\n", f2(res.BrokerProduceP50Ms), f2(res.BrokerProduceP90Ms),
			f2(res.BrokerProduceP99Ms), f2(res.BrokerProduceP999Ms), res.brokerProduceMax(), f2(res.BrokerProduceMeanMs))
		if res.BrokerReaderRequests > 0 {
			fmt.Fprintf(tw, "of which on the connection's reader\t%s\t%s\t%s\t%s\t%s\t%s\t\n", f2(res.BrokerReaderP50Ms), f2(res.BrokerReaderP90Ms),
				f2(res.BrokerReaderP99Ms), f2(res.BrokerReaderP999Ms), "≤ "+f2(res.BrokerReaderMaxBucketMs), f2(res.BrokerReaderMeanMs))
		}
	}
	if r.Config.Consumers > 0 {
		fmt.Fprintf(tw, "end-to-end (send→poll)\t%s\t%s\t%s\t%s\t%s\t%s\t\n", f2(res.E2EP50Ms), f2(res.E2EP90Ms), f2(res.E2EP99Ms),
			f2(res.E2EP999Ms), f2(res.E2EMaxMs), f2(res.E2EMeanMs))
	}
	tw.Flush()
	if res.BrokerProduceRequests > 0 {
		fmt.Fprintf(&b, "(broker: %s Produce requests, percentiles interpolated within the histogram's buckets, max = the highest bucket's bound)\n",
			commas(float64(res.BrokerProduceRequests), 0))
	}
	if res.BrokerJournalGroups > 0 {
		fmt.Fprintf(&b, "(journal: %s groups, write p50 %s p99 %s mean %s ms; %s flushes, p50 %s p99 %s ms; append staged→durable p50 %s p99 %s mean %s ms)\n",
			commas(float64(res.BrokerJournalGroups), 0), f2(res.BrokerJournalWriteP50Ms), f2(res.BrokerJournalWriteP99Ms), f2(res.BrokerJournalWriteMeanMs),
			commas(float64(res.BrokerJournalFlushes), 0), f2(res.BrokerJournalFlushP50Ms), f2(res.BrokerJournalFlushP99Ms),
			f2(res.BrokerJournalCommitP50Ms), f2(res.BrokerJournalCommitP99Ms), f2(res.BrokerJournalCommitMeanMs))
		if res.BrokerJournalCkptWaits > 0 {
			fmt.Fprintf(&b, "(journal writer waited for a checkpoint %s times, %s ms in all)\n",
				commas(float64(res.BrokerJournalCkptWaits), 0), f2(res.BrokerJournalCkptWaitMs))
		}
	}
	if res.Remote != nil {
		fmt.Fprintf(&b, "(%s)\n", res.Remote.summary())
	}

	fmt.Fprintln(&b)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "resources")
	row("client cpu", fmt.Sprintf("%.2f s  (%.2f µs/record, %.0f%% of a core)%s", res.ClientCPUSeconds, res.ClientCPUUsPerRecord,
		100*res.ClientCPUSeconds/max(res.DurationS, 1e-9), res.clientCPUParts()))
	if res.BrokerCPUSeconds != nil {
		row("broker cpu", fmt.Sprintf("%.2f s  (%.2f µs/record, %.0f%% of a core)", *res.BrokerCPUSeconds, res.BrokerCPUUsPerRecord,
			100**res.BrokerCPUSeconds/max(res.DurationS, 1e-9)))
		row("broker rss", fmt.Sprintf("%s  (peak %s)", mib(res.BrokerRSSBytes), mib(res.BrokerPeakRSSBytes)))
	}
	if d := res.Device; d != nil {
		row("device", d.summary())
		row("", d.load())
	}
	tw.Flush()
	if len(res.Errors) > 0 {
		fmt.Fprintln(&b, "\nerrors")
		for _, e := range res.Errors {
			fmt.Fprintf(&b, "  %8d  %s\n", e.Count, e.Error)
		}
	}
	if f := r.Faults; f != nil {
		writeFaults(&b, f)
	}
	if v := r.Verify; v != nil {
		writeVerify(&b, v)
	}
	if bl := r.Baseline; bl != nil {
		writeBaseline(&b, r, bl)
	}
	if rs := r.Rounds; rs != nil {
		writeRounds(&b, rs)
	}
	if db := r.DeviceBaseline; db != nil {
		writeDeviceBaseline(&b, db)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

// catchUp is CatchUpS for tables: "never" when the consumers did not
// catch up within the drain timeout.
func (r *Result) catchUp() string {
	if r.CatchUpS == nil {
		return "never"
	}
	return fmt.Sprintf("%.2f", *r.CatchUpS)
}

// groupNote says which group the consumers were members of, and for a
// share group how many records came again.
func (r *Result) groupNote() string {
	switch r.GroupType {
	case GroupTypeShare:
		n := int64(0)
		if r.RecordsRedelivered != nil {
			n = *r.RecordsRedelivered
		}
		return fmt.Sprintf(" in share group %s, %s redelivered", r.Group, commas(float64(n), 0))
	case GroupTypeConsumer:
		return " in consumer group " + r.Group
	case GroupTypeNone:
		return " by direct partition assignment"
	}
	return ""
}

// brokerProduceMax is the broker's produce maximum as the bucket bound it
// is known by.
func (r *Result) brokerProduceMax() string {
	if r.BrokerProducePastLastBucket {
		return "> " + f2(r.BrokerProduceMaxBucketMs)
	}
	return "≤ " + f2(r.BrokerProduceMaxBucketMs)
}

// clientCPUParts splits the client CPU when the consumers had a process of
// their own.
func (r *Result) clientCPUParts() string {
	if r.ClientCPUConsumerProcessSeconds == nil {
		return ""
	}
	gc := func(n int) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf(" (GOGC %d)", n)
	}
	return fmt.Sprintf(": loadgen %.2f s%s + consumer process %.2f s%s", r.ClientCPUMainSeconds, gc(r.GCPercent), *r.ClientCPUConsumerProcessSeconds, gc(r.ConsumerGCPercent))
}

// commas formats v with the given decimals and thousands separators.
func commas(v float64, decimals int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Sprint(v)
	}
	s := fmt.Sprintf("%.*f", decimals, v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String()
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// writeBaseline prints the --compare-blackhole, --compare-binary or
// --compare-plaintext comparison.
func writeBaseline(b *strings.Builder, r *Report, bl *Baseline) {
	side, main := baselineSide(bl.Mode), mainSide(bl.Mode)
	switch bl.Mode {
	case BaselineBinary:
		fmt.Fprintf(b, "\nbaseline: the same workload against brokers spawned from %s, same run\n", bl.Binary)
	case BaselinePlaintext:
		fmt.Fprintf(b, "\nbaseline: the same workload over the PLAINTEXT listener of brokers spawned from the same properties, same run (secured: %s)\n", r.Config.SecurityProtocol)
	case BaselineConsumerGroup:
		writeShareComparison(b, r, bl)
		return
	default:
		fmt.Fprintf(b, "\nbaseline: the same workload against a %s broker (acks without storing), same run\n", bl.Mode)
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t%s\t%s\t\n", main, side)
	if r.FindMax != nil && bl.FindMax != nil {
		fmt.Fprintf(tw, "max healthy rec/s\t%s\t%s\t\n", commas(r.FindMax.MaxHealthyRate, 0), commas(bl.FindMax.MaxHealthyRate, 0))
	}
	fmt.Fprintf(tw, "records/s (reported step)\t%s\t%s\t\n", commas(r.Result.RecordsPerSec, 0), commas(bl.Result.RecordsPerSec, 0))
	fmt.Fprintf(tw, "produce p99 ms\t%.2f\t%.2f\t\n", r.Result.ProduceP99Ms, bl.Result.ProduceP99Ms)
	if bl.Mode == BaselineBinary || bl.Mode == BaselinePlaintext {
		fmt.Fprintf(tw, "produce p99.9 ms\t%.2f\t%.2f\t\n", r.Result.ProduceP999Ms, bl.Result.ProduceP999Ms)
		fmt.Fprintf(tw, "produce max ms\t%.2f\t%.2f\t\n", r.Result.ProduceMaxMs, bl.Result.ProduceMaxMs)
		if r.Result.RecordsConsumed > 0 && bl.Result.RecordsConsumed > 0 {
			fmt.Fprintf(tw, "end-to-end p99 ms\t%.2f\t%.2f\t\n", r.Result.E2EP99Ms, bl.Result.E2EP99Ms)
		}
	}
	if r.Result.BrokerProduceRequests > 0 && bl.Result.BrokerProduceRequests > 0 {
		fmt.Fprintf(tw, "broker produce p99 ms\t%.2f\t%.2f\t\n", r.Result.BrokerProduceP99Ms, bl.Result.BrokerProduceP99Ms)
	}
	if r.Result.BrokerCPUSeconds != nil && bl.Result.BrokerCPUSeconds != nil {
		fmt.Fprintf(tw, "broker cpu µs/record\t%.2f\t%.2f\t\n", r.Result.BrokerCPUUsPerRecord, bl.Result.BrokerCPUUsPerRecord)
	}
	if d, bd := r.Result.Device, bl.Result.Device; d != nil && bd != nil {
		fmt.Fprintf(tw, "device MB written\t%.1f\t%.1f\t\n", float64(d.WriteBytes)/1e6, float64(bd.WriteBytes)/1e6)
		// Reads show a consumer that fell behind the tail cache onto the
		// device (O_DIRECT writes leave the page cache cold).
		fmt.Fprintf(tw, "device MB read\t%.1f\t%.1f\t\n", float64(d.ReadBytes)/1e6, float64(bd.ReadBytes)/1e6)
		fmt.Fprintf(tw, "device bytes/record byte\t%.2f\t%.2f\t\n", d.BytesPerRecordByte, bd.BytesPerRecordByte)
		fmt.Fprintf(tw, "device busy\t%.1f%%\t%.1f%%\t\n", 100*d.BusyShare, 100*bd.BusyShare)
	}
	if r.Result.ClientCPUUsPerRecord > 0 && bl.Result.ClientCPUUsPerRecord > 0 && bl.Mode == BaselinePlaintext {
		fmt.Fprintf(tw, "client cpu µs/record\t%.2f\t%.2f\t\n", r.Result.ClientCPUUsPerRecord, bl.Result.ClientCPUUsPerRecord)
	}
	tw.Flush()
	fmt.Fprintf(b, "ratio %s / %s: %.1f%%\n", main, side, 100*bl.Ratio)
}

// stepsHaveDevice reports whether any step measured device traffic.
func (fm *FindMax) stepsHaveDevice() bool {
	for _, s := range fm.Steps {
		if s.Result.Device != nil {
			return true
		}
	}
	return false
}

// writeDeviceBaseline prints the --compare-device probe.
func writeDeviceBaseline(b *strings.Builder, db *DeviceBaseline) {
	fmt.Fprintf(b, "\ndevice ceiling: %s\n", db.describe())
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
	row("device ceiling MB/s", fmt.Sprintf("%.1f  (%.1f MB in %.2f s, %d fdatasyncs, %s backend)",
		db.MBPerSec, float64(db.Bytes)/1e6, db.DurationS, db.Syncs, db.Backend))
	if db.Device != "" {
		row("probe's device traffic", db.traffic())
	}
	row("acked record MB/s / ceiling", fmt.Sprintf("%.1f%%", 100*db.Ratio))
	tw.Flush()
}

// describe says how the probe wrote.
func (db *DeviceBaseline) describe() string {
	on := ""
	if db.Device != "" {
		on = " (" + db.Device + ")"
	}
	return fmt.Sprintf("O_DIRECT sequential writes of %d MiB, %d in flight, into a fresh fallocated file in %s%s, fdatasync every %d MiB, same run",
		DeviceProbeChunk>>20, DeviceProbeDepth, db.Dir, on, DeviceProbeSyncBytes>>20)
}

// traffic is the device's counters over the probe.
func (db *DeviceBaseline) traffic() string {
	fl := "flushes n/a"
	if db.Flushes != nil {
		fl = fmt.Sprintf("%s flushes", commas(float64(*db.Flushes), 0))
	}
	return fmt.Sprintf("%s: %.1f MB written in %s writes (%s mean), %s", db.Device, float64(db.DeviceWriteBytes)/1e6,
		commas(float64(db.WriteRequests), 0), kib(db.MeanWriteBytes), fl)
}

// writeShareComparison prints --compare-share-group's comparison: the
// consumers in the share group (the run) and in the consumer group (its
// baseline), same brokers and topic.
func writeShareComparison(b *strings.Builder, r *Report, bl *Baseline) {
	s, g := &r.Result, &bl.Result
	fmt.Fprintf(b, "\ncomparison: the same workload on the same brokers and topic, its consumers in share group %s and in consumer group %s, same run\n", s.Group, g.Group)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t%s\t%s\t\n", sideShareGroup, sideConsumerGroup)
	fmt.Fprintf(tw, "consumed rec/s\t%s\t%s\t\n", commas(s.ConsumedPerSec, 0), commas(g.ConsumedPerSec, 0))
	fmt.Fprintf(tw, "records consumed / acked\t%s / %s\t%s / %s\t\n", commas(float64(s.RecordsConsumed), 0), commas(float64(s.RecordsAcked), 0),
		commas(float64(g.RecordsConsumed), 0), commas(float64(g.RecordsAcked), 0))
	if s.RecordsRedelivered != nil {
		fmt.Fprintf(tw, "redelivered\t%s\t-\t\n", commas(float64(*s.RecordsRedelivered), 0))
	}
	if s.ConsumerLagAtEnd != nil && g.ConsumerLagAtEnd != nil {
		fmt.Fprintf(tw, "lag when producing ended\t%s\t%s\t\n", commas(float64(*s.ConsumerLagAtEnd), 0), commas(float64(*g.ConsumerLagAtEnd), 0))
		fmt.Fprintf(tw, "caught up after s\t%s\t%s\t\n", s.catchUp(), g.catchUp())
	}
	fmt.Fprintf(tw, "end-to-end p50 ms\t%.2f\t%.2f\t\n", s.E2EP50Ms, g.E2EP50Ms)
	fmt.Fprintf(tw, "end-to-end p99 ms\t%.2f\t%.2f\t\n", s.E2EP99Ms, g.E2EP99Ms)
	fmt.Fprintf(tw, "produce p99 ms\t%.2f\t%.2f\t\n", s.ProduceP99Ms, g.ProduceP99Ms)
	if s.BrokerCPUSeconds != nil && g.BrokerCPUSeconds != nil {
		fmt.Fprintf(tw, "broker cpu µs/record\t%.2f\t%.2f\t\n", s.BrokerCPUUsPerRecord, g.BrokerCPUUsPerRecord)
	}
	fmt.Fprintf(tw, "client cpu µs/record\t%.2f\t%.2f\t\n", s.ClientCPUUsPerRecord, g.ClientCPUUsPerRecord)
	if s.ClientCPUConsumerProcessSeconds != nil && g.ClientCPUConsumerProcessSeconds != nil && s.RecordsConsumed > 0 && g.RecordsConsumed > 0 {
		fmt.Fprintf(tw, "consumer process cpu µs/record consumed\t%.2f\t%.2f\t\n", 1e6**s.ClientCPUConsumerProcessSeconds/float64(s.RecordsConsumed),
			1e6**g.ClientCPUConsumerProcessSeconds/float64(g.RecordsConsumed))
	}
	tw.Flush()
	fmt.Fprintf(b, "ratio %s / %s (consumed records/s): %.1f%%\n", sideShareGroup, sideConsumerGroup, 100*bl.Ratio)
}
