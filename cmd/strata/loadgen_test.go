package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/loadgen"
	"github.com/stratalog/strata/record"
)

func TestParseLoadgenFlags(t *testing.T) {
	cfg, out, err := parseLoadgenFlags([]string{"--spawn", "1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	def := loadgen.DefaultConfig()
	if cfg.Partitions != 96 || cfg.RecordBytes != 1024 || cfg.Acks != -1 || cfg.Linger != 5*time.Millisecond ||
		cfg.BatchBytes != 64<<10 || cfg.Engine != "kgo" || cfg.Topic != "loadgen" || cfg.Duration != def.Duration ||
		cfg.MaxP99 != 15*time.Millisecond || out.json != "" || out.progress {
		t.Fatalf("defaults: %+v %+v", cfg, out)
	}
	cfg, out, err = parseLoadgenFlags(strings.Fields(
		"--brokers a:1,b:2 --topic t --partitions 12 --replication-factor 3 --record-bytes 512 --compressible "+
			"--keys 1000 --key-dist hot --hot-key-share 0.25 --producers 4 --rate 12345 --duration 7s --records 99 "+
			"--acks 1 --linger 2ms --batch-bytes 32768 --compression zstd --max-inflight 3 --consumers 2 "+
			"--engine native --json x.json --report x.html --progress --find-max --max-p99 20ms --start-rate 500 --step-retries 2 --warmup 2s"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Brokers) != 2 || cfg.Brokers[1] != "b:2" || cfg.Topic != "t" || cfg.Partitions != 12 || cfg.ReplicationFactor != 3 ||
		cfg.RecordBytes != 512 || !cfg.Compressible || cfg.Keys != 1000 || cfg.KeyDist != "hot" || cfg.HotKeyShare != 0.25 ||
		cfg.Producers != 4 || cfg.Rate != 12345 || cfg.Duration != 7*time.Second || cfg.Records != 99 || cfg.Acks != 1 ||
		cfg.Linger != 2*time.Millisecond || cfg.BatchBytes != 32768 || cfg.Compression != record.CodecZstd || cfg.MaxInflight != 3 ||
		cfg.Consumers != 2 || cfg.Engine != "native" || !cfg.FindMax || cfg.MaxP99 != 20*time.Millisecond || cfg.StartRate != 500 || cfg.StepRetries != 2 ||
		cfg.Warmup != 2*time.Second || out.json != "x.json" || out.report != "x.html" || !out.progress {
		t.Fatalf("parsed: %+v %+v", cfg, out)
	}
	cfg, _, err = parseLoadgenFlags(strings.Fields("--spawn 1 --max-buffered-records 10000"), io.Discard)
	if err != nil || cfg.MaxBufferedRecords != 10000 {
		t.Fatalf("--max-buffered-records: %+v, %v", cfg, err)
	}
	cfg, _, err = parseLoadgenFlags(strings.Fields("--spawn 1 --compare-blackhole --profile b.pprof"), io.Discard)
	if err != nil || !cfg.CompareBlackhole || cfg.Profile != "b.pprof" || cfg.SpawnBlackhole {
		t.Fatalf("--compare-blackhole --profile: %+v, %v", cfg, err)
	}
	cfg, _, err = parseLoadgenFlags(strings.Fields("--spawn 1 --compare-device --compare-device-bytes 16777216"), io.Discard)
	if err != nil || !cfg.CompareDevice || cfg.DeviceProbeBytes != 16<<20 {
		t.Fatalf("--compare-device: %+v, %v", cfg, err)
	}
	cfg, _, err = parseLoadgenFlags(strings.Fields("--spawn 1 --consumers 1"), io.Discard)
	if err != nil || cfg.ConsumersInProcess {
		t.Fatalf("consumers default to a process of their own: %+v, %v", cfg, err)
	}
	cfg, _, err = parseLoadgenFlags(strings.Fields("--spawn 1 --consumers 1 --consumers-in-process"), io.Discard)
	if err != nil || !cfg.ConsumersInProcess {
		t.Fatalf("--consumers-in-process: %+v, %v", cfg, err)
	}
	cfg, _, err = parseLoadgenFlags(strings.Fields("--spawn 3 --replication-factor 3 --idempotent --rate 100 --duration 5s --verify "+
		"--verify-max-records 1000 --verify-timeout 30s --faults kill,pause --fault-interval 2s --fault-count 7 --fault-pause 500ms"), io.Discard)
	if err != nil || !cfg.Verify || cfg.VerifyMaxRecords != 1000 || cfg.VerifyTimeout != 30*time.Second ||
		strings.Join(cfg.Faults, ",") != "kill,pause" || cfg.FaultInterval != 2*time.Second || cfg.FaultCount != 7 || cfg.FaultPause != 500*time.Millisecond {
		t.Fatalf("--verify --faults: %+v, %v", cfg, err)
	}
	cfg, _, err = parseLoadgenFlags(strings.Fields("--spawn 3 --replication-factor 3 --idempotent --rate 100 --duration 5s --verify "+
		"--faults partition,client-partition --fault-partition 3s"), io.Discard)
	if err != nil || strings.Join(cfg.Faults, ",") != "partition,client-partition" || cfg.FaultPartition != 3*time.Second {
		t.Fatalf("--faults partition: %+v, %v", cfg, err)
	}
	cfg, _, err = parseLoadgenFlags(strings.Fields("--spawn 1 --consumers 3 --share-group q --compare-share-group --compare-rounds 2 --group cg"), io.Discard)
	if err != nil || cfg.ShareGroup != "q" || !cfg.CompareShareGroup || cfg.CompareRounds != 2 || cfg.Group != "cg" {
		t.Fatalf("--share-group --compare-share-group: %+v, %v", cfg, err)
	}
	t.Setenv("STRATA_SASL_PASSWORD", "from-env")
	cfg, _, err = parseLoadgenFlags(strings.Fields("--spawn 1 --spawn-config s.properties --security-protocol SASL_SSL --tls-ca ca.pem "+
		"--tls-cert c.pem --tls-key k.pem --sasl-mechanism SCRAM-SHA-512 --sasl-username lg --spawn-listener SECURE --compare-plaintext"), io.Discard)
	if s := cfg.Security; err != nil || s.Protocol != "SASL_SSL" || s.TLSCA != "ca.pem" || s.TLSCert != "c.pem" || s.TLSKey != "k.pem" ||
		s.SASLMechanism != "SCRAM-SHA-512" || s.SASLUsername != "lg" || s.SASLPassword != "from-env" || cfg.SpawnListener != "SECURE" || !cfg.ComparePlaintext {
		t.Fatalf("security flags: %+v, %v", cfg, err)
	}
	cfg, _, err = parseLoadgenFlags(strings.Fields("--spawn 1 --spawn-config s.properties --security-protocol SASL_PLAINTEXT --sasl-mechanism PLAIN --sasl-username lg --sasl-password flag"), io.Discard)
	if err != nil || cfg.Security.SASLPassword != "flag" {
		t.Fatalf("--sasl-password wins over $STRATA_SASL_PASSWORD: %+v, %v", cfg.Security, err)
	}
	cfg, _, err = parseLoadgenFlags(strings.Fields("--spawn 1"), io.Discard)
	if err != nil || cfg.Security.SASLPassword != "" {
		t.Fatalf("$STRATA_SASL_PASSWORD used without SASL: %+v, %v", cfg.Security, err)
	}
	if _, _, err := parseLoadgenFlags([]string{"--help"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
	for _, bad := range []string{"", "--spawn 1 --acks 2", "--brokers x:1 --compare-device", "--spawn 1 --compare-device --compare-device-bytes 4096", "--spawn 1 --compression brotli", "--spawn 1 --brokers x:1",
		"--spawn 1 --key-dist pareto", "--spawn 1 stray", "--spawn 1 --find-max --step-retries 9", "--spawn 1 --partitions 0",
		"--brokers x:1 --compare-blackhole", "--brokers x:1 --profile p",
		"--spawn 1 --verify", "--spawn 1 --rate 10 --verify --engine native", "--spawn 1 --faults flood", "--brokers x:1 --faults kill",
		"--spawn 1 --rate 100 --duration 10s --verify --verify-max-records 10",
		"--spawn 1 --faults partition", "--spawn 3 --faults client-partition --fault-partition 0s",
		"--spawn 1 --security-protocol TLS", "--spawn 1 --security-protocol SASL_SSL --sasl-mechanism PLAIN --sasl-username u --sasl-password p --engine native",
		"--spawn 1 --sasl-mechanism PLAIN", "--spawn 1 --security-protocol SSL --tls-cert c.pem", "--spawn 1 --compare-plaintext",
		"--spawn 1 --spawn-listener X",
		"--spawn 1 --share-group q", "--spawn 1 --consumers 1 --share-group q --consumer-engine native", "--spawn 1 --consumers 1 --share-group q --group g",
		"--spawn 1 --consumers 1 --compare-share-group", "--spawn 1 --consumers 1 --share-group q --compare-share-group --compare-blackhole"} {
		if _, _, err := parseLoadgenFlags(strings.Fields(bad), io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		} else if ue := (*usageError)(nil); !errors.As(err, &ue) {
			t.Errorf("%q: %v is not a usage error (exit 1)", bad, err)
		}
	}
}

// TestLoadgenCommand runs the real binary: a bounded run against a spawned
// broker, writing the table, the JSON and the HTML report.
func TestLoadgenCommand(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "strata")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	jsonPath, htmlPath := filepath.Join(dir, "lg.json"), filepath.Join(dir, "lg.html")
	profPath := filepath.Join(dir, "client.pprof")
	cmd := exec.Command(bin, "loadgen", "--spawn", "1", "--spawn-segment-bytes", "4194304", "--partitions", "4",
		"--rate", "1000", "--duration", "1500ms", "--consumers", "1", "--engine", "native", "--progress",
		"--json", jsonPath, "--report", htmlPath, "--client-profile", profPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("loadgen: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{"native engine", "records/s", "produce (send→ack)", "end-to-end (send→poll)", "broker cpu"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "rec/s") {
		t.Errorf("no progress line with --progress:\n%s", stderr.String())
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		StrataVersion string         `json:"strata_version"`
		StartedAt     string         `json:"started_at"`
		Host          loadgen.Host   `json:"host"`
		Config        map[string]any `json:"config"`
		Result        map[string]any `json:"result"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	started, err := time.Parse(time.RFC3339, doc.StartedAt)
	if !strings.Contains(doc.StrataVersion, "revision ") || err != nil || !strings.HasSuffix(doc.StartedAt, "Z") ||
		started.After(time.Now()) || doc.Host.CPUs < 1 || doc.Host.MemoryBytes <= 0 || doc.Host.Kernel == "" ||
		doc.Host.DataDir == "" || doc.Host.DataDirFS == "" {
		t.Fatalf("version %q, started_at %q (%v), host %+v", doc.StrataVersion, doc.StartedAt, err, doc.Host)
	}
	if doc.Config["engine"] != "native" || doc.Config["rate"] != 1000.0 || doc.Result["records_acked"] != 1500.0 ||
		doc.Result["records_consumed"] != 1500.0 || doc.Result["records_failed"] != 0.0 {
		t.Fatalf("json config %v result %v", doc.Config, doc.Result)
	}
	// The consumer ran in a process of its own: the binary's hidden
	// subcommand, another pid.
	if pid, ok := doc.Result["consumer_pid"].(float64); !ok || pid <= 0 || int(pid) == cmd.Process.Pid || doc.Config["consumers_in"] != "process" {
		t.Fatalf("consumer pid %v (loadgen %d), consumers_in %v", doc.Result["consumer_pid"], cmd.Process.Pid, doc.Config["consumers_in"])
	}
	// --client-profile: the load generator's own CPU profile, a gzipped
	// pprof protobuf whose sample types are CPU samples.
	prof, err := os.ReadFile(profPath)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(prof))
	if err != nil {
		t.Fatalf("--client-profile: not gzip: %v", err)
	}
	pb, err := io.ReadAll(zr)
	if err != nil || !bytes.Contains(pb, []byte("samples")) || !bytes.Contains(pb, []byte("nanoseconds")) {
		t.Fatalf("--client-profile: %d bytes, not a CPU profile (%v)", len(pb), err)
	}
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(page, []byte("<svg ")) < 4 || !bytes.Contains(page, []byte(`class="series"`)) {
		t.Fatal("HTML report has no charts with data")
	}
}
