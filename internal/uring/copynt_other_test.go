//go:build !amd64

package uring

import "testing"

func copyNTPaths() []bool                { return []bool{false} }
func setCopyNTAVX(t *testing.T, on bool) {}
