package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// fsIOCShutdown is EXT4_IOC_SHUTDOWN, the same number as XFS_IOC_GOINGDOWN
// (_IOR('X', 125, __u32)); fsShutdownNoLogFlush its flag that writes
// nothing back: neither dirty pages nor the metadata journal.
const (
	fsIOCShutdown        = 0x8004587d
	fsShutdownNoLogFlush = 2
)

// ShutdownFS shuts down the ext4 or XFS filesystem dir is on as a power
// loss would leave it (xfstests' "godown"): from now on every operation on
// it fails with EIO, and what was not yet on its device (dirty pages, the
// uncommitted metadata journal) never gets there. Mounting it again runs
// its recovery and shows what a restart after a power cut would find.
// Needs CAP_SYS_ADMIN.
func ShutdownFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.IoctlSetPointerInt(int(f.Fd()), fsIOCShutdown, fsShutdownNoLogFlush); err != nil {
		return &os.PathError{Op: "shutdown", Path: dir, Err: err}
	}
	return nil
}
