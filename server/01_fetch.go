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
// partition failed, the handler releases what it read, registers one
// engine.HWWaiter on every fetched partition (woken when any partition's high
// watermark moves past what this pass saw), starts one timer for MaxWaitMs,
// and returns. Waiting costs no goroutine and nothing per partition but a
// registration record; the connection's read goroutine is never blocked and
// netpoll keeps responses in request order. The poll then moves through
//
//	waiting --HW wake--> busy (a new goroutine re-reads every partition)
//	waiting --timer----> busy (on the timer's goroutine: read, answer)
//	waiting --conn closed (netpoll.ConnCloseHandler)--> answer nothing
//	busy: MinBytes reached, a partition failed, or the timer passed → answer
//	      (the response is encoded once, from the last read); else register
//	      again → waiting
//
// fetchState.mu guards the phase and the wake/expired/gone flags; a wake or
// a timeout that arrives while busy is recorded and handled by the busy
// goroutine before it parks, so none is lost. Pending polls are listed in
// Server.polls so a closing connection finds its own.
//
// Isolation: read_uncommitted (0) reads below the high watermark;
// read_committed (1) below the last stable offset (engine/txn.go: the first
// offset of the oldest undecided transaction), and the partition's answer
// carries the aborted transactions overlapping what was read
// (engine Log.AbortedTransactions, from the in-memory aborted transaction
// index), which the consumer drops up to each producer's ABORT marker.
// Both answer LastStableOffset; record bytes keep the zero-copy path.
//
// Follower fetches (replica id >= 0, replication; see replica/doc.go) read
// to the log end instead of the HW (readReplica), report the follower's
// position to the leader's replica state, and long-poll on the log end on a
// goroutine of their own (replicaPoll), since the HW cannot pass a
// follower's offset before that follower fetches again.
//
// Fetch sessions (KIP-227, fetch_session.go): a consumer's full fetch with
// SessionEpoch 0 opens a session; its incremental fetches name only what
// changed and get answers holding only partitions with something new. The
// handler turns an incremental fetch into the session's full partition list
// (useSession) and trims the answer when it is sent.

import (
	"context"
	"errors"
	"fmt"
	"github.com/stratalog/strata/auth"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/netpoll"
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

	// Fetch session (fetch_session.go): the session this fetch opened or
	// continues (nil: none), and whether it is incremental.
	session     *fetchSession
	incremental bool
	order       sessionOrder // f.req's partitions in the session (incremental)

	body    fetchBody
	results []engine.ReadResult // every non-empty read of the last pass, released after the write
	waits   []fetchWaitTarget   // partitions of the last pass a long poll can wait on

	// Long poll (see the file comment). waiter and the read state above
	// belong to whoever holds the busy phase.
	waiter *engine.HWWaiter
	mu     sync.Mutex
	phase  uint8       // pollBusy, pollWaiting, pollDone
	woken  bool        // a HW wake arrived while busy
	expire bool        // MaxWaitMs passed (or the connection closed)
	gone   bool        // the connection closed: answer nothing
	timer  *time.Timer // MaxWaitMs; set under mu
}

// Long-poll phases.
const (
	pollBusy    uint8 = iota // a goroutine owns the state (reading, registering)
	pollWaiting              // registered on the partitions; no goroutine
	pollDone                 // answered (or dropped)
)

// fetchPolls lists the pending long polls of a Server.
type fetchPolls struct {
	mu sync.Mutex
	m  map[*fetchState]struct{}
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

	if rc.version >= 7 && !f.useSession() {
		f.send() // a session error, no partitions
		return
	}

	bytes, failed := f.read()
	if req.MaxWaitMillis <= 0 || bytes >= int64(req.MinBytes) || failed || len(f.waits) == 0 {
		f.send()
		return
	}
	f.release()
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("fetch: long poll waiting", "remote", remoteAddr(rc.conn), "partitions", len(f.waits),
			"min_bytes", req.MinBytes, "max_wait_ms", req.MaxWaitMillis)
	}
	if !f.consumer {
		go f.replicaPoll(time.Duration(req.MaxWaitMillis) * time.Millisecond) // a follower waits on log ends
		return
	}
	f.startPoll(time.Duration(req.MaxWaitMillis) * time.Millisecond)
}

// useSession applies the request's fetch session fields (v7+; see
// fetch_session.go): closes, opens or continues a session, replacing f.req
// by the session's full partition list for an incremental fetch. It
// returns false, with f.body.errCode set, when the fetch must be answered
// with that error alone.
func (f *fetchState) useSession() bool {
	req, ss := f.req, &f.s.sessions
	conn := f.rc.conn.ID()
	byID := f.rc.version >= fetchFirstTopicIDVersion
	switch req.SessionEpoch {
	case -1, 0: // a full fetch; 0 also asks for a (new) session
		if req.SessionID != 0 {
			ss.drop(conn, req.SessionID)
		}
		if req.SessionEpoch == 0 && f.consumer {
			f.session = ss.open(conn, req, byID)
		}
	default:
		if !f.consumer {
			f.body.errCode = kerr.FetchSessionIDNotFound.Code // followers get no sessions
			return false
		}
		sess, full, order, code := ss.incrementalFetch(conn, req, byID)
		if code != 0 {
			f.body.errCode = code
			return false
		}
		f.session, f.incremental, f.req, f.order = sess, true, full, order
	}
	if f.session != nil {
		f.body.sessionID = f.session.id
	}
	return true
}

// read runs one pass over the request: reads every partition, fills f.body,
// f.results and f.waits. It returns the record bytes read and whether any
// partition answered with an error (which ends a long poll, as in Kafka).
func (f *fetchState) read() (bytes int64, failed bool) {
	req, eng, v := f.req, f.s.eng, f.rc.version
	f.waits = f.waits[:0]
	// A long poll reads again into the same slices.
	if cap(f.body.topics) < len(req.Topics) {
		f.body.topics = make([]fetchTopic, len(req.Topics))
	}
	f.body.topics = f.body.topics[:len(req.Topics)]
	remaining := f.maxBytes
	for i := range req.Topics {
		rt := &req.Topics[i]
		ft := &f.body.topics[i]
		ft.name, ft.id = rt.Topic, rt.TopicID
		if cap(ft.partitions) < len(rt.Partitions) {
			ft.partitions = make([]fetchPartition, len(rt.Partitions))
		}
		ft.partitions = ft.partitions[:len(rt.Partitions)]

		var topic *engine.Topic
		var topicErr int16
		if v >= fetchFirstTopicIDVersion {
			if topic = eng.TopicByID(rt.TopicID); topic == nil {
				topicErr = kerr.UnknownTopicID.Code
			}
		} else if topic = eng.Topic(rt.Topic); topic == nil {
			topicErr = kerr.UnknownTopicOrPartition.Code
		}
		// authz.go: Read on the topic (ClusterAction on the cluster for a
		// follower), checked before whether a named topic exists.
		if topic != nil || v < fetchFirstTopicIDVersion {
			name := rt.Topic
			if topic != nil {
				name = topic.Name()
			}
			if !f.authorizedTopic(name) {
				topic, topicErr = nil, kerr.TopicAuthorizationFailed.Code
			}
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
		return f.s.noLogCode(topic, rp.Partition) // cluster.go: not a replica here
	}
	if code := f.s.clusterPartitionCheck(topic, rp.Partition); code != 0 { // cluster.go
		return code
	}
	if !f.consumer {
		return f.readReplica(l, rp, fp, limit, first) // a follower's fetch (below)
	}
	if f.req.IsolationLevel != 0 && f.req.IsolationLevel != 1 {
		return kerr.InvalidRequest.Code
	}
	if code := leaderEpochCheck(rp.CurrentLeaderEpoch, l.LeaderEpoch()); code != 0 {
		return code
	}
	limit = min(limit, int64(max(rp.PartitionMaxBytes, 0)))
	// ReadMem: a consumer at the head is served from the tail cache
	// (memory chunks) instead of segment files the page cache may not hold.
	// read_committed (isolation level 1) reads below the last stable
	// offset only (engine/txn.go).
	committed := f.req.IsolationLevel == 1
	var rr engine.ReadResult
	var err error
	if committed {
		rr, err = l.ReadCommittedMem(rp.FetchOffset, int32(limit), first)
	} else {
		rr, err = l.ReadMem(rp.FetchOffset, int32(limit), first)
	}
	if err != nil {
		rr.Release()
		if errors.Is(err, engine.ErrOffsetOutOfRange) {
			if code, ok := f.readRemote(l, rp, fp, limit, first); ok { // remote.go: tiered storage
				return code
			}
		}
		code := errCode(err)
		if code == kerr.OffsetOutOfRange.Code {
			// Tell the consumer where the log is, so it can reset.
			fp.highWatermark, fp.lastStableOffset, fp.logStartOffset = l.HighWatermark(), l.LastStableOffset(), l.LogStartOffset()
		}
		return code
	}
	if rr.Bytes > math.MaxInt32 { // one batch is < 2 GiB; a broken read, not a client error
		rr.Release()
		f.s.log.Error("fetch: read returned more than 2 GiB", "topic", topic.Name(), "partition", rp.Partition, "bytes", rr.Bytes)
		return kerr.UnknownServerError.Code
	}
	fp.highWatermark = rr.HighWatermark
	fp.lastStableOffset = rr.LastStableOffset
	fp.logStartOffset = f.s.remoteLogStart(l, rr.LogStartOffset) // remote.go: tiered storage
	fp.abortedEmpty = committed
	if len(rr.Chunks) > 0 {
		if committed {
			// Every aborted transaction overlapping what the consumer
			// reads: [fetch offset, LSO) bounds the batches returned
			// (engine Log.AbortedTransactions). The index is read in
			// memory; chunks keep their zero-copy path.
			fp.aborted = l.AbortedTransactions(fp.aborted[:0], rp.FetchOffset, rr.LastStableOffset)
		}
		fp.chunks = rr.Chunks
		if f.results == nil {
			f.results = getReadResults()
		}
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

// readResultsPool recycles the slices of reads a fetch response holds
// until netpoll has written it (a consumer's fetch of 96 partitions grew
// one from nothing per response: 2 % of the broker's CPU at 100,000 rec/s
// with one consumer).
var readResultsPool sync.Pool // of *[]engine.ReadResult, length 0

func getReadResults() []engine.ReadResult {
	if p, ok := readResultsPool.Get().(*[]engine.ReadResult); ok {
		return *p
	}
	return make([]engine.ReadResult, 0, 16)
}

// putReadResults returns rs (every read released) to the pool.
func putReadResults(rs []engine.ReadResult) {
	if cap(rs) > 4096 {
		return // a fetch of an unusually many partitions: let it go
	}
	clear(rs)
	rs = rs[:0]
	readResultsPool.Put(&rs)
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
	if f.session != nil {
		f.session.answer(&f.body, f.incremental, f.rc.version >= fetchFirstTopicIDVersion, f.order)
	}
	if f.consumer && f.s.cfg.Quotas != nil && f.s.cfg.Quotas.Active() {
		f.body.throttleMs = f.s.throttle(f.rc, auth.QuotaConsumerByteRate, float64(fetchBodyBytes(&f.body))) // quota.go
	}
	buf := make([]byte, 0, 5+estimateFetchBodyBytes(&f.body))
	buf = f.rc.appendResponseHeader(buf)
	parts := appendFetchBody(buf, make([]netpoll.Part, 0, fetchBodyParts(&f.body)), &f.body)
	results := f.results
	f.results = nil
	var done func()
	if len(results) > 0 {
		done = func() {
			for i := range results {
				results[i].Release()
			}
			putReadResults(results)
		}
	}
	f.s.meterFetch(&f.body, f.consumer) // metrics.go
	f.s.meterRecordsOut(&f.body, f.consumer)
	f.rc.sendParts(parts, done)
}

// startPoll parks f until a partition's HW moves, wait passes or the
// connection closes. It runs on the handler's goroutine, which owns f.
func (f *fetchState) startPoll(wait time.Duration) {
	f.waiter = engine.NewHWWaiter(f.onWake)
	f.phase = pollBusy
	f.s.polls.add(f)
	f.mu.Lock()
	f.timer = time.AfterFunc(wait, f.onTimer)
	f.mu.Unlock()
	f.register()
	f.run()
}

// register arms the waiter on every partition of the last pass.
func (f *fetchState) register() {
	f.waiter.Arm(len(f.waits))
	for _, w := range f.waits {
		f.waiter.Add(w.log, w.offset)
	}
}

// onWake is the HWWaiter callback, on the goroutine that advanced a HW (a
// flush worker): it must not block, so the re-read goes to a new goroutine.
func (f *fetchState) onWake() {
	f.mu.Lock()
	switch f.phase {
	case pollWaiting:
		f.phase, f.woken = pollBusy, true
		f.mu.Unlock()
		go f.run()
		return
	case pollBusy:
		f.woken = true
	}
	f.mu.Unlock()
}

// onTimer runs on the timer's own goroutine at MaxWaitMs.
func (f *fetchState) onTimer() {
	f.mu.Lock()
	f.expire = true
	if f.phase != pollWaiting {
		f.mu.Unlock() // the busy goroutine sees expire
		return
	}
	f.phase = pollBusy
	f.mu.Unlock()
	f.run()
}

// onConnClosed ends the poll without an answer; on the closing goroutine.
func (f *fetchState) onConnClosed() {
	f.mu.Lock()
	f.gone, f.expire = true, true
	if f.phase != pollWaiting {
		f.mu.Unlock()
		return
	}
	f.phase = pollBusy
	f.mu.Unlock()
	f.run()
}

// run owns f in the busy phase: it handles every wake, timeout or close that
// arrived, reading again and answering or registering again, until f is
// answered or parks in pollWaiting with nothing pending.
func (f *fetchState) run() {
	for {
		f.mu.Lock()
		if !f.woken && !f.expire {
			f.phase = pollWaiting
			f.mu.Unlock()
			return
		}
		f.woken = false
		expired, gone := f.expire, f.gone
		f.mu.Unlock()
		f.waiter.Cancel()
		if gone {
			f.s.log.Debug("fetch: long poll ended: connection closed", "remote", remoteAddr(f.rc.conn))
			f.finish()
			f.rc.drop()
			return
		}
		bytes, failed := f.read()
		if expired || bytes >= int64(f.req.MinBytes) || failed || len(f.waits) == 0 {
			f.finish()
			f.send()
			return
		}
		f.release()
		f.register()
	}
}

// finish leaves the long poll: no timer, no registrations, not listed.
func (f *fetchState) finish() {
	f.mu.Lock()
	f.phase = pollDone
	t := f.timer
	f.mu.Unlock()
	t.Stop()
	f.waiter.Cancel()
	f.s.polls.remove(f)
}

func (p *fetchPolls) add(f *fetchState) {
	p.mu.Lock()
	if p.m == nil {
		p.m = make(map[*fetchState]struct{})
	}
	p.m[f] = struct{}{}
	p.mu.Unlock()
}

func (p *fetchPolls) remove(f *fetchState) {
	p.mu.Lock()
	delete(p.m, f)
	p.mu.Unlock()
}

// ConnClosed implements netpoll.ConnCloseHandler: the connection's pending
// long polls end without an answer.
func (h connHandler) ConnClosed(c *netpoll.Conn) {
	h.s.endPolls(c)
	h.s.sessions.connClosed(c.ID())
	h.s.meterConnClosed(c) // metrics.go
}

// endPolls ends connection c's pending consumer long polls without an
// answer (ConnClosed; tests that dispatch on a stand-in connection call it
// when they close it).
func (s *Server) endPolls(c peer) {
	p := &s.polls
	var mine []*fetchState
	p.mu.Lock()
	for f := range p.m {
		if f.rc.conn == c {
			mine = append(mine, f)
		}
	}
	p.mu.Unlock()
	for _, f := range mine {
		f.onConnClosed()
	}
}

// readReplica serves a follower's fetch (replica id >= 0) of l, which this
// broker leads: batches up to the log end rather than the HW
// (Log.ReadReplicaMem: a follower at the head is served from the tail
// cache's memory, like a consumer, instead of from segment files; for a
// Direct segment that also spares flushing its unwritten tail), then the
// follower's position goes to the leader's replica state
// (Log.FollowerFetch; a follower's fetch offset is what it holds durably,
// see replica/doc.go), which may move the HW reported here. Where the bytes
// come from does not change that rule: the follower appends them and
// fetches past them only once they are durable on it.
func (f *fetchState) readReplica(l *engine.Log, rp *kmsg.FetchRequestTopicPartition, fp *fetchPartition, limit int64, first bool) int16 {
	if code := leaderEpochCheck(rp.CurrentLeaderEpoch, l.LeaderEpoch()); code != 0 {
		return code
	}
	replicaID := f.req.ReplicaID
	if f.rc.version >= 15 {
		replicaID = f.req.ReplicaState.ID
	}
	limit = min(limit, int64(max(rp.PartitionMaxBytes, 0)))
	rr, err := l.ReadReplicaMem(rp.FetchOffset, int32(limit), first)
	if err == nil && rr.Bytes > math.MaxInt32 {
		err = fmt.Errorf("fetch: replica read of %s returned %d bytes", l, rr.Bytes)
	}
	if err == nil {
		// KIP-903: a v15+ fetch carries the follower's broker epoch, which
		// the replica manager checks against its registration.
		if fe, ok := f.s.cluster.repl.(interface {
			FollowerFetchEpoch(*engine.Log, int32, int64, int64) error
		}); ok && f.rc.version >= 15 {
			err = fe.FollowerFetchEpoch(l, replicaID, f.req.ReplicaState.Epoch, rp.FetchOffset)
		} else {
			err = l.FollowerFetch(replicaID, rp.FetchOffset)
		}
	}
	if err != nil {
		rr.Release()
		if errors.Is(err, engine.ErrNotReplicated) {
			return kerr.NotLeaderForPartition.Code
		}
		code := errCode(err)
		if code == kerr.OffsetOutOfRange.Code {
			hw := l.HighWatermark()
			fp.highWatermark, fp.lastStableOffset, fp.logStartOffset = hw, hw, l.LogStartOffset()
			code = f.s.movedToTiered(l, rp.FetchOffset, code) // remote_tier.go: error 109
		}
		return code
	}
	fp.highWatermark, fp.lastStableOffset, fp.logStartOffset = l.HighWatermark(), l.LastStableOffset(), rr.LogStartOffset
	if len(rr.Chunks) > 0 {
		fp.chunks = rr.Chunks
		if f.results == nil {
			f.results = getReadResults()
		}
		f.results = append(f.results, rr)
	} else {
		rr.Release()
	}
	f.waits = append(f.waits, fetchWaitTarget{log: l, offset: rp.FetchOffset})
	return 0
}

// replicaPoll is the long poll of a follower's fetch: it waits for a
// fetched partition's log END to pass the fetch offset (Log.NotifyEnd), not
// its HW, which cannot pass the follower's offset before the follower
// fetches again. One goroutine per waiting follower fetch (a few per
// broker), ended by MaxWaitMs at the latest; a closed connection is noticed
// when the answer fails to send.
func (f *fetchState) replicaPoll(wait time.Duration) {
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	cancels := make([]func(), 0, len(f.waits))
	for {
		for _, w := range f.waits {
			cancels = append(cancels, w.log.NotifyEnd(w.offset, poke))
		}
		expired := false
		select {
		case <-wake:
		case <-timer.C:
			expired = true
		}
		for _, c := range cancels {
			c()
		}
		cancels = cancels[:0]
		bytes, failed := f.read()
		if expired || bytes >= int64(f.req.MinBytes) || failed || len(f.waits) == 0 {
			f.send()
			return
		}
		f.release()
	}
}
