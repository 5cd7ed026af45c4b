package netpoll

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/kframe"
)

// pipelinedClient drives n request/response round trips over c: one
// goroutine writes reqs (pre-framed, batch requests per write) and the
// caller reads n responses of respBytes payload each, discarding them. It
// allocates nothing per request.
func pipelinedClient(b *testing.B, c net.Conn, batch []byte, perBatch, n, respBytes int) {
	b.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Minute))
	werr := make(chan error, 1)
	go func() {
		for sent := 0; sent < n; sent += perBatch {
			k := min(perBatch, n-sent)
			if _, err := c.Write(batch[:k*len(batch)/perBatch]); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	buf := make([]byte, 256<<10)
	want := int64(n) * int64(FrameHeaderBytes+respBytes)
	for got := int64(0); got < want; {
		m, err := c.Read(buf[:min(int64(len(buf)), want-got)])
		got += int64(m)
		if err != nil {
			b.Fatalf("read after %d of %d bytes: %v", got, want, err)
		}
	}
	if err := <-werr; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPipelinedEcho: small requests, answered inline, many in flight.
// One op is one request/response round trip.
func BenchmarkPipelinedEcho(b *testing.B) {
	for _, size := range []int{16, 128, 1024} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			_, addr := startServer(b, Config{}, echo)
			c := dial(b, addr)
			const perBatch = 32
			var batch []byte
			for i := range perBatch {
				batch = kframe.AppendFrame(batch, request(uint32(i), size-4))
			}
			// Warm the pools and buffers so steady state is measured.
			pipelinedClient(b, c, batch, perBatch, 1000, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			pipelinedClient(b, c, batch, perBatch, b.N, size)
		})
	}
}

// BenchmarkQueuedBytesBound: 16 KiB requests pipelined 32 at a time
// through a connection bounded to 4 of them (QueuedMaxRequestBytes), so the
// reader keeps stopping and resuming; still no allocation per request.
func BenchmarkQueuedBytesBound(b *testing.B) {
	const size, perBatch = 16 << 10, 32
	_, addr := startServer(b, Config{QueuedMaxRequestBytes: 4 * size}, handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
		r.Send(frame[:16])
	}))
	c := dial(b, addr)
	var batch []byte
	for i := range perBatch {
		batch = kframe.AppendFrame(batch, request(uint32(i), size-4))
	}
	pipelinedClient(b, c, batch, perBatch, 1000, 16)
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	pipelinedClient(b, c, batch, perBatch, b.N, 16)
}

// BenchmarkSendPartsFile: each request is answered with a 16-byte header and
// a range of a 64 MiB file, by sendfile and by the pread + write fallback
// (the baseline in the same run). One op is one response; bytes are the
// file range.
func BenchmarkSendPartsFile(b *testing.B) {
	const fileBytes = 64 << 20
	f, _ := tempFile(b, fileBytes, 5)
	for _, chunk := range []int{64 << 10, 1 << 20, 16 << 20} {
		for _, mode := range []struct {
			name      string
			copyFiles bool
		}{{"sendfile", false}, {"copy", true}} {
			b.Run(fmt.Sprintf("chunk=%dKiB/%s", chunk>>10, mode.name), func(b *testing.B) {
				benchSendParts(b, f, fileBytes, chunk, mode.copyFiles)
			})
		}
	}
}

func benchSendParts(b *testing.B, f *os.File, fileBytes, chunk int, copyFiles bool) {
	const perBatch = 16
	head := make([]byte, 16)
	// Requests carry 0..perBatch-1 and at most perBatch are in flight, so the
	// in-flight requests have distinct numbers and each can own a parts
	// array: no allocation per response.
	var parts [perBatch][2]Part
	cfg := Config{MaxInFlight: perBatch, copyFiles: copyFiles}
	_, addr := startServer(b, cfg, handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
		i := binary.BigEndian.Uint32(frame) % perBatch
		off := int64(i) * int64(chunk) % int64(fileBytes)
		parts[i] = [2]Part{{Buf: head}, {File: f, Off: off, Len: int64(chunk)}}
		r.SendParts(parts[i][:], nil)
	}))
	c := dial(b, addr)
	var batch []byte
	for i := range perBatch {
		batch = kframe.AppendFrame(batch, request(uint32(i), 0))
	}
	pipelinedClient(b, c, batch, perBatch, 4, 16+chunk)
	b.SetBytes(int64(chunk))
	b.ReportAllocs()
	b.ResetTimer()
	pipelinedClient(b, c, batch, perBatch, b.N, 16+chunk)
}
