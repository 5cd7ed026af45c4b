package engine

import (
	"github.com/stratalog/strata/internal/stratatest"

	"bytes"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"testing"

	"github.com/stratalog/strata/internal/configkeys"
)

// lockedBuffer is a log sink the engine's goroutines write to while the
// test reads it.
type lockedBuffer = stratatest.LogBuffer

const (
	belowLine = "log directory below its free-space floor"
	aboveLine = "log directory back above its free-space floor"
)

// TestFloorRefusesProduceKeepsTheRest runs the refusal path on the real
// filesystem under the test's directory: the floor is raised above the
// space statfs reports, so produce and topic creation fail with ErrNoSpace
// while reads, DeleteRecords, retention, DeleteTopic and committed offsets
// go on and the directory stays online; lowered again, produce resumes at
// the next offset and every acknowledged record reads back, before and
// after a restart. One line is logged at each crossing, however many
// requests are refused and checks run in between.
func TestFloorRefusesProduceKeepsTheRest(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	dir := t.TempDir()
	logs := &lockedBuffer{}
	open := func() *Engine {
		return openEngine(t, dir, func(o *Options) {
			o.Now = clk.Now
			o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		})
	}
	e := open()
	if fs := e.FreeSpace(); fs.Below || fs.Err != nil || fs.TotalBytes <= 0 || fs.FloorBytes <= 0 ||
		fs.FloorBytes > DefaultMinFreeBytes || float64(fs.FloorBytes) > DefaultMinFreePercent/100*float64(fs.TotalBytes)+1 {
		t.Fatalf("FreeSpace at Open with the default floor: %+v", fs)
	}
	ret := map[string]string{"retention.ms": "10000", "file.delete.delay.ms": "0"}
	for k, v := range smallConfig() {
		ret[k] = v
	}
	a := mustTopic(t, e, "a", 1, ret).Partition(0)
	gone := mustTopic(t, e, "gone", 1, nil).Partition(0)
	mustAppend(t, gone, batchOf(t, 1, 10, t0, 0))
	var next int64
	for i := 0; i < 6; i++ { // one 3,000-byte record a segment (segment.bytes=4096)
		info := mustAppend(t, a, batchOf(t, 1, 3000, t0+int64(i)*1000, i))
		next = info.LastOffset + 1
	}
	if err := waitDurable(t, a, next-1); err != nil {
		t.Fatal(err)
	}

	// Floor = the whole filesystem (bytes past it, 100%): usable < floor.
	e.SetMinFreeSpace(math.MaxInt64, 100)
	fs := e.FreeSpace()
	if !fs.Below || fs.FloorBytes != fs.TotalBytes || fs.UsableBytes >= fs.FloorBytes {
		t.Fatalf("FreeSpace with the floor at the filesystem's size: %+v", fs)
	}
	for i := 0; i < 5; i++ {
		e.checkFloor(clk.Now().UnixMilli()) // the coordinator's checks
		if _, err := a.Append(batchOf(t, 1, 3000, t0+6000, 100+i), 0); !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrOffline) {
			t.Fatalf("produce below the floor: %v, want ErrNoSpace", err)
		}
	}
	if _, err := e.CreateTopic("b", 1, nil); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("CreateTopic below the floor: %v, want ErrNoSpace", err)
	}
	if e.Topic("b") != nil {
		t.Fatal("refused topic exists")
	}
	if err := e.CreatePartitions("a", 2); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("CreatePartitions below the floor: %v, want ErrNoSpace", err)
	}
	if a.LogEndOffset() != next {
		t.Fatalf("log end %d after refused appends, want %d", a.LogEndOffset(), next)
	}

	// What keeps working: committed offsets (an internal topic, created
	// below the floor), reads, DeleteRecords, retention, DeleteTopic.
	if err := e.Commit("g", "a", 0, 3); err != nil {
		t.Fatalf("Commit below the floor: %v", err)
	}
	if off, err := e.Committed("g", "a", 0); err != nil || off != 3 {
		t.Fatalf("Committed = %d, %v", off, err)
	}
	if got, _ := readAll(t, a, 0, 1<<20); len(got) != 6 {
		t.Fatalf("read %d batches below the floor, want 6", len(got))
	}
	if start, err := a.DeleteRecords(1); err != nil || start != 1 {
		t.Fatalf("DeleteRecords below the floor: %d, %v", start, err)
	}
	clk.ms.Store(t0 + 2000 + 10000 + 1) // records at t0 and t0+1000... t0+2000 expire
	if n := e.enforceRetention(); n < 2 || a.LogStartOffset() != 3 {
		t.Fatalf("retention below the floor deleted %d segments, log start %d; want >= 2 and 3", n, a.LogStartOffset())
	}
	if err := e.DeleteTopic("gone"); err != nil {
		t.Fatalf("DeleteTopic below the floor: %v", err)
	}
	if err := e.Offline(); err != nil {
		t.Fatalf("directory offline below the floor: %v", err)
	}
	if n := logs.Count(belowLine); n != 1 {
		t.Fatalf("%d lines for crossing below the floor, want 1", n)
	}

	// Space returns (the floor is lowered under the usable space).
	e.SetMinFreeSpace(1<<20, 100)
	if fs := e.FreeSpace(); fs.Below || fs.FloorBytes != 1<<20 {
		t.Fatalf("FreeSpace with a 1 MiB floor: %+v", fs)
	}
	e.checkFloor(clk.Now().UnixMilli())
	if n := logs.Count(aboveLine); n != 1 {
		t.Fatalf("%d lines for recovering, want 1", n)
	}
	info := mustAppend(t, a, batchOf(t, 1, 3000, clk.Now().UnixMilli(), 200))
	if info.BaseOffset != next {
		t.Fatalf("first append after recovery at %d, want %d", info.BaseOffset, next)
	}
	if err := waitDurable(t, a, info.LastOffset); err != nil {
		t.Fatal(err)
	}
	mustTopic(t, e, "b", 1, nil)
	if err := e.CreatePartitions("a", 2); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		t.Helper()
		got, _ := readAll(t, l, l.LogStartOffset(), 1<<20)
		if len(got) != 4 {
			t.Fatalf("read %d batches from %d, want 4 (offsets 3..6)", len(got), l.LogStartOffset())
		}
		for i, b := range got {
			if want := bytes.Repeat([]byte{byte(3 + i)}, 3000); i < 3 && !bytes.Contains(b, want) {
				t.Fatalf("batch %d holds other records", 3+i)
			}
		}
		if !bytes.Contains(got[3], bytes.Repeat([]byte{200}, 3000)) {
			t.Fatal("the batch appended after recovery holds other records")
		}
	}
	check(a)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = open()
	defer e.Close()
	check(e.Topic("a").Partition(0))
}

// TestFloorChecksOnTheEngineClock: the coordinator asks statfs once
// floorCheckMs has passed on the engine's clock, not per call; with the
// floor off too (FreeSpace stays current).
func TestFloorChecksOnTheEngineClock(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	e := openEngine(t, t.TempDir(), func(o *Options) { o.Now = clk.Now })
	defer e.Close()
	checked := func() int64 {
		e.floor.mu.Lock()
		defer e.floor.mu.Unlock()
		return e.floor.checkedMs
	}
	if got := checked(); got != t0 {
		t.Fatalf("checked at %d at Open, want %d", got, t0)
	}
	if due := e.floorDue(t0 + floorCheckMs - 1); due != t0+floorCheckMs || checked() != t0 {
		t.Fatalf("before due: next %d, checked %d", due, checked())
	}
	if due := e.floorDue(t0 + floorCheckMs); due != t0+2*floorCheckMs || checked() != t0+floorCheckMs {
		t.Fatalf("when due: next %d, checked %d", due, checked())
	}
	e.SetMinFreeSpace(-1, 0) // off: still checked, for FreeSpace
	if due := e.floorDue(t0 + 10*floorCheckMs); due != t0+11*floorCheckMs || checked() != t0+10*floorCheckMs {
		t.Fatalf("floor off: next %d, checked %d", due, checked())
	}
	if fs := e.FreeSpace(); fs.Below || fs.FloorBytes != 0 {
		t.Fatalf("FreeSpace with the floor off: %+v", fs)
	}
}

// TestFloorBytes: the floor is the smaller of the two bounds, off when
// either is; recovery needs a margin above it.
func TestFloorBytes(t *testing.T) {
	const gib = int64(1) << 30
	for _, c := range []struct {
		minBytes int64
		minPct   float64
		total    int64
		want     int64
	}{
		{0, 0, 1000 * gib, DefaultMinFreeBytes},  // 5% = 50 GiB: 4 GiB is smaller
		{0, 0, 20 * gib, gib},                    // 5% of 20 GiB
		{10 * gib, 100, 20 * gib, 10 * gib},      // bytes only
		{-1, 0, 20 * gib, 0},                     // bytes off
		{0, -1, 20 * gib, 0},                     // percent off
		{math.MaxInt64, 100, 20 * gib, 20 * gib}, // the whole filesystem
		{gib, 250, 20 * gib, gib},                // percent capped at 100
	} {
		var f diskFloor
		f.set(c.minBytes, c.minPct)
		if got := f.floorBytes(c.total); got != c.want {
			t.Errorf("floor(%d, %g%%) of %d = %d, want %d", c.minBytes, c.minPct, c.total, got, c.want)
		}
	}
	if m := floorMargin(DefaultMinFreeBytes); m != floorMarginMax {
		t.Errorf("margin of 4 GiB = %d, want %d", m, floorMarginMax)
	}
	if m := floorMargin(gib); m != gib/16 {
		t.Errorf("margin of 1 GiB = %d, want %d", m, gib/16)
	}
}

// The table's defaults are the engine's.
func TestFloorDefaultsAreTheTables(t *testing.T) {
	for name, want := range map[string]string{
		"log.dir.min.free.bytes":   strconv.FormatInt(DefaultMinFreeBytes, 10),
		"log.dir.min.free.percent": strconv.FormatFloat(DefaultMinFreePercent, 'g', -1, 64),
	} {
		k, ok := configkeys.BrokerKey(name)
		if !ok || k.Default != want {
			t.Errorf("%s: table default %v, engine's %s", name, k, want)
		}
	}
}
