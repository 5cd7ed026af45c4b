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

// WriteFileAtomicFS replaces path with data: write the temporary file
// (TmpPath), fsync it, rename it over path, fsync the directory. After a
// crash path holds the old or the new contents, never a mix, and once it
// returns nil the new contents (rules in the package doc). On an error
// the temporary file is removed (best effort) and path holds the old or,
// when only the directory sync failed, possibly the new contents.
func WriteFileAtomicFS(fsys FS, path string, data []byte) error {
	tmp := TmpPath(path)
	if err := WriteFileSyncFS(fsys, tmp, data); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		fsys.Remove(tmp)
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// WriteFileSyncFS writes data to path (created, or truncated) and fsyncs
// it; on a failure the file is removed. Its directory entry is not
// synced.
func WriteFileSyncFS(fsys FS, path string, data []byte) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
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
		fsys.Remove(path)
	}
	return werr
}

// WriteFileAtomic is WriteFileAtomicFS on the OS file system.
func WriteFileAtomic(path string, data []byte) error { return WriteFileAtomicFS(OS, path, data) }

// ReplaceFileNoSyncFS replaces path with data through the temporary file
// and a rename, without any sync: after a crash path may be missing (if
// it did not exist), hold the old contents, the new, or (the rename
// durable before the data) an empty or torn file, so its reader must
// check what it reads (a CRC).
func ReplaceFileNoSyncFS(fsys FS, path string, data []byte) error {
	tmp := TmpPath(path)
	if err := WriteFile(fsys, tmp, data, 0o644); err != nil {
		fsys.Remove(tmp)
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		fsys.Remove(tmp)
		return err
	}
	return nil
}

// ReplaceFileNoSync is ReplaceFileNoSyncFS on the OS file system.
func ReplaceFileNoSync(path string, data []byte) error { return ReplaceFileNoSyncFS(OS, path, data) }

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

// SyncDir fsyncs a directory of the OS file system so entries created,
// renamed or removed in it are durable (a no-op where the system refuses
// directory syncs).
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

// SyncPathFS fsyncs the file path.
func SyncPathFS(fsys FS, path string) error {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncPath is SyncPathFS on the OS file system.
func SyncPath(path string) error { return SyncPathFS(OS, path) }
