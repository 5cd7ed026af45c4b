package uring

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

const copyNTAvailable = true

var copyNTAVX = cpu.X86.HasAVX

// copyNTBody copies len(src) bytes (a multiple of 128; dst 32-byte aligned)
// with non-temporal stores.
func copyNTBody(dst, src []byte) {
	if len(src) == 0 {
		return
	}
	if copyNTAVX {
		copyNTAVX256(unsafe.SliceData(dst), unsafe.SliceData(src), len(src))
	} else {
		copyNTSSE2(unsafe.SliceData(dst), unsafe.SliceData(src), len(src))
	}
}

//go:noescape
func copyNTAVX256(dst, src *byte, n int)

//go:noescape
func copyNTSSE2(dst, src *byte, n int)
