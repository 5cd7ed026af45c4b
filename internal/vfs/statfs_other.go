//go:build !linux

package vfs

import "errors"

// FreeSpace is not implemented off Linux.
func FreeSpace(string) (usable, total int64, err error) {
	return 0, 0, errors.New("vfs: statfs not supported on this platform")
}
