package engine

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestJournalFilesZeroFilled: a fresh journal's files are written with
// zeros to their full size (blocks allocated and written, not a hole), so
// that later overwrites change no metadata; with a size that is no
// multiple of the zero-fill buffer the last write is short. After Close,
// every file has its size and blocks, and the bytes past the groups the
// engine wrote are zeros.
func TestJournalFilesZeroFilled(t *testing.T) {
	for _, total := range []int64{JournalMinBytes, 30_000_000} {
		t.Run(fmt.Sprint(total), func(t *testing.T) {
			dir := t.TempDir()
			e := openEngine(t, dir, func(o *Options) { o.JournalBytes = total })
			fileBytes := e.jnl.fileBytes
			if fileBytes%(1<<20) == 0 && total != JournalMinBytes {
				t.Fatalf("file size %d is a multiple of the buffer: the short write is not covered", fileBytes)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			zeroFiles := 0
			for i := range journalFiles {
				path := filepath.Join(dir, journalDirName, fmt.Sprintf("journal-%d", i))
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(data)) != fileBytes {
					t.Fatalf("%s: %d bytes, want %d", path, len(data), fileBytes)
				}
				var st syscall.Stat_t
				if err := syscall.Stat(path, &st); err != nil {
					t.Fatal(err)
				}
				if st.Blocks*512 < fileBytes {
					t.Fatalf("%s: %d bytes in blocks for %d bytes: not written through", path, st.Blocks*512, fileBytes)
				}
				// The groups written since Open sit at the start of a file
				// and are short; what follows them was never written.
				if bytes.Count(data[4<<10:], []byte{0}) == len(data)-4<<10 {
					zeroFiles++
				}
			}
			if zeroFiles < journalFiles-2 {
				t.Fatalf("%d of %d journal files are zeros past their first page", zeroFiles, journalFiles)
			}
		})
	}
}
