package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
)

// fakeClock is a settable clock for Options.Now.
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock(ms int64) *fakeClock { c := &fakeClock{}; c.ms.Store(ms); return c }
func (c *fakeClock) Now() time.Time    { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Advance(ms int64)  { c.ms.Add(ms) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// smallConfig is a config with tiny segments and a dense index.
func smallConfig() map[string]string {
	return map[string]string{
		"segment.bytes":        "4096",
		"index.interval.bytes": "256",
		"segment.index.bytes":  "4096",
		"preallocate":          "false",
	}
}

func openEngine(t testing.TB, dir string, mutate func(*Options)) *Engine {
	t.Helper()
	opts := Options{Dir: dir, Logger: quietLogger()}
	if mutate != nil {
		mutate(&opts)
	}
	e, err := Open(opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return e
}

// topicLogs returns the first n partitions of tp.
func topicLogs(tp *Topic, n int) []*Log {
	logs := make([]*Log, n)
	for p := range logs {
		logs[p] = tp.Partition(int32(p))
	}
	return logs
}

// mustTopic creates a topic and returns its partition 0.
func mustTopic(t testing.TB, e *Engine, name string, partitions int32, cfg map[string]string) *Topic {
	t.Helper()
	tp, err := e.CreateTopic(name, partitions, cfg)
	if err != nil {
		t.Fatalf("CreateTopic(%s): %v", name, err)
	}
	return tp
}

// testRecord is what tests put into batches.
type testRecord struct {
	ts    int64
	key   []byte
	value []byte
}

// makeBatch encodes records (uncompressed) into one batch.
func makeBatch(t testing.TB, recs ...testRecord) []byte {
	t.Helper()
	var b record.Builder
	b.Reset(record.CodecNone, recs[0].ts)
	for _, r := range recs {
		b.Add(r.ts, r.key, r.value, nil)
	}
	out, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// batchOf builds a batch of n records with values of valueLen bytes, every
// record stamped ts; values encode the batch seed so reads can be checked.
func batchOf(t testing.TB, n, valueLen int, ts int64, seed int) []byte {
	recs := make([]testRecord, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte(seed + i)}, valueLen)
		recs[i] = testRecord{ts: ts, key: []byte(fmt.Sprintf("k%d-%d", seed, i)), value: v}
	}
	return makeBatch(t, recs...)
}

// waitDurable blocks until offset is below the HW (or the log fails).
func waitDurable(t testing.TB, l *Log, offset int64) error {
	t.Helper()
	done := make(chan error, 1)
	l.WhenDurable(offset, func(err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second): // deadlock guard, not a timing assertion
		t.Fatalf("WhenDurable(%d) never fired; HW %d", offset, l.HighWatermark())
		return nil
	}
}

func mustAppend(t testing.TB, l *Log, batch []byte) AppendInfo {
	t.Helper()
	info, err := l.Append(batch, 0)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return info
}

// readAll reads every batch below the HW from offset from, via Read, and
// returns the concatenated batch bytes and the number of Read calls.
func readAll(t testing.TB, l *Log, from int64, maxBytes int32) ([][]byte, int) {
	t.Helper()
	var out [][]byte
	calls := 0
	for guard := 0; guard < 1_000_000; guard++ {
		res, err := l.Read(from, maxBytes, true)
		calls++
		if err != nil {
			t.Fatalf("Read(%d): %v", from, err)
		}
		if len(res.Chunks) == 0 {
			res.Release()
			return out, calls
		}
		data := readChunks(t, res)
		res.Release()
		for rest := data; len(rest) > 0; {
			b, r, h, err := record.Next(rest)
			if err != nil {
				t.Fatalf("chunk at %d: %v", from, err)
			}
			if !record.CheckCRC(b) {
				t.Fatalf("batch at offset %d fails its CRC", h.BaseOffset)
			}
			out = append(out, b)
			from = h.LastOffset() + 1
			rest = r
		}
	}
	t.Fatal("readAll did not terminate")
	return nil, 0
}

func readChunks(t testing.TB, res ReadResult) []byte {
	t.Helper()
	var data []byte
	var total int64
	for _, c := range res.Chunks {
		buf := make([]byte, c.Len)
		if _, err := c.File.ReadAt(buf, c.Pos); err != nil {
			t.Fatalf("ReadAt: %v", err)
		}
		data = append(data, buf...)
		total += c.Len
	}
	if total != res.Bytes {
		t.Fatalf("chunks hold %d bytes, Bytes says %d", total, res.Bytes)
	}
	return data
}

// walkedBatch is one batch found by the naive walker.
type walkedBatch struct {
	pos        int64
	size       int
	base, last int64
}

// naiveWalk parses a whole .log file batch by batch with CRC checks and
// returns the valid prefix (the plain version recovery is checked against).
func naiveWalk(t testing.TB, path string) []walkedBatch {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []walkedBatch
	pos := int64(0)
	for rest := data; len(rest) > 0; {
		b, r, h, err := record.Next(rest)
		if err != nil || !record.CheckCRC(b) {
			break
		}
		out = append(out, walkedBatch{pos, len(b), h.BaseOffset, h.LastOffset()})
		pos += int64(len(b))
		rest = r
	}
	return out
}

// segmentBases lists the base offsets of the .log files in dir.
func segmentBases(t testing.TB, dir string) []int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range ents {
		if b, ok := parseSegmentFileName(e.Name(), logSuffix); ok {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// copyDir copies a data directory tree (a crash image when the engine is
// still running: nothing after the copy reaches it).
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	// Checkpoints first: a crash never leaves a recovery point newer than
	// the data, and the copy below may see data newer than the checkpoint.
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{recoveryPointFile, logStartFile} {
		if data, err := os.ReadFile(filepath.Join(src, name)); err == nil {
			if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	err := filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if filepath.Dir(path) == src && (fi.Name() == recoveryPointFile || fi.Name() == logStartFile) {
			return nil
		}
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkIndexesAgainstWalk verifies that every offset index entry of every
// segment of l points at a batch start whose last offset is the entry's
// offset, and every time index entry names an offset inside the segment.
func checkIndexesAgainstWalk(t testing.TB, l *Log) {
	t.Helper()
	l.idxMu.RLock()
	defer l.idxMu.RUnlock()
	for _, s := range *l.segs.Load() {
		walk := naiveWalk(t, s.logPath)
		byPos := map[int64]walkedBatch{}
		for _, w := range walk {
			byPos[w.pos] = w
		}
		if s.off != nil {
			// Walk entries via Lookup on every batch's last offset.
			seen := map[int64]bool{}
			ambiguous := len(walk) > 0 && walk[0].last == s.base
			for _, w := range walk {
				eo, pos := s.off.Lookup(w.last)
				if eo == s.base && pos == 0 && !ambiguous {
					continue // no entry at or below w.last
				}
				if seen[eo] {
					continue
				}
				seen[eo] = true
				b, ok := byPos[pos]
				if !ok {
					t.Fatalf("%s: index entry (%d, %d) is not at a batch start", s.logPath, eo, pos)
				}
				if b.last != eo {
					t.Fatalf("%s: index entry (%d, %d) points at batch [%d, %d]", s.logPath, eo, pos, b.base, b.last)
				}
			}
			if !ambiguous && len(seen) != s.off.Entries() {
				t.Fatalf("%s: found %d index entries by lookup, index has %d", s.logPath, len(seen), s.off.Entries())
			}
		}
		if s.tim != nil {
			if ts, off, ok := s.tim.Last(); ok {
				found := false
				for _, w := range walk {
					if off >= w.base && off <= w.last {
						found = true
					}
				}
				if !found {
					t.Fatalf("%s: time index entry (%d, %d) names no batch", s.logPath, ts, off)
				}
			}
		}
	}
}

// resultBytes gathers a ReadResult's bytes: memory chunks as they are,
// file chunks read from their file. It does not release res.
func resultBytes(res *ReadResult) ([]byte, error) {
	var data []byte
	for _, c := range res.Chunks {
		if c.Buf != nil {
			data = append(data, c.Buf...)
			continue
		}
		buf := make([]byte, c.Len)
		if _, err := c.File.ReadAt(buf, c.Pos); err != nil {
			return nil, err
		}
		data = append(data, buf...)
	}
	return data, nil
}

// requireSharedFlush fails t unless its temporary directories' filesystem
// shares device flushes (ext4 or XFS, as CI has): the ends mode and the
// pool of recycled files run only there.
func requireSharedFlush(t *testing.T) {
	t.Helper()
	if fs, ok := sharedFlushFS(t.TempDir()); !ok {
		t.Fatalf("the test directory's filesystem (%s) has no shared device flushes; ext4 or XFS is needed, as CI has", fs)
	}
}

// appendRoundsDurable appends rounds of one batch of n records of valueLen
// bytes to each of tp's first parts partitions, each round waiting until
// its batches are durable, and returns each partition's batches in order.
// onDurable, if not nil, runs in each batch's durability callback.
func appendRoundsDurable(t *testing.T, tp *Topic, parts, rounds, n, valueLen int, onDurable func(*Log, AppendInfo)) [][][]byte {
	t.Helper()
	want := make([][][]byte, parts)
	for round := range rounds {
		var wg sync.WaitGroup
		for p := range parts {
			l := tp.Partition(int32(p))
			b := batchOf(t, n, valueLen, int64(round), round*parts+p)
			info := mustAppend(t, l, b)
			want[p] = append(want[p], append([]byte(nil), b...))
			wg.Add(1)
			l.WhenDurable(info.LastOffset, func(err error) {
				if err != nil {
					t.Error(err)
				}
				if onDurable != nil {
					onDurable(l, info)
				}
				wg.Done()
			})
		}
		wg.Wait()
	}
	return want
}

// hwCoversDurable is an appendRoundsDurable check: a batch's durability
// callback runs with the HW already past it.
func hwCoversDurable(t *testing.T) func(*Log, AppendInfo) {
	return func(l *Log, info AppendInfo) {
		if hw := l.HighWatermark(); hw < info.LastOffset+1 {
			t.Errorf("durable callback with HW %d below %d", hw, info.LastOffset+1)
		}
	}
}
