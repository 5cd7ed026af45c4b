package segmenttest_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stratalog/strata/segment/segmenttest"
)

func TestMemFileCrash(t *testing.T) {
	f := segmenttest.NewMemFile([]byte("base"))
	mustWrite := func(p string, off int64) {
		t.Helper()
		if _, err := f.WriteAt([]byte(p), off); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite("AAAA", 4)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	mustWrite("BBBB", 8)
	if err := f.Truncate(10); err != nil {
		t.Fatal(err)
	}
	mustWrite("CCCC", 10)
	if f.Pending() != 3 || string(f.Bytes()) != "baseAAAABBCCCC" {
		t.Fatalf("pending %d, bytes %q", f.Pending(), f.Bytes())
	}
	cases := []struct {
		keep, torn int
		want       string
	}{
		{0, 0, "baseAAAA"},
		{0, 2, "baseAAAABB"},
		{1, 0, "baseAAAABBBB"},
		{2, 0, "baseAAAABB"},
		{2, 3, "baseAAAABBCCC"},
		{3, 0, "baseAAAABBCCCC"},
	}
	for _, c := range cases {
		g := segmenttest.NewMemFile(nil)
		for _, op := range []struct {
			p   string
			off int64
		}{{"base", 0}, {"AAAA", 4}} {
			g.WriteAt([]byte(op.p), op.off)
		}
		g.Sync()
		g.WriteAt([]byte("BBBB"), 8)
		g.Truncate(10)
		g.WriteAt([]byte("CCCC"), 10)
		after := g.CrashAfter(c.keep, c.torn)
		if got := string(after.Bytes()); got != c.want {
			t.Fatalf("CrashAfter(%d, %d) = %q, want %q", c.keep, c.torn, got, c.want)
		}
		if _, err := g.ReadAt(make([]byte, 1), 0); !errors.Is(err, segmenttest.ErrCrashed) {
			t.Fatalf("crashed file still readable: %v", err)
		}
	}
	after := f.CrashRandom(rand.New(rand.NewPCG(1, 1)))
	if got := after.Bytes(); !bytes.HasPrefix(got, []byte("baseAAAA")) || !bytes.Equal(after.SyncedBytes(), got) {
		t.Fatalf("CrashRandom lost synced data or left pending writes: %q", got)
	}
}

func TestFaultyFile(t *testing.T) {
	mf := segmenttest.NewMemFile(nil)
	boom := errors.New("boom")
	ff := segmenttest.NewFaultyFile(mf, func(op segmenttest.Op, call, off int64, n int) error {
		switch {
		case op == segmenttest.OpWrite && call == 2:
			return &segmenttest.ShortWrite{N: 3, Err: boom}
		case op == segmenttest.OpSync && call >= 2:
			return boom
		}
		return nil
	})
	if n, err := ff.WriteAt([]byte("hello"), 0); n != 5 || err != nil {
		t.Fatalf("first write: %d %v", n, err)
	}
	if n, err := ff.WriteAt([]byte("world"), 5); n != 3 || !errors.Is(err, boom) {
		t.Fatalf("short write: %d %v", n, err)
	}
	if string(mf.Bytes()) != "hellowor" {
		t.Fatalf("file %q", mf.Bytes())
	}
	if err := ff.Sync(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := ff.Sync(); err != boom {
			t.Fatalf("sync: %v", err)
		}
	}
	if ff.Calls(segmenttest.OpSync) != 3 || mf.Syncs() != 1 {
		t.Fatalf("calls %d, syncs %d", ff.Calls(segmenttest.OpSync), mf.Syncs())
	}
}
