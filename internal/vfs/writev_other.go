//go:build !linux

package vfs

// WriteVAt writes bufs one after another at off, WriteAt per buffer.
func WriteVAt(f File, bufs [][]byte, off int64) (int, error) { return writeEachAt(f, bufs, off) }
