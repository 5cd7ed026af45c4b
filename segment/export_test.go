package segment

// SetRecoverChunkBytes lowers Recover's read size so small test files cross
// chunk boundaries; it returns a function restoring the default.
func SetRecoverChunkBytes(n int64) (restore func()) {
	old := recoverChunkBytes
	recoverChunkBytes = n
	return func() { recoverChunkBytes = old }
}
