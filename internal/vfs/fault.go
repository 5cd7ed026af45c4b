package vfs

import "path/filepath"

// Op is a set of operations of an FS and its Files, for faults.
type Op uint32

const (
	OpOpen     Op = 1 << iota // FS.OpenFile
	OpRead                    // File.Read, File.ReadAt
	OpWrite                   // File.Write, File.WriteAt
	OpSync                    // File.Sync of a regular file
	OpSyncDir                 // FS.SyncDir, File.Sync of a directory
	OpTruncate                // FS.Truncate, File.Truncate
	OpClose                   // File.Close
	OpRename                  // FS.Rename
	OpRemove                  // FS.Remove, FS.RemoveAll
	OpMkdir                   // FS.Mkdir, FS.MkdirAll
	OpReadDir                 // FS.ReadDir
	OpStat                    // FS.Stat, File.Stat

	// OpAny is every operation.
	OpAny Op = 1<<iota - 1
)

// Fault makes matching operations of a MemFS fail. What a failed
// operation leaves behind is in the package doc ("Injected errors").
type Fault struct {
	Ops    Op     // the operations that may fail; 0 = OpAny
	Path   string // only operations on this path (either path of a Rename); "" = any
	Suffix string // only operations on a path ending with Suffix; "" = any
	// Nth fails only the Nth matching operation (1-based, counted from
	// Inject); 0 fails every one.
	Nth int64
	// Err is the error, returned wrapped as the os package wraps its own
	// (a *fs.PathError): typically syscall.EIO or syscall.ENOSPC.
	Err error
}

// fault is an injected Fault and how many operations it matched.
type fault struct {
	Fault
	seen int64
}

func (f *fault) matches(op Op, paths []string) bool {
	ops := f.Ops
	if ops == 0 {
		ops = OpAny
	}
	if ops&op == 0 {
		return false
	}
	if f.Path == "" && f.Suffix == "" {
		return true
	}
	for _, p := range paths {
		if (f.Path == "" || filepath.Clean(f.Path) == filepath.Clean(p)) &&
			(f.Suffix == "" || len(p) >= len(f.Suffix) && p[len(p)-len(f.Suffix):] == f.Suffix) {
			return true
		}
	}
	return false
}
