//go:build !amd64

package ntcopy

import "unsafe"

const available = false

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func copyBody(dst, src []byte) { copy(dst, src) }
