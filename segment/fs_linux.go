//go:build linux

package segment

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Facts about the filesystem and block device under a data directory, for
// the engine's choice of flush (engine/devflush.go) and the load
// generator's device counters: the system calls stay in this package.

// DeviceOf is the st_dev of path.
func DeviceOf(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return uint64(st.Dev), nil
}

// DeviceNumbers splits a device number into its major and minor.
func DeviceNumbers(dev uint64) (major, minor uint32) { return unix.Major(dev), unix.Minor(dev) }

// FSType names dir's filesystem: "ext4", "xfs", or its magic number in hex
// ("unknown" when statfs fails).
func FSType(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	switch uint32(st.Type) {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	}
	return fmt.Sprintf("0x%x", uint32(st.Type))
}

// blockDevDir is /sys/dev/block/<major>:<minor> for the device under path.
func blockDevDir(path string) (string, error) {
	dev, err := DeviceOf(path)
	if err != nil {
		return "", err
	}
	major, minor := DeviceNumbers(dev)
	return fmt.Sprintf("/sys/dev/block/%d:%d", major, minor), nil
}

// DeviceName is the kernel's name of the block device under path ("vda",
// "nvme0n1p2"), or "" when it has none.
func DeviceName(path string) string {
	dir, err := blockDevDir(path)
	if err != nil {
		return ""
	}
	link, err := os.Readlink(dir)
	if err != nil {
		return ""
	}
	return filepath.Base(link)
}

// OpenDirectAllocated opens an existing file for O_DIRECT writes and gives
// [0, size) blocks (fallocate mode 0: unwritten extents, i_size covering
// them): what a device probe writes into, as the engine's segments do.
func OpenDirectAllocated(path string, size int64) (*os.File, error) {
	f, err := openDirect(path, false)
	if err != nil {
		return nil, err
	}
	if err := fallocateSize(f, size); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// MaxWriteSegments is the most memory segments (pages, for a buffer whose
// pages are not physically contiguous) one request to the block device
// under dir may carry (queue/max_segments), or 0 when unknown. A larger
// write is split into two device requests.
func MaxWriteSegments(dir string) int {
	base, err := blockDevDir(dir)
	if err != nil {
		return 0
	}
	for _, p := range []string{base + "/queue/max_segments", base + "/../queue/max_segments"} { // a partition: its disk's queue
		if b, err := os.ReadFile(p); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}
