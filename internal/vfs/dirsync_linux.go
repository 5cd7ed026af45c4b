//go:build linux

package vfs

// dirSyncSupported: fsync on a directory is meaningful and must succeed.
const dirSyncSupported = true
