package txn_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/txn"

	"github.com/stratalog/strata/internal/stratatest"
)

// The engine's Open leaves the producer id block file alone by name: txn's
// file must be that name, or a restart of a single broker would find the
// engine treating it as a stray file.
func TestBlockFileNameIsTheEngines(t *testing.T) {
	if txn.BlockFileName != engine.ProducerIDBlockFile {
		t.Fatalf("txn.BlockFileName %q, engine.ProducerIDBlockFile %q", txn.BlockFileName, engine.ProducerIDBlockFile)
	}
}

// TestBlockFileSurvivesCrashes: seeded rounds allocate producer id blocks
// on a memory file system that loses power after a random operation (in
// the middle of a replace too), sometimes with a write, sync, rename or
// directory sync failing on the way (EIO, ENOSPC), then crash it (synced
// state only, or with unsynced changes kept and writes torn). A source
// opened on what the crash left must start at the end of the last
// acknowledged block or of the one in flight (never below an
// acknowledged block: ids would repeat; never past the last attempt), and
// its file must read back.
func TestBlockFileSurvivesCrashes(t *testing.T) {
	const dir = "/data"
	seeds := stratatest.CrashSeeds(t)
	var acked, inFlight, faults int
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 0xb10c))
		m := vfs.NewMemFS()
		if err := m.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		m.SyncDir("/")
		src, err := txn.NewFileBlockSourceFS(m, dir, 3)
		if err != nil {
			t.Fatal(err)
		}
		if rng.IntN(3) == 0 {
			ops := []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir, vfs.OpOpen}
			errs := []error{syscall.EIO, syscall.ENOSPC}
			m.Inject(vfs.Fault{Ops: ops[rng.IntN(len(ops))], Nth: 1 + rng.Int64N(8), Err: errs[rng.IntN(2)]})
			faults++
		}
		m.PowerOffAfter(rng.Int64N(40))
		ends := map[int64]bool{} // every end a write may have left in the file
		lastAcked := int64(-1)
		for range 10 {
			b, err := src.AllocateBlock(context.Background())
			if errors.Is(err, vfs.ErrCrashed) {
				break
			}
			if err != nil {
				continue // a fault: the block was not handed out
			}
			ends[b.First+b.Size] = true
			lastAcked = b.First + b.Size
			acked++
		}
		// The block being written when the power went, if any: the next
		// after the last acknowledged one.
		start := int64(3) << txn.NodeRangeBits
		if lastAcked < 0 {
			ends[start+txn.BlockSize] = true
		} else {
			ends[lastAcked+txn.BlockSize] = true
		}
		after := m.Crash(vfs.CrashOptions{Seed: seed, KeepUnsynced: rng.IntN(2) == 0, Tear: rng.IntN(2) == 0})
		again, err := txn.NewFileBlockSourceFS(after, dir, 3)
		if err != nil {
			t.Fatal(err)
		}
		b, err := again.AllocateBlock(context.Background())
		if err != nil {
			t.Fatalf("seed %d: allocating after the crash: %v", seed, err)
		}
		switch {
		case lastAcked >= 0 && b.First < lastAcked:
			t.Fatalf("seed %d: block at %d after the crash, below the end %d of an acknowledged block", seed, b.First, lastAcked)
		case b.First != start && !ends[b.First]:
			t.Fatalf("seed %d: block at %d after the crash: no write left that end (%v)", seed, b.First, ends)
		case lastAcked >= 0 && b.First != lastAcked:
			inFlight++
		}
		ents, _ := after.ReadDir(dir)
		for _, e := range ents {
			if e.Name() != txn.BlockFileName && filepath.Ext(e.Name()) != vfs.TmpSuffix {
				t.Fatalf("seed %d: stray %s", seed, e.Name())
			}
		}
	}
	if acked == 0 || inFlight == 0 {
		t.Fatalf("%d blocks acknowledged, %d restarts from a block in flight: the rounds checked too little", acked, inFlight)
	}
	t.Logf("%d rounds (%d with a fault): %d blocks acknowledged, %d restarts past the last acknowledged block", seeds, faults, acked, inFlight)
}
