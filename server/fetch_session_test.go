package server

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionFetch is a fetch of partitions (at offsets, in partition order)
// of one topic, named by name before v13 and by id from v13, in session sid
// at epoch; MaxWait 0.
func sessionFetch(v int16, name string, id [16]byte, sid, epoch int32, offsets map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.MinBytes, req.MaxBytes = 1, 1<<30
	req.SessionID, req.SessionEpoch = sid, epoch
	if len(offsets) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		if v >= fetchFirstTopicIDVersion {
			rt.TopicID = id
		} else {
			rt.Topic = name
		}
		var ps []int32
		for p := range offsets {
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		for _, p := range ps {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offsets[p], 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// sessionFetchByID is sessionFetch at the newest version (topics by id).
func sessionFetchByID(id [16]byte, sid, epoch int32, offsets map[int32]int64) *kmsg.FetchRequest {
	return sessionFetch(fetchMaxVersion, "", id, sid, epoch, offsets)
}

// fetchedValues maps each partition of resp to its record values.
func fetchedValues(t *testing.T, resp *kmsg.FetchResponse) map[int32][]string {
	t.Helper()
	got := map[int32][]string{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("partition %d: error %d", rp.Partition, rp.ErrorCode)
			}
			_, values := fetchValues(t, rp.RecordBatches)
			got[rp.Partition] = values
		}
	}
	return got
}

// sessionSetup starts a broker with topic name of parts partitions, n
// records in batches of per in each, and dials it.
func sessionSetup(t *testing.T, name string, parts int32, n, per int) (*engine.Topic, *rawConn) {
	t.Helper()
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, name, parts, nil)
	for p := range parts {
		fetchProduce(t, tp, p, n, per, fmt.Sprintf("p%d", p))
	}
	return tp, dialRaw(t, addr)
}

// TestFetchSessions walks KIP-227 on one connection, for a version naming
// topics by name and one naming them by id: a full fetch opens a session
// and is answered in full; incremental fetches are answered with only the
// partitions that have records (or a moved high watermark), read from the
// offsets the session holds (the broker never advances them itself);
// ForgottenTopics drops partitions; a stale epoch, an unknown id, another
// connection's id and a closed session are refused; closing the connection
// drops its sessions.
func TestFetchSessions(t *testing.T) {
	for _, v := range []int16{7, 12, 13, fetchMaxVersion} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			addr, s, eng := startBroker(t)
			name := fmt.Sprintf("sess%d", v)
			tp := prodTopic(t, eng, name, 3, nil)
			for p := range int32(3) {
				fetchProduce(t, tp, p, 2, 2, fmt.Sprintf("p%d", p))
			}
			c := dialRaw(t, addr)
			corr := int32(0)
			fetch := func(id, epoch int32, offsets map[int32]int64, edit func(*kmsg.FetchRequest)) *kmsg.FetchResponse {
				t.Helper()
				req := sessionFetch(v, name, tp.ID(), id, epoch, offsets)
				if edit != nil {
					edit(req)
				}
				corr++
				var resp kmsg.FetchResponse
				c.roundTrip(req, corr, &resp)
				return &resp
			}

			// Open: answered in full, with a session id.
			resp := fetch(0, 0, map[int32]int64{0: 0, 1: 0, 2: 0}, nil)
			id := resp.SessionID
			got := fetchedValues(t, resp)
			if resp.ErrorCode != 0 || id == 0 || len(got) != 3 || len(got[0]) != 2 || len(got[2]) != 2 {
				t.Fatalf("full fetch: error %d session %d values %v", resp.ErrorCode, id, got)
			}
			// Incremental, every partition moved to its end: nothing new.
			resp = fetch(id, 1, map[int32]int64{0: 2, 1: 2, 2: 2}, nil)
			if resp.ErrorCode != 0 || resp.SessionID != id || len(resp.Topics) != 0 {
				t.Fatalf("incremental with nothing new: error %d session %d topics %+v", resp.ErrorCode, resp.SessionID, resp.Topics)
			}
			// A record on partition 1: only partition 1 is answered, with
			// no partition named in the request.
			fetchProduce(t, tp, 1, 1, 1, "new1")
			for epoch := int32(2); epoch <= 3; epoch++ {
				// Twice: the session's offset for partition 1 is still 2.
				resp = fetch(id, epoch, nil, nil)
				got = fetchedValues(t, resp)
				if resp.ErrorCode != 0 || len(got) != 1 || len(got[1]) != 1 || got[1][0] != "new1-0" || resp.Topics[0].Partitions[0].HighWatermark != 3 {
					t.Fatalf("epoch %d: error %d values %v", epoch, resp.ErrorCode, got)
				}
			}
			// A stale epoch is refused, with no partitions.
			resp = fetch(id, 3, nil, nil)
			if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(resp.Topics) != 0 {
				t.Fatalf("stale epoch: error %d topics %d", resp.ErrorCode, len(resp.Topics))
			}
			// Forget partition 1: records on 1 and 2, only 2 is answered.
			fetchProduce(t, tp, 1, 1, 1, "late1")
			fetchProduce(t, tp, 2, 1, 1, "new2")
			resp = fetch(id, 4, nil, func(r *kmsg.FetchRequest) {
				ft := kmsg.NewFetchRequestForgottenTopic()
				ft.Topic, ft.TopicID, ft.Partitions = name, tp.ID(), []int32{1}
				if v >= fetchFirstTopicIDVersion {
					ft.Topic = ""
				}
				r.ForgottenTopics = append(r.ForgottenTopics, ft)
			})
			got = fetchedValues(t, resp)
			if resp.ErrorCode != 0 || len(got) != 1 || len(got[2]) != 1 || got[2][0] != "new2-0" {
				t.Fatalf("after forgetting partition 1: error %d values %v", resp.ErrorCode, got)
			}
			// Unknown ids, and this session from another connection.
			for _, bad := range []struct {
				c  *rawConn
				id int32
			}{{c, id + 1000}, {dialRaw(t, addr), id}} {
				corr++
				var r kmsg.FetchResponse
				bad.c.roundTrip(sessionFetch(v, name, tp.ID(), bad.id, 5, nil), corr, &r)
				if r.ErrorCode != kerr.FetchSessionIDNotFound.Code || r.SessionID != 0 || len(r.Topics) != 0 {
					t.Fatalf("session %d from another connection or unknown: error %d session %d", bad.id, r.ErrorCode, r.SessionID)
				}
			}
			// Close it (epoch -1): a full sessionless answer; then it is gone.
			resp = fetch(id, -1, map[int32]int64{0: 0}, nil)
			if got = fetchedValues(t, resp); resp.ErrorCode != 0 || resp.SessionID != 0 || len(got[0]) != 2 {
				t.Fatalf("closing fetch: error %d session %d values %v", resp.ErrorCode, resp.SessionID, got)
			}
			if resp = fetch(id, 5, nil, nil); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
				t.Fatalf("closed session: error %d", resp.ErrorCode)
			}
			// A new session, dropped when its connection closes.
			if resp = fetch(0, 0, map[int32]int64{0: 0}, nil); resp.SessionID == 0 {
				t.Fatal("no second session")
			}
			c.Close()
			waitFor(t, func() string { return "sessions of a closed connection dropped" }, func() bool {
				s.sessions.mu.Lock()
				defer s.sessions.mu.Unlock()
				return len(s.sessions.m) == 0
			})
		})
	}
}

// TestFetchSessionRotation: with a response budget smaller than the
// backlog, the partitions that returned records go to the end of the
// session's order, so every partition is served in turn.
func TestFetchSessionRotation(t *testing.T) {
	tp, c := sessionSetup(t, "rot", 4, 200, 20)
	offsets := map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}
	served := map[int32]int{}
	var id int32
	for i := range int32(8) {
		epoch := i
		req := sessionFetchByID(tp.ID(), id, epoch, offsets)
		req.MaxBytes = 1 // one batch per response (minOneBatch)
		var resp kmsg.FetchResponse
		c.roundTrip(req, i+1, &resp)
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch %d: error %d", i, resp.ErrorCode)
		}
		id = resp.SessionID
		clear(offsets) // incremental: name only the partitions that moved
		for p, values := range fetchedValues(t, &resp) {
			if len(values) > 0 {
				served[p]++
				offsets[p] = int64(len(values)) * int64(served[p])
			}
		}
	}
	for p := range int32(4) {
		if served[p] != 2 {
			t.Fatalf("8 one-batch fetches served partitions %v, want each twice", served)
		}
	}
}

// TestFetchSessionsFranzGo: a franz-go consumer of 16 partitions (which
// uses sessions when the broker offers them) reads every record in order
// while records keep arriving, through incremental fetches.
func TestFetchSessionsFranzGo(t *testing.T) {
	addr, s, eng := startBroker(t)
	const parts, rounds, per = 16, 10, 5
	prodTopic(t, eng, "kgosess", parts, nil)
	producer := prodClient(t, addr, kgo.DefaultProduceTopic("kgosess"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	consumer := newClient(t, addr, kgo.ConsumeTopics("kgosess"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	ctx := testCtx(t)
	next := map[int32]int{}
	total := 0
	for round := range rounds {
		for p := range int32(parts) {
			for i := range per {
				r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, round*per+i))}
				if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
		want := (round + 1) * parts * per
		for total < want {
			fs := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d records", total, want)
			}
			if errs := fs.Errors(); len(errs) > 0 {
				t.Fatalf("consume errors: %v", errs)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if got, want := string(r.Value), fmt.Sprintf("%d-%d", r.Partition, next[r.Partition]); got != want {
					t.Fatalf("partition %d offset %d: %q, want %q", r.Partition, r.Offset, got, want)
				}
				next[r.Partition]++
				total++
			})
		}
	}
	s.sessions.mu.Lock()
	inc, open := s.sessions.incremental, len(s.sessions.m)
	s.sessions.mu.Unlock()
	if inc == 0 || open == 0 {
		t.Fatalf("franz-go consumed without sessions: %d incremental fetches, %d sessions open", inc, open)
	}
	t.Logf("%d incremental fetches", inc)
}

// BenchmarkFetchSessionIncremental is the session bookkeeping of one
// incremental fetch of a 96-partition session in which 12 partitions moved
// and returned records: apply the request, build the full partition list,
// trim the answer and rotate.
func BenchmarkFetchSessionIncremental(b *testing.B) {
	const parts = 96
	var id [16]byte
	id[0] = 1
	offsets := map[int32]int64{}
	for p := range int32(parts) {
		offsets[p] = 0
	}
	var ss fetchSessions
	open := sessionFetchByID(id, 0, 0, offsets)
	fs := ss.open(1, open, true)
	body := fetchBody{version: fetchMaxVersion}
	moved := map[int32]int64{}
	chunk := []engine.Chunk{{Buf: make([]byte, 1024), Len: 1024}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		clear(moved)
		for k := range int32(12) {
			moved[(int32(i)*12+k)%parts] = int64(i + 1)
		}
		req := sessionFetchByID(id, fs.id, fs.epoch, moved)
		_, full, order, code := ss.incrementalFetch(1, req, true)
		if code != 0 {
			b.Fatalf("error %d", code)
		}
		// What read() would fill: every partition, 12 with records.
		body.topics = body.topics[:0]
		for _, rt := range full.Topics {
			ft := fetchTopic{id: rt.TopicID}
			for _, rp := range rt.Partitions {
				fp := fetchPartition{partition: rp.Partition, highWatermark: int64(i), lastStableOffset: int64(i), logStartOffset: 0}
				if _, ok := moved[rp.Partition]; ok {
					fp.chunks = chunk
				}
				ft.partitions = append(ft.partitions, fp)
			}
			body.topics = append(body.topics, ft)
		}
		fs.answer(&body, true, true, order)
	}
}

// Forgetting several partitions in one incremental fetch leaves the others
// in order, each findable by its key.
func TestFetchSessionForgetMany(t *testing.T) {
	var id [16]byte
	id[0] = 7
	var ss fetchSessions
	fs := ss.open(1, sessionFetchByID(id, 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0, 4: 0}), true)
	if fs == nil {
		t.Fatal("no session")
	}
	req := sessionFetchByID(id, fs.id, 1, nil)
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.TopicID, ft.Partitions = id, []int32{3, 1, 9}
	req.ForgottenTopics = append(req.ForgottenTopics, ft)
	_, full, _, code := ss.incrementalFetch(1, req, true)
	if code != 0 {
		t.Fatalf("error %d", code)
	}
	var got []int32
	for _, rt := range full.Topics {
		for _, rp := range rt.Partitions {
			got = append(got, rp.Partition)
		}
	}
	if len(got) != 3 || len(fs.index) != 3 {
		t.Fatalf("after forgetting 1 and 3 (and 9, unknown): partitions %v, index %v", got, fs.index)
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	if got[0] != 0 || got[1] != 2 || got[2] != 4 {
		t.Fatalf("partitions %v, want [0 2 4]", got)
	}
	for i, sp := range fs.parts {
		if fs.index[sp.key] != i {
			t.Fatalf("index of %v is %d, want %d", sp.key, fs.index[sp.key], i)
		}
	}
}

// A connection that keeps opening sessions keeps only its newest
// maxFetchSessionsPerConn; another connection's are untouched.
func TestFetchSessionsPerConnection(t *testing.T) {
	var id [16]byte
	var ss fetchSessions
	req := sessionFetchByID(id, 0, 0, map[int32]int64{0: 0})
	other := ss.open(2, req, true)
	var ids []int32
	for range maxFetchSessionsPerConn + 3 {
		ids = append(ids, ss.open(1, req, true).id)
	}
	if got := len(ss.m); got != maxFetchSessionsPerConn+1 {
		t.Fatalf("%d sessions open, want %d for connection 1 and 1 for connection 2", got, maxFetchSessionsPerConn)
	}
	for i, sid := range ids {
		_, kept := ss.m[sid]
		if want := i >= len(ids)-maxFetchSessionsPerConn; kept != want {
			t.Fatalf("session %d (opened %d of %d) kept %v, want %v", sid, i+1, len(ids), kept, want)
		}
	}
	if _, ok := ss.m[other.id]; !ok {
		t.Fatal("connection 2's session was dropped")
	}
}

// An incremental fetch that lists no partition long-polls on every
// partition of its session: a record on one it did not name wakes it (a
// tail consumer's next request names only the partitions that moved).
func TestFetchSessionLongPollWakesOnUnlistedPartition(t *testing.T) {
	tp, c := sessionSetup(t, "sesswake", 2, 1, 1)
	var resp kmsg.FetchResponse
	c.roundTrip(sessionFetchByID(tp.ID(), 0, 0, map[int32]int64{0: 1, 1: 1}), 1, &resp)
	id := resp.SessionID
	if resp.ErrorCode != 0 || id == 0 {
		t.Fatalf("opening fetch: error %d session %d", resp.ErrorCode, id)
	}
	const maxWait = 30 * time.Second
	req := sessionFetchByID(tp.ID(), id, 1, nil)
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	late := prodBatch(t, 1, record.CodecNone, "late1")
	produced := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond) // the fetch is waiting by then (or answers the record at once: also right)
		produced <- appendWait(tp.Partition(1), late)
	}()
	start := time.Now()
	resp = kmsg.FetchResponse{}
	c.roundTrip(req, 2, &resp)
	took := time.Since(start)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	got := fetchedValues(t, &resp)
	if resp.ErrorCode != 0 || len(got) != 1 || len(got[1]) != 1 || got[1][0] != "late1-0" {
		t.Fatalf("woken fetch: error %d values %v", resp.ErrorCode, got)
	}
	if took >= maxWait/2 { // woken by the record, not answered at MaxWait
		t.Fatalf("the long poll returned after %v (MaxWait %v): the record on an unlisted partition did not wake it", took, maxWait)
	}
}
