//go:build !linux

package segment

import (
	"errors"
	"os"
)

// DeviceOf: no device numbers here.
func DeviceOf(string) (uint64, error) { return 0, errors.ErrUnsupported }

// DeviceNumbers: no device numbers here.
func DeviceNumbers(uint64) (major, minor uint32) { return 0, 0 }

// FSType: unknown here.
func FSType(string) string { return "unknown" }

// DeviceName: unknown here.
func DeviceName(string) string { return "" }

// OpenDirectAllocated: no O_DIRECT here.
func OpenDirectAllocated(string, int64) (*os.File, error) { return nil, errors.ErrUnsupported }

// MaxWriteSegments: unknown here.
func MaxWriteSegments(string) int { return 0 }
