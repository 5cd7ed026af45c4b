//go:build !amd64

package ntcopy

import "testing"

func paths() []bool                { return []bool{false} }
func setAVX(t *testing.T, on bool) {}
