package server

// Fetch (API key 1), v4..v18.
//
// Each requested partition is read with engine Log.Read, in request order,
// against two byte budgets: the partition's PartitionMaxBytes and what is left
// of the response's MaxBytes (itself capped by Config.FetchMaxBytes). The
// first partition that returns anything may exceed both by one batch
// (minOneBatch), so a record larger than the budgets still makes progress, as
// in Kafka. The response is framed by hand (fetch_encode.go) and the record
// chunks go out with sendfile; their ReadResults are released in the
// sendParts done callback, which netpoll calls after the write finished or
// failed.
//
// Long poll: when fewer than MinBytes were read, MaxWaitMs > 0 and no
// partition failed, the handler releases what it read and returns; a
// goroutine owned by the request then waits for any fetched partition's high
// watermark to move past what it saw (Log.Wait), the MaxWaitMs timer, or the
// connection closing, reads again and answers (or waits again while still
// below MinBytes). The connection's read goroutine is never blocked, and
// netpoll keeps responses in request order. The goroutine ends on the timer
// at the latest.
//
// Fetch sessions (KIP-227) are not implemented: every answer carries
// SessionID 0, which makes clients stop asking for one (franz-go kills its
// session on a zero id). A full fetch (SessionEpoch 0 or -1, whatever the
// SessionID) is served; an incremental one (any other epoch) gets
// FETCH_SESSION_ID_NOT_FOUND, as Kafka answers for a session it does not
// know, and clients fall back to full fetches.

import (
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// fetchMinVersion is the first version with RecordBatch (magic v2)
	// records; older versions need message-set down-conversion.
	fetchMinVersion = 4
	// fetchMaxVersion is kmsg's newest Fetch; v13+ names topics by id.
	fetchMaxVersion = 18

	// fetchMaxResponseBytes caps the response budget whatever the request
	// and fetch.max.bytes say, so a response (records plus framing, plus one
	// oversized first batch) stays far below the 2 GiB a frame can carry.
	fetchMaxResponseBytes = 1 << 30

	// fetchSelectMax bounds the channels one reflect.Select waits on (the
	// runtime's limit is 65536); larger long polls fan in through helper
	// goroutines, each waiting on at most this many.
	fetchSelectMax = 1024
)

func init() { register(1, fetchMinVersion, fetchMaxVersion, handleFetch) }

// fetchWaitTarget is a partition a long poll waits on: it wakes when the
// partition's high watermark moves past offset.
type fetchWaitTarget struct {
	log    *engine.Log
	offset int64
}

// fetchState is one Fetch request being served. It is owned by the handler
// until it returns and by the long-poll goroutine afterwards; never both.
type fetchState struct {
	s        *Server
	rc       *reqCtx
	req      *kmsg.FetchRequest
	maxBytes int64 // response budget: min(request MaxBytes, fetch.max.bytes, fetchMaxResponseBytes)
	consumer bool  // ReplicaID / ReplicaState.ID < 0

	body    fetchBody
	results []engine.ReadResult // every non-empty read of the last pass, released after the write
	waits   []fetchWaitTarget   // partitions of the last pass a long poll can wait on
}

func handleFetch(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.FetchRequest)
	f := &fetchState{
		s:        s,
		rc:       rc,
		req:      req,
		maxBytes: int64(max(min(req.MaxBytes, s.cfg.FetchMaxBytes, fetchMaxResponseBytes), 0)),
		body:     fetchBody{version: rc.version},
	}
	replicaID := req.ReplicaID
	if rc.version >= 15 {
		replicaID = req.ReplicaState.ID // KIP-903 moved it into a tag
	}
	f.consumer = replicaID < 0 // -1 consumer, -2 debug consumer

	if rc.version >= 7 && req.SessionEpoch != 0 && req.SessionEpoch != -1 {
		// An incremental fetch of a session we never created.
		f.body.errCode = kerr.FetchSessionIDNotFound.Code
		f.send()
		return
	}

	bytes, failed := f.read()
	if req.MaxWaitMillis <= 0 || bytes >= int64(req.MinBytes) || failed || len(f.waits) == 0 {
		f.send()
		return
	}
	f.release()
	s.log.Debug("fetch: long poll waiting", "remote", remoteAddr(rc.conn), "partitions", len(f.waits),
		"min_bytes", req.MinBytes, "max_wait_ms", req.MaxWaitMillis)
	go f.longPoll(time.Duration(req.MaxWaitMillis) * time.Millisecond)
}

// read runs one pass over the request: reads every partition, fills f.body,
// f.results and f.waits. It returns the record bytes read and whether any
// partition answered with an error (which ends a long poll, as in Kafka).
func (f *fetchState) read() (bytes int64, failed bool) {
	req, eng, v := f.req, f.s.eng, f.rc.version
	f.waits = f.waits[:0]
	f.body.topics = make([]fetchTopic, len(req.Topics))
	remaining := f.maxBytes
	for i := range req.Topics {
		rt := &req.Topics[i]
		ft := &f.body.topics[i]
		ft.name, ft.id = rt.Topic, rt.TopicID
		ft.partitions = make([]fetchPartition, len(rt.Partitions))

		var topic *engine.Topic
		var topicErr int16
		if v >= fetchFirstTopicIDVersion {
			if topic = eng.TopicByID(rt.TopicID); topic == nil {
				topicErr = kerr.UnknownTopicID.Code
			}
		} else if topic = eng.Topic(rt.Topic); topic == nil {
			topicErr = kerr.UnknownTopicOrPartition.Code
		}

		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			fp := &ft.partitions[j]
			*fp = fetchPartition{
				partition:        rp.Partition,
				highWatermark:    -1,
				lastStableOffset: -1,
				logStartOffset:   -1,
			}
			fp.errCode = topicErr
			if fp.errCode == 0 {
				fp.errCode = f.readPartition(topic, rp, fp, remaining, bytes == 0)
			}
			if fp.errCode != 0 {
				failed = true
				continue
			}
			n := chunkBytes(fp.chunks)
			bytes += n
			remaining = max(remaining-n, 0)
		}
	}
	return bytes, failed
}

// readPartition reads one partition into fp and returns its error code.
// limit is what is left of the response budget; first is true while nothing
// has been read yet in this response (minOneBatch).
func (f *fetchState) readPartition(topic *engine.Topic, rp *kmsg.FetchRequestTopicPartition, fp *fetchPartition, limit int64, first bool) int16 {
	l := topic.Partition(rp.Partition)
	if l == nil {
		return kerr.UnknownTopicOrPartition.Code
	}
	if !f.consumer {
		// Replication is not implemented: no broker is our follower.
		return kerr.NotLeaderForPartition.Code
	}
	if f.req.IsolationLevel != 0 && f.req.IsolationLevel != 1 {
		return kerr.InvalidRequest.Code
	}
	if code := leaderEpochCheck(rp.CurrentLeaderEpoch, l.LeaderEpoch()); code != 0 {
		return code
	}
	limit = min(limit, int64(max(rp.PartitionMaxBytes, 0)))
	rr, err := l.Read(rp.FetchOffset, int32(limit), first)
	if err != nil {
		rr.Release()
		code := errCode(err)
		if code == kerr.OffsetOutOfRange.Code {
			// Tell the consumer where the log is, so it can reset.
			hw := l.HighWatermark()
			fp.highWatermark, fp.lastStableOffset, fp.logStartOffset = hw, hw, l.LogStartOffset()
		}
		return code
	}
	if rr.Bytes > math.MaxInt32 { // one batch is < 2 GiB; a broken read, not a client error
		rr.Release()
		f.s.log.Error("fetch: read returned more than 2 GiB", "topic", topic.Name(), "partition", rp.Partition, "bytes", rr.Bytes)
		return kerr.UnknownServerError.Code
	}
	fp.highWatermark = rr.HighWatermark
	// read_committed reads up to the last stable offset, which equals the
	// high watermark until transactions exist; so do the reads.
	fp.lastStableOffset = rr.LastStableOffset
	fp.logStartOffset = rr.LogStartOffset
	fp.abortedEmpty = f.req.IsolationLevel == 1
	if len(rr.Chunks) > 0 {
		fp.chunks = rr.Chunks
		f.results = append(f.results, rr)
	} else {
		rr.Release()
	}
	// Wake when the HW passes both the fetch offset and what we just saw,
	// so data already here (but below MinBytes) does not wake us at once.
	f.waits = append(f.waits, fetchWaitTarget{log: l, offset: max(rp.FetchOffset, rr.HighWatermark)})
	return 0
}

// leaderEpochCheck is KIP-320 fencing: a client's CurrentLeaderEpoch (-1 =
// skip) newer than ours is UNKNOWN_LEADER_EPOCH (we lag), older is
// FENCED_LEADER_EPOCH (the client lags). Shared by Fetch, ListOffsets and
// OffsetForLeaderEpoch.
func leaderEpochCheck(clientEpoch, ourEpoch int32) int16 {
	switch {
	case clientEpoch < 0:
		return 0
	case clientEpoch > ourEpoch:
		return kerr.UnknownLeaderEpoch.Code
	case clientEpoch < ourEpoch:
		return kerr.FencedLeaderEpoch.Code
	}
	return 0
}

// release releases the reads of the last pass (a long poll re-reads).
func (f *fetchState) release() {
	for i := range f.results {
		f.results[i].Release()
	}
	clear(f.results)
	f.results = f.results[:0]
}

// send encodes the response and completes the request; the reads are
// released once netpoll has written (or failed to write) the response.
func (f *fetchState) send() {
	buf := make([]byte, 0, 5+estimateFetchBodyBytes(&f.body))
	buf = f.rc.appendResponseHeader(buf)
	parts := appendFetchBody(buf, nil, &f.body)
	results := f.results
	f.results = nil
	var done func()
	if len(results) > 0 {
		done = func() {
			for i := range results {
				results[i].Release()
			}
		}
	}
	f.rc.sendParts(parts[0].Buf, parts[1:], done)
}

// fetchWake is why a long poll's wait ended.
type fetchWake int

const (
	fetchWoken fetchWake = iota // a partition's high watermark moved
	fetchTimedOut
	fetchConnClosed
)

// longPoll waits for data, the deadline or the connection closing, and
// completes the request. It runs on its own goroutine and always ends: the
// timer fires at the latest.
func (f *fetchState) longPoll(wait time.Duration) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	closed := f.rc.conn.Done()
	for {
		switch f.await(timer.C, closed) {
		case fetchConnClosed:
			// Nobody to answer; complete the slot so netpoll can move on.
			f.s.log.Debug("fetch: long poll ended: connection closed", "remote", remoteAddr(f.rc.conn))
			f.rc.skip()
			return
		case fetchTimedOut:
			f.read()
			f.send()
			return
		}
		bytes, failed := f.read()
		if bytes >= int64(f.req.MinBytes) || failed || len(f.waits) == 0 {
			f.send()
			return
		}
		f.release()
	}
}

// await blocks until a wait target's high watermark moves, the timer fires
// or the connection closes.
func (f *fetchState) await(timeout <-chan time.Time, closed <-chan struct{}) fetchWake {
	if len(f.waits) == 1 {
		w := f.waits[0]
		select {
		case <-closed:
			return fetchConnClosed
		case <-timeout:
			return fetchTimedOut
		case <-w.log.Wait(w.offset):
			return fetchWoken
		}
	}
	if len(f.waits) <= fetchSelectMax {
		cases := make([]reflect.SelectCase, 0, 2+len(f.waits))
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(closed)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timeout)})
		for _, w := range f.waits {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.log.Wait(w.offset))})
		}
		switch chosen, _, _ := reflect.Select(cases); chosen {
		case 0:
			return fetchConnClosed
		case 1:
			return fetchTimedOut
		}
		return fetchWoken
	}

	// Many partitions: helpers each wait on a group and poke wake; they end
	// when stop closes, and await waits for them before returning.
	stop := make(chan struct{})
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for lo := 0; lo < len(f.waits); lo += fetchSelectMax {
		group := f.waits[lo:min(lo+fetchSelectMax, len(f.waits))]
		cases := make([]reflect.SelectCase, 0, 1+len(group))
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stop)})
		for _, w := range group {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.log.Wait(w.offset))})
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if chosen, _, _ := reflect.Select(cases); chosen != 0 {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}()
	}
	var why fetchWake
	select {
	case <-closed:
		why = fetchConnClosed
	case <-timeout:
		why = fetchTimedOut
	case <-wake:
		why = fetchWoken
	}
	close(stop)
	wg.Wait()
	return why
}
