package engine_test

import (
	"bytes"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/txn"
)

// TestTxnMarkerBytes: the marker batch AppendTxnMarker writes is, but for
// the offset and leader epoch the log stamps, the batch txn.AppendMarkerBatch
// builds (the engine cannot import package txn, so it repeats the code).
func TestTxnMarkerBytes(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	e, err := engine.Open(engine.Options{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tp, err := e.CreateTopic("m", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := tp.Partition(0)
	for i, commit := range []bool{true, false} {
		info, err := l.AppendTxnMarker(42, 3, 7, commit, 5)
		if err != nil || info.BaseOffset != int64(i) {
			t.Fatalf("AppendTxnMarker: %+v %v", info, err)
		}
		done := make(chan error, 1)
		l.WhenDurable(info.LastOffset, func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		rr, err := l.Read(info.BaseOffset, 1<<20, true)
		if err != nil || len(rr.Chunks) != 1 {
			t.Fatalf("Read: %v, %d chunks", err, len(rr.Chunks))
		}
		got := make([]byte, rr.Chunks[0].Len)
		if _, err := rr.Chunks[0].File.ReadAt(got, rr.Chunks[0].Pos); err != nil {
			t.Fatal(err)
		}
		rr.Release()
		want := txn.AppendMarkerBatch(nil, 42, 3, 7, commit, now.UnixMilli())
		record.SetBaseOffset(want, info.BaseOffset)
		record.SetPartitionLeaderEpoch(want, 5)
		if !bytes.Equal(got, want) {
			t.Fatalf("marker batch\n%x\nwant\n%x", got, want)
		}
		var gotCommit bool
		var coord int32
		err = record.Iterate(got, func(h *record.Header, r *record.Record) error {
			var perr error
			gotCommit, coord, perr = txn.ParseMarker(r.Key, r.Value)
			return perr
		})
		if err != nil || gotCommit != commit || coord != 7 {
			t.Fatalf("ParseMarker: commit %v coord %d err %v", gotCommit, coord, err)
		}
	}
}
