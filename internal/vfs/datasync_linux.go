package vfs

import (
	"os"
	"syscall"
)

// Datasync makes f's data durable with fdatasync(2) when f is an OS file
// (no inode timestamps written: on a file whose blocks are already
// allocated and written, only the data and a device cache flush), and
// with f.Sync otherwise.
func Datasync(f File) error {
	if of, ok := f.(*os.File); ok {
		if err := syscall.Fdatasync(int(of.Fd())); err != nil {
			return &os.PathError{Op: "fdatasync", Path: of.Name(), Err: err}
		}
		return nil
	}
	return f.Sync()
}

// OpenDirect opens name for O_DIRECT reads and writes (offsets, lengths and
// buffers aligned to the device's logical block; 4 KiB is always enough).
func OpenDirect(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDWR|syscall.O_DIRECT, 0)
}
