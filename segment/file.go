package segment

import (
	"io"
	"os"
)

// File is the I/O a segment needs from its backing file. Implementations use
// positional I/O only; the segment never seeks. WriteAt and ReadAt follow the
// io.WriterAt and io.ReaderAt contracts. Sync makes written data durable
// (fdatasync for a real file). Size reports the current file size (i_size).
// Fd returns the OS descriptor, or ^uintptr(0) for files without one.
type File interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
	Close() error
	Fd() uintptr
}

// osFiler is implemented by Files backed by an *os.File (for sendfile).
type osFiler interface {
	OSFile() *os.File
}

// preallocator is implemented by Files that can reserve blocks past i_size
// without changing it. handled is false if the platform or filesystem cannot.
type preallocator interface {
	Preallocate(size int64) (handled bool, err error)
}

// osFile is the File for a real file: pread/pwrite, fdatasync, fallocate.
type osFile struct {
	f *os.File
}

// NewOSFile wraps f as a File. The segment takes ownership of f.
func NewOSFile(f *os.File) File { return &osFile{f: f} }

func (o *osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o *osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o *osFile) Sync() error                              { return fdatasync(o.f) }
func (o *osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o *osFile) Close() error                             { return o.f.Close() }
func (o *osFile) Fd() uintptr                              { return o.f.Fd() }
func (o *osFile) OSFile() *os.File                         { return o.f }

func (o *osFile) Size() (int64, error) {
	st, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (o *osFile) Preallocate(size int64) (bool, error) { return fallocateKeepSize(o.f, size) }
