package ntcopy

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

const available = true

var useAVX = cpu.X86.HasAVX

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// copyBody copies len(src) bytes (a multiple of 128; dst 32-byte aligned)
// with non-temporal stores.
func copyBody(dst, src []byte) {
	if len(src) == 0 {
		return
	}
	if useAVX {
		copyAVX(unsafe.SliceData(dst), unsafe.SliceData(src), len(src))
	} else {
		copySSE2(unsafe.SliceData(dst), unsafe.SliceData(src), len(src))
	}
}

//go:noescape
func copyAVX(dst, src *byte, n int)

//go:noescape
func copySSE2(dst, src *byte, n int)
