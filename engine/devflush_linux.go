package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// deviceOf is the st_dev of path.
func deviceOf(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return uint64(st.Dev), nil
}

// sharedFlushFS reports whether dir's filesystem overwrites allocated,
// written blocks in place with O_DIRECT, without metadata of its own, and
// sends the device a cache flush from an fdatasync that has nothing to
// write: ext4 and XFS. Copy-on-write filesystems (btrfs, bcachefs, ZFS)
// allocate on every overwrite, so their segments keep their own fdatasync.
func sharedFlushFS(dir string) (string, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown", false
	}
	switch uint32(st.Type) {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4", true
	case unix.XFS_SUPER_MAGIC:
		return "xfs", true
	}
	return fmt.Sprintf("0x%x", uint32(st.Type)), false
}

// ext4NoJournal reports whether dir is on an ext4 filesystem mounted
// without a journal (/sys/fs/ext4/<device>/journal_task is "<none>").
func ext4NoJournal(dir string) bool {
	if fs, _ := sharedFlushFS(dir); fs != "ext4" {
		return false
	}
	dev, err := deviceOf(dir)
	if err != nil {
		return false
	}
	link, err := os.Readlink(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(dev), unix.Minor(dev)))
	if err != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/sys/fs/ext4", filepath.Base(link), "journal_task"))
	return err == nil && strings.TrimSpace(string(b)) == "<none>"
}

// maxWriteSegments is the most memory segments (pages, for a buffer whose
// pages are not physically contiguous) one request to the block device
// under dir may carry (queue/max_segments), or 0 when unknown. A larger
// write is split into two device requests.
func maxWriteSegments(dir string) int {
	dev, err := deviceOf(dir)
	if err != nil {
		return 0
	}
	base := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(dev), unix.Minor(dev))
	for _, p := range []string{base + "/queue/max_segments", base + "/../queue/max_segments"} { // a partition: its disk's queue
		if b, err := os.ReadFile(p); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}
