package vfs

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
)

// TmpSuffix ends the temporary file WriteFileAtomic writes first (a crash
// can leave one behind: owners delete such strays when they open).
const TmpSuffix = ".tmp"

// MaxFileNameLen is the longest file name (in bytes) the filesystems we
// run on accept.
const MaxFileNameLen = 255

// WriteFileAtomic replaces path with data: write the temporary file
// (TmpPath), fsync it, rename it over path, fsync the directory. After a
// crash path holds the old or the new contents, never a mix.
func WriteFileAtomic(path string, data []byte) error {
	tmp := TmpPath(path)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(tmp)
		return werr
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// ReplaceFileNoSync replaces path with data through the temporary file and
// a rename, without any fsync: after a crash path holds the old contents,
// the new, or (the rename durable before the data) a torn or empty file,
// so its reader must check what it reads (a CRC).
func ReplaceFileNoSync(path string, data []byte) error {
	tmp := TmpPath(path)
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// TmpPath is path+TmpSuffix, or a hashed hidden name in the same
// directory when that would pass MaxFileNameLen (a 249-character topic's
// file).
func TmpPath(path string) string {
	dir, base := filepath.Split(path)
	if len(base)+len(TmpSuffix) <= MaxFileNameLen {
		return path + TmpSuffix
	}
	sum := sha256.Sum256([]byte(base))
	return filepath.Join(dir, "."+hex.EncodeToString(sum[:16])+TmpSuffix)
}

// SyncDir fsyncs a directory so entries created, renamed or removed in it
// are durable (a no-op where the system refuses directory syncs).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !dirSyncSupported {
		return nil
	}
	return err
}

// SyncPath fsyncs a file by path.
func SyncPath(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
