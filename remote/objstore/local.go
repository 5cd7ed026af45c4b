package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/stratalog/strata/internal/vfs"
)

// The local store keeps each object in one file under its root, at the
// key's path (a key's "/" are directories). The file starts with a
// 64-byte header: magic, content size (big-endian uint64), the content's
// checksum, zeros to the end; the content follows. The magic's last byte
// says which checksum: 2, CRC-32C (big-endian, 4 bytes); 1, SHA-256 (32
// bytes: objects stored before CRC-32C, still read). One file per object makes
// a put's rename the single commit point: a crash leaves the old object,
// the new one, or a temporary file (".put-*.tmp", never a key since key
// components cannot start with ".") that Open removes.
const (
	localHeaderLen = 64
	localTmpPrefix = ".put-"
)

var (
	localMagic    = [8]byte{'S', 'T', 'R', 'O', 'B', 'J', 0, 1} // SHA-256
	localMagicCRC = [8]byte{'S', 'T', 'R', 'O', 'B', 'J', 0, 2} // CRC-32C
)

// putHeaderSum writes sum and its magic into header hdr.
func putHeaderSum(hdr []byte, sum Sum) {
	clear(hdr[16:48])
	if sum.alg() == SHA256 {
		copy(hdr[:8], localMagic[:])
		copy(hdr[16:48], sum.v[:])
		return
	}
	copy(hdr[:8], localMagicCRC[:])
	copy(hdr[16:20], sum.v[:4])
}

// Local is the local-directory store: the default remote store, so a
// single broker runs tiered storage with no other service. Objects are
// written atomically (temporary file, fsync, rename, directory fsync)
// through a vfs.FS.
type Local struct {
	fsys vfs.FS
	root string
}

var _ ObjectStore = (*Local)(nil)

// OpenLocal opens (creating it if needed) the store rooted at dir of fsys,
// removing temporary files a crash left behind.
func OpenLocal(fsys vfs.FS, dir string) (*Local, error) {
	if err := mkdirs(fsys, dir); err != nil {
		return nil, newErr("open", dir, Transient, err)
	}
	l := &Local{fsys: fsys, root: dir}
	if err := l.walk(dir, func(p string, name string, isDir bool) error {
		if !isDir && strings.HasPrefix(name, localTmpPrefix) {
			if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, newErr("open", dir, Transient, err)
	}
	return l, nil
}

func (l *Local) path(key string) string { return filepath.Join(l.root, filepath.FromSlash(key)) }

// fsErr classifies a file system error: a missing file is NotFound,
// anything else Transient (a full or failing disk may recover; the
// caller backs off).
func fsErr(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return newErr(op, key, NotFound, err)
	}
	return newErr(op, key, Transient, err)
}

// errKeyConflict is a put of a key that is a path prefix of another key
// ("a" beside "a/b"), or under a key ("a/b" beside "a"): S3 allows both,
// the local store's directories cannot.
var errKeyConflict = errors.New("the key is a path prefix of another key, or another key is a path prefix of it (the local store keeps keys as paths)")

// isPathConflict reports an error from a file where a directory is
// needed or the other way round.
func isPathConflict(err error) bool {
	return errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}

// mkdirs creates the directory dir with its missing parents and syncs
// each parent whose entries changed, so a synced object's directory chain
// (and the root's) is durable.
func mkdirs(fsys vfs.FS, dir string) error {
	if _, err := fsys.Stat(dir); err == nil {
		return nil
	}
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

func tmpName() string {
	var b [8]byte
	rand.Read(b[:])
	return localTmpPrefix + hex.EncodeToString(b[:]) + vfs.TmpSuffix
}

// Put implements ObjectStore.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64, sum Sum) (Info, error) {
	return l.put(ctx, key, r, size, sum, false)
}

// PutSum implements SumPutter: the header's sum is written after the
// content, before the file is synced and renamed into place.
func (l *Local) PutSum(ctx context.Context, key string, r io.Reader, size int64) (Info, error) {
	return l.put(ctx, key, r, size, Sum{}, true)
}

// copyBufBytes is the size of a put's copy buffer.
const copyBufBytes = 1 << 20

// copyBufs pools put's copy buffers. A tiered broker puts a segment's
// .log every time one of its partitions rolls (96 partitions of 4 MiB
// segments at 100 MB/s: ~25 a second), and a fresh 1 MiB buffer for each
// was 25 MiB/s of garbage the whole broker's collections paid for, plus
// its zeroing. Large allocations are page-aligned, so a pooled buffer
// still takes the O_DIRECT segment reader's reads straight into it
// (segment.SequentialReader).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufBytes); return &b }}

// copyBuffer returns a buffer for copying size bytes and its release:
// a pooled 1 MiB one, or, for less than half of that, a buffer of
// exactly the size (small objects: indexes, snapshots).
func copyBuffer(size int64) ([]byte, func()) {
	if size < copyBufBytes/2 {
		return make([]byte, max(size, 1)), func() {}
	}
	p := copyBufs.Get().(*[]byte)
	return *p, func() { copyBufs.Put(p) }
}

func (l *Local) put(ctx context.Context, key string, r io.Reader, size int64, sum Sum, anySum bool) (Info, error) {
	const op = "put"
	if err := ValidKey(key); err != nil {
		return Info{}, newErr(op, key, Permanent, err)
	}
	if size < 0 {
		return Info{}, newErr(op, key, Permanent, fmt.Errorf("negative size %d", size))
	}
	if err := ctxErr(op, key, ctx); err != nil {
		return Info{}, err
	}
	dst := l.path(key)
	dir := filepath.Dir(dst)
	if err := mkdirs(l.fsys, dir); err != nil {
		if isPathConflict(err) {
			return Info{}, newErr(op, key, Permanent, errKeyConflict)
		}
		return Info{}, fsErr(op, key, err)
	}
	tmp := filepath.Join(dir, tmpName())
	f, err := l.fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if isPathConflict(err) {
			return Info{}, newErr(op, key, Permanent, errKeyConflict)
		}
		return Info{}, fsErr(op, key, err)
	}
	fail := func(err error) (Info, error) {
		f.Close()
		l.fsys.Remove(tmp)
		return Info{}, err
	}
	var hdr [localHeaderLen]byte
	binary.BigEndian.PutUint64(hdr[8:16], uint64(size))
	putHeaderSum(hdr[:], sum)
	if _, err := f.Write(hdr[:]); err != nil {
		return fail(fsErr(op, key, err))
	}
	v := newVerifyReader(ctx, r, size, sum)
	v.anySum = anySum
	// 1 MiB reads (io.Copy would read 32 KiB at a time through the
	// file's ReadFrom), through a pooled buffer.
	buf, release := copyBuffer(size)
	_, err = io.CopyBuffer(struct{ io.Writer }{f}, v, buf)
	release()
	if err != nil {
		return fail(l.copyErr(ctx, op, key, v, err))
	}
	if err := v.check(); err != nil {
		return fail(l.copyErr(ctx, op, key, v, err))
	}
	if anySum {
		sum = v.content
		putHeaderSum(hdr[:], sum)
		if _, err := f.WriteAt(hdr[:], 0); err != nil {
			return fail(fsErr(op, key, err))
		}
	}
	if err := f.Sync(); err != nil {
		return fail(fsErr(op, key, err))
	}
	if err := f.Close(); err != nil {
		l.fsys.Remove(tmp)
		return Info{}, fsErr(op, key, err)
	}
	if err := ctxErr(op, key, ctx); err != nil {
		l.fsys.Remove(tmp)
		return Info{}, err
	}
	if st, err := l.fsys.Stat(dst); err == nil && st.IsDir() {
		l.fsys.Remove(tmp)
		return Info{}, newErr(op, key, Permanent, errKeyConflict)
	}
	if err := l.fsys.Rename(tmp, dst); err != nil {
		l.fsys.Remove(tmp)
		if isPathConflict(err) {
			return Info{}, newErr(op, key, Permanent, errKeyConflict)
		}
		return Info{}, fsErr(op, key, err)
	}
	if err := l.fsys.SyncDir(dir); err != nil {
		return Info{}, fsErr(op, key, err)
	}
	return Info{Key: key, Size: size, ETag: sum.String(), Sum: sum}, nil
}

// copyErr classifies an error of the copy into the temporary file.
func (l *Local) copyErr(ctx context.Context, op, key string, v *verifyReader, err error) error {
	switch {
	case errors.Is(err, ErrChecksumMismatch):
		return newErr(op, key, Permanent, err)
	case ctx.Err() != nil:
		return newErr(op, key, Transient, ctx.Err())
	}
	// The source's or the disk's error: both may go away.
	return newErr(op, key, Transient, err)
}

// open opens key's file and reads its header.
func (l *Local) open(op, key string) (vfs.File, Info, error) {
	if err := ValidKey(key); err != nil {
		return nil, Info{}, newErr(op, key, Permanent, err)
	}
	f, err := vfs.Open(l.fsys, l.path(key))
	if err != nil {
		if isPathConflict(err) { // a path through a file: no such object
			return nil, Info{}, newErr(op, key, NotFound, err)
		}
		return nil, Info{}, fsErr(op, key, err)
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close() // a directory of longer keys, not an object
		return nil, Info{}, newErr(op, key, NotFound, fmt.Errorf("%s is a directory", l.path(key)))
	}
	info, err := readHeader(f, key)
	if err != nil {
		f.Close()
		return nil, Info{}, newErr(op, key, Permanent, err)
	}
	return f, info, nil
}

func readHeader(f vfs.File, key string) (Info, error) {
	var hdr [localHeaderLen]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return Info{}, fmt.Errorf("reading the header: %w", err)
	}
	info := Info{Key: key, Size: int64(binary.BigEndian.Uint64(hdr[8:16]))}
	switch {
	case bytes.Equal(hdr[:8], localMagicCRC[:]):
		info.Sum.Alg = CRC32C
		copy(info.Sum.v[:4], hdr[16:20])
	case bytes.Equal(hdr[:8], localMagic[:]):
		info.Sum.Alg = SHA256
		copy(info.Sum.v[:], hdr[16:48])
	default:
		return Info{}, errors.New("not an object file (bad magic)")
	}
	info.ETag = info.Sum.String()
	st, err := f.Stat()
	if err != nil {
		return Info{}, err
	}
	if info.Size < 0 || st.Size() != localHeaderLen+info.Size {
		return Info{}, fmt.Errorf("%w: file holds %d bytes, header says %d", ErrChecksumMismatch, st.Size()-localHeaderLen, info.Size)
	}
	return info, nil
}

// Get implements ObjectStore.
func (l *Local) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	const op = "get"
	if err := ctxErr(op, key, ctx); err != nil {
		return nil, Info{}, err
	}
	f, info, err := l.open(op, key)
	if err != nil {
		return nil, Info{}, err
	}
	rc := &ctxReadCloser{ctx: ctx, r: io.NewSectionReader(f, localHeaderLen, info.Size), c: f, op: op, key: key}
	return newSumReadCloser(rc, info, op), info, nil
}

// GetRange implements ObjectStore.
func (l *Local) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	const op = "get"
	if err := ctxErr(op, key, ctx); err != nil {
		return nil, err
	}
	f, info, err := l.open(op, key)
	if err != nil {
		return nil, err
	}
	if off < 0 || off > info.Size {
		f.Close()
		return nil, newErr(op, key, Permanent, fmt.Errorf("%w: offset %d, size %d", ErrInvalidRange, off, info.Size))
	}
	if n < 0 || n > info.Size-off {
		n = info.Size - off
	}
	return &ctxReadCloser{ctx: ctx, r: io.NewSectionReader(f, localHeaderLen+off, n), c: f, op: op, key: key}, nil
}

// Head implements ObjectStore.
func (l *Local) Head(ctx context.Context, key string) (Info, error) {
	if err := ctxErr("head", key, ctx); err != nil {
		return Info{}, err
	}
	f, info, err := l.open("head", key)
	if err != nil {
		return Info{}, err
	}
	f.Close()
	return info, nil
}

// Delete implements ObjectStore.
func (l *Local) Delete(ctx context.Context, key string) error {
	const op = "delete"
	if err := ValidKey(key); err != nil {
		return newErr(op, key, Permanent, err)
	}
	if err := ctxErr(op, key, ctx); err != nil {
		return err
	}
	p := l.path(key)
	if st, err := l.fsys.Stat(p); err == nil && st.IsDir() {
		return nil // a directory of longer keys: no object under key
	}
	if err := l.fsys.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) || isPathConflict(err) {
			return nil
		}
		return fsErr(op, key, err)
	}
	if err := l.fsys.SyncDir(filepath.Dir(p)); err != nil {
		return fsErr(op, key, err)
	}
	return nil
}

// List implements ObjectStore. It walks the directory holding the
// prefix's complete components and sorts what it finds: the cost of a
// page is the number of keys under that directory.
func (l *Local) List(ctx context.Context, prefix, after string, max int) (Page, error) {
	const op = "list"
	if !validPrefix(prefix) {
		return Page{}, newErr(op, prefix, Permanent, ErrInvalidKey)
	}
	if max <= 0 || max > MaxListPage {
		max = MaxListPage
	}
	if err := ctxErr(op, prefix, ctx); err != nil {
		return Page{}, err
	}
	base := l.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		base = l.path(prefix[:i])
	}
	var keys []string
	err := l.walk(base, func(p, name string, isDir bool) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if isDir || strings.HasPrefix(name, ".") {
			return nil
		}
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		k := filepath.ToSlash(rel)
		if strings.HasPrefix(k, prefix) && k > after && ValidKey(k) == nil {
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if ctx.Err() != nil {
			return Page{}, newErr(op, prefix, Transient, ctx.Err())
		}
		return Page{}, fsErr(op, prefix, err)
	}
	sort.Strings(keys)
	var pg Page
	if len(keys) > max {
		keys = keys[:max]
		pg.Next = keys[max-1]
	}
	for _, k := range keys {
		f, info, err := l.open(op, k)
		if errors.Is(err, ErrNotFound) {
			continue // deleted since the walk
		}
		if err != nil {
			return Page{}, err
		}
		f.Close()
		pg.Objects = append(pg.Objects, info)
	}
	return pg, nil
}

// walk calls fn for every entry under dir, depth first.
func (l *Local) walk(dir string, fn func(p, name string, isDir bool) error) error {
	ents, err := l.fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if err := fn(p, e.Name(), e.IsDir()); err != nil {
			return err
		}
		if e.IsDir() {
			if err := l.walk(p, fn); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}
