//go:build !linux

package vfs

// dirSyncSupported is false where fsync on a directory may be refused.
const dirSyncSupported = false
