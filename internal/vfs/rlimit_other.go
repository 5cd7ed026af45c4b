//go:build !unix

package vfs

import "errors"

// OpenFileLimit is not implemented off Unix.
func OpenFileLimit() (uint64, error) {
	return 0, errors.New("vfs: RLIMIT_NOFILE not supported on this platform")
}
