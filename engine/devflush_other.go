//go:build !linux

package engine

import (
	"errors"
)

func deviceOf(string) (uint64, error) { return 0, errors.ErrUnsupported }

// sharedFlushFS: no O_DIRECT segments here, so nothing to share.
func sharedFlushFS(string) (string, bool) { return "unknown", false }

// ext4NoJournal: no ext4 here.
func ext4NoJournal(string) bool { return false }

// maxWriteSegments: unknown here.
func maxWriteSegments(string) int { return 0 }
