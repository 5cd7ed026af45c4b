package objstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stratalog/strata/internal/vfs"
)

func TestLocalConformanceOS(t *testing.T) {
	runConformance(t, suite{
		newStore: func(t *testing.T) ObjectStore {
			s, err := OpenLocal(vfs.OS, filepath.Join(t.TempDir(), "remote"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		bigSize: 12 << 20,
	})
}

func TestLocalConformanceMemFS(t *testing.T) {
	runConformance(t, suite{
		newStore: func(t *testing.T) ObjectStore {
			s, err := OpenLocal(vfs.NewMemFS(), "/remote")
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		bigSize: 6 << 20,
	})
}

// A byte changed on disk after the put: a full Get fails at its end with
// ErrChecksumMismatch instead of returning the wrong content as good.
func TestLocalGetDetectsCorruption(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenLocal(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	data := randBytes(7, 4096)
	put(t, s, "t/seg", data)
	p := filepath.Join(dir, "t", "seg")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	raw[localHeaderLen+100] ^= 1
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	rc, _, err := s.Get(testCtx(t), "t/seg")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(rc)
	rc.Close()
	wantKind(t, "read of a corrupted object", err, Permanent, ErrChecksumMismatch)

	// A truncated file is refused at open.
	if err := os.Truncate(p, localHeaderLen+10); err != nil {
		t.Fatal(err)
	}
	_, err = s.Head(testCtx(t), "t/seg")
	wantKind(t, "head of a truncated object", err, Permanent, ErrChecksumMismatch)
}

// A put is durable once it returns and all-or-nothing across a power cut
// at any point: the MemFS loses everything unsynced, and what survives is
// the old object or the new one, never a torn one, with no temporary file
// left after OpenLocal.
func TestLocalPutAtomicAcrossPowerCut(t *testing.T) {
	old := randBytes(8, 3000)
	neu := randBytes(9, 5000)
	for cut := int64(1); ; cut++ {
		m := vfs.NewMemFS()
		s, err := OpenLocal(m, "/r")
		if err != nil {
			t.Fatal(err)
		}
		put(t, s, "a/b/seg", old)
		m.PowerOffAfter(cut)
		_, perr := s.Put(testCtx(t), "a/b/seg", bytes.NewReader(neu), int64(len(neu)), SumOf(neu))
		completed := !m.PoweredOff()
		if perr != nil && completed {
			t.Fatalf("cut %d: put failed without a power cut: %v", cut, perr)
		}
		if perr == nil && !completed {
			t.Fatalf("cut %d: put succeeded through a power cut", cut)
		}
		m2 := m.Crash(vfs.CrashOptions{Seed: uint64(cut), KeepUnsynced: true, Reorder: true, Tear: true})
		s2, err := OpenLocal(m2, "/r")
		if err != nil {
			t.Fatalf("cut %d: reopen: %v", cut, err)
		}
		got, _ := getAll(t, s2, "a/b/seg")
		switch {
		case bytes.Equal(got, neu):
		case bytes.Equal(got, old) && !completed:
		default:
			t.Fatalf("cut %d: after the crash the object has %d bytes (completed=%v)", cut, len(got), completed)
		}
		ents, err := m2.ReadDir("/r/a/b")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				t.Fatalf("cut %d: temporary file %s left after reopen", cut, e.Name())
			}
		}
		if completed {
			if cut < 4 {
				t.Fatalf("the put finished in %d operations", cut)
			}
			return
		}
	}
}

// The first put of a key creates its directories and syncs their parents:
// after a power cut right after it returns, the object is there.
func TestLocalNewDirectoriesDurable(t *testing.T) {
	m := vfs.NewMemFS()
	s, err := OpenLocal(m, "/r")
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "x/y/z/seg", []byte("durable"))
	m2 := m.Crash(vfs.CrashOptions{})
	s2, err := OpenLocal(m2, "/r")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := getAll(t, s2, "x/y/z/seg"); string(got) != "durable" {
		t.Fatalf("after the crash: %q", got)
	}
}

// Disk errors are transient (the caller backs off), not NotFound.
func TestLocalDiskErrorIsTransient(t *testing.T) {
	m := vfs.NewMemFS()
	s, err := OpenLocal(m, "/r")
	if err != nil {
		t.Fatal(err)
	}
	m.PowerOffAfter(0)
	_, err = s.Put(testCtx(t), "k", strings.NewReader("x"), 1, SumOf([]byte("x")))
	wantKind(t, "put on a failing disk", err, Transient, nil)
	if errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("disk error reported as a missing file: %v", err)
	}
}

// S3 allows "a" beside "a/b"; the local store keeps keys as paths and
// refuses the second as a Permanent error (not a Transient one a caller
// would retry forever), and reads of either kind of path say NotFound.
func TestLocalKeyPathConflicts(t *testing.T) {
	for name, fsys := range map[string]vfs.FS{"os": vfs.OS, "mem": vfs.NewMemFS()} {
		t.Run(name, func(t *testing.T) {
			root := "/r"
			if name == "os" {
				root = t.TempDir()
			}
			s, err := OpenLocal(fsys, root)
			if err != nil {
				t.Fatal(err)
			}
			ctx := testCtx(t)
			put(t, s, "a/b", []byte("ab"))
			put(t, s, "f", []byte("f"))
			x := []byte("x")
			_, err = s.Put(ctx, "a", bytes.NewReader(x), 1, SumOf(x))
			wantKind(t, "put of a directory's key", err, Permanent, nil)
			_, err = s.Put(ctx, "f/g", bytes.NewReader(x), 1, SumOf(x))
			wantKind(t, "put under a file's key", err, Permanent, nil)
			_, err = s.Head(ctx, "a")
			wantKind(t, "head of a directory's key", err, NotFound, ErrNotFound)
			_, _, err = s.Get(ctx, "f/g")
			wantKind(t, "get under a file's key", err, NotFound, ErrNotFound)
			if err := s.Delete(ctx, "a"); err != nil {
				t.Fatalf("delete of a directory's key: %v", err)
			}
			if err := s.Delete(ctx, "f/g"); err != nil {
				t.Fatalf("delete under a file's key: %v", err)
			}
			if got, _ := getAll(t, s, "a/b"); string(got) != "ab" {
				t.Fatalf("a/b after the conflicts: %q", got)
			}
		})
	}
}

// PutSum stores the content with its own sum in the header (what Get
// verifies and Head reports), after one read of it; a content shorter or
// longer than size is refused and leaves no object.
func TestLocalPutSum(t *testing.T) {
	s, err := OpenLocal(vfs.OS, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	data := randBytes(11, 3<<20+17)
	info, err := s.PutSum(ctx, "t/seg", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if info.Sum != SumOf(data) || info.Size != int64(len(data)) {
		t.Fatalf("PutSum info %+v: want sum %s size %d", info, SumOf(data), len(data))
	}
	if h, err := s.Head(ctx, "t/seg"); err != nil || h.Sum != SumOf(data) {
		t.Fatalf("Head: %+v %v, want sum %s", h, err, SumOf(data))
	}
	rc, _, err := s.Get(ctx, "t/seg")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get after PutSum: %d bytes, %v", len(got), err)
	}
	for _, c := range []struct {
		name string
		size int64
	}{{"short", int64(len(data)) + 1}, {"long", int64(len(data)) - 1}} {
		_, err := s.PutSum(ctx, "t/"+c.name, bytes.NewReader(data), c.size)
		wantKind(t, "PutSum of a "+c.name+" content", err, Permanent, ErrChecksumMismatch)
		if _, err := s.Head(ctx, "t/"+c.name); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: Head after a refused PutSum: %v, want not found", c.name, err)
		}
	}
}

// Objects stored before CRC-32C (the header's magic ending in 1, a
// SHA-256) still read: Head reports the SHA-256 and a full Get verifies
// by it; a put with a SHA-256 sum stores that layout. New objects carry a
// CRC-32C (magic ending in 2).
func TestLocalSHA256Objects(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenLocal(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	data := randBytes(11, 5000)
	put(t, s, "t/new", data)
	raw, err := os.ReadFile(filepath.Join(dir, "t", "new"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw[:8], localMagicCRC[:]) {
		t.Fatalf("a new object's magic %q", raw[:8])
	}
	old, err := ParseSum(hex.EncodeToString(func() []byte { h := sha256.Sum256(data); return h[:] }()))
	if err != nil || old.Alg != SHA256 {
		t.Fatalf("ParseSum of a SHA-256: %+v %v", old, err)
	}
	if _, err := s.Put(testCtx(t), "t/old", bytes.NewReader(data), int64(len(data)), old); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "t", "old")
	if raw, err = os.ReadFile(p); err != nil || !bytes.Equal(raw[:8], localMagic[:]) {
		t.Fatalf("a SHA-256 object's magic %q (%v)", raw[:8], err)
	}
	if info, err := s.Head(testCtx(t), "t/old"); err != nil || info.Sum != old {
		t.Fatalf("head: %+v %v, want sum %s", info, err, old)
	}
	rc, _, err := s.Get(testCtx(t), "t/old")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes: %v", len(got), err)
	}
	raw[localHeaderLen+4000] ^= 1
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	rc, _, err = s.Get(testCtx(t), "t/old")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(rc)
	rc.Close()
	wantKind(t, "read of a corrupted SHA-256 object", err, Permanent, ErrChecksumMismatch)
	// And a put whose content does not match a SHA-256 sum is refused.
	_, err = s.Put(testCtx(t), "t/old2", bytes.NewReader(data[1:]), int64(len(data)-1), old)
	wantKind(t, "put with a wrong SHA-256", err, Permanent, ErrChecksumMismatch)
}

// A put copies through a pooled buffer: putting many large objects does
// not allocate a 1 MiB buffer each (a tiered broker puts a segment every
// time a partition rolls, ~25 a second in a keyed 100 MB/s run, and the
// garbage made 46 collections in a 27 s run where the pool makes 13).
func TestLocalPutReusesCopyBuffer(t *testing.T) {
	s, err := OpenLocal(vfs.OS, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	data := randBytes(5, copyBufBytes+4096)
	r := bytes.NewReader(data)
	put := func(i int) {
		r.Reset(data)
		if _, err := s.PutSum(ctx, fmt.Sprintf("t/seg-%d", i), r, int64(len(data))); err != nil {
			t.Fatal(err)
		}
	}
	put(0) // the pool's first buffer
	const puts = 64
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 1; i <= puts; i++ {
		put(i)
	}
	runtime.ReadMemStats(&after)
	// Without the pool each put allocates copyBufBytes. With it a
	// collection may drop the pooled buffer, and under the race detector
	// sync.Pool drops a quarter of its Puts on purpose: ~copyBufBytes/4
	// a put, plus the detector's own allocations.
	if per := (after.TotalAlloc - before.TotalAlloc) / puts; per >= copyBufBytes*3/4 {
		t.Fatalf("%d bytes allocated per put of %d bytes, want under %d", per, len(data), copyBufBytes*3/4)
	}
}
