//go:build !amd64

package uring

import "unsafe"

const copyNTAvailable = false

func copyNTAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func copyNTBody(dst, src []byte) { copy(dst, src) }
