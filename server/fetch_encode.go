package server

// Hand-framed Fetch response body, so record bytes go from segment files to
// the socket with sendfile instead of through a kmsg.FetchResponse.
//
// The body, for the versions we serve (v4..v18; kmsg's FetchResponse is the
// reference, and the tests decode our bytes with it for every version):
//
//	ThrottleMillis      int32
//	ErrorCode           int16                          v7+
//	SessionID           int32                          v7+
//	Topics              array
//	  Topic             string                         v4..v12
//	  TopicID           [16]byte                       v13+
//	  Partitions        array
//	    Partition       int32
//	    ErrorCode       int16
//	    HighWatermark   int64
//	    LastStableOffset int64
//	    LogStartOffset  int64                          v5+
//	    AbortedTransactions nullable array of          (null unless read_committed: then the
//	                                                    aborted transactions overlapping the read)
//	      ProducerID int64, FirstOffset int64, [tags]
//	    PreferredReadReplica int32                     v11+
//	    RecordBatches   nullable bytes                 (length prefix here, bytes from files)
//	    [tags]                                         v12+: empty
//	  [tags]                                           v12+: empty
//	[tags]                                             v12+: empty (NodeEndpoints omitted)
//
// Non-flexible versions (v4..v11) use int32 array lengths and int16 string
// lengths; flexible versions (v12+) use compact forms, uvarint(n+1), and end
// every struct with a tagged-field section, which we always send empty.
//
// appendFetchBody emits the body as a list of netpoll.Parts: byte runs of the
// encoding (one buffer, cut after each records length prefix) interleaved
// with each partition's record chunks: file ranges (sent with sendfile) or,
// for batches still in the engine's tail cache (Log.ReadMem), the cache's
// memory, which netpoll writes with writev. Nothing is copied from either.

import (
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/netpoll"
	"github.com/twmb/franz-go/pkg/kbin"
)

// fetchFirstFlexibleVersion is the first Fetch version using KIP-482's
// compact encoding and tagged fields.
const fetchFirstFlexibleVersion = 12

// fetchFirstTopicIDVersion is the first Fetch version naming topics by id.
const fetchFirstTopicIDVersion = 13

// fetchPartition is one partition of a Fetch response.
type fetchPartition struct {
	partition        int32
	errCode          int16
	highWatermark    int64
	lastStableOffset int64
	logStartOffset   int64
	// abortedEmpty sends an empty (not null) aborted-transactions array, as
	// Kafka does for read_committed fetches; read_uncommitted gets null.
	abortedEmpty bool
	// aborted are the aborted transactions of a read_committed read
	// (engine Log.AbortedTransactions); sent as a non-null array.
	aborted []engine.AbortedTxn
	// chunks are the partition's record bytes: whole batches in segment
	// files. The caller keeps their total at most math.MaxInt32 (the
	// handler turns a larger read into an error).
	chunks []engine.Chunk
}

// fetchTopic is one topic of a Fetch response: name for v4..v12, id for v13+.
type fetchTopic struct {
	name       string
	id         [16]byte
	partitions []fetchPartition
}

// fetchBody is a whole Fetch response body.
type fetchBody struct {
	version    int16
	throttleMs int32
	errCode    int16 // top level (fetch sessions), v7+
	sessionID  int32 // v7+
	topics     []fetchTopic
}

// estimateFetchBodyBytes is an upper bound of the non-record bytes of b, so
// the encoding buffer is allocated once.
func estimateFetchBodyBytes(b *fetchBody) int {
	n := 4 + 2 + 4 + 5 + 1
	for i := range b.topics {
		t := &b.topics[i]
		n += 5 + len(t.name) + 16 + 5 + 1
		n += len(t.partitions) * (4 + 2 + 8 + 8 + 8 + 5 + 4 + 5 + 1)
		for j := range t.partitions {
			n += len(t.partitions[j].aborted) * (8 + 8 + 1)
		}
	}
	return n
}

// fetchBodyBytes is the size of b's encoding: its non-record bytes
// (estimated, an upper bound) plus every partition's record bytes (what
// a consumer's quota counts).
func fetchBodyBytes(b *fetchBody) int64 {
	n := int64(estimateFetchBodyBytes(b))
	for i := range b.topics {
		for j := range b.topics[i].partitions {
			for _, c := range b.topics[i].partitions[j].chunks {
				n += max(c.Len, int64(len(c.Buf)))
			}
		}
	}
	return n
}

// fetchBodyParts is the most parts appendFetchBody makes of b: a run of buf
// before each partition's chunks and one per chunk, and the last run.
func fetchBodyParts(b *fetchBody) int {
	n := 1
	for i := range b.topics {
		for j := range b.topics[i].partitions {
			if c := len(b.topics[i].partitions[j].chunks); c > 0 {
				n += 1 + c
			}
		}
	}
	return n
}

// appendFetchBody appends b's encoding to buf (which may already hold the
// response header) and returns the parts to send: buf's bytes cut into runs
// around each partition's records, and the file ranges of the record chunks,
// in wire order. parts is appended to and returned. Each Buf part is a
// capacity-limited slice, so nothing appended later can overwrite it even
// when buf's array is shared.
func appendFetchBody(buf []byte, parts []netpoll.Part, b *fetchBody) []netpoll.Part {
	v := b.version
	flex := v >= fetchFirstFlexibleVersion
	start := 0 // first byte of buf not yet in a part

	buf = kbin.AppendInt32(buf, b.throttleMs)
	if v >= 7 {
		buf = kbin.AppendInt16(buf, b.errCode)
		buf = kbin.AppendInt32(buf, b.sessionID)
	}
	buf = fetchAppendArrayLen(buf, len(b.topics), flex)
	for i := range b.topics {
		t := &b.topics[i]
		if v >= fetchFirstTopicIDVersion {
			buf = kbin.AppendUuid(buf, t.id)
		} else if flex {
			buf = kbin.AppendCompactString(buf, t.name)
		} else {
			buf = kbin.AppendString(buf, t.name)
		}
		buf = fetchAppendArrayLen(buf, len(t.partitions), flex)
		for j := range t.partitions {
			p := &t.partitions[j]
			buf = kbin.AppendInt32(buf, p.partition)
			buf = kbin.AppendInt16(buf, p.errCode)
			buf = kbin.AppendInt64(buf, p.highWatermark)
			buf = kbin.AppendInt64(buf, p.lastStableOffset) // v4+
			if v >= 5 {
				buf = kbin.AppendInt64(buf, p.logStartOffset)
			}
			// Aborted transactions: null for read_uncommitted, else the
			// transactions the consumer must drop (possibly none).
			switch {
			case len(p.aborted) > 0:
				buf = fetchAppendArrayLen(buf, len(p.aborted), flex)
				for _, a := range p.aborted {
					buf = kbin.AppendInt64(buf, a.ProducerID)
					buf = kbin.AppendInt64(buf, a.FirstOffset)
					if flex {
						buf = append(buf, 0) // aborted transaction tags: none
					}
				}
			case !p.abortedEmpty && flex:
				buf = kbin.AppendCompactNullableArrayLen(buf, 0, true)
			case !p.abortedEmpty:
				buf = kbin.AppendNullableArrayLen(buf, 0, true)
			default:
				buf = fetchAppendArrayLen(buf, 0, flex)
			}
			if v >= 11 {
				buf = kbin.AppendInt32(buf, -1) // PreferredReadReplica: none (KIP-392)
			}
			// Records: never null (Kafka sends an empty set), length then bytes.
			n := chunkBytes(p.chunks)
			if flex {
				buf = kbin.AppendUvarint(buf, uint32(n)+1)
			} else {
				buf = kbin.AppendInt32(buf, int32(n))
			}
			if len(p.chunks) > 0 {
				parts = append(parts, netpoll.Part{Buf: buf[start:len(buf):len(buf)]})
				start = len(buf)
				for _, c := range p.chunks {
					switch {
					case c.File == nil && len(c.Buf) > 0: // the tail cache (Log.ReadMem)
						parts = append(parts, netpoll.Part{Buf: c.Buf})
					case c.File != nil && c.Len > 0:
						parts = append(parts, netpoll.Part{File: c.File, Off: c.Pos, Len: c.Len})
					}
				}
			}
			if flex {
				buf = append(buf, 0) // partition tags: none
			}
		}
		if flex {
			buf = append(buf, 0) // topic tags: none
		}
	}
	if flex {
		buf = append(buf, 0) // response tags: none (NodeEndpoints only with NOT_LEADER_OR_FOLLOWER)
	}
	if start < len(buf) {
		parts = append(parts, netpoll.Part{Buf: buf[start:len(buf):len(buf)]})
	}
	return parts
}

// chunkBytes is the total length of chunks.
func chunkBytes(chunks []engine.Chunk) int64 {
	var n int64
	for _, c := range chunks {
		n += max(c.Len, 0)
	}
	return n
}

// fetchAppendArrayLen appends a non-null array length in the version's form.
func fetchAppendArrayLen(dst []byte, n int, flex bool) []byte {
	if flex {
		return kbin.AppendCompactArrayLen(dst, n)
	}
	return kbin.AppendArrayLen(dst, n)
}
