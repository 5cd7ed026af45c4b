package engine

// Sync log: a test-only record of what the engine made durable, for
// power-loss tests (e2e/powerloss_test.go).
//
// A SIGKILL keeps every byte the process wrote into the page cache; a power
// loss keeps only what was fsynced. With Options.SyncLog set, every sync the
// engine runs through syncFile (segment data fdatasync, sealed-segment index
// fsync, partition directory fsync, recovery-point and cleaner checkpoints)
// appends one line to the sync log after the sync succeeded and before
// syncFile returns, so before the flusher publishes the durable offset and
// anything is acknowledged:
//
//	<path relative to the data directory> <length>\n   a file synced in place or replaced
//	<path relative to the data directory> dir\n        a directory fsync
//
// The length is the file's size before the sync (a file synced in place:
// every byte written before the sync started is durable; bytes appended
// concurrently may not be) or after it (a file replaced atomically by
// writeFileAtomic, a new inode that was fsynced whole before its rename).
// A line is written with one write(2) on an O_APPEND descriptor: it survives
// SIGKILL (page cache), which is all the test needs; no user-space buffer
// can lose it. The recorder costs a stat pair and a write per sync and is
// off (nil) unless Options.SyncLog is set.
//
// CutToSyncLog turns a data directory left by SIGKILL into the one a power
// loss at the same instant could leave: each segment file (.log, .index,
// .timeindex) is truncated to its last synced length, files never synced
// are deleted (an index whose segment data was synced is emptied instead),
// .tmp files (never renamed into place) are deleted. Other
// files are left as they are: the engine writes them with writeFileAtomic
// (write tmp, fsync, rename, fsync dir), so any version on disk is a whole
// file, and config.LoadOrCreateMeta's meta.properties likewise. The
// controller directory (Raft log and snapshots in bbolt, which fsyncs its
// own writes before hashicorp/raft acknowledges them) is left intact.
//
// Limits (documented, not simulated): a file truncated or removed after
// its last sync keeps the state the process left (a real power loss might
// bring back old bytes or entries); a torn write is modelled on the first
// 4 KiB past the synced length only (CutOptions.Torn).

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// syncRecorder appends sync records to the sync log. Safe for concurrent
// use by the flush workers, the coordinator and the cleaner.
type syncRecorder struct {
	dir string // data directory the paths are made relative to

	mu  sync.Mutex
	f   *os.File
	buf []byte // reused line buffer, guarded by mu
}

// openSyncRecorder opens (appending, creating) the sync log at path for
// the data directory dir.
func openSyncRecorder(path, dir string) (*syncRecorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("engine: opening sync log: %w", err)
	}
	return &syncRecorder{dir: dir, f: f}, nil
}

// close closes the log; nil-safe.
func (r *syncRecorder) close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// record appends one line: rel and either "dir" or the length.
func (r *syncRecorder) record(path string, length int64, isDir bool) error {
	rel, err := filepath.Rel(r.dir, path)
	if err != nil || strings.ContainsAny(rel, "\n") {
		return fmt.Errorf("engine: sync log: path %q outside data directory %q", path, r.dir)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return errors.New("engine: sync log closed")
	}
	b := append(r.buf[:0], rel...)
	b = append(b, ' ')
	if isDir {
		b = append(b, "dir"...)
	} else {
		b = strconv.AppendInt(b, length, 10)
	}
	b = append(b, '\n')
	r.buf = b
	_, err = r.f.Write(b)
	return err
}

// recordSync runs sync for path and, with a sync log, records what it made
// durable before returning. A failure to record is returned as a sync
// failure (the test would otherwise cut acknowledged data).
func (e *Engine) recordSync(path string, sync func() error) error {
	r := e.synclog
	if r == nil {
		return sync()
	}
	before, _ := os.Stat(path)
	if err := sync(); err != nil {
		return err
	}
	return e.recordSynced(path, before)
}

// recordSynced records a sync of path that succeeded; before is path's
// stat from before the sync started (nil: it failed).
func (e *Engine) recordSynced(path string, before os.FileInfo) error {
	r := e.synclog
	after, aerr := os.Stat(path)
	switch {
	case aerr != nil:
		return nil // removed meanwhile (retention, DeleteRecords): nothing to keep
	case after.IsDir():
		return r.record(path, 0, true)
	case before != nil && os.SameFile(before, after):
		return r.record(path, before.Size(), false)
	default: // replaced atomically: the new file was fsynced whole
		return r.record(path, after.Size(), false)
	}
}

// SyncedState is what a sync log says was durable: the last synced length
// of each file and the directories synced, keyed by path relative to the
// data directory (slash-separated as the OS writes them).
type SyncedState struct {
	Files map[string]int64
	Dirs  map[string]bool
}

// maxSyncLogLine bounds one line of a sync log (a path is at most a few
// hundred bytes).
const maxSyncLogLine = 64 << 10

// ReadSyncLog parses a sync log; later lines for a file replace earlier
// ones. A malformed line is an error except a last line cut short (the
// process died mid-write), which is ignored.
func ReadSyncLog(rd io.Reader) (SyncedState, error) {
	st := SyncedState{Files: map[string]int64{}, Dirs: map[string]bool{}}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 4096), maxSyncLogLine)
	var pending error
	for n := 1; sc.Scan(); n++ {
		if pending != nil {
			return st, pending
		}
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 || i == len(line)-1 {
			pending = fmt.Errorf("sync log line %d: malformed %q", n, line)
			continue
		}
		rel, v := filepath.Clean(line[:i]), line[i+1:]
		if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return st, fmt.Errorf("sync log line %d: path %q outside the data directory", n, rel)
		}
		if v == "dir" {
			st.Dirs[rel] = true
			continue
		}
		length, err := strconv.ParseInt(v, 10, 64)
		if err != nil || length < 0 {
			pending = fmt.Errorf("sync log line %d: bad length %q", n, v)
			continue
		}
		st.Files[rel] = length
	}
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("sync log: %w", err)
	}
	return st, nil // a malformed last line is a write cut by the kill
}

// CutOptions tunes CutToSyncLog.
type CutOptions struct {
	// Torn fills the first up to 4 KiB past each truncated file's synced
	// length with random bytes (only where unsynced data existed): a write
	// torn by the power loss, which recovery must treat as a torn tail.
	Torn bool
}

// CutStats counts what CutToSyncLog did.
type CutStats struct {
	Truncated  int   // files cut back to their synced length
	Deleted    int   // files never synced (or .tmp) removed
	BytesCut   int64 // bytes past synced lengths dropped (before torn garbage)
	TornWrites int   // files given a garbage tail
}

func (s CutStats) String() string {
	return fmt.Sprintf("%d files truncated (%d bytes dropped, %d torn tails), %d files deleted",
		s.Truncated, s.BytesCut, s.TornWrites, s.Deleted)
}

// tornPage is how much unsynced data a torn write leaves as garbage.
const tornPage = 4096

// CutToSyncLog rewrites the data directory dir (its broker stopped) into
// the state a power loss could leave, given the sync log at logPath; see
// the file comment for the rules. The controller directory is skipped.
func CutToSyncLog(dir, logPath string, opts CutOptions) (CutStats, error) {
	var stats CutStats
	f, err := os.Open(logPath)
	if err != nil {
		return stats, err
	}
	st, err := ReadSyncLog(f)
	f.Close()
	if err != nil {
		return stats, err
	}
	absLog, _ := filepath.Abs(logPath)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, rerr := filepath.Rel(dir, path)
		if rerr != nil {
			return rerr
		}
		if d.IsDir() {
			if rel == ControllerDirName {
				return filepath.SkipDir
			}
			return nil
		}
		if abs, _ := filepath.Abs(path); abs == absLog || !d.Type().IsRegular() {
			return nil
		}
		name := d.Name()
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			stats.Deleted++
			return os.Remove(path)
		case strings.HasSuffix(name, logSuffix), strings.HasSuffix(name, indexSuffix),
			strings.HasSuffix(name, timeIndexSuffix):
		default:
			return nil // whole files written atomically
		}
		synced, ok := st.Files[rel]
		if !ok && !strings.HasSuffix(name, logSuffix) {
			// An index of a segment whose data was synced: created with
			// it at the roll (the same directory fsync made both entries
			// durable), its contents never synced.
			if _, logSynced := st.Files[strings.TrimSuffix(rel, filepath.Ext(rel))+logSuffix]; logSynced {
				ok, synced = true, 0
			}
		}
		if !ok {
			stats.Deleted++
			return os.Remove(path)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() <= synced {
			return nil
		}
		stats.Truncated++
		stats.BytesCut += info.Size() - synced
		if err := os.Truncate(path, synced); err != nil {
			return err
		}
		if !opts.Torn {
			return nil
		}
		n := min(info.Size()-synced, tornPage-synced%tornPage)
		garbage := make([]byte, n)
		rand.Read(garbage)
		w, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, werr := w.WriteAt(garbage, synced)
		if cerr := w.Close(); werr == nil {
			werr = cerr
		}
		stats.TornWrites++
		return werr
	})
	return stats, err
}
