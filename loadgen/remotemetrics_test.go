package loadgen

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/metrics"
)

// TestRemoteCountersOfSpawnedBroker: a broker spawned from a config naming
// a local-directory object store (64 KiB segments, a pass every 100 ms,
// copied segments deleted locally at once): loadgen creates its topic
// with remote.storage.enable=true, and after a 2 s run whose consumer
// starts 3 s late (the first segments have been copied and deleted
// locally for seconds by then) the report's remote object counts segments
// and bytes uploaded (the store directory holds them) and the consumer's
// remote reads, in the JSON and in the table.
func TestRemoteCountersOfSpawnedBroker(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte(strings.Join([]string{
		"strata.remote.storage.type=local",
		"strata.remote.storage.local.dir=" + store,
		"remote.log.manager.task.interval.ms=100",
		"log.segment.bytes=65536",
		"log.local.retention.bytes=0",
		"log.retention.check.interval.ms=100",
		"",
	}, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := smallRun(EngineNative)
	cfg.SpawnSegmentBytes = 0
	cfg.SpawnConfig = props
	cfg.ConsumerDelay = 3 * time.Second
	var logb bytes.Buffer
	cfg.Log = &logb
	rep, err := Run(testCtx(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, logb.String())
	}
	checkClean(t, rep, 4000)
	if !strings.Contains(logb.String(), "remote.storage.enable=true") {
		t.Fatalf("the topic was not created tiered:\n%s", logb.String())
	}
	rr := rep.Result.Remote
	if rr == nil {
		t.Fatalf("no remote figures\n%s", logb.String())
	}
	// 4,000 records of 1 KiB in 64 KiB segments: dozens roll.
	if rr.SegmentsUploaded <= 0 || rr.BytesUploaded < rr.SegmentsUploaded*(32<<10) || rr.UploadSeconds <= 0 || rr.UploadMBps <= 0 {
		t.Fatalf("remote figures %+v", *rr)
	}
	if rr.RemoteReads <= 0 || rr.FetchedBytes <= 0 || rr.RemoteReadBytes <= 0 || rr.RemoteReadMeanMs <= 0 || rr.RemoteReadP99Ms <= 0 {
		t.Fatalf("remote reads %+v", *rr)
	}
	var objects int64
	if err := filepath.Walk(store, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.HasSuffix(fi.Name(), ".log") {
			objects++
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if objects < rr.SegmentsUploaded {
		t.Fatalf("%d .log objects in the store, %d segments uploaded", objects, rr.SegmentsUploaded)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Result struct {
			Remote map[string]any `json:"remote"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Result.Remote["segments_uploaded"] != float64(rr.SegmentsUploaded) || back.Result.Remote["bytes_uploaded"] == nil {
		t.Fatalf("JSON remote object %v", back.Result.Remote)
	}
	var tb bytes.Buffer
	if err := rep.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tb.String(), "(remote storage: ") {
		t.Fatalf("no remote storage line in the table:\n%s", tb.String())
	}
	t.Logf("%s", rr.summary())
}

// TestRemoteAbsentWithoutStore: a broker exporting no remote-storage
// series leaves the report without a remote object, and loadgen creates
// its topic with no configs unless the spawn config names a store.
func TestRemoteAbsentWithoutStore(t *testing.T) {
	c := &Cluster{Brokers: []*SpawnedBroker{{NodeID: 0, MetricsAddr: metricsServer(t, metrics.New())}}}
	ctx := testCtx(t, time.Minute)
	s0, s1 := c.brokerRemoteSample(ctx), c.brokerRemoteSample(ctx)
	if s0 == nil || s1 == nil || s1.on {
		t.Fatalf("samples %+v %+v", s0, s1)
	}
	var r Result
	if err := r.setBrokerRemote(s0, s1); err != nil || r.Remote != nil {
		t.Fatalf("remote %+v, %v", r.Remote, err)
	}
	b, err := json.Marshal(r)
	if err != nil || bytes.Contains(b, []byte(`"remote"`)) {
		t.Fatalf("JSON %s, %v", b, err)
	}

	dir := t.TempDir()
	for _, tc := range []struct {
		props string
		want  bool
	}{
		{"log.segment.bytes=65536\n# strata.remote.storage.type=local\n", false},
		{"log.segment.bytes=65536\n  strata.remote.storage.type = local\n", true},
	} {
		p := filepath.Join(dir, "server.properties")
		if err := os.WriteFile(p, []byte(tc.props), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := Config{Spawn: 1, SpawnConfig: p}
		got, err := cfg.topicConfigs()
		if err != nil || (got != nil) != tc.want || (tc.want && *got["remote.storage.enable"] != "true") {
			t.Fatalf("%q: %v, %v", tc.props, got, err)
		}
	}
	if got, err := (&Config{Brokers: []string{"127.0.0.1:9092"}}).topicConfigs(); got != nil || err != nil {
		t.Fatalf("external brokers: %v, %v", got, err)
	}
}
