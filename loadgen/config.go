package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stratalog/strata/batcher"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Engines a run can produce with.
const (
	EngineKgo    = "kgo"    // franz-go's kgo.Client, as an application runs it
	EngineNative = "native" // batcher.Accumulator + pipelined raw Produce requests
)

// Key distributions.
const (
	KeyDistUniform = "uniform"
	KeyDistZipf    = "zipf"
	KeyDistHot     = "hot"
)

// Limits that keep every run bounded and every allocation sized.
const (
	MaxProducers   = 1024
	MaxConsumers   = 1024
	MaxRecordBytes = 1 << 20 // one record's value
	MaxInflight    = 64      // produce requests in flight per connection
	MaxSpawn       = 16
	// MaxSpawnControllers bounds --spawn-controllers.
	MaxSpawnControllers = 7
	MinRecordBytes      = stampBytes
	// MaxDuration bounds one run (or one --find-max step).
	MaxDuration = 24 * time.Hour
)

// Config is one load run: where, what, how fast and how it is measured. The
// zero value is not valid; start from DefaultConfig.
type Config struct {
	// Target: Brokers of any Kafka-compatible cluster, or Spawn local
	// strata brokers (StrataBin serve ...) for the run.
	Brokers   []string
	Spawn     int
	StrataBin string // executable for Spawn; "" = this executable
	// SpawnControllers, when > 0, spawns that many controller-only nodes
	// (process.roles=controller) as the quorum's voters, and the Spawn
	// brokers as broker-only nodes (SpawnOptions.Controllers).
	SpawnControllers int
	// SpawnSegmentBytes and SpawnConfig configure spawned brokers (see
	// SpawnOptions).
	SpawnSegmentBytes int64
	SpawnConfig       string
	// SpawnBlackhole starts the spawned brokers with --blackhole (produce
	// acknowledged without storing); CompareBlackhole runs the same
	// workload a second time against a blackhole broker spawned for it and
	// reports both (Report.Baseline). Both need Spawn.
	SpawnBlackhole   bool
	CompareBlackhole bool
	// CompareBinary is another strata executable (an earlier build): the
	// same workload, consumers included, runs a second time against
	// brokers spawned from it, and the report compares the two builds
	// (Report.Baseline, mode "binary"): a change judged against the build
	// before it in the same minutes. Exclusive with CompareBlackhole; needs
	// Spawn.
	CompareBinary string
	// CompareRounds > 1 repeats the comparison that many times, fresh
	// brokers each round, alternating which side runs first, and reports
	// every pair and the median ratio (RunRounds, Report.Rounds). Needs
	// CompareBlackhole or CompareBinary.
	CompareRounds int
	// CompareDevice measures, after the run (and its blackhole baseline),
	// the durable sequential write ceiling of the filesystem the spawned
	// brokers' data directories are on, writing DeviceProbeBytes (at most
	// DeviceProbeMaxTime) with O_DIRECT into a probe file there
	// (Report.DeviceBaseline). Needs Spawn.
	CompareDevice    bool
	DeviceProbeBytes int64
	// quietDevice: do not log why device traffic is not measured (the
	// blackhole baseline's second spawn; the first said it).
	quietDevice bool
	// brokerBin, when set, is the executable the spawned brokers run
	// (CompareBinary's baseline side); consumer processes still run
	// StrataBin.
	brokerBin string
	// Security is how the clients connect (security.go): TLS, SASL.
	Security Security
	// SpawnListener names the listener of --spawn-config's listeners the
	// clients use ("" = the one whose protocol is Security's, if only one
	// is). Spawned brokers get every listener of that file on free
	// loopback ports of their own.
	SpawnListener string
	// ComparePlaintext runs the same workload (consumers too) a second
	// time against brokers spawned from the same properties, the clients
	// on its PLAINTEXT listener without TLS or SASL, and reports both and
	// the ratio (Report.Baseline, mode "plaintext"): what the security
	// costs, measured in the same minutes. Needs Spawn and a secured
	// Security; exclusive with CompareBlackhole and CompareBinary.
	ComparePlaintext bool
	// Profile is a file for the first spawned broker's CPU profile (pprof),
	// written when the broker stops at the end of the run.
	Profile string
	// ConsumerProfile is a file for the consumer process's CPU profile
	// (pprof), from its consumers' start to its end (the last round's
	// with CompareRounds or a baseline: each run's process rewrites it).
	ConsumerProfile string

	// Workload.
	Topic             string
	Partitions        int32 // when the topic is created
	ReplicationFactor int16 // when the topic is created
	RecordBytes       int   // value bytes per record, >= 8 (the send stamp)
	Compressible      bool  // text-like payload instead of random bytes
	Keys              int64 // key space; 0 = keyless records
	KeyDist           string
	HotKeyShare       float64 // KeyDistHot: share of records with the hot key
	ZipfS             float64 // KeyDistZipf: exponent s > 1
	Producers         int
	Rate              float64       // records/s over all producers; 0 = closed loop
	Duration          time.Duration // 0 = until Records
	Records           int64         // 0 = until Duration
	Warmup            time.Duration // produce this long first, unmeasured
	Acks              int16         // -1 (all), 1 or 0
	Linger            time.Duration
	BatchBytes        int
	Compression       record.Codec
	Idempotent        bool
	MaxInflight       int // produce requests in flight per broker connection
	// MaxBufferedRecords is the kgo engine's client-side window
	// (kgo.MaxBufferedRecords): 0 = franz-go's own default (50,000), raised
	// to one full batch per partition where that is more.
	MaxBufferedRecords int
	Consumers          int
	Group              string // consume through this consumer group instead of direct assignment
	// ShareGroup consumes through this KIP-932 share group instead: the
	// kgo consumers join it as members, acknowledge every record ACCEPT,
	// and before each measured run its share-partitions start at the
	// topic's end offsets (AlterShareGroupOffsets), so they deliver the
	// run's records (sharegroup.go). Exclusive with Group unless
	// CompareShareGroup.
	ShareGroup string
	// CompareShareGroup measures the workload twice on the same brokers
	// and topic after one warm-up: its consumers in share group
	// ShareGroup, then in consumer group Group (ShareGroup+"-consumers"
	// when empty), alternating which goes first over CompareRounds rounds;
	// the report is the share group's with the consumer group's as its
	// Baseline (mode BaselineConsumerGroup).
	CompareShareGroup bool
	Engine            string
	// ConsumerEngine is the consumers' engine: kgo or native ("" = kgo
	// with --group, else the producers' Engine).
	ConsumerEngine string
	// ConsumerDelay starts the consumers this long after the producers,
	// still at the offsets the run began at: they start that far behind
	// and catch up (from the tail cache or the segment files) while the
	// producers go on. End-to-end latency then includes the delay.
	ConsumerDelay time.Duration
	// ConsumersInProcess runs the consumers in this process, sharing its
	// Go runtime (scheduler, garbage collector) with the producers; by
	// default they run in a child process (consumerproc.go).
	ConsumersInProcess bool
	Seed               uint64
	// DrainTimeout bounds the wait for outstanding acks and for consumers
	// to catch up once producing stops.
	DrainTimeout time.Duration

	// Capacity search (--find-max).
	FindMax      bool
	MaxP99       time.Duration // health bound on produce p99
	MaxErrorRate float64       // health bound on failed/sent
	StartRate    float64       // first step's rate
	StepDuration time.Duration // each step's duration
	MaxSteps     int           // ramp + bisect steps at most
	BisectSteps  int           // bisection steps after the first unhealthy one
	StepRetries  int           // runs of an unhealthy rate again before it counts as unhealthy

	// Verify records every acknowledged record and reads the topic back
	// at the end (verify.go): lost, duplicated and reordered records.
	// VerifyMaxRecords refuses runs that could produce more records;
	// VerifyTimeout bounds the read-back.
	Verify           bool
	VerifyMaxRecords int64
	VerifyTimeout    time.Duration
	// beforeReadBack, if set (tests), runs between producing and the
	// read-back with the run's admin client.
	beforeReadBack func(ctx context.Context, admin *kgo.Client) error

	// Faults injected into the spawned brokers while producing
	// (faults.go): FaultKill, FaultPause, FaultPartition,
	// FaultClientPartition, FaultDiskFull, FaultPowerLoss,
	// FaultControllerKill, FaultControllerPause. One every FaultInterval,
	// at most FaultCount (0: until the producers are done); a pause (of a
	// broker or of the active controller) lasts FaultPause, a partition
	// FaultPartition, a full disk FaultDiskFull (each broker's data
	// directory then a filesystem of FaultDiskBytes).
	Faults         []string
	FaultInterval  time.Duration
	FaultCount     int
	FaultPause     time.Duration
	FaultPartition time.Duration
	FaultDiskFull  time.Duration
	FaultDiskBytes int64

	// Output. Progress is where the one-line-per-second progress goes
	// (nil = none); Log gets notes and warnings (nil = discard).
	Progress io.Writer
	Log      io.Writer
}

// DefaultConfig is the documented default workload: 1 KiB incompressible
// keyless records to 96 partitions, one kgo producer, closed loop for 30 s.
func DefaultConfig() Config {
	return Config{
		Topic:             "loadgen",
		Partitions:        96,
		ReplicationFactor: 1,
		RecordBytes:       1024,
		KeyDist:           KeyDistUniform,
		HotKeyShare:       0.4,
		ZipfS:             1.1,
		Producers:         1,
		Duration:          30 * time.Second,
		Acks:              -1,
		Linger:            batcher.DefaultLinger,
		BatchBytes:        batcher.DefaultMaxBatchBytes,
		Compression:       record.CodecNone,
		MaxInflight:       5,
		Engine:            EngineKgo,
		Seed:              1,
		DrainTimeout:      30 * time.Second,
		MaxP99:            15 * time.Millisecond,
		MaxErrorRate:      0.001,
		StartRate:         10000,
		StepDuration:      10 * time.Second,
		MaxSteps:          20,
		BisectSteps:       3,
		StepRetries:       1,
		DeviceProbeBytes:  1 << 30,
		VerifyMaxRecords:  DefaultVerifyMaxRecords,
		VerifyTimeout:     2 * time.Minute,
		FaultInterval:     5 * time.Second,
		FaultPause:        2 * time.Second,
		FaultPartition:    10 * time.Second,
		FaultDiskFull:     10 * time.Second,
		FaultDiskBytes:    DefaultFaultDiskBytes,
	}
}

// ParseAcks maps "all", "-1", "1" and "0" to Kafka's acks value.
func ParseAcks(s string) (int16, error) {
	switch strings.ToLower(s) {
	case "all", "-1":
		return -1, nil
	case "1", "leader":
		return 1, nil
	case "0", "none":
		return 0, nil
	}
	return 0, fmt.Errorf("acks %q: want all, 1 or 0", s)
}

func acksName(a int16) string {
	if a == -1 {
		return "all"
	}
	return fmt.Sprint(a)
}

// Validate checks every field and its bounds.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case len(c.Brokers) == 0 && c.Spawn == 0:
		bad("no target: give --brokers or --spawn")
	case len(c.Brokers) > 0 && c.Spawn > 0:
		bad("--brokers and --spawn are exclusive")
	case c.Spawn < 0 || c.Spawn > MaxSpawn:
		bad("--spawn %d out of range 0..%d", c.Spawn, MaxSpawn)
	}
	if c.SpawnControllers < 0 || c.SpawnControllers > MaxSpawnControllers {
		bad("--spawn-controllers %d out of range 0..%d", c.SpawnControllers, MaxSpawnControllers)
	} else if c.SpawnControllers > 0 && c.Spawn == 0 {
		bad("--spawn-controllers needs --spawn (the brokers beside the controllers)")
	}
	if (c.SpawnBlackhole || c.CompareBlackhole || c.CompareBinary != "" || c.CompareDevice || c.Profile != "") && c.Spawn == 0 {
		bad("--compare-blackhole, --compare-binary, --compare-device and --profile need --spawn")
	}
	if c.CompareBinary != "" && (c.CompareBlackhole || c.SpawnBlackhole) {
		bad("--compare-binary and --compare-blackhole (or --spawn-blackhole) are exclusive: one baseline per run")
	}
	if c.CompareRounds < 0 || c.CompareRounds > MaxCompareRounds || (c.CompareRounds > 1 && !c.CompareBlackhole && c.CompareBinary == "" && !c.ComparePlaintext && !c.CompareShareGroup) {
		bad("--compare-rounds %d: 0..%d, and more than 1 needs --compare-blackhole, --compare-binary, --compare-plaintext or --compare-share-group", c.CompareRounds, MaxCompareRounds)
	}
	c.validateSecurity(bad)
	if c.CompareDevice && (c.DeviceProbeBytes < DeviceProbeChunk || c.DeviceProbeBytes > 1<<40) {
		bad("--compare-device-bytes %d out of range %d..%d", c.DeviceProbeBytes, DeviceProbeChunk, int64(1)<<40)
	}
	if c.SpawnSegmentBytes < 0 || (c.SpawnSegmentBytes > 0 && c.SpawnSegmentBytes < 1<<20) {
		bad("--spawn-segment-bytes %d: at least 1 MiB", c.SpawnSegmentBytes)
	}
	if c.Topic == "" || len(c.Topic) > 249 {
		bad("--topic must be 1..249 characters")
	}
	if c.Partitions < 1 || c.Partitions > batcher.MaxPartitions {
		bad("--partitions %d out of range 1..%d", c.Partitions, batcher.MaxPartitions)
	}
	if c.ReplicationFactor < 1 {
		bad("--replication-factor must be at least 1")
	}
	if c.RecordBytes < MinRecordBytes || c.RecordBytes > MaxRecordBytes {
		bad("--record-bytes %d out of range %d..%d (the first 8 bytes carry the send time)", c.RecordBytes, MinRecordBytes, MaxRecordBytes)
	}
	if c.Keys < 0 {
		bad("--keys must not be negative")
	}
	switch c.KeyDist {
	case KeyDistUniform:
	case KeyDistZipf:
		if !(c.ZipfS > 1) || c.ZipfS > 100 {
			bad("--zipf-s %v must be in (1, 100]", c.ZipfS)
		}
	case KeyDistHot:
		if !(c.HotKeyShare >= 0 && c.HotKeyShare <= 1) {
			bad("--hot-key-share %v must be in [0, 1]", c.HotKeyShare)
		}
	default:
		bad("--key-dist %q: want uniform, zipf or hot", c.KeyDist)
	}
	if c.Producers < 1 || c.Producers > MaxProducers {
		bad("--producers %d out of range 1..%d", c.Producers, MaxProducers)
	}
	if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) || c.Rate > 1e9 {
		bad("--rate %v out of range 0..1e9", c.Rate)
	}
	if c.Rate > 0 && c.Rate/float64(c.Producers) < 1.0/3600 {
		bad("--rate %v is under one record per hour per producer", c.Rate)
	}
	if c.Duration < 0 || c.Duration > MaxDuration {
		bad("--duration %v out of range 0..%v", c.Duration, MaxDuration)
	}
	if c.Warmup < 0 || c.Warmup > time.Hour {
		bad("--warmup %v out of range 0..1h", c.Warmup)
	}
	if c.Records < 0 {
		bad("--records must not be negative")
	}
	if c.Duration == 0 && c.Records == 0 && !c.FindMax {
		bad("unbounded run: give --duration or --records")
	}
	if c.Acks != -1 && c.Acks != 0 && c.Acks != 1 {
		bad("--acks %d: want all, 1 or 0", c.Acks)
	}
	if c.Linger < 0 || c.Linger > time.Minute {
		bad("--linger %v out of range 0..1m", c.Linger)
	}
	if c.BatchBytes < 1024 || c.BatchBytes > 16<<20 {
		bad("--batch-bytes %d out of range 1024..16777216", c.BatchBytes)
	}
	if c.Compression < record.CodecNone || c.Compression > record.CodecZstd {
		bad("unknown compression %v", c.Compression)
	}
	if c.Idempotent && c.Acks != -1 {
		bad("--idempotent needs --acks all")
	}
	if c.MaxInflight < 1 || c.MaxInflight > MaxInflight || (c.Idempotent && c.MaxInflight > 5) {
		bad("--max-inflight %d out of range 1..%d (1..5 when idempotent)", c.MaxInflight, MaxInflight)
	}
	if c.MaxBufferedRecords < 0 || c.MaxBufferedRecords > 10_000_000 {
		bad("--max-buffered-records %d out of range 0..10000000", c.MaxBufferedRecords)
	}
	if c.MaxBufferedRecords > 0 && c.Engine != EngineKgo {
		bad("--max-buffered-records is the kgo engine's window (the native engine's is --max-inflight)")
	}
	if c.Consumers < 0 || c.Consumers > MaxConsumers {
		bad("--consumers %d out of range 0..%d", c.Consumers, MaxConsumers)
	}
	if c.Group != "" && c.Consumers == 0 {
		bad("--group needs --consumers")
	}
	c.validateShareGroup(bad)
	if c.ConsumerDelay < 0 || c.ConsumerDelay > time.Hour {
		bad("--consumer-delay %v out of range 0..1h", c.ConsumerDelay)
	}
	if c.ConsumerDelay > 0 && c.Consumers == 0 {
		bad("--consumer-delay needs --consumers")
	}
	if c.Engine != EngineKgo && c.Engine != EngineNative {
		bad("--engine %q: want kgo or native", c.Engine)
	}
	switch c.ConsumerEngine {
	case "", EngineKgo:
	case EngineNative:
		if c.Group != "" {
			bad("--consumer-engine native cannot join a group (--group needs kgo)")
		}
		if c.ShareGroup != "" {
			bad("--consumer-engine native fetches assigned partitions and cannot join a share group: --share-group needs --consumer-engine kgo (franz-go's share consumer)")
		}
	default:
		bad("--consumer-engine %q: want kgo or native", c.ConsumerEngine)
	}
	if c.DrainTimeout <= 0 || c.DrainTimeout > time.Hour {
		bad("drain timeout %v out of range", c.DrainTimeout)
	}
	if c.FindMax {
		if c.MaxP99 <= 0 {
			bad("--max-p99 must be positive")
		}
		if !(c.MaxErrorRate >= 0 && c.MaxErrorRate <= 1) {
			bad("--max-error-rate must be in [0, 1]")
		}
		if !(c.StartRate >= 1) || c.StartRate > 1e9 {
			bad("--start-rate %v out of range 1..1e9", c.StartRate)
		}
		if c.StepDuration < time.Second || c.StepDuration > time.Hour {
			bad("--step-duration %v out of range 1s..1h", c.StepDuration)
		}
		if c.MaxSteps < 1 || c.MaxSteps > 100 || c.BisectSteps < 0 || c.BisectSteps > 20 {
			bad("--max-steps must be 1..100 and --bisect-steps 0..20")
		}
		if c.StepRetries < 0 || c.StepRetries > 5 {
			bad("--step-retries must be 0..5")
		}
	}
	c.validateVerify(bad)
	return errors.Join(errs...)
}

// validateSecurity checks the clients' security flags, --spawn-listener
// and --compare-plaintext.
func (c *Config) validateSecurity(bad func(format string, args ...any)) {
	c.Security.validate(bad)
	sec := c.Security.secured()
	if sec && (c.Engine == EngineNative || (c.Consumers > 0 && c.consumerEngine() == EngineNative)) {
		bad("--engine native and --consumer-engine native speak PLAINTEXT only: with --security-protocol %s use --engine kgo (and --consumer-engine kgo)", c.Security.protocol())
	}
	if sec && len(c.Faults) > 0 {
		bad("--faults runs its clients and proxies in PLAINTEXT: not with --security-protocol %s", c.Security.protocol())
	}
	if c.SpawnListener != "" && (c.Spawn == 0 || c.SpawnConfig == "") {
		bad("--spawn-listener names a listener of --spawn-config's listeners: it needs --spawn and --spawn-config")
	}
	if c.ComparePlaintext {
		switch {
		case c.Spawn == 0 || c.SpawnConfig == "":
			bad("--compare-plaintext needs --spawn and a --spawn-config with a PLAINTEXT listener besides the secured one")
		case !sec:
			bad("--compare-plaintext compares a secured listener with a PLAINTEXT one: give --security-protocol SSL, SASL_PLAINTEXT or SASL_SSL")
		}
		if c.CompareBlackhole || c.CompareBinary != "" || c.SpawnBlackhole {
			bad("--compare-plaintext, --compare-blackhole and --compare-binary are exclusive: one baseline per run")
		}
	}
}

// validateVerify checks --verify and --faults.
func (c *Config) validateVerify(bad func(format string, args ...any)) {
	if c.Verify {
		if c.Engine != EngineKgo {
			bad("--verify records acknowledgements of the kgo engine only (not --engine %s)", c.Engine)
		}
		if c.RecordBytes < MinVerifyRecordBytes {
			bad("--verify needs --record-bytes of at least %d (the send stamp and the record's id)", MinVerifyRecordBytes)
		}
		if c.Acks == 0 {
			bad("--verify needs --acks 1 or all (acks=0 acknowledges nothing)")
		}
		if c.FindMax {
			bad("--verify and --find-max are exclusive")
		}
		if c.VerifyMaxRecords < 1 || c.VerifyMaxRecords > 1<<40 {
			bad("--verify-max-records %d out of range 1..%d", c.VerifyMaxRecords, int64(1)<<40)
		}
		switch n := verifyCount(c); {
		case n < 0:
			bad("--verify needs a bounded record count: give --rate or --records")
		case n > c.VerifyMaxRecords:
			bad("--verify: the run could produce %d records, over --verify-max-records %d (its logs keep a few bytes per record)", n, c.VerifyMaxRecords)
		}
		if c.VerifyTimeout < time.Second || c.VerifyTimeout > time.Hour {
			bad("--verify-timeout %v out of range 1s..1h", c.VerifyTimeout)
		}
	}
	if len(c.Faults) > 0 {
		if c.Spawn == 0 {
			bad("--faults needs --spawn (faults are injected into spawned brokers)")
		}
		if c.FindMax || c.SpawnBlackhole {
			bad("--faults cannot be combined with --find-max or a blackhole broker")
		}
		for _, f := range c.Faults {
			if _, err := ParseFaults(f); err != nil {
				bad("--faults: %v", err)
			}
		}
		if c.FaultInterval < 100*time.Millisecond || c.FaultInterval > time.Hour {
			bad("--fault-interval %v out of range 100ms..1h", c.FaultInterval)
		}
		if c.FaultCount < 0 || c.FaultCount > 1_000_000 {
			bad("--fault-count %d out of range 0..1000000", c.FaultCount)
		}
		if c.FaultPause <= 0 || c.FaultPause > time.Hour {
			bad("--fault-pause %v out of range (0, 1h]", c.FaultPause)
		}
		if c.FaultPartition <= 0 || c.FaultPartition > time.Hour {
			bad("--fault-partition %v out of range (0, 1h]", c.FaultPartition)
		}
		if c.FaultDiskFull <= 0 || c.FaultDiskFull > time.Hour {
			bad("--fault-disk-full %v out of range (0, 1h]", c.FaultDiskFull)
		}
		if c.FaultDiskBytes < minFaultDiskBytes || c.FaultDiskBytes > 1<<40 {
			bad("--fault-disk-bytes %d out of range %d..%d", c.FaultDiskBytes, minFaultDiskBytes, int64(1)<<40)
		}
		if needsProxy(c.Faults) && c.Spawn < 2 {
			bad("--faults partition and client-partition need --spawn 2 or more (brokers to cut apart)")
		}
		if needsQuorum(c.Faults) && c.SpawnControllers > 0 && c.SpawnControllers < maxSpawnVoters {
			bad("--faults controller-kill and controller-pause need --spawn-controllers %d or more (a majority left with one down)", maxSpawnVoters)
		}
		if needsQuorum(c.Faults) && c.SpawnControllers == 0 && c.Spawn < maxSpawnVoters {
			bad("--faults controller-kill and controller-pause need --spawn %d or more (a quorum of %d controllers, a majority left with one down)", maxSpawnVoters, maxSpawnVoters)
		}
	}
}

// configJSON is the configuration as the result file records it, units in
// the names.
type configJSON struct {
	Engine            string   `json:"engine"`
	Brokers           []string `json:"brokers,omitempty"`
	Spawn             int      `json:"spawn"`
	SpawnControllers  int      `json:"spawn_controllers,omitempty"`
	Blackhole         bool     `json:"blackhole,omitempty"`
	CompareDevice     bool     `json:"compare_device,omitempty"`
	DeviceProbeBytes  int64    `json:"compare_device_bytes,omitempty"`
	Topic             string   `json:"topic"`
	Partitions        int32    `json:"partitions"`
	ReplicationFactor int16    `json:"replication_factor"`
	RecordBytes       int      `json:"record_bytes"`
	Compressible      bool     `json:"compressible"`
	Keys              int64    `json:"keys"`
	KeyDist           string   `json:"key_dist"`
	HotKeyShare       float64  `json:"hot_key_share"`
	ZipfS             float64  `json:"zipf_s"`
	Producers         int      `json:"producers"`
	Rate              float64  `json:"rate"`
	DurationS         float64  `json:"duration_s"`
	Records           int64    `json:"records"`
	WarmupS           float64  `json:"warmup_s"`
	WarmupConsumers   bool     `json:"warmup_consumers,omitempty"` // the consumers ran through the warm-up (consumersWarmUp)
	Acks              string   `json:"acks"`
	LingerMs          float64  `json:"linger_ms"`
	BatchBytes        int      `json:"batch_bytes"`
	Compression       string   `json:"compression"`
	Idempotent        bool     `json:"idempotent"`
	MaxInflight       int      `json:"max_inflight"`
	MaxBuffered       int      `json:"max_buffered_records,omitempty"` // kgo engine: the client's window
	Consumers         int      `json:"consumers"`
	ConsumerEngine    string   `json:"consumer_engine,omitempty"`
	ConsumerDelayS    float64  `json:"consumer_delay_s,omitempty"`
	ConsumersIn       string   `json:"consumers_in,omitempty"` // "process" (their own) or "loadgen"
	Group             string   `json:"group,omitempty"`
	ShareGroup        string   `json:"share_group,omitempty"`
	CompareShareGroup bool     `json:"compare_share_group,omitempty"`
	Seed              uint64   `json:"seed"`
	DrainTimeoutS     float64  `json:"drain_timeout_s"`
	FindMax           bool     `json:"find_max"`
	MaxP99Ms          float64  `json:"max_p99_ms,omitempty"`
	MaxErrorRate      float64  `json:"max_error_rate,omitempty"`
	StartRate         float64  `json:"start_rate,omitempty"`
	StepDurationS     float64  `json:"step_duration_s,omitempty"`
	MaxSteps          int      `json:"max_steps,omitempty"`
	BisectSteps       int      `json:"bisect_steps,omitempty"`
	StepRetries       int      `json:"step_retries,omitempty"`
	Verify            bool     `json:"verify,omitempty"`
	VerifyMaxRecords  int64    `json:"verify_max_records,omitempty"`
	VerifyTimeoutS    float64  `json:"verify_timeout_s,omitempty"`
	Faults            []string `json:"faults,omitempty"`
	FaultIntervalS    float64  `json:"fault_interval_s,omitempty"`
	FaultCount        int      `json:"fault_count,omitempty"`
	FaultPauseS       float64  `json:"fault_pause_s,omitempty"`
	FaultPartitionS   float64  `json:"fault_partition_s,omitempty"`
	FaultDiskFullS    float64  `json:"fault_disk_full_s,omitempty"`
	FaultDiskBytes    int64    `json:"fault_disk_bytes,omitempty"`
	SecurityProtocol  string   `json:"security_protocol"`
	SASLMechanism     string   `json:"sasl_mechanism,omitempty"`
	SASLUsername      string   `json:"sasl_username,omitempty"`
	TLSClientCert     bool     `json:"tls_client_cert,omitempty"`
	SpawnListener     string   `json:"spawn_listener,omitempty"`
	ComparePlaintext  bool     `json:"compare_plaintext,omitempty"`
}

func (c *Config) json() configJSON {
	j := configJSON{
		Engine: c.Engine, Brokers: c.Brokers, Spawn: c.Spawn, SpawnControllers: c.SpawnControllers, Blackhole: c.SpawnBlackhole, Topic: c.Topic,
		Partitions: c.Partitions, ReplicationFactor: c.ReplicationFactor,
		RecordBytes: c.RecordBytes, Compressible: c.Compressible, Keys: c.Keys,
		KeyDist: c.KeyDist, HotKeyShare: c.HotKeyShare, ZipfS: c.ZipfS,
		Producers: c.Producers, Rate: c.Rate, DurationS: c.Duration.Seconds(),
		Records: c.Records, WarmupS: c.Warmup.Seconds(), WarmupConsumers: c.consumersWarmUp(), Acks: acksName(c.Acks), LingerMs: ms(c.Linger),
		BatchBytes: c.BatchBytes, Compression: c.Compression.String(),
		Idempotent: c.Idempotent, MaxInflight: c.MaxInflight, MaxBuffered: c.maxBufferedRecords(int(c.Partitions)), Consumers: c.Consumers,
		Group: c.Group, ShareGroup: c.ShareGroup, CompareShareGroup: c.CompareShareGroup, Seed: c.Seed, DrainTimeoutS: c.DrainTimeout.Seconds(), FindMax: c.FindMax,
	}
	if c.CompareDevice {
		j.CompareDevice, j.DeviceProbeBytes = true, c.DeviceProbeBytes
	}
	// The password is never written.
	j.SecurityProtocol, j.SpawnListener, j.ComparePlaintext = c.Security.protocol(), c.SpawnListener, c.ComparePlaintext
	if c.Security.useSASL() {
		j.SASLMechanism, j.SASLUsername = strings.ToUpper(c.Security.SASLMechanism), c.Security.SASLUsername
	}
	j.TLSClientCert = c.Security.useTLS() && c.Security.TLSCert != ""
	if c.Verify {
		j.Verify, j.VerifyMaxRecords, j.VerifyTimeoutS = true, c.VerifyMaxRecords, c.VerifyTimeout.Seconds()
	}
	if len(c.Faults) > 0 {
		j.Faults, j.FaultIntervalS, j.FaultCount = c.Faults, c.FaultInterval.Seconds(), c.FaultCount
		if slices.Contains(c.Faults, FaultPause) || slices.Contains(c.Faults, FaultControllerPause) {
			j.FaultPauseS = c.FaultPause.Seconds()
		}
		if needsProxy(c.Faults) {
			j.FaultPartitionS = c.FaultPartition.Seconds()
		}
		if slices.Contains(c.Faults, FaultDiskFull) {
			j.FaultDiskFullS, j.FaultDiskBytes = c.FaultDiskFull.Seconds(), c.FaultDiskBytes
		}
	}
	if c.Consumers > 0 {
		j.ConsumerEngine = c.consumerEngine()
		j.ConsumerDelayS = c.ConsumerDelay.Seconds()
		j.ConsumersIn = "process"
		if c.ConsumersInProcess {
			j.ConsumersIn = "loadgen"
		}
	}
	if c.FindMax {
		j.MaxP99Ms, j.MaxErrorRate, j.StartRate = ms(c.MaxP99), c.MaxErrorRate, c.StartRate
		j.StepDurationS, j.MaxSteps, j.BisectSteps = c.StepDuration.Seconds(), c.MaxSteps, c.BisectSteps
		j.StepRetries = c.StepRetries
	}
	return j
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// describe is the one-line workload summary the table and report print.
func (c *Config) describe() string {
	keys := "keyless (sticky partitioner)"
	if c.Keys > 0 {
		keys = fmt.Sprintf("%d keys, %s", c.Keys, c.KeyDist)
		switch c.KeyDist {
		case KeyDistHot:
			keys += fmt.Sprintf(" (hot key %.0f%%)", 100*c.HotKeyShare)
		case KeyDistZipf:
			keys += fmt.Sprintf(" (s=%g)", c.ZipfS)
		}
	}
	payload := "incompressible"
	if c.Compressible {
		payload = "compressible"
	}
	pace := "closed loop"
	if c.Rate > 0 {
		pace = fmt.Sprintf("open loop %s rec/s", commas(c.Rate, 0))
	}
	bound := ""
	if c.Duration > 0 {
		bound = " for " + c.Duration.String()
	}
	if c.Records > 0 {
		bound += fmt.Sprintf(" (at most %s records)", commas(float64(c.Records), 0))
	}
	if c.FindMax {
		pace, bound = fmt.Sprintf("open loop from %s rec/s (capacity search, %v steps)", commas(c.StartRate, 0), c.StepDuration), ""
	}
	if c.Warmup > 0 {
		bound += fmt.Sprintf(" after a %v warm-up", c.Warmup)
		if c.consumersWarmUp() {
			bound += " with the consumers"
		}
	}
	extra := ""
	extra += c.Security.describe()
	if c.Verify {
		extra += ", verified (read back at the end)"
	}
	if len(c.Faults) > 0 {
		extra += fmt.Sprintf(", faults %s every %v", strings.Join(c.Faults, ","), c.FaultInterval)
		if c.FaultCount > 0 {
			extra += fmt.Sprintf(" (at most %d)", c.FaultCount)
		}
	}
	rf := ""
	if c.ReplicationFactor > 1 {
		rf = fmt.Sprintf(", replication factor %d", c.ReplicationFactor)
	}
	window := ""
	if n := c.maxBufferedRecords(int(c.Partitions)); n > 0 {
		window = fmt.Sprintf(", %s records buffered at most", commas(float64(n), 0))
	}
	return fmt.Sprintf("topic %s (%d partitions%s), %d B %s records, %s, %d producer(s), %s%s, acks=%s, linger %v, batch %d B, compression %v, idempotent %v%s, %d%s consumer(s)%s%s%s",
		c.Topic, c.Partitions, rf, c.RecordBytes, payload, keys, c.Producers, pace, bound, acksName(c.Acks),
		c.Linger, c.BatchBytes, c.Compression, c.Idempotent, window, c.Consumers, c.consumerNote(), c.groupNote(), c.consumerWhere(), extra)
}

// kgoDefaultBufferedRecords is franz-go's own MaxBufferedRecords default.
const kgoDefaultBufferedRecords = 50_000

// maxBufferedRecords is the kgo engine's client-side window for a topic of
// partitions partitions (0 for the native engine): --max-buffered-records,
// else franz-go's default, raised where one full batch per partition needs
// more (at 10,000 partitions of 64 KiB batches, 640,000 records of 1 KiB).
// A closed loop runs at about this many records over the mean send-to-ack
// latency (Produce blocks while this many are unacknowledged).
func (c *Config) maxBufferedRecords(partitions int) int {
	if c.Engine != EngineKgo {
		return 0
	}
	if c.MaxBufferedRecords > 0 {
		return c.MaxBufferedRecords
	}
	return max(kgoDefaultBufferedRecords, partitions*c.BatchBytes/max(c.RecordBytes, 1))
}

// consumerEngine is the engine the consumers run with.
func (c *Config) consumerEngine() string {
	switch {
	case c.ConsumerEngine != "":
		return c.ConsumerEngine
	case c.Group != "" || c.ShareGroup != "":
		return EngineKgo
	}
	return c.Engine
}

// consumerNote names the consumers' engine in the workload line.
func (c *Config) consumerNote() string {
	if c.Consumers == 0 {
		return ""
	}
	return " " + c.consumerEngine()
}

// consumerWhere says where the consumers run and when they start.
func (c *Config) consumerWhere() string {
	if c.Consumers == 0 {
		return ""
	}
	where := " in a process of their own"
	if c.ConsumersInProcess {
		where = " in the producers' process"
	}
	if c.ConsumerDelay > 0 {
		where += fmt.Sprintf(", starting %v after the producers", c.ConsumerDelay)
	}
	return where
}

// groupNote names the consumers' group in the workload line.
func (c *Config) groupNote() string {
	switch {
	case c.CompareShareGroup:
		return fmt.Sprintf(" in share group %s, compared with consumer group %s", c.ShareGroup, c.comparedGroup())
	case c.ShareGroup != "":
		return " in share group " + c.ShareGroup
	case c.Group != "":
		return " in group " + c.Group
	}
	return ""
}
