//go:build !linux

package uring

// backends: io_uring exists only on Linux; elsewhere the suite runs on the
// pwrite backend alone.
var backends = []Backend{BackendPwrite}
