package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/diskstats"
	"github.com/stratalog/strata/segment"
)

// TestMetaFlushFlushesOnXFS: with metadata (segments on unwritten
// extents), every flush reaches the device as a cache flush, also when
// there is no metadata to write. On XFS syncfs only forces the log, and
// a round whose O_DIRECT writes all overwrote converted blocks leaves
// nothing to log: syncfs alone issued no flush, and an acknowledged
// append sat in the device's volatile cache. The test loop-mounts an XFS
// image (root; ./scripts/test installs xfsprogs) and counts the loop
// device's completed flushes (internal/diskstats) over rounds of one such
// overwrite and one flush each.
func TestMetaFlushFlushesOnXFS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("loop-mounts an XFS image: run the tests as root (./scripts/test in CI runs as root)")
	}
	if _, err := exec.LookPath("mkfs.xfs"); err != nil {
		t.Fatal("mkfs.xfs not found (./scripts/test installs xfsprogs)")
	}
	base := t.TempDir()
	img, mnt := filepath.Join(base, "xfs.img"), filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 512<<20); err != nil { // sparse; mkfs.xfs wants 300 MiB or more
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
	}
	run("mkfs.xfs", "-q", img)
	run("mount", "-o", "loop", img, mnt)
	t.Cleanup(func() {
		if exec.Command("umount", mnt).Run() != nil {
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
	if fs := segment.FSType(mnt); fs != "xfs" {
		t.Fatalf("the image mounted as %q", fs)
	}
	devNum, err := segment.DeviceOf(mnt)
	if err != nil {
		t.Fatal(err)
	}
	major, minor := segment.DeviceNumbers(devNum)
	flushes := func() uint64 {
		t.Helper()
		s, err := diskstats.Read(major, minor)
		if err != nil {
			t.Fatal(err)
		}
		if !s.HasFlushes {
			t.Fatalf("%s counts no flushes (a kernel before 5.5)", diskstats.Path)
		}
		return s.Flushes
	}

	d, err := openDevFlush(mnt, true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	f, err := os.OpenFile(filepath.Join(mnt, "seg"), os.O_RDWR|os.O_CREATE|syscall.O_DIRECT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(buf)
	if _, err := f.WriteAt(buf, 0); err != nil { // allocated and written: later writes are overwrites
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}

	const rounds = 20
	before := flushes()
	for i := range rounds {
		buf[0] = byte(i)
		if _, err := f.WriteAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		if err := d.wait(); err != nil {
			t.Fatal(err)
		}
	}
	if got := flushes() - before; got < rounds {
		t.Fatalf("%d rounds of an overwrite and a flush reached device %d:%d as %d flushes: some flushes wrote nothing to the device", rounds, major, minor, got)
	}
}
