package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/netpoll"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// encTestFile writes content to a new file in t's temp dir and returns it
// open for reading (closed at cleanup).
func encTestFile(tb testing.TB, content []byte) *os.File {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// encTestBatches builds n real record batches (offsets assigned
// consecutively) with record.Builder, compressed with codec.
func encTestBatches(tb testing.TB, n int, codec record.Codec) [][]byte {
	tb.Helper()
	var b record.Builder
	var out [][]byte
	offset := int64(0)
	for i := 0; i < n; i++ {
		b.Reset(codec, 1_700_000_000_000+int64(i))
		for r := 0; r <= i; r++ {
			b.Add(1_700_000_000_000+int64(i), []byte(fmt.Sprintf("k%d-%d", i, r)), bytes.Repeat([]byte{byte('a' + r)}, 100+r), nil)
		}
		batch, err := b.AppendTo(nil)
		if err != nil {
			tb.Fatal(err)
		}
		record.SetBaseOffset(batch, offset)
		offset += int64(i + 1)
		out = append(out, batch)
	}
	return out
}

// encTestWire concatenates parts as netpoll would write them: Buf bytes, and
// File ranges read by offset.
func encTestWire(tb testing.TB, parts []netpoll.Part) []byte {
	tb.Helper()
	var w []byte
	for _, p := range parts {
		if p.File == nil {
			w = append(w, p.Buf...)
			continue
		}
		if len(p.Buf) != 0 {
			tb.Fatalf("part has both Buf and File")
		}
		chunk := make([]byte, p.Len)
		if _, err := p.File.ReadAt(chunk, p.Off); err != nil && err != io.EOF {
			tb.Fatal(err)
		}
		w = append(w, chunk...)
	}
	return w
}

// encTestChunkBytes reads the bytes chunks point at.
func encTestChunkBytes(tb testing.TB, chunks []engine.Chunk) []byte {
	tb.Helper()
	var out []byte
	for _, c := range chunks {
		if c.File == nil {
			out = append(out, c.Buf...)
			continue
		}
		b := make([]byte, c.Len)
		if _, err := c.File.ReadAt(b, c.Pos); err != nil {
			tb.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// encTestCompare checks that got (decoded by kmsg) carries every field of
// want, version by version.
func encTestCompare(t testing.TB, v int16, want *fetchBody, got *kmsg.FetchResponse) {
	t.Helper()
	if got.ThrottleMillis != want.throttleMs {
		t.Errorf("v%d ThrottleMillis = %d, want %d", v, got.ThrottleMillis, want.throttleMs)
	}
	wantErr, wantSession := want.errCode, want.sessionID
	if v < 7 {
		wantErr, wantSession = 0, 0
	}
	if got.ErrorCode != wantErr || got.SessionID != wantSession {
		t.Errorf("v%d ErrorCode, SessionID = %d, %d; want %d, %d", v, got.ErrorCode, got.SessionID, wantErr, wantSession)
	}
	if len(got.Brokers) != 0 || got.UnknownTags.Len() != 0 {
		t.Errorf("v%d unexpected tags: brokers %d, unknown %d", v, len(got.Brokers), got.UnknownTags.Len())
	}
	if len(got.Topics) != len(want.topics) {
		t.Fatalf("v%d %d topics, want %d", v, len(got.Topics), len(want.topics))
	}
	for i := range want.topics {
		wt, gt := &want.topics[i], &got.Topics[i]
		if v >= fetchFirstTopicIDVersion {
			if gt.TopicID != wt.id || gt.Topic != "" {
				t.Errorf("v%d topic %d: id %x name %q, want id %x", v, i, gt.TopicID, gt.Topic, wt.id)
			}
		} else if gt.Topic != wt.name || gt.TopicID != [16]byte{} {
			t.Errorf("v%d topic %d: name %q id %x, want name %q", v, i, gt.Topic, gt.TopicID, wt.name)
		}
		if len(gt.Partitions) != len(wt.partitions) {
			t.Fatalf("v%d topic %d: %d partitions, want %d", v, i, len(gt.Partitions), len(wt.partitions))
		}
		for j := range wt.partitions {
			wp, gp := &wt.partitions[j], &gt.Partitions[j]
			wantLogStart := wp.logStartOffset
			if v < 5 {
				wantLogStart = -1 // kmsg default; not on the wire
			}
			if gp.Partition != wp.partition || gp.ErrorCode != wp.errCode ||
				gp.HighWatermark != wp.highWatermark || gp.LastStableOffset != wp.lastStableOffset ||
				gp.LogStartOffset != wantLogStart {
				t.Errorf("v%d %d/%d: got p=%d err=%d hw=%d lso=%d start=%d; want p=%d err=%d hw=%d lso=%d start=%d",
					v, i, j, gp.Partition, gp.ErrorCode, gp.HighWatermark, gp.LastStableOffset, gp.LogStartOffset,
					wp.partition, wp.errCode, wp.highWatermark, wp.lastStableOffset, wantLogStart)
			}
			wantNull := !wp.abortedEmpty && len(wp.aborted) == 0
			if wantNull != (gp.AbortedTransactions == nil) || len(gp.AbortedTransactions) != len(wp.aborted) {
				t.Errorf("v%d %d/%d: aborted transactions %v (nil=%v), want %v (empty=%v)",
					v, i, j, gp.AbortedTransactions, gp.AbortedTransactions == nil, wp.aborted, wp.abortedEmpty)
			}
			for k := range gp.AbortedTransactions {
				if k < len(wp.aborted) && (gp.AbortedTransactions[k].ProducerID != wp.aborted[k].ProducerID ||
					gp.AbortedTransactions[k].FirstOffset != wp.aborted[k].FirstOffset) {
					t.Errorf("v%d %d/%d: aborted transaction %d = %+v, want %+v", v, i, j, k, gp.AbortedTransactions[k], wp.aborted[k])
				}
			}
			if gp.PreferredReadReplica != -1 {
				t.Errorf("v%d %d/%d: preferred read replica %d", v, i, j, gp.PreferredReadReplica)
			}
			if gp.RecordBatches == nil {
				t.Errorf("v%d %d/%d: null records, want a (possibly empty) record set", v, i, j)
			}
			if want := encTestChunkBytes(t, wp.chunks); !bytes.Equal(gp.RecordBatches, want) {
				t.Errorf("v%d %d/%d: records %d bytes differ from the %d chunk bytes", v, i, j, len(gp.RecordBatches), len(want))
			}
			if gp.UnknownTags.Len() != 0 || gp.DivergingEpoch.Epoch != -1 || gp.CurrentLeader.LeaderID != -1 || gp.SnapshotID.Epoch != -1 {
				t.Errorf("v%d %d/%d: unexpected tagged fields", v, i, j)
			}
		}
	}
}

// TestFetchEncodeEveryVersion is the encoder's correctness test: for each
// served version, a response whose records point at real batches in a file
// is framed by hand, reassembled as netpoll would send it, decoded with kmsg
// and compared field by field; kmsg re-encoding the decoded response must
// also give back the exact bytes.
func TestFetchEncodeEveryVersion(t *testing.T) {
	batches := encTestBatches(t, 4, record.CodecNone)
	gz := encTestBatches(t, 2, record.CodecGzip)
	content := bytes.Repeat([]byte{0xEE}, 37) // chunks never start at 0
	var pos, lens []int64
	for _, b := range append(batches, gz...) {
		pos = append(pos, int64(len(content)))
		lens = append(lens, int64(len(b)))
		content = append(content, b...)
	}
	f := encTestFile(t, content)
	chunk := func(i, n int) engine.Chunk { // batches i..i+n-1, contiguous in the file
		c := engine.Chunk{File: f, Pos: pos[i]}
		for k := i; k < i+n; k++ {
			c.Len += lens[k]
		}
		return c
	}

	for v := int16(fetchMinVersion); v <= fetchMaxVersion; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			body := fetchBody{
				version:    v,
				throttleMs: 17,
				errCode:    0,
				sessionID:  0,
				topics: []fetchTopic{
					{name: "alpha", id: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, partitions: []fetchPartition{
						{partition: 0, highWatermark: 10, lastStableOffset: 10, logStartOffset: 0,
							chunks: []engine.Chunk{chunk(0, 1), chunk(1, 3)}},
						{partition: 3, errCode: 1, highWatermark: 42, lastStableOffset: 42, logStartOffset: 7},
						{partition: 1, highWatermark: 5, lastStableOffset: 5, logStartOffset: 5, abortedEmpty: true},
						{partition: 2, highWatermark: 1 << 40, lastStableOffset: 1 << 40, logStartOffset: 1 << 39,
							abortedEmpty: true, chunks: []engine.Chunk{chunk(4, 2)}},
						{partition: 4, highWatermark: 90, lastStableOffset: 60, logStartOffset: 0, abortedEmpty: true,
							aborted: []engine.AbortedTxn{{ProducerID: 7, FirstOffset: 0}, {ProducerID: 1 << 50, FirstOffset: 3}},
							chunks:  []engine.Chunk{chunk(0, 2)}},
					}},
					{name: "", id: [16]byte{}, partitions: nil},
					{name: "a-topic.with_all.chars-" + string(bytes.Repeat([]byte{'x'}, 200)), id: [16]byte{0xff},
						partitions: []fetchPartition{{partition: 0, errCode: 3, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1}}},
				},
			}
			header := []byte{0, 0, 0, 9} // stands in for the response header
			parts := appendFetchBody(append([]byte(nil), header...), nil, &body)
			files := 0
			for _, p := range parts {
				if p.File != nil {
					files++
				}
			}
			if files != 4 {
				t.Fatalf("%d file parts, want 4 (one per chunk)", files)
			}
			wire := encTestWire(t, parts)
			if !bytes.HasPrefix(wire, header) {
				t.Fatalf("response header not kept at the front")
			}
			wire = wire[len(header):]
			var resp kmsg.FetchResponse
			resp.Version = v
			if err := resp.ReadFrom(wire); err != nil {
				t.Fatalf("kmsg cannot decode our v%d response: %v", v, err)
			}
			encTestCompare(t, v, &body, &resp)
			if again := resp.AppendTo(nil); !bytes.Equal(again, wire) {
				t.Errorf("kmsg re-encoding differs from ours (%d vs %d bytes)", len(again), len(wire))
			}
		})
	}
}

// TestFetchEncodeSessionError checks the top-level error form: no topics.
func TestFetchEncodeSessionError(t *testing.T) {
	for v := int16(7); v <= fetchMaxVersion; v++ {
		body := fetchBody{version: v, errCode: 70, sessionID: 0}
		parts := appendFetchBody(nil, nil, &body)
		if len(parts) != 1 {
			t.Fatalf("v%d: %d parts, want 1", v, len(parts))
		}
		var resp kmsg.FetchResponse
		resp.Version = v
		if err := resp.ReadFrom(parts[0].Buf); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 70 || len(resp.Topics) != 0 {
			t.Fatalf("v%d: error %d, %d topics", v, resp.ErrorCode, len(resp.Topics))
		}
	}
}

// TestFetchEncodePartsIsolated checks that each Buf part is capacity-capped,
// so a later append to the shared buffer can never overwrite it.
func TestFetchEncodePartsIsolated(t *testing.T) {
	f := encTestFile(t, bytes.Repeat([]byte{1}, 100))
	body := fetchBody{version: 12, topics: []fetchTopic{{name: "t", partitions: []fetchPartition{
		{partition: 0, chunks: []engine.Chunk{{File: f, Pos: 0, Len: 10}}},
		{partition: 1, chunks: []engine.Chunk{{File: f, Pos: 10, Len: 10}}},
	}}}}
	buf := make([]byte, 0, 4096)
	parts := appendFetchBody(buf, nil, &body)
	for i, p := range parts {
		if p.File == nil && cap(p.Buf) != len(p.Buf) {
			t.Fatalf("part %d: cap %d > len %d", i, cap(p.Buf), len(p.Buf))
		}
	}
}

// FuzzFetchEncode builds a response from fuzz input (version, field values,
// chunk ranges into a file of arbitrary bytes) and asserts kmsg decodes it
// to the same fields and re-encodes it to the same bytes.
func FuzzFetchEncode(f *testing.F) {
	f.Add(uint8(4), []byte("seed"), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(uint8(12), []byte{0, 0, 0, 0}, []byte("records"))
	f.Add(uint8(18), bytes.Repeat([]byte{0xff}, 64), bytes.Repeat([]byte{0x80}, 300))
	f.Fuzz(func(t *testing.T, vb uint8, spec, data []byte) {
		v := fetchMinVersion + int16(vb)%(fetchMaxVersion-fetchMinVersion+1)
		file := encTestFile(t, data)
		r := &encFuzzReader{b: spec}
		body := fetchBody{version: v, throttleMs: int32(r.u32())}
		if v >= 7 {
			body.errCode, body.sessionID = int16(r.u16()), int32(r.u32())
		}
		for nt := int(r.byte() % 4); nt > 0; nt-- {
			var ft fetchTopic
			ft.name = string(r.bytes(int(r.byte() % 40)))
			copy(ft.id[:], r.bytes(16))
			for np := int(r.byte() % 4); np > 0; np-- {
				fp := fetchPartition{
					partition:        int32(r.u32()),
					errCode:          int16(r.u16()),
					highWatermark:    int64(r.u32())<<8 | int64(r.byte()),
					lastStableOffset: int64(r.u32()),
					logStartOffset:   int64(r.u32()),
					abortedEmpty:     r.byte()&1 == 1,
				}
				for nc := int(r.byte() % 3); nc > 0 && len(data) > 0; nc-- {
					off := int64(r.u16()) % int64(len(data))
					n := int64(r.u16()) % (int64(len(data)) - off + 1)
					fp.chunks = append(fp.chunks, engine.Chunk{File: file, Pos: off, Len: n})
				}
				ft.partitions = append(ft.partitions, fp)
			}
			body.topics = append(body.topics, ft)
		}
		wire := encTestWire(t, appendFetchBody(nil, nil, &body))
		var resp kmsg.FetchResponse
		resp.Version = v
		if err := resp.ReadFrom(wire); err != nil {
			t.Fatalf("v%d: kmsg cannot decode: %v", v, err)
		}
		encTestCompare(t, v, &body, &resp)
		if again := resp.AppendTo(nil); !bytes.Equal(again, wire) {
			t.Fatalf("v%d: kmsg re-encoding differs", v)
		}
	})
}

// encFuzzReader hands out fuzz bytes, zeros once exhausted.
type encFuzzReader struct{ b []byte }

func (r *encFuzzReader) bytes(n int) []byte {
	out := make([]byte, n)
	copy(out, r.b)
	r.b = r.b[min(n, len(r.b)):]
	return out
}
func (r *encFuzzReader) byte() byte  { return r.bytes(1)[0] }
func (r *encFuzzReader) u16() uint16 { return binary.BigEndian.Uint16(r.bytes(2)) }
func (r *encFuzzReader) u32() uint32 { return binary.BigEndian.Uint32(r.bytes(4)) }

// TestFetchBodyParts: fetchBodyParts bounds the parts appendFetchBody
// makes, so a slice of that capacity never grows (the response's parts
// are one allocation), for partitions with and without chunks, memory and
// file chunks, and empty ones.
func TestFetchBodyParts(t *testing.T) {
	f := encTestFile(t, []byte{0})
	mem := engine.Chunk{Buf: []byte{1, 2, 3}}
	file := engine.Chunk{File: f, Pos: 0, Len: 1}
	for _, chunks := range [][][]engine.Chunk{
		nil,
		{nil},
		{{file}},
		{nil, {mem, file}, nil, {file}},
		{{mem}, {mem, mem, mem}, {{File: f}}, {file, mem}},
	} {
		body := fetchBody{version: fetchMaxVersion, topics: []fetchTopic{{id: [16]byte{1}}, {id: [16]byte{2}}}}
		for p, cs := range chunks {
			tp := &body.topics[p%2]
			tp.partitions = append(tp.partitions, fetchPartition{partition: int32(p), highWatermark: 1, lastStableOffset: 1, chunks: cs})
		}
		n := fetchBodyParts(&body)
		parts := appendFetchBody(nil, make([]netpoll.Part, 0, n), &body)
		if len(parts) > n || cap(parts) != n {
			t.Fatalf("%d partitions: %d parts in a slice of capacity %d, fetchBodyParts said %d", len(chunks), len(parts), cap(parts), n)
		}
	}
}

// BenchmarkFetchEncode frames responses of 1 and 100 partitions, each with
// one 1 MiB chunk; bytes/op counts the records the response carries, which
// the encoder never touches.
func BenchmarkFetchEncode(b *testing.B) {
	f := encTestFile(b, []byte{0})
	for _, np := range []int{1, 100} {
		b.Run(fmt.Sprintf("partitions=%d", np), func(b *testing.B) {
			body := fetchBody{version: fetchMaxVersion, topics: []fetchTopic{{id: [16]byte{1}}}}
			for p := 0; p < np; p++ {
				body.topics[0].partitions = append(body.topics[0].partitions, fetchPartition{
					partition: int32(p), highWatermark: 1000, lastStableOffset: 1000,
					chunks: []engine.Chunk{{File: f, Pos: 0, Len: 1 << 20}},
				})
			}
			buf := make([]byte, 0, estimateFetchBodyBytes(&body))
			parts := make([]netpoll.Part, 0, 2*np+1)
			b.SetBytes(int64(np) << 20)
			b.ReportAllocs()
			for b.Loop() {
				parts = appendFetchBody(buf[:0], parts[:0], &body)
			}
			_ = parts
		})
	}
}

// TestFetchEncodeMemoryChunks: chunks from the tail cache (Buf, no File)
// go out as their own Buf parts, mixed with file chunks, and decode to the
// same batches.
func TestFetchEncodeMemoryChunks(t *testing.T) {
	batches := encTestBatches(t, 3, record.CodecNone)
	f := encTestFile(t, batches[0])
	for _, v := range []int16{fetchMinVersion, 11, fetchMaxVersion} {
		body := fetchBody{version: v, topics: []fetchTopic{{name: "mem", id: [16]byte{9}, partitions: []fetchPartition{
			{partition: 0, highWatermark: 6, lastStableOffset: 6, chunks: []engine.Chunk{
				{File: f, Pos: 0, Len: int64(len(batches[0]))},
				{Buf: batches[1], Pos: int64(len(batches[0])), Len: int64(len(batches[1]))},
			}},
			{partition: 1, highWatermark: 3, lastStableOffset: 3, chunks: []engine.Chunk{
				{Buf: batches[2], Len: int64(len(batches[2]))},
			}},
		}}}}
		parts := appendFetchBody(nil, nil, &body)
		files, mem := 0, 0
		for _, p := range parts {
			switch {
			case p.File != nil:
				files++
			case len(p.Buf) > 0 && &p.Buf[0] == &batches[1][0], len(p.Buf) > 0 && &p.Buf[0] == &batches[2][0]:
				mem++ // the cache's own bytes, not a copy
			}
		}
		if files != 1 || mem != 2 {
			t.Fatalf("v%d: %d file parts and %d memory parts, want 1 and 2", v, files, mem)
		}
		var resp kmsg.FetchResponse
		resp.Version = v
		if err := resp.ReadFrom(encTestWire(t, parts)); err != nil {
			t.Fatalf("v%d: kmsg cannot decode: %v", v, err)
		}
		encTestCompare(t, v, &body, &resp)
	}
}
