package loadgen

import (
	"context"
	"errors"
	"fmt"
	"github.com/stratalog/strata/internal/kframe"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The lean tail consumer (--consumer-engine native): what the native
// producer is to kgo's producer. kgo's consumer decodes every record into a
// kgo.Record and costs the load generator about 2.5 µs of CPU per record
// (150,000 records/s: 3.4-3.6 µs/record for a native producer with one kgo
// consumer against 0.8 without), CPU the broker under test competes for on
// a small machine. This one keeps a fetch session (KIP-227) on one
// connection per leader broker — after the first request, each one lists
// only the partitions whose fetch offset moved, and the broker answers with
// only those that have something — and walks the returned batches in place
// (CRC checked, records decoded without allocating); what it measures is
// the same: from a record's scheduled send time to the fetch that returned
// it.

const (
	fetchKey = 1
	// nativeFetchVersion is the newest Fetch without tagged fields or topic
	// ids (Kafka 2.3+; RecordBatch v2, log start offsets, isolation level).
	nativeFetchVersion = 11
	// The consumer's fetch settings: kgo's defaults but for the response
	// limit (kgo: 50 MiB), FetchMaxWait as the kgo consumer here sets it.
	nativeFetchMaxWaitMs       = 500
	nativeFetchMaxBytes        = 16 << 20
	nativeFetchPartitionBytes  = 1 << 20
	nativeFetchErrorBackoff    = 100 * time.Millisecond
	nativeFetchResponseTimeout = nativeFetchMaxWaitMs*time.Millisecond + responseGrace
	// maxFetchResponseBytes bounds a response frame: the byte limit plus
	// one oversized first batch per partition is far below it.
	maxFetchResponseBytes = 4 * nativeFetchMaxBytes
)

// tailConsumer is one consumer of a run (kgo's or the native one).
type tailConsumer interface {
	run(ctx context.Context) // consumes until ctx is done, then closes
	close()                  // for a consumer whose run never started
}

// nativeConsumer owns one fetcher per leader broker of its partitions; run
// starts their goroutines and returns when all have stopped.
type nativeConsumer struct {
	fetchers []*fetcher
}

// fetcher fetches a fixed set of partitions from one broker on one
// connection, one request at a time, in a fetch session.
type fetcher struct {
	env   *runEnv
	rec   *recorder
	addr  string
	conn  net.Conn
	parts []kmsg.FetchRequestTopicPartition // every partition, FetchOffset = next to read
	sent  []int64                           // by position in parts: the FetchOffset the session has
	index map[int32]int                     // partition -> position in parts
	req   kmsg.FetchRequest                 // reused
	fmt   *kmsg.RequestFormatter
	corr  int32
	out   []byte
	in    []byte

	session int32 // fetch session id; 0 = none (the next request opens one)
	epoch   int32 // the next request's session epoch

	fetches, full atomic.Int64 // requests sent, of which full (tests)
}

// newNativeConsumer connects consumer k of n to the leaders of partitions
// p ≡ k (mod n), starting at startOffsets; nil when it has no partitions.
func newNativeConsumer(env *runEnv, k int, startOffsets map[int32]int64, rec *recorder) (*nativeConsumer, error) {
	cfg, ti := env.cfg, env.topic
	c := &nativeConsumer{}
	byNode := map[int32]*fetcher{}
	for p := int32(k); p < ti.partitions; p += int32(cfg.Consumers) {
		leader := ti.leaders[p]
		f := byNode[leader]
		if f == nil {
			if v, ok := ti.maxFetch[leader]; !ok || v < nativeFetchVersion {
				c.close()
				return nil, fmt.Errorf("broker %d does not serve Fetch v%d (the native consumer's version)", leader, nativeFetchVersion)
			}
			conn, err := net.DialTimeout("tcp", ti.addrs[leader], 10*time.Second)
			if err != nil {
				c.close()
				return nil, err
			}
			f = newFetcher(env, rec, ti.addrs[leader], conn)
			byNode[leader] = f
			c.fetchers = append(c.fetchers, f)
		}
		f.add(p, startOffsets[p])
	}
	if len(c.fetchers) == 0 {
		return nil, nil // more consumers than partitions
	}
	return c, nil
}

func newFetcher(env *runEnv, rec *recorder, addr string, conn net.Conn) *fetcher {
	f := &fetcher{env: env, rec: rec, addr: addr, conn: conn, index: map[int32]int{},
		fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(loadgenClientID + "-consumer"))}
	f.req.Default()
	f.req.Version = nativeFetchVersion
	f.req.ReplicaID = -1
	f.req.MaxWaitMillis = nativeFetchMaxWaitMs
	f.req.MinBytes = 1
	f.req.MaxBytes = nativeFetchMaxBytes
	t := kmsg.NewFetchRequestTopic()
	t.Topic = env.cfg.Topic
	f.req.Topics = []kmsg.FetchRequestTopic{t}
	return f
}

// build fills f.req for the next fetch: every partition when no session is
// open (epoch 0 opens one), else only those whose fetch offset moved since
// the session last heard of it.
func (f *fetcher) build() {
	t := &f.req.Topics[:1][0]
	t.Partitions = t.Partitions[:0]
	full := f.session == 0
	if full {
		f.epoch = 0
		f.full.Add(1)
	}
	f.req.SessionID, f.req.SessionEpoch = f.session, f.epoch
	for i := range f.parts {
		if full || f.parts[i].FetchOffset != f.sent[i] {
			t.Partitions = append(t.Partitions, f.parts[i])
			f.sent[i] = f.parts[i].FetchOffset
		}
	}
	f.req.Topics = f.req.Topics[:0]
	if len(t.Partitions) > 0 {
		f.req.Topics = f.req.Topics[:1]
	}
	f.fetches.Add(1)
}

// add makes f fetch partition p from offset.
func (f *fetcher) add(p int32, offset int64) {
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = p
	fp.CurrentLeaderEpoch = -1
	fp.FetchOffset = offset
	fp.LogStartOffset = -1
	fp.PartitionMaxBytes = nativeFetchPartitionBytes
	f.index[p] = len(f.parts)
	f.parts = append(f.parts, fp)
	f.sent = append(f.sent, offset)
}

func (c *nativeConsumer) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, f := range c.fetchers {
		wg.Add(1)
		go func() { defer wg.Done(); f.run(ctx) }()
	}
	wg.Wait()
}

func (c *nativeConsumer) close() {
	for _, f := range c.fetchers {
		f.conn.Close()
	}
}

// run fetches until ctx is done (which closes the connection to end a
// fetch in progress) or the connection fails (noted as a consume error).
func (f *fetcher) run(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() { f.conn.Close() })
	defer stop()
	defer f.conn.Close()
	st := f.env.st
	for ctx.Err() == nil {
		resp, err := f.fetch()
		if err != nil {
			if ctx.Err() == nil {
				st.consumeErrors.Add(1)
				st.noteError("consume: "+err.Error(), 1)
			}
			return
		}
		if resp == nil {
			continue // session lost: the next request is a full one
		}
		if failed := f.consume(resp); failed {
			select {
			case <-ctx.Done():
			case <-time.After(nativeFetchErrorBackoff):
			}
		}
	}
}

// fetch sends one Fetch request and reads its response; a response that
// lost the session (the broker evicted or forgot it) makes the next request
// a full one, and comes back as nil without error.
func (f *fetcher) fetch() (*kmsg.FetchResponse, error) {
	f.build()
	f.corr++
	f.out = f.fmt.AppendRequest(f.out[:0], &f.req, f.corr)
	f.conn.SetDeadline(wallClock().Add(nativeFetchResponseTimeout))
	if _, err := f.conn.Write(f.out); err != nil {
		return nil, fmt.Errorf("fetching from %s: %w", f.addr, err)
	}
	var err error
	if f.in, err = kframe.ReadFrame(f.conn, maxFetchResponseBytes, f.in); err != nil {
		return nil, fmt.Errorf("reading a fetch response from %s: %w", f.addr, err)
	}
	body, got, err := kframe.SplitResponseHeader(f.in, false) // v11: response header v0
	if err != nil {
		return nil, fmt.Errorf("fetch response from %s: %w", f.addr, err)
	}
	if got != f.corr {
		return nil, fmt.Errorf("fetch response from %s: correlation id %d, want %d", f.addr, got, f.corr)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = nativeFetchVersion
	if err := resp.UnsafeReadFrom(body); err != nil {
		return nil, fmt.Errorf("fetch response from %s: %w", f.addr, err)
	}
	switch err := errorForCode(resp.ErrorCode); {
	case errors.Is(err, kerr.FetchSessionIDNotFound), errors.Is(err, kerr.InvalidFetchSessionEpoch):
		f.session = 0
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("fetch response from %s: %w", f.addr, err)
	}
	f.session = resp.SessionID // 0 if the broker keeps no session: every request is full
	if f.epoch++; f.epoch < 0 {
		f.epoch = 1 // wraps to 1: 0 would open a new session
	}
	return resp, nil
}

// consume records the run's records of one response and advances the
// fetch offsets past every whole batch; failed reports a partition error
// (noted; the caller backs off before fetching again).
func (f *fetcher) consume(resp *kmsg.FetchResponse) (failed bool) {
	env, st := f.env, f.env.st
	runStart := env.baseUnix + int64(env.measureOff)
	now := env.now()
	parts := f.parts
	var n int64
	f.rec.mu.Lock()
	defer func() {
		f.rec.mu.Unlock()
		st.consumed.Add(n)
	}()
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != env.cfg.Topic {
			continue
		}
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			k, ok := f.index[rp.Partition]
			if !ok {
				continue
			}
			if err := errorForCode(rp.ErrorCode); err != nil {
				st.consumeErrors.Add(1)
				st.noteError(fmt.Sprintf("consume: partition %d: %v", rp.Partition, err), 1)
				failed = true
				continue
			}
			fp := &parts[k]
			got, next, err := f.walk(rp.RecordBatches, fp.FetchOffset, runStart, now)
			n += got
			fp.FetchOffset = next
			if err != nil {
				st.consumeErrors.Add(1)
				st.noteError(fmt.Sprintf("consume: partition %d: %v", rp.Partition, err), 1)
				failed = true
			}
		}
	}
	return failed
}

// walk records the records at or past offset in batches (a partition's
// record set; a partial batch at its end is left for the next fetch) and
// returns how many were this run's and the next fetch offset. Caller holds
// f.rec.mu.
func (f *fetcher) walk(batches []byte, offset, runStart int64, now time.Duration) (n, next int64, err error) {
	next = offset
	baseUnix := f.env.baseUnix
	for len(batches) > 0 {
		batch, rest, h, err := record.Next(batches)
		if errors.Is(err, record.ErrShort) {
			break // cut by the size limits: fetched again next time
		}
		if err != nil {
			return n, next, err
		}
		batches = rest
		last := h.LastOffset()
		if last < next {
			continue // a batch that starts before the fetch offset
		}
		if !h.Control() {
			from := next
			err := record.Iterate(batch, func(h *record.Header, r *record.Record) error {
				if h.BaseOffset+int64(r.OffsetDelta) < from {
					return nil
				}
				stamp, ok := readStamp(r.Value)
				if !ok || stamp < runStart {
					return nil // not this run's record
				}
				n++
				f.rec.recordLocked(now - time.Duration(stamp-baseUnix))
				return nil
			})
			if err != nil {
				return n, next, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
			}
		}
		next = last + 1
	}
	return n, next, nil
}
