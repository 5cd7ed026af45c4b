package server

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A partition whose log is corrupt answers Produce and Fetch with
// KAFKA_STORAGE_ERROR while the other partition of the same topic serves,
// and counts in strata_offline_partitions (issue 21; engine/corrupt.go).
func TestCorruptPartitionIsStorageError(t *testing.T) {
	dir := t.TempDir()
	eng, err := engine.Open(engine.Options{Dir: dir, Log: engine.DefaultLogConfig(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := eng.CreateTopic("cor", 2, map[string]string{"segment.bytes": "4096"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		for p := range int32(2) {
			if _, err := tp.Partition(p).Append(prodBatch(t, 20, record.CodecNone, "value-"), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	// Flip the last byte of the first batch of partition 0's second segment.
	pdir := filepath.Join(dir, "cor-0")
	ents, err := os.ReadDir(pdir)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			logs = append(logs, filepath.Join(pdir, e.Name()))
		}
	}
	sort.Strings(logs)
	if len(logs) < 3 {
		t.Fatalf("partition 0 has %d segments", len(logs))
	}
	data, err := os.ReadFile(logs[1])
	if err != nil {
		t.Fatal(err)
	}
	b, _, _, err := record.Next(data)
	if err != nil {
		t.Fatal(err)
	}
	data[len(b)-1] ^= 0xff
	if err := os.WriteFile(logs[1], data, 0o644); err != nil {
		t.Fatal(err)
	}

	addr, url, s := startMeteredBroker(t, func(c *Config, o *engine.Options) {
		o.Dir, o.VerifyRecovery = dir, true
		c.AutoCreateTopics = false
	})
	tp = s.eng.Topic("cor")
	if tp.Partition(0).Corruption() == nil || tp.Partition(1).Corruption() != nil {
		t.Fatal("verification did not mark partition 0 (alone) corrupt")
	}
	cl := newClient(t, addr)
	ctx := testCtx(t)
	for p, want := range []int16{kerr.KafkaStorageError.Code, 0} {
		presp, err := prodRequest(9, 1, "cor", tp.ID(), int32(p), prodBatch(t, 1, record.CodecNone, "x")).RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := presp.Topics[0].Partitions[0].ErrorCode; got != want {
			t.Fatalf("produce to partition %d: code %d, want %d", p, got, want)
		}
		fresp, err := fetchRequest(12, tp, "cor", int32(p), 0, 1<<20).RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		fp := fresp.Topics[0].Partitions[0]
		if fp.ErrorCode != want {
			t.Fatalf("fetch from partition %d: code %d, want %d", p, fp.ErrorCode, want)
		}
		if (want == 0) != (len(fp.RecordBatches) > 0) {
			t.Fatalf("fetch from partition %d: code %d with %d bytes", p, fp.ErrorCode, len(fp.RecordBatches))
		}
	}
	if got := scrapeMetrics(t, url).Gauge(metrics.OfflinePartitions); got != 1 {
		t.Fatalf("%s = %v, want 1", metrics.OfflinePartitions, got)
	}
}
