//go:build !linux

package engine

import "errors"

// statfsDir is not implemented off Linux: the floor keeps its verdict
// (produce accepted) and FreeSpace reports the error.
func statfsDir(string) (usable, total int64, err error) {
	return 0, 0, errors.New("engine: statfs not supported on this platform")
}
