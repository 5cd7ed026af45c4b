package engine

import (
	"fmt"
	"os"

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
