//go:build unix

package vfs

import "syscall"

// OpenFileLimit returns the process's soft limit on open descriptors
// (RLIMIT_NOFILE), which bounds, among others, the size of an io_uring
// fixed-file table.
func OpenFileLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return rl.Cur, nil
}
