//go:build !amd64

package uring

const copyNTAvailable = false

func copyNTBody(dst, src []byte) { copy(dst, src) }
