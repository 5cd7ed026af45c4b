package loadgen

import (
	"os"
	"syscall"
)

// fsSpace is the usable (f_bavail) and total bytes of dir's filesystem.
func fsSpace(dir string) (usable, total int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Bavail) * st.Bsize, int64(st.Blocks) * st.Bsize, nil
}

// reserve allocates n bytes of f's blocks without writing them.
func reserve(f *os.File, n int64) error {
	return syscall.Fallocate(int(f.Fd()), 0, 0, n)
}
