package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratalog/strata/segment"
)

// TestMetaFlushFlushesOnXFS: with metadata (segments on unwritten
// extents), every flush reaches the device as a cache flush, also when
// there is no metadata to write. On XFS syncfs only forces the log, and
// a round whose O_DIRECT writes all overwrote converted blocks leaves
// nothing to log: syncfs alone issued no flush, and an acknowledged
// append sat in the device's volatile cache. The test loop-mounts an XFS
// image (root; ./scripts/test installs xfsprogs) and counts the loop
// device's completed flushes (/proc/diskstats) over rounds of one such
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
	dev := segment.DeviceName(mnt)
	if dev == "" {
		t.Fatalf("no block device under %s", mnt)
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
	before := deviceFlushes(t, dev)
	for i := range rounds {
		buf[0] = byte(i)
		if _, err := f.WriteAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		if err := d.wait(); err != nil {
			t.Fatal(err)
		}
	}
	if got := deviceFlushes(t, dev) - before; got < rounds {
		t.Fatalf("%d rounds of an overwrite and a flush reached %s as %d device flushes: some flushes wrote nothing to the device", rounds, dev, got)
	}
}

// deviceFlushes is the number of flush requests dev completed
// (/proc/diskstats, field 19).
func deviceFlushes(t *testing.T, dev string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 19 && f[2] == dev {
			n, err := strconv.ParseInt(f[18], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("%s not in /proc/diskstats (or without flush counts)", dev)
	return 0
}
