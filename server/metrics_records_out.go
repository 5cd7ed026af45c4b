package server

// Records out per topic (metrics.TopicRecordsOut): the record counts of
// the batches a consumer's Fetch response sends, read from the batches'
// own headers just before the response goes out (01_fetch.go, send, next
// to meterFetch).
//
// A memory chunk (the tail cache, a remote read) is walked in place: one
// look at each batch's length and record count fields. A file chunk (a
// consumer behind the tail cache, sent with sendfile) has its batch
// headers read with one 61-byte pread each into a buffer on the stack; the
// engine read those bytes ahead for the send (scanRead's Prefetch), so the
// reads come from the page cache the send uses next. Nothing is allocated
// per batch or per request, and the topic's counters are looked up once
// per topic of a response. Follower fetches are not counted, as for bytes
// out.

import (
	"encoding/binary"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
)

// Fields of a v2 batch header read here (record/header.go).
const (
	batchLengthAt = 8  // int32: the bytes after this field
	batchMagicAt  = 16 // int8: 2
	batchCountAt  = 57 // int32: records in the batch
)

// meterRecordsOut counts the records of each topic of a consumer's Fetch
// response about to be sent.
func (s *Server) meterRecordsOut(body *fetchBody, consumer bool) {
	m := s.cfg.Metrics
	if m == nil || !consumer {
		return
	}
	var hdr [record.HeaderSize]byte
	for i := range body.topics {
		ft := &body.topics[i]
		var n int64
		for j := range ft.partitions {
			for _, c := range ft.partitions[j].chunks {
				n += chunkRecords(c, &hdr)
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
// their headers; hdr is scratch space for a file chunk's headers. The walk
// stops at the first header that is not a v2 batch's or that reaches past
// the chunk (the engine sends whole, checked batches: neither happens).
func chunkRecords(c engine.Chunk, hdr *[record.HeaderSize]byte) int64 {
	var n int64
	for off := int64(0); off+record.HeaderSize <= c.Len; {
		var h []byte
		if c.File == nil {
			if int64(len(c.Buf)) < c.Len {
				return n
			}
			h = c.Buf[off : off+record.HeaderSize]
		} else {
			if _, err := c.File.ReadAt(hdr[:], c.Pos+off); err != nil {
				return n
			}
			h = hdr[:]
		}
		size := record.LogOverhead + int64(int32(binary.BigEndian.Uint32(h[batchLengthAt:])))
		if h[batchMagicAt] != 2 || size < record.HeaderSize || off+size > c.Len {
			return n
		}
		n += int64(max(int32(binary.BigEndian.Uint32(h[batchCountAt:])), 0))
		off += size
	}
	return n
}
