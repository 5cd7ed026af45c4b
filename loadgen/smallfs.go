package loadgen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Small filesystems for --faults disk-full: each spawned broker's data
// directory is an ext4 filesystem of its own (an image file in the run's
// directory, formatted with mkfs.ext4 and loop-mounted; mounting needs
// root), so filling it fills that broker's disk and nothing else on the
// machine. A fault fills it with one fallocate'd filler file (no bytes
// written: the blocks are only reserved) until the usable space is half
// the broker's free-space floor, holds it for --fault-disk-full, and
// removes it.

// DefaultFaultDiskBytes is --fault-disk-bytes' default: each broker's
// filesystem. The broker's floor is then 5 % of it (log.dir.min.free.percent).
const DefaultFaultDiskBytes = 2 << 30

// minFaultDiskBytes is the smallest filesystem --fault-disk-bytes takes.
const minFaultDiskBytes = 256 << 20

// fillerName is the filler file's name in a broker's data directory.
const fillerName = "loadgen-disk-full.filler"

// mountSmallFS makes dir an ext4 filesystem of size bytes backed by the
// image file img (created sparse).
func mountSmallFS(ctx context.Context, dir, img string, size int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// -m 0: no blocks reserved for root (the broker runs as root here, and
	// reserved blocks would hide the fill from its free-space floor).
	if err := runTool(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", img); err != nil {
		return err
	}
	if err := runTool(ctx, "mount", "-o", "loop", img, dir); err != nil {
		return fmt.Errorf("%w (--faults disk-full mounts a small filesystem per broker: it needs root)", err)
	}
	return nil
}

// unmountSmallFS unmounts dir (its brokers stopped); a busy mount is
// detached lazily rather than left behind.
func unmountSmallFS(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := runTool(ctx, "umount", dir)
	if err != nil {
		if lerr := runTool(ctx, "umount", "-l", dir); lerr == nil {
			return nil
		}
	}
	return err
}

func runTool(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// fillDisk fills dir's filesystem until at most leave bytes stay usable,
// with one filler file, and returns the bytes it reserved.
func fillDisk(dir string, leave int64) (int64, error) {
	usable, _, err := fsSpace(dir)
	if err != nil {
		return 0, err
	}
	n := usable - leave
	if n <= 0 {
		return 0, nil
	}
	f, err := os.OpenFile(dir+"/"+fillerName, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	err = reserve(f, n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dir + "/" + fillerName)
		return 0, fmt.Errorf("reserving %d bytes: %w", n, err)
	}
	return n, nil
}

// unfillDisk removes the filler file.
func unfillDisk(dir string) error {
	err := os.Remove(dir + "/" + fillerName)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// floorOf is the broker's free-space floor on a filesystem of total bytes
// with the default settings (engine.DefaultMinFreeBytes, 4 GiB, and
// DefaultMinFreePercent, 5 %: the smaller).
func floorOf(total int64) int64 { return min(4<<30, total/20) }

// bytesString prints n in MiB.
func bytesString(n int64) string { return strconv.FormatInt(n>>20, 10) + " MiB" }

// remountSmallFS unmounts dir's filesystem (after a power loss: shut
// down, its brokers gone) and mounts its image again, which runs ext4's
// journal recovery. A broker that has exited can keep the filesystem busy
// for a moment (the kernel tears an io_uring instance down after the
// process, holding its files until then), so the unmount is tried again
// for up to umountWait; never lazily, which would let the image be
// mounted twice.
func remountSmallFS(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), umountWait+30*time.Second)
	defer cancel()
	for try := 0; ; try++ {
		err := runTool(ctx, "umount", dir)
		if err == nil {
			break
		}
		if time.Duration(try)*umountRetry >= umountWait {
			return err
		}
		time.Sleep(umountRetry)
	}
	return runTool(ctx, "mount", "-o", "loop", dir+".img", dir)
}

// umountWait bounds the retries of an unmount kept busy by exited
// brokers, one every umountRetry.
const (
	umountWait  = 15 * time.Second
	umountRetry = 50 * time.Millisecond
)
