package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// FS is a file system: what the engine and the coordinators do with the
// files they own besides segment data. Paths are the platform's (the
// engine joins them with path/filepath). Errors are the os package's: a
// *fs.PathError (*os.LinkError for Rename) wrapping a syscall.Errno, so
// errors.Is(err, fs.ErrNotExist) and friends work on every
// implementation. Implementations are safe for concurrent use.
type FS interface {
	// OpenFile opens name as os.OpenFile does: flag is O_RDONLY, O_WRONLY
	// or O_RDWR, or'ed with O_CREATE, O_EXCL, O_TRUNC and O_APPEND; perm
	// is used when the file is created. A directory opens read-only (its
	// File's Sync is a directory sync).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes name and, for a directory, everything under it,
	// as os.RemoveAll: nil when name does not exist. Durable once the
	// parent directory is synced (until then a crash may bring back the
	// directory with its durable entries).
	RemoveAll(name string) error
	// Rename renames oldpath to newpath, replacing a file (or an empty
	// directory, when oldpath is one) at newpath.
	Rename(oldpath, newpath string) error
	// Truncate changes the size of the file name, zero-filling a growth.
	Truncate(name string, size int64) error
	// Mkdir creates the directory name; MkdirAll creates it and any
	// missing parents (nil if it exists).
	Mkdir(name string, perm fs.FileMode) error
	MkdirAll(name string, perm fs.FileMode) error
	// ReadDir lists the directory name, sorted by file name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Stat describes the file or directory name.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the directory's entries durable: every file created,
	// renamed or removed in it before the call survives a crash.
	SyncDir(name string) error
}

// File is an open file of an FS: *os.File's methods that the owners of
// small files use. Read and Write move the file offset; ReadAt and
// WriteAt do not (WriteAt fails on a file opened with O_APPEND, as
// *os.File's does).
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Name is the name the file was opened with.
	Name() string
	Stat() (fs.FileInfo, error)
	Truncate(size int64) error
	// Sync is fsync: the file's data and size are durable when it
	// returns nil (its directory entry needs a directory sync).
	Sync() error
}

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return f, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                  { return os.RemoveAll(name) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) Truncate(name string, size int64) error       { return os.Truncate(name, size) }
func (osFS) Mkdir(name string, perm fs.FileMode) error    { return os.Mkdir(name, perm) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)        { return os.Stat(name) }
func (osFS) SyncDir(name string) error                    { return SyncDir(name) }

// Open opens name read-only.
func Open(fsys FS, name string) (File, error) { return fsys.OpenFile(name, os.O_RDONLY, 0) }

// ErrTooLarge is returned (wrapped) by ReadFileLimit for a file past its
// limit.
var ErrTooLarge = errors.New("vfs: file larger than the limit")

// ReadFile reads the whole file name.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := Open(fsys, name)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return b, err
}

// ReadFileLimit reads the file name, failing with ErrTooLarge (wrapped,
// naming the file) when it holds more than maxBytes: a file read back
// from disk is bounded before it is trusted with memory.
func ReadFileLimit(fsys FS, name string, maxBytes int64) ([]byte, error) {
	f, err := Open(fsys, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > maxBytes {
		return nil, fmt.Errorf("%w: %s holds more than %d bytes", ErrTooLarge, name, maxBytes)
	}
	return b, nil
}

// WriteFile creates or truncates name and writes data, without a sync.
func WriteFile(fsys FS, name string, data []byte, perm fs.FileMode) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeEachAt is WriteVAt's portable form.
func writeEachAt(f File, bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := f.WriteAt(b, off)
		total += n
		if err != nil {
			return total, err
		}
		off += int64(n)
	}
	return total, nil
}
