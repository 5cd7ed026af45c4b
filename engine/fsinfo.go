package engine

import "github.com/stratalog/strata/segment"

// The data directory's filesystem and device, as the flush choice needs
// them (package segment asks the kernel).

// sharedFlushFS reports whether dir's filesystem overwrites allocated,
// written blocks in place with O_DIRECT, without metadata of its own, and
// sends the device a cache flush from an fdatasync that has nothing to
// write: ext4 and XFS. Copy-on-write filesystems (btrfs, bcachefs, ZFS)
// allocate on every overwrite, so their segments keep their own fdatasync.
func sharedFlushFS(dir string) (string, bool) {
	fs := segment.FSType(dir)
	return fs, fs == "ext4" || fs == "xfs"
}
