package engine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of sizeBytes on a new directory and unmounts it
// at cleanup (registered before anything opened inside it, so it runs
// last). The capability check is the mount itself: without CAP_SYS_ADMIN
// (or in a user namespace that forbids it) the test is skipped, saying so.
func mountTmpfs(t *testing.T, sizeBytes int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+itoa(sizeBytes)); err != nil {
		t.Skipf("cannot mount a %d-byte tmpfs here (%v): needs CAP_SYS_ADMIN; the floor's refusal path is tested on the real filesystem by TestFloorRefusesProduceKeepsTheRest", sizeBytes, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// TestFloorOnAFullFilesystem fills a small real filesystem (a 32 MiB
// tmpfs). With an 8 MiB floor the coordinator's checks refuse produce with
// ErrNoSpace while space is left; with the floor off, appends and rolls run
// into ENOSPC, which fails those appends with ErrResource and leaves the
// directory online; when a ballast file is removed (space returns) appends
// resume at the next offset, and every acknowledged batch reads back
// byte for byte, before and after a restart: nothing acknowledged lost,
// nothing half written served.
func TestFloorOnAFullFilesystem(t *testing.T) {
	const (
		fsBytes     = 32 << 20
		floorBytes  = 8 << 20
		ballastSize = 4 << 20
	)
	dir := mountTmpfs(t, fsBytes)
	ballast := filepath.Join(dir, "ballast")
	if err := os.WriteFile(ballast, make([]byte, ballastSize), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	open := func() *Engine {
		return openEngine(t, data, func(o *Options) { o.MinFreeBytes, o.MinFreePercent = floorBytes, 100 })
	}
	e := open()
	t.Cleanup(func() { e.Close() }) // before the unmount (idempotent)
	l := mustTopic(t, e, "full", 1, map[string]string{"segment.bytes": itoa(1 << 20)}).Partition(0)

	var acked [][]byte // every acknowledged batch, as stored
	appendOne := func(seed int) error {
		b := batchOf(t, 1, 60<<10, 1000, seed)
		info, err := l.Append(b, 0)
		if err != nil {
			return err
		}
		if err := waitDurable(t, l, info.LastOffset); err != nil {
			t.Fatalf("acknowledged append at %d not durable: %v", info.BaseOffset, err)
		}
		if info.BaseOffset != int64(len(acked)) {
			t.Fatalf("append at %d, want %d", info.BaseOffset, len(acked))
		}
		acked = append(acked, b) // Append assigned its offset in place
		return nil
	}

	// 1. The floor: refused with space left.
	var err error
	for i := 0; err == nil && i < 1000; i++ {
		if err = appendOne(i); err == nil {
			e.checkFloor(e.nowMs()) // the coordinator's check, without waiting for it
		}
	}
	fs := e.FreeSpace()
	if !errors.Is(err, ErrNoSpace) || !fs.Below || fs.UsableBytes <= 0 || fs.UsableBytes >= floorBytes {
		t.Fatalf("filling to the floor: %v after %d appends; %+v", err, len(acked), fs)
	}
	t.Logf("floor reached after %d appends: %d bytes usable of %d", len(acked), fs.UsableBytes, fs.TotalBytes)
	if got, _ := readAll(t, l, 0, 1<<20); len(got) != len(acked) {
		t.Fatalf("read %d batches below the floor, want %d", len(got), len(acked))
	}

	// 2. The floor off: appends and rolls run into ENOSPC. Each one that
	// fails is ErrResource; one that fits in what is left (a smaller
	// reservation step, a roll's first one) is acknowledged as usual.
	e.SetMinFreeSpace(-1, -1)
	fails, inARow := 0, 0
	for i := 0; inARow < 5 && i < 2000; i++ {
		err := appendOne(1000 + i)
		if err == nil {
			inARow = 0
			continue
		}
		if !errors.Is(err, ErrResource) || errors.Is(err, ErrOffline) || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
			t.Fatalf("append on a full filesystem: %v, want ErrResource (ENOSPC)", err)
		}
		if fails == 0 {
			t.Logf("first ENOSPC after %d appends: %v", len(acked), err)
		}
		fails++
		inARow++
	}
	if inARow < 5 {
		t.Fatalf("the filesystem never filled: %d failed appends, %d acknowledged", fails, len(acked))
	}
	t.Logf("full: %d appends failed with ENOSPC, %d acknowledged; %+v", fails, len(acked), e.FreeSpace())
	// To the last byte: a filler file takes what the reservations left.
	filler := filepath.Join(dir, "filler")
	fillUp(t, filler)
	if err := appendOne(9999); !errors.Is(err, ErrResource) {
		t.Fatalf("append with 0 bytes left: %v, want ErrResource", err)
	}
	// The coordinator's recovery-point checkpoint runs out of space too:
	// retried, not a failed disk.
	ckptErr := e.writeRecoveryCheckpoint()
	if !errors.Is(ckptErr, syscall.ENOSPC) {
		t.Fatalf("recovery-point checkpoint with 0 bytes left: %v, want ENOSPC", ckptErr)
	}
	e.recoveryCheckpointWritten(ckptErr)
	if err := e.Offline(); err != nil {
		t.Fatalf("directory offline on a full filesystem: %v", err)
	}
	if got, _ := readAll(t, l, 0, 1<<20); len(got) != len(acked) {
		t.Fatalf("read %d batches on a full filesystem, want %d", len(got), len(acked))
	}

	// 3. Space returns.
	for _, p := range []string{ballast, filler} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	before := len(acked)
	for i := 0; i < 8; i++ {
		if err := appendOne(3000 + i); err != nil {
			t.Fatalf("append after space returned: %v", err)
		}
	}
	e.SetMinFreeSpace(floorBytes, 100)
	check := func(l *Log) {
		t.Helper()
		got, _ := readAll(t, l, 0, 1<<20)
		if len(got) != len(acked) {
			t.Fatalf("read %d batches, want %d", len(got), len(acked))
		}
		for i := range got {
			if !bytes.Equal(got[i], acked[i]) {
				t.Fatalf("batch %d differs from what was acknowledged", i)
			}
		}
	}
	check(l)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = open()
	check(e.Topic("full").Partition(0))
	t.Logf("%d batches acknowledged (%d after space returned), all read back after a restart", len(acked), len(acked)-before)
}

// fillUp writes path until the filesystem is full.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for i := 0; i < 1<<20; i++ {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("the filesystem never filled")
}
