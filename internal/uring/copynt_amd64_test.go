package uring

import "testing"

// copyNTPaths are the body copies to test: AVX where the CPU has it, and SSE2.
func copyNTPaths() []bool {
	if copyNTAVX {
		return []bool{true, false}
	}
	return []bool{false}
}

func setCopyNTAVX(t *testing.T, on bool) {
	old := copyNTAVX
	copyNTAVX = on
	t.Cleanup(func() { copyNTAVX = old })
}
