package vfs

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrCrashed is the error (wrapped) of every call on a MemFS, and on its
// open files, after its power was lost (PowerOffAfter) or it was crashed
// (Crash): the file system the program restarts with is Crash's result.
var ErrCrashed = errors.New("vfs: power lost")

// errAppendWriteAt is *os.File's answer to WriteAt on an O_APPEND file.
var errAppendWriteAt = errors.New("os: invalid use of WriteAt on file opened with O_APPEND")

// MemFS is a file system in memory that remembers what was made durable
// and can lose the rest (Crash), lose power in the middle of a sequence of
// operations (PowerOffAfter) and fail chosen operations (Inject). Its
// semantics are in the package doc. Safe for concurrent use: one mutex
// covers the whole tree.
type MemFS struct {
	mu      sync.Mutex
	root    *memNode
	seq     uint64 // sequence number of the last directory change
	nextIno uint64
	ops     int64 // operations counted so far (faults, PowerOffAfter)
	offAt   int64 // power is lost after operation offAt; 0 = never
	down    bool  // power lost: every call fails with ErrCrashed
	faults  []*fault

	// Device cache (SetDeviceCache): overwrites inside a file's durable
	// size wait in a volatile cache shared by every file until a Sync of
	// any file; devDirty holds the files with such writes not yet flushed.
	devCache bool
	devDirty map[*memNode]struct{}
	// Where PowerOffAfter's cut fell: the first operation refused.
	offOp   Op
	offPath string
}

// memNode is an inode: a regular file or a directory.
type memNode struct {
	ino  uint64
	mode fs.FileMode // permission bits, | fs.ModeDir for a directory

	// A regular file: data is what reads see (the page cache); a crash
	// keeps synced plus, at most, a prefix of pending.
	data    []byte
	synced  []byte
	pending []dataOp

	// A directory: entries is what lookups see; a crash keeps durable
	// plus, at most, the changes of dpending older than its cut.
	entries  map[string]*memNode
	durable  map[string]*memNode
	dpending []metaOp
}

// dataOp is one unsynced write (data != nil or empty write) or truncate.
// With the device cache, dev marks a write that overwrote bytes inside the
// file's durable size (no metadata change) and flushed one that a device
// cache flush (any file's Sync) made durable since.
type dataOp struct {
	off     int64
	data    []byte
	trunc   bool
	size    int64
	dev     bool
	flushed bool
}

// metaOp is one unsynced directory change: name now points at node (nil:
// removed). seq orders changes across directories; the two halves of a
// rename share one.
type metaOp struct {
	seq  uint64
	name string
	node *memNode
}

func (n *memNode) isDir() bool { return n.mode.IsDir() }

// SetDeviceCache turns the device cache model on (or off) for m and the
// file systems its Crash returns: the disk under m has a volatile write
// cache shared by all its files, as the engine's shared device flushes
// rely on (the journal's fdatasync making completed overwrites of
// zero-filled segments durable). A write that lies wholly inside the
// file's durable size (the size as of its last Sync, and below every
// truncation made since) is an overwrite of blocks already written and
// made durable: it needs no metadata, so it becomes durable once a Sync of
// ANY file (the fdatasync that flushes the device's cache) returns nil
// after it. Every other change (a write that extends the file, a
// truncation, directory changes) still needs its own file's or directory's
// sync. A directory sync is not taken as a device flush (a file system may
// or may not flush for it; the model assumes the worse). At a crash, and
// unlike the default model's prefix, each unsynced write and truncation
// of a file is kept or lost on its own (KeepUnsynced), and with Tear a
// lost write may leave any of its 512-byte sectors behind (a device
// writes sectors atomically, a multi-sector write in any order). Call it
// before the first operation whose durability it should govern.
func (m *MemFS) SetDeviceCache(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.devCache = on
}

// PowerLostAt reports the operation and path PowerOffAfter's cut fell on
// (the first one refused), and false when the power has not gone off that
// way.
func (m *MemFS) PowerLostAt() (Op, string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.offOp, m.offPath, m.offOp != 0
}

// flushDevice is a device cache flush: every overwrite held in the cache
// is durable from now on. A file's leading durable changes are folded into
// its synced contents. Caller holds mu.
func (m *MemFS) flushDevice() {
	for n := range m.devDirty {
		for i := range n.pending {
			if n.pending[i].dev {
				n.pending[i].flushed = true
			}
		}
		k := 0
		for k < len(n.pending) && n.pending[k].flushed {
			n.synced = applyData(n.synced, n.pending[k])
			k++
		}
		n.pending = slices.Delete(n.pending, 0, k)
	}
	clear(m.devDirty)
}

// NewMemFS returns an empty file system: only its root directory, "/",
// exists. Relative paths are resolved from the root.
func NewMemFS() *MemFS {
	m := &MemFS{}
	m.root = m.newDir(0o755)
	return m
}

func (m *MemFS) newDir(perm fs.FileMode) *memNode {
	m.nextIno++
	return &memNode{ino: m.nextIno, mode: perm.Perm() | fs.ModeDir,
		entries: map[string]*memNode{}, durable: map[string]*memNode{}}
}

func (m *MemFS) newFile(perm fs.FileMode) *memNode {
	m.nextIno++
	return &memNode{ino: m.nextIno, mode: perm.Perm()}
}

// PowerOffAfter lets the next n operations run and makes every later one
// fail with ErrCrashed, changing nothing: the power was lost there. Crash
// then gives the file system a restart would find.
func (m *MemFS) PowerOffAfter(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.offAt = m.ops + max(n, 0)
	if n <= 0 {
		m.down = true
	}
}

// PoweredOff reports whether the power was lost (PowerOffAfter, Crash).
func (m *MemFS) PoweredOff() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.down
}

// Ops returns how many operations were attempted so far (failed ones
// included, those after the power was lost excluded).
func (m *MemFS) Ops() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops
}

// Inject adds a fault; it counts matching operations from now on.
func (m *MemFS) Inject(f Fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults = append(m.faults, &fault{Fault: f})
}

// ClearFaults removes every injected fault.
func (m *MemFS) ClearFaults() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults = nil
}

// begin counts one operation and says how it fails: ErrCrashed once the
// power is lost, else the error of the first matching fault (then
// injected). Caller holds mu.
func (m *MemFS) begin(op Op, paths ...string) (injected bool, err error) {
	if m.down {
		return false, ErrCrashed
	}
	m.ops++
	if m.offAt > 0 && m.ops > m.offAt {
		m.ops--
		m.down = true
		m.offOp = op
		if len(paths) > 0 {
			m.offPath = paths[0]
		}
		return false, ErrCrashed
	}
	for _, f := range m.faults {
		if !f.matches(op, paths) {
			continue
		}
		f.seen++
		if f.Nth == 0 || f.seen == f.Nth {
			return true, f.Err
		}
	}
	return false, nil
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// split turns a path into its components from the root.
func split(name string) []string {
	c := filepath.ToSlash(filepath.Clean("/" + name))
	if c == "/" {
		return nil
	}
	return strings.Split(c[1:], "/")
}

// walk resolves components to a node. Caller holds mu.
func (m *MemFS) walk(parts []string) (*memNode, error) {
	n := m.root
	for _, p := range parts {
		if !n.isDir() {
			return nil, syscall.ENOTDIR
		}
		c := n.entries[p]
		if c == nil {
			return nil, syscall.ENOENT
		}
		n = c
	}
	return n, nil
}

// parent resolves the directory holding name and name's last component
// ("" for the root). Caller holds mu.
func (m *MemFS) parent(name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", nil
	}
	d, err := m.walk(parts[:len(parts)-1])
	if err != nil {
		return nil, "", err
	}
	if !d.isDir() {
		return nil, "", syscall.ENOTDIR
	}
	return d, parts[len(parts)-1], nil
}

// lookup resolves name. Caller holds mu.
func (m *MemFS) lookup(name string) (*memNode, error) { return m.walk(split(name)) }

// setEntry changes one entry of d as part of change seq. Caller holds mu.
func setEntry(d *memNode, name string, n *memNode, seq uint64) {
	if n == nil {
		delete(d.entries, name)
	} else {
		d.entries[name] = n
	}
	d.dpending = append(d.dpending, metaOp{seq: seq, name: name, node: n})
}

func applyMeta(ents map[string]*memNode, ops []metaOp) {
	for _, op := range ops {
		if op.node == nil {
			delete(ents, op.name)
		} else {
			ents[op.name] = op.node
		}
	}
}

func writeAt(dst, p []byte, off int64) []byte {
	if end := off + int64(len(p)); end > int64(len(dst)) {
		dst = resize(dst, end)
	}
	copy(dst[off:], p)
	return dst
}

func resize(dst []byte, size int64) []byte {
	if size <= int64(len(dst)) {
		return dst[:size]
	}
	return append(dst, make([]byte, size-int64(len(dst)))...)
}

func applyData(dst []byte, op dataOp) []byte {
	if op.trunc {
		return resize(dst, op.size)
	}
	return writeAt(dst, op.data, op.off)
}

// write records a write to n; with the device cache, one inside n's
// durable size waits in the cache for any file's Sync. Caller holds mu.
func (m *MemFS) write(n *memNode, p []byte, off int64) {
	n.data = writeAt(n.data, p, off)
	op := dataOp{off: off, data: slices.Clone(p)}
	if m.devCache && len(p) > 0 && off+int64(len(p)) <= n.durableFloor() {
		op.dev = true
		if m.devDirty == nil {
			m.devDirty = map[*memNode]struct{}{}
		}
		m.devDirty[n] = struct{}{}
	}
	n.pending = append(n.pending, op)
}

// durableFloor is the end of n's bytes whose blocks are durable with
// their metadata: its synced size, lowered by every truncation since.
// Caller holds mu.
func (n *memNode) durableFloor() int64 {
	floor := int64(len(n.synced))
	for _, op := range n.pending {
		if op.trunc {
			floor = min(floor, op.size)
		}
	}
	return floor
}

// truncate records a size change of n. Caller holds mu.
func (n *memNode) truncate(size int64) {
	n.data = resize(n.data, size)
	n.pending = append(n.pending, dataOp{trunc: true, size: size})
}

// sync makes n's pending changes durable. A failed sync of a file drops
// them instead (Linux marks the pages clean: the data stays readable and
// is lost at the crash); a failed sync of a directory leaves them
// pending. Caller holds mu.
func (n *memNode) sync(failed bool) {
	if n.isDir() {
		if !failed {
			applyMeta(n.durable, n.dpending)
			n.dpending = nil
		}
		return
	}
	s := slices.Clone(n.synced)
	for _, op := range n.pending {
		if !failed || op.flushed { // a failed sync loses only what no flush made durable
			s = applyData(s, op)
		}
	}
	n.synced = s
	n.pending = nil
}

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.begin(OpOpen, name); err != nil {
		return nil, pathErr("open", name, err)
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	d, base, err := m.parent(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	var n *memNode
	if d == nil {
		n = m.root
	} else {
		n = d.entries[base]
	}
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, syscall.ENOENT)
	case n == nil:
		n = m.newFile(perm)
		m.seq++
		setEntry(d, base, n, m.seq)
	case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, syscall.EEXIST)
	case n.isDir() && (acc != os.O_RDONLY || flag&os.O_TRUNC != 0):
		return nil, pathErr("open", name, syscall.EISDIR)
	case flag&os.O_TRUNC != 0 && acc != os.O_RDONLY:
		n.truncate(0)
	}
	return &memFile{fs: m, node: n, name: name, flag: flag}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.begin(OpRemove, name); err != nil {
		return pathErr("remove", name, err)
	}
	d, base, err := m.parent(name)
	switch {
	case err != nil:
		return pathErr("remove", name, err)
	case d == nil:
		return pathErr("remove", name, syscall.EBUSY)
	}
	n := d.entries[base]
	switch {
	case n == nil:
		return pathErr("remove", name, syscall.ENOENT)
	case n.isDir() && len(n.entries) > 0:
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	m.seq++
	setEntry(d, base, nil, m.seq)
	return nil
}

// RemoveAll implements FS (one operation for faults): it unlinks name
// from its parent, so a crash before the parent's sync brings the
// directory back with the entries that were durable in it.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.begin(OpRemove, name); err != nil {
		return pathErr("unlinkat", name, err)
	}
	d, base, err := m.parent(name)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return nil
	case err != nil:
		return pathErr("unlinkat", name, err)
	case d == nil:
		return pathErr("unlinkat", name, syscall.EBUSY)
	case d.entries[base] == nil:
		return nil
	}
	m.seq++
	setEntry(d, base, nil, m.seq)
	return nil
}

// Rename implements FS. As os.Rename, an existing directory at newpath is
// EEXIST.
func (m *MemFS) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	lerr := func(err error) error { return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err} }
	if _, err := m.begin(OpRename, oldpath, newpath); err != nil {
		return lerr(err)
	}
	od, obase, err := m.parent(oldpath)
	if err != nil {
		return lerr(err)
	}
	if od == nil {
		return lerr(syscall.EBUSY)
	}
	n := od.entries[obase]
	if n == nil {
		return lerr(syscall.ENOENT)
	}
	nd, nbase, err := m.parent(newpath)
	if err != nil {
		return lerr(err)
	}
	if nd == nil {
		return lerr(syscall.EEXIST) // the root is a directory
	}
	target := nd.entries[nbase]
	switch {
	case target == n:
		return nil // the same file: POSIX does nothing
	case target != nil && target.isDir():
		return lerr(syscall.EEXIST)
	case target != nil && n.isDir():
		return lerr(syscall.ENOTDIR)
	}
	if n.isDir() {
		op, np := split(oldpath), split(newpath)
		if len(np) > len(op) && slices.Equal(np[:len(op)], op) {
			return lerr(syscall.EINVAL) // into its own subtree
		}
	}
	m.seq++
	setEntry(od, obase, nil, m.seq)
	setEntry(nd, nbase, n, m.seq)
	return nil
}

// Truncate implements FS.
func (m *MemFS) Truncate(name string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.begin(OpTruncate, name); err != nil {
		return pathErr("truncate", name, err)
	}
	n, err := m.lookup(name)
	switch {
	case err != nil:
		return pathErr("truncate", name, err)
	case n.isDir():
		return pathErr("truncate", name, syscall.EISDIR)
	case size < 0:
		return pathErr("truncate", name, syscall.EINVAL)
	}
	n.truncate(size)
	return nil
}

// Mkdir implements FS.
func (m *MemFS) Mkdir(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.begin(OpMkdir, name); err != nil {
		return pathErr("mkdir", name, err)
	}
	return m.mkdir(name, perm)
}

// mkdir creates one directory. Caller holds mu.
func (m *MemFS) mkdir(name string, perm fs.FileMode) error {
	d, base, err := m.parent(name)
	switch {
	case err != nil:
		return pathErr("mkdir", name, err)
	case d == nil || d.entries[base] != nil:
		return pathErr("mkdir", name, syscall.EEXIST)
	}
	m.seq++
	setEntry(d, base, m.newDir(perm), m.seq)
	return nil
}

// MkdirAll implements FS (one operation for faults).
func (m *MemFS) MkdirAll(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.begin(OpMkdir, name); err != nil {
		return pathErr("mkdir", name, err)
	}
	parts := split(name)
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		n, err := m.lookup(p)
		switch {
		case err == nil && n.isDir():
			continue
		case err == nil:
			return pathErr("mkdir", p, syscall.ENOTDIR)
		case !errors.Is(err, syscall.ENOENT):
			return pathErr("mkdir", p, err)
		}
		if err := m.mkdir(p, perm); err != nil {
			return err
		}
	}
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.begin(OpReadDir, name); err != nil {
		return nil, pathErr("open", name, err)
	}
	n, err := m.lookup(name)
	switch {
	case err != nil:
		return nil, pathErr("open", name, err)
	case !n.isDir():
		return nil, pathErr("readdirent", name, syscall.ENOTDIR)
	}
	names := make([]string, 0, len(n.entries))
	for k := range n.entries {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]fs.DirEntry, len(names))
	for i, k := range names {
		out[i] = fs.FileInfoToDirEntry(infoOf(k, n.entries[k]))
	}
	return out, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.begin(OpStat, name); err != nil {
		return nil, pathErr("stat", name, err)
	}
	n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	return infoOf(filepath.Base(name), n), nil
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	injected, err := m.begin(OpSyncDir, name)
	if err != nil && !injected {
		return pathErr("sync", name, err)
	}
	n, lerr := m.lookup(name)
	switch {
	case lerr != nil:
		return pathErr("open", name, lerr)
	case !n.isDir():
		return pathErr("sync", name, syscall.ENOTDIR)
	}
	n.sync(injected)
	if err != nil {
		return pathErr("sync", name, err)
	}
	return nil
}

// memInfo is an fs.FileInfo of a MemFS node. ModTime is the zero time: a
// MemFS keeps no clock.
type memInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func infoOf(name string, n *memNode) memInfo {
	return memInfo{name: name, size: int64(len(n.data)), mode: n.mode}
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

// memFile is an open file of a MemFS. It keeps its inode: a file removed
// or renamed while open stays readable and writable through it.
type memFile struct {
	fs     *MemFS
	node   *memNode
	name   string
	flag   int
	pos    int64
	closed bool
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) readable() bool { return f.flag&(os.O_WRONLY|os.O_RDWR) != os.O_WRONLY }
func (f *memFile) writable() bool { return f.flag&(os.O_WRONLY|os.O_RDWR) != os.O_RDONLY }

// start checks the handle and counts an operation. Caller holds fs.mu.
func (f *memFile) start(op Op, name string) (injected bool, err error) {
	if f.closed {
		return false, pathErr(name, f.name, os.ErrClosed)
	}
	injected, err = f.fs.begin(op, f.name)
	if err != nil {
		return injected, pathErr(name, f.name, err)
	}
	return false, nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	n, err := f.readAt(p, f.pos, "read")
	f.pos += int64(n)
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off < 0 {
		return 0, pathErr("readat", f.name, errors.New("negative offset"))
	}
	n, err := f.readAt(p, off, "read")
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// readAt reads at off; io.EOF only when nothing is left. Caller holds fs.mu.
func (f *memFile) readAt(p []byte, off int64, op string) (int, error) {
	if _, err := f.start(OpRead, op); err != nil {
		return 0, err
	}
	switch {
	case f.node.isDir():
		return 0, pathErr(op, f.name, syscall.EISDIR)
	case !f.readable():
		return 0, pathErr(op, f.name, syscall.EBADF)
	case off >= int64(len(f.node.data)):
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	return copy(p, f.node.data[off:]), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if _, err := f.start(OpWrite, "write"); err != nil {
		return 0, err
	}
	if !f.writable() {
		return 0, pathErr("write", f.name, syscall.EBADF)
	}
	if f.flag&os.O_APPEND != 0 {
		f.pos = int64(len(f.node.data))
	}
	f.fs.write(f.node, p, f.pos)
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.flag&os.O_APPEND != 0 {
		return 0, errAppendWriteAt
	}
	if _, err := f.start(OpWrite, "write"); err != nil {
		return 0, err
	}
	switch {
	case !f.writable():
		return 0, pathErr("write", f.name, syscall.EBADF)
	case off < 0:
		return 0, pathErr("writeat", f.name, errors.New("negative offset"))
	}
	f.fs.write(f.node, p, off)
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if _, err := f.start(OpTruncate, "truncate"); err != nil {
		return err
	}
	if !f.writable() || size < 0 || f.node.isDir() {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	f.node.truncate(size)
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	op := OpSync
	if f.node.isDir() {
		op = OpSyncDir
	}
	injected, err := f.start(op, "sync")
	if err != nil && !injected {
		return err
	}
	f.node.sync(injected)
	if f.fs.devCache && !injected && !f.node.isDir() {
		f.fs.flushDevice() // an fsync ends with a device cache flush
	}
	return err
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if _, err := f.start(OpStat, "stat"); err != nil {
		return nil, err
	}
	return infoOf(filepath.Base(f.name), f.node), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	_, err := f.start(OpClose, "close")
	f.closed = true
	return err
}

// CrashOptions says what a Crash keeps beyond what was made durable.
type CrashOptions struct {
	// Seed drives every random choice: one seed, one outcome.
	Seed uint64
	// KeepUnsynced keeps a random prefix of the unsynced directory
	// changes (in the order they were made, across directories: an
	// ordered metadata journal, ext4's) and of each file's unsynced
	// writes and truncates. Without it only synced state survives.
	KeepUnsynced bool
	// Reorder, with KeepUnsynced, keeps a random subset of the unsynced
	// directory changes instead of a prefix (each change, both halves of
	// a rename together, kept or lost on its own): a file system that
	// does not order its metadata, which POSIX allows; only a directory
	// sync orders one change before the next.
	Reorder bool
	// Tear applies the first unsynced write of each file that is not
	// kept in part: a random prefix of its bytes, and half the time
	// zeros over the rest of its range past the old end of the file
	// (the size reached the disk before the data).
	Tear bool
}

// crashStream separates Crash's random stream from the caller's.
const crashStream = 0x63726173685f6673

// Crash loses the power: it returns the file system a restart finds,
// holding what was made durable (and what opts keeps), and m itself, with
// every file open on it, fails every call with ErrCrashed from now on.
func (m *MemFS) Crash(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = true
	c := &crasher{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, crashStream)),
		out: &MemFS{devCache: m.devCache}, made: map[*memNode]*memNode{}}
	if opts.KeepUnsynced {
		seqs := pendingSeqs(m.root)
		if opts.Reorder {
			c.kept = map[uint64]bool{}
			for _, seq := range seqs {
				c.kept[seq] = c.rng.IntN(2) == 0
			}
		} else if k := c.rng.IntN(len(seqs) + 1); k < len(seqs) {
			c.cut = seqs[k]
		} else {
			c.cut = m.seq + 1
		}
	}
	c.out.root = c.rebuild(m.root)
	return c.out
}

// crasher builds the file system after a crash.
type crasher struct {
	opts CrashOptions
	rng  *rand.Rand
	cut  uint64          // directory changes with seq < cut survive
	kept map[uint64]bool // Reorder: the directory changes that survive
	out  *MemFS
	made map[*memNode]*memNode // old inode -> new (an inode can have two names)
}

// pendingSeqs lists the sequence numbers of every unsynced directory
// change reachable from root, ascending, without repeats.
func pendingSeqs(root *memNode) []uint64 {
	var seqs []uint64
	seen := map[*memNode]bool{}
	var visit func(n *memNode)
	visit = func(n *memNode) {
		if seen[n] || !n.isDir() {
			return
		}
		seen[n] = true
		for _, op := range n.dpending {
			seqs = append(seqs, op.seq)
			if op.node != nil {
				visit(op.node)
			}
		}
		for _, c := range n.durable {
			visit(c)
		}
	}
	visit(root)
	slices.Sort(seqs)
	return slices.Compact(seqs)
}

func (c *crasher) rebuild(n *memNode) *memNode {
	if x := c.made[n]; x != nil {
		return x
	}
	c.out.nextIno++
	x := &memNode{ino: c.out.nextIno, mode: n.mode}
	c.made[n] = x
	if !n.isDir() {
		x.data = c.fileAfterCrash(n)
		x.synced = slices.Clone(x.data)
		return x
	}
	ents := make(map[string]*memNode, len(n.durable))
	for k, v := range n.durable {
		ents[k] = v
	}
	for _, op := range n.dpending {
		if op.seq < c.cut || c.kept[op.seq] {
			applyMeta(ents, []metaOp{op})
		}
	}
	names := make([]string, 0, len(ents))
	for k := range ents {
		names = append(names, k)
	}
	slices.Sort(names) // one seed, one outcome
	x.entries = make(map[string]*memNode, len(names))
	x.durable = make(map[string]*memNode, len(names))
	for _, k := range names {
		y := c.rebuild(ents[k])
		x.entries[k], x.durable[k] = y, y
	}
	return x
}

// fileAfterCrash is the contents of file n after the crash.
func (c *crasher) fileAfterCrash(n *memNode) []byte {
	if c.out.devCache {
		return c.fileAfterCrashDev(n)
	}
	data := slices.Clone(n.synced)
	keep := 0
	if c.opts.KeepUnsynced {
		keep = c.rng.IntN(len(n.pending) + 1)
	}
	for _, op := range n.pending[:keep] {
		data = applyData(data, op)
	}
	if !c.opts.Tear || keep == len(n.pending) || n.pending[keep].trunc || len(n.pending[keep].data) == 0 {
		return data
	}
	op := n.pending[keep]
	data = writeAt(data, op.data[:c.rng.IntN(len(op.data))], op.off)
	if end := op.off + int64(len(op.data)); c.rng.IntN(2) == 0 && end > int64(len(data)) {
		data = resize(data, end)
	}
	return data
}

// sectorBytes is the unit a device writes atomically (the device cache
// model's tears).
const sectorBytes = 512

// fileAfterCrashDev is fileAfterCrash with the device cache: flushed
// writes are kept, and each other change independently (KeepUnsynced);
// with Tear, half of the lost writes leave a random subset of their
// sectors (each write's range cut at multiples of sectorBytes).
func (c *crasher) fileAfterCrashDev(n *memNode) []byte {
	data := slices.Clone(n.synced)
	for _, op := range n.pending {
		switch {
		case op.flushed || (c.opts.KeepUnsynced && c.rng.IntN(2) == 0):
			data = applyData(data, op)
		case c.opts.Tear && !op.trunc && len(op.data) > 0 && c.rng.IntN(2) == 0:
			end := op.off + int64(len(op.data))
			for lo := op.off; lo < end; {
				hi := min((lo/sectorBytes+1)*sectorBytes, end)
				if c.rng.IntN(2) == 0 {
					data = writeAt(data, op.data[lo-op.off:hi-op.off], lo)
				}
				lo = hi
			}
		}
	}
	return data
}
