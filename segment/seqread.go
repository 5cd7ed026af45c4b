package segment

import (
	"io"
)

// seqChunk is the size of a SequentialReader's reads.
const seqChunk = 1 << 20

// SequentialReader returns a reader of the segment's first size bytes for
// a one-pass copy (tiered storage's upload of a sealed segment). On a real
// file it reads with O_DIRECT, 1 MiB at a time, into a buffer of its own:
// the copy does not fill the page cache with a segment nobody reads again
// soon (every page a buffered read brings in is memory the kernel
// allocates, zeroes and later reclaims: CPU the produce path competes
// with), and the device gets 1 MiB reads rather than readahead windows.
// Elsewhere (another file system, a file that refuses O_DIRECT) it reads
// through ReadAt. Dirty pages of the range are written back by the kernel
// before a direct read, so the bytes are those ReadAt would give; as with
// ReadAt, the reader ends at Written if that is below size (a Direct
// segment's appends still being written behind). The segment must stay
// open (pinned) until the reader is closed.
func (s *Segment) SequentialReader(size int64) io.ReadCloser {
	size = min(size, s.readable())
	if o, ok := s.file.(*osFile); ok {
		if f, err := o.get(false); err == nil {
			r, err := openDirectReader(f, size)
			o.put()
			if err == nil {
				return r
			}
		}
	}
	return io.NopCloser(io.NewSectionReader(s, 0, size))
}
