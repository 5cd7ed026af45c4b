//go:build !linux

package vfs

// Datasync is f.Sync off Linux.
func Datasync(f File) error { return f.Sync() }
