//go:build linux

package segment_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratalog/strata/internal/uring"
	"github.com/stratalog/strata/segment"
)

// patByte is the byte appended at position p (never zero, so a stale
// zero-filled page cannot pass).
func patByte(p int64) byte { return byte(p%251) + 1 }

// TestDirectHeadReadsCoherent: buffered readers (pread and sendfile through
// File, with readahead on) read the newest written bytes of a Direct
// segment — the partial last page the ring rewrites at every Flush, and
// the unwritten reservation past it via readahead — while appends and
// Flushes go on. No read below Written() may differ from what was appended,
// and once done no stale page may survive in the page cache (a full
// re-read through a new descriptor matches). The kernel drops cached pages
// of an O_DIRECT write's range before it and again after its completion
// (after unwritten extents are converted), so a read racing the write
// cannot leave a stale copy behind; this test holds it to that.
func TestDirectHeadReadsCoherent(t *testing.T) {
	opts := segment.Options{Ring: newRing(t, uring.BackendUring), Direct: true}
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	s, err := segment.CreateWith(path, 64<<20, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const total = 2 << 20
	var done atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	sink, err := os.Create(filepath.Join(t.TempDir(), "sink"))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			buf := make([]byte, 64<<10)
			for ; !done.Load(); runtime.Gosched() {
				w := s.Written()
				n := min(w, int64(1+rng.IntN(len(buf))))
				from := w - n
				if r == 1 && n > 0 {
					// sendfile (what fetch uses) into a file, read back.
					off := from
					m, err := unix.Sendfile(int(sink.Fd()), int(s.File().Fd()), &off, int(n))
					if err != nil || m <= 0 {
						errs <- fmt.Errorf("sendfile [%d, %d): %d, %v", from, w, m, err)
						return
					}
					if _, err := sink.ReadAt(buf[:m], 0); err != nil {
						errs <- err
						return
					}
					if _, err := sink.Seek(0, 0); err != nil {
						errs <- err
						return
					}
					n = int64(m)
				} else if _, err := s.File().ReadAt(buf[:n], from); err != nil {
					errs <- fmt.Errorf("pread [%d, %d): %v", from, w, err)
					return
				}
				reads.Add(1)
				for i := range n {
					if buf[i] != patByte(from+i) {
						errs <- fmt.Errorf("reader %d: read [%d, %d) below Written %d: byte at %d is %d, appended %d",
							r, from, from+n, w, from+i, buf[i], patByte(from+i))
						return
					}
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 4096)
	for s.Size() < total {
		n := 100 + rng.IntN(3000)
		pos := s.Size()
		for i := range n {
			data[i] = patByte(pos + int64(i))
		}
		if _, err := s.Append(data[:n]); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(3) == 0 { // rewrites the partial last page
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Fatal("no read raced the appends")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all := make([]byte, s.Size())
	if _, err := f.ReadAt(all, 0); err != nil {
		t.Fatal(err)
	}
	for i := range all {
		if all[i] != patByte(int64(i)) {
			t.Fatalf("after the run a buffered read at %d gives %d, appended %d (stale page cache)", i, all[i], patByte(int64(i)))
		}
	}
	t.Logf("%d reads raced %d MiB of appends", reads.Load(), total>>20)
}
