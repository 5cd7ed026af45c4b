//go:build !linux

package vfs

import "os"

// Datasync is f.Sync off Linux.
func Datasync(f File) error { return f.Sync() }

// OpenDirect opens name for reads and writes (no O_DIRECT off Linux).
func OpenDirect(name string) (*os.File, error) { return os.OpenFile(name, os.O_RDWR, 0) }
