package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/stratatest"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/metrics/metricstest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// batchBytes adds up what a franz-go client saw of the record batches it
// produced and fetched: records, and bytes as they were on the wire
// (compressed, plus the 61-byte batch header franz-go leaves out).
type batchBytes struct {
	mu sync.Mutex
	batchCounts
}

type batchCounts struct {
	producedRecords, producedBytes  int
	fetchedRecords, fetchedBytes    int
	producedBatches, fetchedBatches int
}

const batchHeaderBytes = 61

func (b *batchBytes) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.producedRecords += m.NumRecords
	b.producedBytes += m.CompressedBytes + batchHeaderBytes
	b.producedBatches++
}

func (b *batchBytes) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fetchedRecords += m.NumRecords
	b.fetchedBytes += m.CompressedBytes + batchHeaderBytes
	b.fetchedBatches++
}

// httpStatus GETs url and returns its status code and body.
func httpStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	cl := http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// The "Show" for metrics and health against the strata binary:
//
//   - A produce (zstd, one batch per request) and a group consume: the
//     scraped records and bytes in and out per topic are exactly what the
//     client counted in the batches it sent and read (bytes as on the wire:
//     compressed records plus the batch header), and the group's lag falls
//     from every record to 0 once it commits.
//   - A restart whose recovery is held up: the data directory's log start
//     offset checkpoint is replaced by a FIFO, so opening the directory
//     blocks in reading it until the test writes the saved checkpoint into
//     it. While it blocks, /healthz answers 200 and /readyz 503; once the
//     checkpoint is written the broker finishes recovery and /readyz
//     answers 200, with the records still there.
func TestServeMetricsAgreeWithClientAndReadyAfterRecovery(t *testing.T) {
	const hangGuard = 2 * time.Minute // not a performance threshold
	bin, cleanup, err := stratatest.BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	dir := t.TempDir()
	srv := startServe(t, bin, hangGuard, true, "--listen", "127.0.0.1:0", "--data-dir", dir,
		"--metrics-listeners", "http://127.0.0.1:0")
	base := "http://" + srv.metrics
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	const topic, group, n = "agree", "agreers", 12
	counts := &batchBytes{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.kafka), kgo.WithHooks(counts), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, r.Err)
	}
	for i := range n {
		v := strings.Repeat("compressible value ", 10+i)
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte{byte('a' + i)}, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	zero := kadm.Offsets{}
	zero.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
	if r, err := kadm.NewClient(cl).CommitOffsets(ctx, group, zero); err != nil || r.Error() != nil {
		t.Fatalf("commit offset 0: %v %v", err, r.Error())
	}
	f, err := metricstest.Scrape(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Gauge(metrics.GroupLag, "group", group); got != n {
		t.Errorf("lag before consuming: %v, want %d", got, n)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(srv.kafka), kgo.WithHooks(counts), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	consumeAndCommit(t, ctx, cons, n)

	if f, err = metricstest.Scrape(base + "/metrics"); err != nil {
		t.Fatal(err)
	}
	counts.mu.Lock()
	c := counts.batchCounts
	counts.mu.Unlock()
	if c.producedRecords != n || c.producedBatches != n || c.fetchedRecords != n {
		t.Fatalf("the client produced %d records in %d batches and fetched %d, want %d each", c.producedRecords, c.producedBatches, c.fetchedRecords, n)
	}
	if got := f.Counter(metrics.TopicRecordsIn, "topic", topic); got != float64(c.producedRecords) {
		t.Errorf("records in %v, the client produced %d", got, c.producedRecords)
	}
	if got := f.Counter(metrics.TopicBytesIn, "topic", topic); got != float64(c.producedBytes) {
		t.Errorf("bytes in %v, the client sent %d in %d batches", got, c.producedBytes, c.producedBatches)
	}
	if got := f.Counter(metrics.TopicBytesOut, "topic", topic); got != float64(c.fetchedBytes) {
		t.Errorf("bytes out %v, the client read %d in %d batches", got, c.fetchedBytes, c.fetchedBatches)
	}
	if got := f.Counter(metrics.TopicRecordsOut, "topic", topic); got != float64(c.fetchedRecords) {
		t.Errorf("records out %v, the client read %d", got, c.fetchedRecords)
	}
	if got := f.Gauge(metrics.GroupLag, "group", group); got != 0 {
		t.Errorf("lag after consuming and committing: %v", got)
	}
	srv.stop(t, hangGuard)

	// Hold the next recovery up on a FIFO in place of the checkpoint.
	ckpt := filepath.Join(dir, "log-start-offset-checkpoint")
	saved, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(ckpt); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(ckpt, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--metrics-listeners", "http://127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // after a failure; a no-op once it exited
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	deadline := time.After(hangGuard)
	metricsAddr := ""
	for metricsAddr == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("strata serve exited before its metrics endpoint listened")
			}
			if m := serveMetricsRe.FindStringSubmatch(line); m != nil {
				metricsAddr = m[1]
			}
		case <-deadline:
			t.Fatal("no metrics endpoint line")
		}
	}
	base = "http://" + metricsAddr
	// Until the broker opens the FIFO to read it, opening it to write
	// fails with ENXIO; each round, the broker is alive and not ready.
	var w *os.File
	for probes := 0; w == nil; probes++ {
		if code, _ := httpStatus(t, base+"/healthz"); code != http.StatusOK {
			t.Fatalf("/healthz during recovery: %d", code)
		}
		if code, body := httpStatus(t, base+"/readyz"); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz during recovery (probe %d): %d %q, want 503", probes, code, body)
		}
		fd, err := syscall.Open(ckpt, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		switch {
		case err == nil:
			w = os.NewFile(uintptr(fd), ckpt)
		case errors.Is(err, syscall.ENXIO):
			select {
			case <-deadline:
				t.Fatal("the broker never opened the log start offset checkpoint")
			case <-time.After(10 * time.Millisecond):
			}
		default:
			t.Fatal(err)
		}
	}
	// The broker is now blocked reading the FIFO: still not ready.
	if code, body := httpStatus(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with recovery blocked on the checkpoint: %d %q", code, body)
	}
	if _, err := w.Write(saved); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	kafkaAddr := ""
	for kafkaAddr == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("strata serve exited during recovery")
			}
			if strings.Contains(line, "ignoring log start offset checkpoint") {
				t.Errorf("the checkpoint written through the FIFO was refused: %s", line)
			}
			if m := serveKafkaRe.FindStringSubmatch(line); m != nil {
				kafkaAddr = m[1]
				// On port 0 the line advertises the port the listener got.
				if !strings.Contains(line, " advertised="+kafkaAddr+" ") {
					t.Errorf("the listening line does not advertise %s: %s", kafkaAddr, line)
				}
			}
		case <-deadline:
			t.Fatal("no Kafka listener line after recovery")
		}
	}
	for {
		code, body := httpStatus(t, base+"/readyz")
		if code == http.StatusOK {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("/readyz after recovery: %d %q", code, body)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if f, err = metricstest.Scrape(base + "/metrics"); err != nil {
		t.Fatal(err)
	}
	if got, want := f.Gauge(metrics.LogSizeBytes, "topic", topic), float64(c.producedBytes); got != want {
		t.Errorf("log size after the restart %v, want the %v bytes produced", got, want)
	}
	if got := f.Gauge(metrics.GroupLag, "group", group); got != 0 {
		t.Errorf("lag after the restart: %v", got)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for open := true; open; {
		select {
		case _, open = <-lines:
		case <-deadline:
			t.Fatal("strata serve did not stop after SIGTERM")
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("strata serve after SIGTERM: %v", err)
	}
}
