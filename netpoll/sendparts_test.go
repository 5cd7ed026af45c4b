package netpoll

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/kframe"
)

// tempFile writes n pseudo-random bytes to a file in t.TempDir and returns
// it open for reading, with its contents.
func tempFile(tb testing.TB, n int, seed uint64) (*os.File, []byte) {
	tb.Helper()
	data := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(data[i:], rng.Uint64())
	}
	path := filepath.Join(tb.TempDir(), "seg.log")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f, data
}

// devNull returns an empty temp file.
func devNull(tb testing.TB) *os.File {
	f, _ := tempFile(tb, 0, 0)
	return f
}

// copyModes runs fn with sendfile and with the pread + write fallback.
func copyModes(t *testing.T, fn func(t *testing.T, copyFiles bool)) {
	t.Run("sendfile", func(t *testing.T) { fn(t, false) })
	t.Run("copy", func(t *testing.T) { fn(t, true) })
}

func TestSendPartsFileRanges(t *testing.T) {
	copyModes(t, func(t *testing.T, copyFiles bool) {
		const fileBytes = 3<<20 + 123
		f, data := tempFile(t, fileBytes, 7)
		// Responses: interleaved buffers and file ranges, including empty
		// ones, overlapping ranges, the file's last byte, and a range larger
		// than the socket buffer (so sendfile meets EAGAIN).
		responses := [][]Part{
			{{Buf: []byte("head")}, {File: f, Off: 0, Len: 10}, {Buf: nil}, {File: f, Off: 1000, Len: 2 << 20},
				{Buf: []byte("mid")}, {File: f, Off: fileBytes - 5, Len: 5}, {File: f, Off: 7, Len: 0}, {Buf: []byte("tail")}},
			{{File: f, Off: 0, Len: fileBytes}},
			{{File: f, Off: 500, Len: 100}, {File: f, Off: 550, Len: 100}, {File: f, Off: 0, Len: 1}},
			{{Buf: []byte("buffers only")}},
			{},
		}
		want := func(parts []Part) []byte {
			var b []byte
			for _, p := range parts {
				if p.File != nil {
					b = append(b, data[p.Off:p.Off+p.Len]...)
				} else {
					b = append(b, p.Buf...)
				}
			}
			return b
		}
		var done atomic.Int32
		s, addr := startServer(t, Config{copyFiles: copyFiles}, handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
			i := binary.BigEndian.Uint32(frame)
			r.SendParts(responses[i%uint32(len(responses))], func() { done.Add(1) })
		}))
		c := dial(t, addr)
		// Pipelined: every response is requested twice before any is read.
		const rounds = 2
		var reqs []byte
		for i := range rounds * len(responses) {
			reqs = kframe.AppendFrame(reqs, request(uint32(i), 0))
		}
		c.SetWriteDeadline(time.Now().Add(ioTimeout))
		if _, err := c.Write(reqs); err != nil {
			t.Fatal(err)
		}
		for i := range rounds * len(responses) {
			got := readFrame(t, c)
			if w := want(responses[i%len(responses)]); !bytes.Equal(got, w) {
				t.Fatalf("response %d: %d bytes, want %d; differ", i, len(got), len(w))
			}
		}
		eventually(t, "done callbacks", func() bool { return done.Load() == int32(rounds*len(responses)) })
		var ranged int64
		for _, parts := range responses {
			for _, p := range parts {
				ranged += p.Len
			}
		}
		ranged *= rounds
		sent, copied := s.sendfileBytes.Load(), s.copiedBytes.Load()
		if copyFiles && (sent != 0 || copied != ranged) || !copyFiles && (sent != ranged || copied != 0) {
			t.Fatalf("sendfile wrote %d and the fallback %d file bytes of %d (copy mode %v)", sent, copied, ranged, copyFiles)
		}
		// sendfile and pread pass offsets: the file's own offset never moved.
		if pos, err := f.Seek(0, io.SeekCurrent); err != nil || pos != 0 {
			t.Fatalf("file offset %d (err %v), want 0", pos, err)
		}
	})
}

func TestSendPartsShortFile(t *testing.T) {
	copyModes(t, func(t *testing.T, copyFiles bool) {
		f, data := tempFile(t, 1000, 9)
		var done atomic.Int32
		_, addr := startServer(t, Config{copyFiles: copyFiles}, handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
			// The range runs 100 bytes past the end of the file.
			r.SendParts([]Part{{Buf: []byte("hdr")}, {File: f, Off: 900, Len: 200}}, func() { done.Add(1) })
		}))
		c := dial(t, addr)
		writeFrame(t, c, []byte("q"))
		got := expectClosed(t, c)
		// What arrives is a prefix of the promised frame, never more.
		want := append(binary.BigEndian.AppendUint32(nil, 203), "hdr"...)
		want = append(want, data[900:]...)
		if !bytes.HasPrefix(want, got) {
			t.Fatalf("got %x, not a prefix of %x", got, want)
		}
		eventually(t, "done called", func() bool { return done.Load() == 1 })
	})
}

// TestSendPartsConcurrentFile serves one file to several connections at once:
// positional reads mean they never disturb each other.
func TestSendPartsConcurrentFile(t *testing.T) {
	f, data := tempFile(t, 1<<20, 11)
	_, addr := startServer(t, Config{}, handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
		off := int64(binary.BigEndian.Uint32(frame)) * 4096 % (1 << 20)
		r.SendParts([]Part{{File: f, Off: off, Len: 1<<20 - off}}, nil)
	}))
	const conns, perConn = 4, 16
	errs := make(chan string, conns*perConn)
	finished := make(chan struct{}, conns)
	for range conns {
		c := dial(t, addr)
		go func() {
			defer func() { finished <- struct{}{} }()
			c.SetDeadline(time.Now().Add(ioTimeout))
			var reqs []byte
			for i := range perConn {
				reqs = kframe.AppendFrame(reqs, request(uint32(i*37), 0))
			}
			if _, err := c.Write(reqs); err != nil {
				errs <- err.Error()
				return
			}
			var buf []byte
			for i := range perConn {
				var err error
				buf, err = kframe.ReadFrame(c, 1<<21, buf)
				off := int64(i*37) * 4096 % (1 << 20)
				if err != nil || !bytes.Equal(buf, data[off:]) {
					errs <- "response differs"
					return
				}
			}
		}()
	}
	for range conns {
		<-finished
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
