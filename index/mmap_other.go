//go:build !linux

package index

import (
	"io"
	"os"
	"unsafe"
)

// allocate grows f to size.
func allocate(f *os.File, size int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() >= size {
		return nil
	}
	return f.Truncate(size)
}

// mapFile reads the file into a 4-byte aligned heap buffer standing in for a
// mapping; stores are written through by wrote.
func mapFile(f *os.File, size int, _ bool) ([]byte, error) {
	words := make([]uint32, (size+3)/4)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return b, nil
}

func unmapFile(*os.File, []byte) error { return nil }

// keepDescriptor: the heap copy is written through the descriptor.
const keepDescriptor = true

// privateMaps: Options.Private is ignored; every entry is written through.
const privateMaps = false

func syncFile(f *os.File, _ string, _ []byte) error { return f.Sync() }

// wrote writes b[off:off+n] through to the file.
func wrote(f *os.File, b []byte, off, n int) error {
	_, err := f.WriteAt(b[off:off+n], int64(off))
	return err
}

// writeOut: no such call here; the pages go with the next sync.
func writeOut(*os.File, int64, int64) error { return nil }
