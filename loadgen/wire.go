package loadgen

// The native producer's wire path: Produce requests framed by hand so that
// batch bytes go from the accumulator's buffers to the socket with one
// writev and no copy, pipelined on one TCP connection per broker, and
// responses decoded with kmsg.
//
// Produce request frame (v3..v12; "flex" = v9+ compact/tagged encoding):
//
//	int32   size                        bytes after this field
//	int16   api key 0, int16 version, int32 correlation id
//	int16   client id length, client id (request header v1/v2: never compact)
//	flex:   uvarint 0                   header tagged fields
//	        transactional id            null: int16 -1 | flex uvarint 0
//	int16   acks, int32 timeout ms
//	        topics: 1                   int32 1 | flex uvarint 2
//	        topic name                  int16 len + bytes | flex uvarint len+1 + bytes
//	        partitions: n               int32 n | flex uvarint n+1
//	  n×    int32 partition
//	        records length              int32 len | flex uvarint len+1
//	        records                     ← the batch bytes, a separate iovec
//	flex:   uvarint 0                   partition tagged fields
//	flex:   uvarint 0, uvarint 0        topic and request tagged fields
//
// Everything but the batch bytes is appended into one reused buffer (the
// head) and cut into the iovecs between the batches once complete.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/stratalog/strata/internal/kframe"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/batcher"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	produceKey            = 0
	produceMinVersion     = 3  // RecordBatch v2
	produceMaxVersion     = 12 // v13 names topics by id
	produceFlexible       = 9
	produceZstdMinVersion = 7
	produceTimeoutMs      = 30000
	// maxResponseBytes bounds a produce response frame we are willing to
	// buffer; a response for one topic is a few bytes per partition.
	maxResponseBytes = 16 << 20
	// maxRequestBytes bounds the batch bytes in one produce request, like
	// the Java client's max.request.size.
	maxRequestBytes = 1 << 20
	// responseGrace is added to the request timeout before a read gives up.
	responseGrace   = 15 * time.Second
	loadgenClientID = "strata-loadgen"
)

// produceReq is one produce request: its batches (one per partition at
// most), its frame and what its response must match. A connection owns a
// fixed set of them (its in-flight limit); they cycle through free.
type produceReq struct {
	corrID  int32
	batches []*batcher.Batch
	head    []byte
	cuts    []int // head offsets: head[cuts[i]:cuts[i+1]] precedes batches[i]
	bufs    net.Buffers
	bufsArr [][]byte
	bytes   int // batch bytes
	records int
}

// appendFrame builds req's frame for version/acks into req.head and
// req.bufs. The caller has filled req.batches.
func (r *produceReq) appendFrame(version int16, corrID int32, acks int16, topic string) {
	flex := version >= produceFlexible
	h := r.head[:0]
	h = append(h, 0, 0, 0, 0) // size, patched below
	h = binary.BigEndian.AppendUint16(h, produceKey)
	h = binary.BigEndian.AppendUint16(h, uint16(version))
	h = binary.BigEndian.AppendUint32(h, uint32(corrID))
	h = binary.BigEndian.AppendUint16(h, uint16(len(loadgenClientID)))
	h = append(h, loadgenClientID...)
	if flex {
		h = append(h, 0) // header tags
		h = append(h, 0) // transactional id: null compact string
	} else {
		h = binary.BigEndian.AppendUint16(h, 0xffff) // null string
	}
	h = binary.BigEndian.AppendUint16(h, uint16(acks))
	h = binary.BigEndian.AppendUint32(h, produceTimeoutMs)
	if flex {
		h = binary.AppendUvarint(h, 2)
		h = binary.AppendUvarint(h, uint64(len(topic))+1)
	} else {
		h = binary.BigEndian.AppendUint32(h, 1)
		h = binary.BigEndian.AppendUint16(h, uint16(len(topic)))
	}
	h = append(h, topic...)
	if flex {
		h = binary.AppendUvarint(h, uint64(len(r.batches))+1)
	} else {
		h = binary.BigEndian.AppendUint32(h, uint32(len(r.batches)))
	}
	r.cuts = append(r.cuts[:0], 0)
	r.bytes, r.records = 0, 0
	for i, b := range r.batches {
		if i > 0 && flex {
			h = append(h, 0) // previous partition's tags
		}
		h = binary.BigEndian.AppendUint32(h, uint32(b.Partition))
		if flex {
			h = binary.AppendUvarint(h, uint64(len(b.Bytes))+1)
		} else {
			h = binary.BigEndian.AppendUint32(h, uint32(len(b.Bytes)))
		}
		r.cuts = append(r.cuts, len(h))
		r.bytes += len(b.Bytes)
		r.records += b.Records
	}
	if flex {
		if len(r.batches) > 0 {
			h = append(h, 0) // last partition's tags
		}
		h = append(h, 0, 0) // topic tags, request tags
	}
	r.cuts = append(r.cuts, len(h))
	binary.BigEndian.PutUint32(h, uint32(len(h)-4+r.bytes))
	r.head = h

	bufs := r.bufsArr[:0]
	for i, b := range r.batches {
		bufs = append(bufs, h[r.cuts[i]:r.cuts[i+1]], b.Bytes)
	}
	if last := h[r.cuts[len(r.batches)]:]; len(last) > 0 {
		bufs = append(bufs, last)
	}
	r.bufsArr = bufs
	r.bufs = bufs
	r.corrID = corrID
}

// parseProduceResponse checks a response frame (the bytes after its size)
// against the correlation id and decodes the body into resp.
func parseProduceResponse(frame []byte, version int16, corrID int32, resp *kmsg.ProduceResponse) error {
	body, got, err := kframe.SplitResponseHeader(frame, version >= produceFlexible)
	if err != nil {
		return fmt.Errorf("loadgen: produce response: %w", err)
	}
	if got != corrID {
		return fmt.Errorf("loadgen: produce response for correlation id %d, expected %d", got, corrID)
	}
	*resp = kmsg.ProduceResponse{Version: version}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("loadgen: decoding produce response: %w", err)
	}
	return nil
}

// partitionErrors returns, for each batch of req in order, the error the
// response gives its partition (nil on success). A partition the response
// does not mention fails.
func partitionErrors(req *produceReq, resp *kmsg.ProduceResponse, topic string, out []error) []error {
	out = out[:0]
	for _, b := range req.batches {
		var err error = errMissingPartition
		for ti := range resp.Topics {
			t := &resp.Topics[ti]
			if t.Topic != topic {
				continue
			}
			for pi := range t.Partitions {
				if p := &t.Partitions[pi]; p.Partition == b.Partition {
					err = kerr.ErrorForCode(p.ErrorCode)
					if err != nil && p.ErrorMessage != nil {
						err = fmt.Errorf("%w: %s", err, *p.ErrorMessage)
					}
				}
			}
		}
		out = append(out, err)
	}
	return out
}

var errMissingPartition = errors.New("produce response does not mention the partition")

// nativeConn is one pipelined connection to one broker, owned by one native
// producer. The producer goroutine frames and writes requests (send); the
// reader goroutine reads the responses in order (readLoop), records
// latencies and errors, releases batches and returns requests to free.
//
// free holds the requests not in flight: taking one is how the producer
// waits when maxInflight requests are outstanding. inflight carries the
// written requests, in order, to the reader; the producer closes it when it
// is done, and the reader then exits (done) after the last response.
type nativeConn struct {
	conn     net.Conn
	addr     string
	version  int16
	acks     int16
	topic    string
	corr     int32
	free     chan *produceReq
	inflight chan *produceReq
	done     chan struct{}
	dead     atomic.Bool
	readErr  error // the reader's fatal error, read after done

	acc         *batcher.Accumulator
	env         *runEnv
	rec         *recorder
	recordBytes int64
}

func dialNative(env *runEnv, addr string, version int16, acc *batcher.Accumulator, rec *recorder) (*nativeConn, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	n := env.cfg.MaxInflight
	c := &nativeConn{
		conn: conn, addr: addr, version: version, acks: env.cfg.Acks, topic: env.cfg.Topic,
		free: make(chan *produceReq, n), inflight: make(chan *produceReq, n), done: make(chan struct{}),
		acc: acc, env: env, rec: rec, recordBytes: int64(env.cfg.RecordBytes),
	}
	for range n {
		c.free <- &produceReq{}
	}
	if c.acks == 0 {
		go c.discardLoop()
	} else {
		go c.readLoop()
	}
	return c, nil
}

// takeReq waits for a request slot: the in-flight limit.
func (c *nativeConn) takeReq() *produceReq { return <-c.free }

// send frames req and writes it. req.batches is filled; ownership of req
// and its batches passes to the connection.
func (c *nativeConn) send(req *produceReq) {
	st := c.env.st
	if c.dead.Load() {
		c.finish(req, errConnDead, 0)
		return
	}
	c.corr++
	req.appendFrame(c.version, c.corr, c.acks, c.topic)
	st.requests.Add(1)
	st.batches.Add(int64(len(req.batches)))
	st.batchRecords.Add(int64(req.records))
	if c.acks != 0 {
		c.inflight <- req // never blocks: at most cap requests exist
	}
	_, err := req.bufs.WriteTo(c.conn)
	if err != nil {
		c.kill(fmt.Errorf("writing to %s: %w", c.addr, err))
	}
	if c.acks == 0 {
		c.finish(req, err, c.env.now())
	}
}

var errConnDead = errors.New("connection to the broker failed earlier")

// kill marks the connection failed and closes it, so the reader fails
// every request still in flight.
func (c *nativeConn) kill(err error) {
	if c.dead.CompareAndSwap(false, true) {
		c.env.st.noteError(err.Error(), 1)
		c.conn.Close()
	}
}

// finish accounts for a completed request: per batch success (latency of
// each record from its scheduled time to now) or failure, then releases
// the batches and the request.
func (c *nativeConn) finish(req *produceReq, err error, now time.Duration, perBatch ...error) {
	st := c.env.st
	for i, b := range req.batches {
		e := err
		if e == nil && i < len(perBatch) {
			e = perBatch[i]
		}
		n := c.env.measuredTags(b.Tags) // the lead-in's records do not count
		switch {
		case n == 0:
		case e != nil:
			st.failRecords(n, e)
		default:
			c.rec.recordSince(now, b.Tags, int64(c.env.measureOff))
			st.acked.Add(n)
			st.ackedBytes.Add(n * c.recordBytes)
		}
		c.acc.Release(b)
		req.batches[i] = nil
	}
	req.batches = req.batches[:0]
	c.free <- req
}

// readLoop reads one response per in-flight request, in order.
func (c *nativeConn) readLoop() {
	defer close(c.done)
	var (
		frame []byte
		resp  kmsg.ProduceResponse
		errs  []error
		fatal error
	)
	for req := range c.inflight {
		if fatal == nil {
			frame, fatal = c.readFrame(frame)
			if fatal == nil {
				fatal = parseProduceResponse(frame, c.version, req.corrID, &resp)
			}
			if fatal != nil {
				c.readErr = fatal
				c.kill(fatal)
			}
		}
		if fatal != nil {
			c.finish(req, fatal, 0)
			continue
		}
		errs = partitionErrors(req, &resp, c.topic, errs)
		c.finish(req, nil, c.env.now(), errs...)
	}
}

// readFrame reads one size-prefixed frame into buf (reused).
func (c *nativeConn) readFrame(buf []byte) ([]byte, error) {
	c.conn.SetReadDeadline(wallClock().Add(produceTimeoutMs*time.Millisecond + responseGrace))
	buf, err := kframe.ReadFrame(c.conn, maxResponseBytes, buf)
	if err != nil {
		return buf, fmt.Errorf("reading a produce response from %s: %w", c.addr, err)
	}
	return buf, nil
}

// discardLoop watches an acks=0 connection: the broker sends nothing, and
// closes the connection when a produce fails.
func (c *nativeConn) discardLoop() {
	defer close(c.done)
	_, err := io.Copy(io.Discard, c.conn)
	if err == nil {
		err = io.EOF
	}
	if !c.dead.Load() {
		c.kill(fmt.Errorf("acks=0 connection to %s closed by the broker: %w", c.addr, err))
	}
	for range c.inflight { // nothing is ever queued with acks=0; wait for close
	}
}

// close ends the connection after every in-flight response or, at the
// latest, after timeout; requests still unanswered then fail.
func (c *nativeConn) close(timeout time.Duration) {
	close(c.inflight)
	if c.acks == 0 {
		c.dead.Store(true)
		c.conn.Close() // wakes discardLoop
		<-c.done
		return
	}
	select {
	case <-c.done:
	case <-time.After(timeout):
		c.kill(fmt.Errorf("no produce response from %s within %v of the end of the run", c.addr, timeout))
		<-c.done
	}
	c.conn.Close()
}
