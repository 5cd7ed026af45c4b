package server

// Fetch sessions (KIP-227) for consumer fetches.
//
// A consumer that fetches many partitions sends the same partition list on
// every Fetch, and a plain answer lists every partition, mostly with
// nothing new. A session lets both sides send only what changed:
//
//	SessionEpoch 0 (full, "open")   the broker serves the request in full,
//	                                remembers its partitions (fetch offset,
//	                                budget, leader epoch) and answers with a
//	                                new SessionID (0: no slot free, the client
//	                                keeps fetching in full)
//	SessionEpoch n > 0              an incremental fetch of SessionID: n must
//	                                be the session's next epoch; the request
//	                                carries only partitions that are new or
//	                                whose fetch state changed, and
//	                                ForgottenTopics drops partitions. The
//	                                broker reads every partition of the
//	                                session, and answers only partitions with
//	                                records, an error, or a high watermark,
//	                                last stable offset or log start offset
//	                                other than the one it last sent
//	SessionEpoch -1 (full, "close") SessionID (if any) is dropped; the fetch is
//	                                served in full without a session
//
// An unknown SessionID answers FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
// INVALID_FETCH_SESSION_EPOCH, with no partitions; clients start over with a
// full fetch. As in Kafka the broker never advances a fetch offset itself:
// a partition the client leaves out is read again from its cached offset.
//
// Follower fetches (replica id >= 0) are served without sessions (answer
// SessionID 0). Sessions belong to the connection that opened them and
// end with it (Kafka keeps them across connections until evicted; a client
// reconnecting gets FETCH_SESSION_ID_NOT_FOUND and opens a new one, which is
// what Kafka answers for an evicted session). A broker keeps at most
// maxFetchSessions, a connection at most maxFetchSessionsPerConn (opening
// another drops its oldest); when the broker is full, a new full fetch is
// served without a session.

import (
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFetchSessions bounds the sessions a broker keeps (Kafka's
// max.incremental.fetch.session.cache.slots default).
const maxFetchSessions = 1000

// maxFetchSessionsPerConn bounds the sessions one connection holds.
const maxFetchSessionsPerConn = 4

// fetchSessionKey names a session partition: by topic name (v7..v12) or
// topic id (v13+); the other field is zero.
type fetchSessionKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// sessionPartition is one partition of a session: the fetch parameters the
// client last sent for it, and what the broker last answered.
type sessionPartition struct {
	key fetchSessionKey
	req kmsg.FetchRequestTopicPartition
	// Last answered; hw -1 after an error so the partition is answered
	// again once the error clears.
	hw, lso, logStart int64
	answered          bool
	rotate            bool // returned records: moves to the end (rotate)
	forgotten         bool // in ForgottenTopics: compact drops it
}

// fetchSession is one open session. mu guards everything; the session is
// used by one fetch at a time (the client waits for each answer), which the
// epoch check enforces.
type fetchSession struct {
	id     int32
	conn   uint64 // the connection that opened it
	opened uint64 // open order (fetchSessions.opened)

	mu    sync.Mutex
	epoch int32 // the epoch the next incremental fetch must carry
	parts []sessionPartition
	spare []sessionPartition // rotate's other buffer
	index map[fetchSessionKey]int
	gen   uint64 // bumped whenever parts changes order or membership
	gone  bool   // closed or replaced: answers no longer update it
}

// sessionOrder maps the partitions of a request built by fullRequest (in
// wire order) to their indexes in the session's parts, valid while the
// session's gen is still gen.
type sessionOrder struct {
	at  []int32
	gen uint64
}

// fetchSessions is a Server's open sessions.
type fetchSessions struct {
	mu     sync.Mutex
	m      map[int32]*fetchSession
	next   int32  // the last id handed out
	opened uint64 // sessions opened so far

	incremental uint64 // incremental fetches served (tests, under mu)
}

// nextEpoch is the epoch after e (wrapping to 1, never 0 or -1).
func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// open creates a session for connection conn holding req's partitions, or
// returns nil when every slot is taken.
func (ss *fetchSessions) open(conn uint64, req *kmsg.FetchRequest, byID bool) *fetchSession {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	// A connection needs one session (a client fetches from a broker on one
	// connection); one that keeps opening them loses its oldest, so it
	// cannot take every slot nor hold many copies of a huge request.
	var oldest *fetchSession
	mine := 0
	for _, fs := range ss.m {
		if fs.conn == conn {
			mine++
			if oldest == nil || fs.opened < oldest.opened {
				oldest = fs
			}
		}
	}
	if mine >= maxFetchSessionsPerConn {
		delete(ss.m, oldest.id)
		oldest.mu.Lock()
		oldest.gone = true
		oldest.mu.Unlock()
	}
	if len(ss.m) >= maxFetchSessions {
		return nil
	}
	if ss.m == nil {
		ss.m = make(map[int32]*fetchSession)
	}
	for {
		ss.next++
		if ss.next <= 0 {
			ss.next = 1
		}
		if _, used := ss.m[ss.next]; !used {
			break
		}
	}
	ss.opened++
	fs := &fetchSession{id: ss.next, conn: conn, opened: ss.opened, epoch: 1, index: make(map[fetchSessionKey]int)}
	fs.update(req, byID)
	ss.m[fs.id] = fs
	return fs
}

// drop closes session id (if it exists and belongs to conn).
func (ss *fetchSessions) drop(conn uint64, id int32) {
	ss.mu.Lock()
	fs := ss.m[id]
	if fs != nil && fs.conn == conn {
		delete(ss.m, id)
	} else {
		fs = nil
	}
	ss.mu.Unlock()
	if fs != nil {
		fs.mu.Lock()
		fs.gone = true
		fs.mu.Unlock()
	}
}

// connClosed drops every session of connection conn.
func (ss *fetchSessions) connClosed(conn uint64) {
	ss.mu.Lock()
	var mine []*fetchSession
	for id, fs := range ss.m {
		if fs.conn == conn {
			delete(ss.m, id)
			mine = append(mine, fs)
		}
	}
	ss.mu.Unlock()
	for _, fs := range mine {
		fs.mu.Lock()
		fs.gone = true
		fs.mu.Unlock()
	}
}

// incrementalFetch checks an incremental fetch (epoch > 0) of session id
// from connection conn, applies it to the session and returns the session
// and the full request it stands for (every partition of the session, in
// session order), or a top-level error code.
func (ss *fetchSessions) incrementalFetch(conn uint64, req *kmsg.FetchRequest, byID bool) (*fetchSession, *kmsg.FetchRequest, sessionOrder, int16) {
	ss.mu.Lock()
	fs := ss.m[req.SessionID]
	if fs != nil && fs.conn != conn {
		fs = nil
	}
	if fs != nil {
		ss.incremental++
	}
	ss.mu.Unlock()
	if fs == nil {
		return nil, nil, sessionOrder{}, kerr.FetchSessionIDNotFound.Code
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.gone {
		return nil, nil, sessionOrder{}, kerr.FetchSessionIDNotFound.Code
	}
	if req.SessionEpoch != fs.epoch {
		return nil, nil, sessionOrder{}, kerr.InvalidFetchSessionEpoch.Code
	}
	fs.epoch = nextEpoch(fs.epoch)
	forgot := false
	for i := range req.ForgottenTopics {
		ft := &req.ForgottenTopics[i]
		for _, p := range ft.Partitions {
			forgot = fs.forget(sessionKey(ft.Topic, ft.TopicID, p, byID)) || forgot
		}
	}
	if forgot {
		fs.compact()
	}
	fs.update(req, byID)
	full, order := fs.fullRequest(req, byID)
	return fs, full, order, 0
}

// sessionKey is the key of partition p of a topic named by name or id.
func sessionKey(name string, id [16]byte, p int32, byID bool) fetchSessionKey {
	if byID {
		return fetchSessionKey{id: id, partition: p}
	}
	return fetchSessionKey{topic: name, partition: p}
}

// update adds req's partitions to the session or refreshes their fetch
// parameters. Caller holds fs.mu (or owns fs).
func (fs *fetchSession) update(req *kmsg.FetchRequest, byID bool) {
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			k := sessionKey(rt.Topic, rt.TopicID, rp.Partition, byID)
			if at, ok := fs.index[k]; ok {
				fs.parts[at].req = *rp
				continue
			}
			fs.gen++
			fs.index[k] = len(fs.parts)
			fs.parts = append(fs.parts, sessionPartition{key: k, req: *rp})
		}
	}
}

// forget marks partition k removed (compact drops it) and reports whether
// it was in the session. Caller holds fs.mu.
func (fs *fetchSession) forget(k fetchSessionKey) bool {
	at, ok := fs.index[k]
	if !ok {
		return false
	}
	delete(fs.index, k)
	fs.parts[at].forgotten = true
	return true
}

// compact drops the partitions forget marked, in one pass however many
// there are. Caller holds fs.mu.
func (fs *fetchSession) compact() {
	kept := fs.parts[:0]
	for _, sp := range fs.parts {
		if !sp.forgotten {
			kept = append(kept, sp)
		}
	}
	clear(fs.parts[len(kept):])
	fs.parts = kept
	for i := range fs.parts {
		fs.index[fs.parts[i].key] = i
	}
	fs.gen++
}

// fullRequest is req with its partitions replaced by every partition of
// the session, grouped by topic in session order (a topic's partitions
// together, topics in the order they first appear), and the session index
// of each partition in wire order. Caller holds fs.mu.
func (fs *fetchSession) fullRequest(req *kmsg.FetchRequest, byID bool) (*kmsg.FetchRequest, sessionOrder) {
	full := *req
	full.ForgottenTopics = nil
	// The topic of each partition (an index into topics) and how many
	// partitions each topic has; consecutive partitions of one topic skip
	// the map.
	topicOf := make([]int32, len(fs.parts))
	var topics []fetchSessionKey
	var counts []int
	seen := make(map[fetchSessionKey]int32)
	last := int32(-1)
	for i := range fs.parts {
		tk := fetchSessionKey{topic: fs.parts[i].key.topic, id: fs.parts[i].key.id}
		if last < 0 || topics[last] != tk {
			at, ok := seen[tk]
			if !ok {
				at = int32(len(topics))
				seen[tk] = at
				topics = append(topics, tk)
				counts = append(counts, 0)
			}
			last = at
		}
		topicOf[i] = last
		counts[last]++
	}
	// Each topic's partitions are a run of one array; a partition's wire
	// position is its place in that array.
	parts := make([]kmsg.FetchRequestTopicPartition, len(fs.parts))
	starts := make([]int, len(topics))
	full.Topics = make([]kmsg.FetchRequestTopic, len(topics))
	off := 0
	for j, tk := range topics {
		rt := &full.Topics[j]
		rt.Default()
		if byID {
			rt.TopicID = tk.id
		} else {
			rt.Topic = tk.topic
		}
		starts[j] = off
		rt.Partitions = parts[off:off]
		off += counts[j]
	}
	order := sessionOrder{at: make([]int32, len(fs.parts)), gen: fs.gen}
	for i := range fs.parts {
		t := topicOf[i]
		rt := &full.Topics[t]
		pos := starts[t] + len(rt.Partitions)
		parts[pos] = fs.parts[i].req
		rt.Partitions = parts[starts[t] : pos+1]
		order.at[pos] = int32(i)
	}
	return &full, order
}

// answer records what the response body says about each partition and,
// for an incremental fetch, drops from it the partitions the client needs
// nothing about (see the file comment); partitions that returned records
// move to the end of the session's order. order maps the body's partitions
// to the session's when the request came from fullRequest (else map
// lookups). It runs once per fetch, when the response is sent.
func (fs *fetchSession) answer(b *fetchBody, incremental, byID bool, order sessionOrder) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.gone {
		return
	}
	positional := order.at != nil && order.gen == fs.gen
	k, rotated := 0, 0
	for i := range b.topics {
		t := &b.topics[i]
		kept := t.partitions[:0]
		for j := range t.partitions {
			p := &t.partitions[j]
			at, ok := -1, false
			if positional && k < len(order.at) {
				at = int(order.at[k])
				ok = fs.parts[at].req.Partition == p.partition
			}
			k++
			if !ok {
				at, ok = fs.index[sessionKey(t.name, t.id, p.partition, byID)]
			}
			must := p.errCode != 0 || len(p.chunks) > 0
			if ok {
				sp := &fs.parts[at]
				if !sp.answered || sp.hw != p.highWatermark || sp.lso != p.lastStableOffset || sp.logStart != p.logStartOffset {
					must = true
				}
				sp.answered = true
				sp.hw, sp.lso, sp.logStart = p.highWatermark, p.lastStableOffset, p.logStartOffset
				if p.errCode != 0 {
					sp.hw = -1
				}
				if len(p.chunks) > 0 && !sp.rotate {
					sp.rotate = true
					rotated++
				}
			}
			if must || !incremental {
				kept = append(kept, *p)
			}
		}
		t.partitions = kept
	}
	if rotated > 0 {
		fs.rotate()
	}
	if incremental {
		kept := b.topics[:0]
		for i := range b.topics {
			if len(b.topics[i].partitions) > 0 {
				kept = append(kept, b.topics[i])
			}
		}
		b.topics = kept
	}
}

// rotate moves the session partitions marked rotate (they returned
// records) to the end of the session's order, so the next fetches read the
// others first: the response budget goes to partitions in order, and
// Kafka rotates the same way. Caller holds fs.mu.
func (fs *fetchSession) rotate() {
	out := fs.spare[:0]
	for _, sp := range fs.parts {
		if !sp.rotate {
			out = append(out, sp)
		}
	}
	for _, sp := range fs.parts {
		if sp.rotate {
			sp.rotate = false
			out = append(out, sp)
		}
	}
	fs.parts, fs.spare = out, fs.parts
	for i := range fs.parts {
		fs.index[fs.parts[i].key] = i
	}
	fs.gen++
}
