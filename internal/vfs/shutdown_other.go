//go:build !linux

package vfs

import "errors"

// ShutdownFS is Linux-only (EXT4_IOC_SHUTDOWN).
func ShutdownFS(string) error { return errors.New("vfs: filesystem shutdown needs Linux") }
