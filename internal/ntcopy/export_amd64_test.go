package ntcopy

import "testing"

// paths are the body copies to test: AVX where the CPU has it, and SSE2.
func paths() []bool {
	if useAVX {
		return []bool{true, false}
	}
	return []bool{false}
}

func setAVX(t *testing.T, on bool) {
	old := useAVX
	useAVX = on
	t.Cleanup(func() { useAVX = old })
}
