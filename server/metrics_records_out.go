package server

// Records out per topic (metrics.TopicRecordsOut): the record counts of
// the batches a consumer's Fetch response sends, read from the batches'
// own headers just before the response goes out (01_fetch.go, send, next
// to meterFetch).
//
// A memory chunk (the tail cache, a remote read) is walked in place: one
// look at each batch's length and record count fields. A file chunk (a
// consumer behind the tail cache, or every consumer with the pwrite
// backend, whose chunks are all file ranges for sendfile) has its headers
// read into a 4 KiB buffer on the stack: one pread reads every header that
// starts in the next 4 KiB, so batches smaller than that cost one read per
// 4 KiB; after a batch of 4 KiB or more the next read is of its
// successor's 61-byte header alone (one read per batch while they are that
// large, back to the window after a smaller one). The engine read those bytes ahead for the send
// (scanRead's Prefetch), so the reads come from the page cache the send
// uses next. Nothing is allocated per batch or per request, and the
// topic's counters are looked up once per topic of a response. Follower
// fetches are not counted, as for bytes out.

import (
	"encoding/binary"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
)

// Fields of a v2 batch header read here (record/header.go), and the
// window a file chunk's headers are read through.
const (
	batchLengthAt = 8  // int32: the bytes after this field
	batchMagicAt  = 16 // int8: 2
	batchCountAt  = 57 // int32: records in the batch

	headerWindow = 4 << 10
)

// meterRecordsOut counts the records of each topic of a consumer's Fetch
// response about to be sent.
func (s *Server) meterRecordsOut(body *fetchBody, consumer bool) {
	m := s.cfg.Metrics
	if m == nil || !consumer {
		return
	}
	var buf [headerWindow]byte
	for i := range body.topics {
		ft := &body.topics[i]
		var n int64
		for j := range ft.partitions {
			for _, c := range ft.partitions[j].chunks {
				n += chunkRecords(c, &buf)
			}
		}
		if n == 0 {
			continue
		}
		name := ft.name
		if body.version >= fetchFirstTopicIDVersion {
			name = s.topicName(ft.id)
		}
		m.Topic(name).OutRecords(n)
	}
}

// chunkRecords is the number of records in the whole batches of c, by
// their headers; buf is scratch space for a file chunk's headers. The walk
// stops at the first header that is not a v2 batch's or whose batch
// reaches past the chunk (the engine sends whole, checked batches: neither
// happens).
func chunkRecords(c engine.Chunk, buf *[headerWindow]byte) int64 {
	if c.File == nil {
		if int64(len(c.Buf)) < c.Len {
			return 0
		}
		n, _, _, _ := headerRecords(c.Buf[:c.Len], c.Len)
		return n
	}
	var n int64
	want := int64(headerWindow)
	for off := int64(0); off+record.HeaderSize <= c.Len; {
		w := buf[:min(want, c.Len-off)]
		if _, err := c.File.ReadAt(w, c.Pos+off); err != nil {
			return n
		}
		k, next, last, ok := headerRecords(w, c.Len-off)
		n += k
		if !ok {
			return n
		}
		off += next
		want = headerWindow
		if last >= headerWindow {
			want = record.HeaderSize // batches larger than the window: read headers alone
		}
	}
	return n
}

// headerRecords adds up the record counts of the batches whose headers lie
// wholly in b, the bytes from a batch boundary, of which avail are in the
// chunk. It returns the records, the position of the first batch whose
// header is not in b (or the end of the last batch), the size of the last
// batch counted, and false at a header that does not parse or a batch past
// avail.
func headerRecords(b []byte, avail int64) (n, next, last int64, ok bool) {
	for next+record.HeaderSize <= int64(len(b)) {
		h := b[next : next+record.HeaderSize]
		size := record.LogOverhead + int64(int32(binary.BigEndian.Uint32(h[batchLengthAt:])))
		if h[batchMagicAt] != 2 || size < record.HeaderSize || next+size > avail {
			return n, next, last, false
		}
		n += int64(max(int32(binary.BigEndian.Uint32(h[batchCountAt:])), 0))
		next += size
		last = size
	}
	return n, next, last, true
}
