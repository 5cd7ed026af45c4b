//go:build unix

package vfs

import (
	"syscall"
	"testing"
)

func TestOpenFileLimitIsTheSoftLimit(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	got, err := OpenFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	if got != rl.Cur {
		t.Fatalf("OpenFileLimit = %d, RLIMIT_NOFILE soft limit %d", got, rl.Cur)
	}
}
