package replica

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/crcsum"
	"github.com/stratalog/strata/internal/kframe"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Versions the follower speaks (the broker serves Fetch v4-18 and
// OffsetForLeaderEpoch v0-4). Fetch v15 (KIP-903) carries the replica id
// with this broker's registration epoch in ReplicaState (ReplicaID is -1)
// and names topics by id (v13+); v4 of OffsetForLeaderEpoch carries
// ReplicaID.
const (
	fetchVersion      = 15
	epochQueryVersion = 4
)

// idp names a partition by topic id, as Fetch v13+ does.
type idp struct {
	id   [16]byte
	part int32
}

// fpart is a partition in a fetcher. Owned by the fetcher goroutine except
// where noted.
type fpart struct {
	p            *partition
	log          *engine.Log
	epoch        int32 // the leader epoch this follower was told (CurrentLeaderEpoch)
	truncating   bool  // needs OffsetForLeaderEpoch before fetching
	backoffUntil time.Time
	retried      time.Duration // the wait after its last error in a row (retryAfter); 0 after a success
}

// fetcher replicates every partition this broker follows from one source
// broker over one connection: one goroutine (run), started by the Manager
// and stopped by close.
type fetcher struct {
	m   *Manager
	src int32

	mu    sync.Mutex // guards parts and conn
	parts map[*partition]*fpart
	conn  net.Conn

	// procMu is held while the fetcher truncates or appends to logs; remove
	// takes it after dropping a partition so that, once remove returns, the
	// fetcher never touches that partition's log again.
	procMu sync.Mutex

	wake chan struct{} // poked on add and on follower durable progress
	stop chan struct{}
	done chan struct{}

	corr    int32
	fmt     *kmsg.RequestFormatter
	buf     []byte // request encoding, reused
	rbuf    []byte // response frame, reused
	backoff time.Duration

	// sums are rbuf's block checksums, taken as the response was read
	// (kframe.ReadFrameSummed): its record batches' CRCs are combined
	// from them while their bytes are still in the CPU's cache, instead
	// of read again at append (engine.Log.AppendAsFollowerSummed). A
	// response larger than rbuf (the first ones, until rbuf has grown) is
	// read without them and checked byte by byte. sumsAt is where the
	// last partition found in rbuf ended: partitions are applied in the
	// response's order, so each is looked for from there (Sums.Offset).
	sums   crcsum.Sums
	sumsAt int
}

func newFetcher(m *Manager, src int32) *fetcher {
	return &fetcher{
		m:     m,
		src:   src,
		parts: map[*partition]*fpart{},
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		fmt:   kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("strata-replica-%d", m.cfg.BrokerID))),
	}
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// add puts p in the fetcher in the truncating state with the given epoch.
func (f *fetcher) add(p *partition, epoch int32) {
	f.mu.Lock()
	f.parts[p] = &fpart{p: p, log: p.log, epoch: epoch, truncating: true}
	f.mu.Unlock()
	p.fstate.Store(fetchTruncating)
	p.fetcherP.Store(f)
	f.poke()
}

// remove drops p and returns how many partitions remain. Once it returns
// the fetcher does not touch p's log.
func (f *fetcher) remove(p *partition) int {
	f.mu.Lock()
	delete(f.parts, p)
	n := len(f.parts)
	f.mu.Unlock()
	p.fetcherP.CompareAndSwap(f, nil)
	p.fstate.Store(fetchIdle)
	f.procMu.Lock()
	//lint:ignore SA2001 an empty critical section: waits for a round in progress
	f.procMu.Unlock()
	return n
}

// close stops the fetcher and waits for its goroutine.
func (f *fetcher) close() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.mu.Lock()
	if f.conn != nil {
		f.conn.Close() // unblocks a read in progress
	}
	f.mu.Unlock()
	<-f.done
}

func (f *fetcher) stopped() bool {
	select {
	case <-f.stop:
		return true
	default:
		return false
	}
}

// member reports whether fp is still p's current entry. Caller holds procMu.
func (f *fetcher) member(fp *fpart) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parts[fp.p] == fp
}

// snapshot returns the current partitions.
func (f *fetcher) snapshot() []*fpart {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*fpart, 0, len(f.parts))
	for _, fp := range f.parts {
		out = append(out, fp)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].p.key, out[j].p.key
		return a.topic < b.topic || (a.topic == b.topic && a.part < b.part)
	})
	return out
}

// sleep waits d, or less if stopped (false) or, with wakeable, poked.
func (f *fetcher) sleep(d time.Duration, wakeable bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	var wake chan struct{}
	if wakeable {
		wake = f.wake
	}
	select {
	case <-f.stop:
		return false
	case <-t.C:
	case <-wake:
	}
	return true
}

func (f *fetcher) failed(err error) {
	f.closeConn()
	f.backoff = nextBackoff(f.backoff, time.Duration(f.m.cfg.FetchBackoffMs)*time.Millisecond)
	if !f.stopped() {
		f.m.log.Warn("replica fetcher: error; backing off", "source", f.src, "err", err, "backoff", f.backoff)
	}
	f.sleep(f.backoff, false)
}

func (f *fetcher) closeConn() {
	f.mu.Lock()
	if f.conn != nil {
		f.conn.Close()
		f.conn = nil
	}
	f.mu.Unlock()
}

// run is the fetcher goroutine.
func (f *fetcher) run() {
	defer f.m.wg.Done()
	defer close(f.done)
	defer f.closeConn()
	for !f.stopped() {
		parts := f.snapshot()
		if len(parts) == 0 {
			f.sleep(time.Second, true)
			continue
		}
		dialed, err := f.ensureConn()
		if err != nil {
			f.failed(err)
			continue
		}
		if dialed {
			// Partitions added while the connection was made (a broker
			// back after a restart is handed its partitions one by one)
			// go into this round's requests, not into rounds of their own.
			if parts = f.snapshot(); len(parts) == 0 {
				continue
			}
		}
		if err := f.truncatePhase(parts); err != nil {
			f.failed(err)
			continue
		}
		if err := f.fetchPhase(parts); err != nil {
			f.failed(err)
			continue
		}
		f.backoff = 0
	}
}

// ensureConn connects to the source broker unless connected; dialed
// reports a new connection.
func (f *fetcher) ensureConn() (dialed bool, err error) {
	f.mu.Lock()
	have := f.conn != nil
	f.mu.Unlock()
	if have {
		return false, nil
	}
	addr, ok := f.m.cfg.BrokerAddr(f.src)
	if !ok {
		return false, fmt.Errorf("no address for broker %d", f.src)
	}
	ctx, cancel := context.WithTimeout(f.m.ctx, time.Duration(f.m.cfg.SocketTimeoutMs)*time.Millisecond)
	defer cancel()
	c, err := f.m.cfg.Dial(ctx, addr)
	if err != nil {
		return false, fmt.Errorf("dialing broker %d at %s: %w", f.src, addr, err)
	}
	f.mu.Lock()
	if f.stopped() {
		f.mu.Unlock()
		c.Close()
		return false, errors.New("fetcher stopped")
	}
	f.conn = c
	f.mu.Unlock()
	return true, nil
}

// roundTrip sends req and decodes the answer into resp, with a deadline of
// extra plus the socket timeout.
func (f *fetcher) roundTrip(req kmsg.Request, resp kmsg.Response, extra time.Duration) error {
	f.mu.Lock()
	c := f.conn
	f.mu.Unlock()
	if c == nil {
		return errors.New("not connected")
	}
	f.corr++
	corr := f.corr
	f.buf = f.fmt.AppendRequest(f.buf[:0], req, corr)
	deadline := f.m.cfg.Now().Add(extra + time.Duration(f.m.cfg.SocketTimeoutMs)*time.Millisecond)
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	if _, err := c.Write(f.buf); err != nil {
		return fmt.Errorf("writing to broker %d: %w", f.src, err)
	}
	maxFrame := int32(min(int64(f.m.cfg.FetchResponseMaxBytes)+maxFrameSlack, math.MaxInt32))
	body, err := kframe.ReadFrameSummed(c, maxFrame, f.rbuf[:0], &f.sums)
	f.sumsAt = 0
	if cap(body) <= 64<<20 {
		f.rbuf = body[:0] // keep ordinary buffers for reuse; drop huge ones
	}
	if err != nil {
		return fmt.Errorf("reading from broker %d: %w", f.src, err)
	}
	rest, gotCorr, err := kframe.SplitResponseHeader(body, resp.IsFlexible())
	if err != nil {
		return err
	}
	if gotCorr != corr {
		return fmt.Errorf("broker %d answered correlation id %d, expected %d", f.src, gotCorr, corr)
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(rest); err != nil {
		return fmt.Errorf("decoding %T from broker %d: %w", resp, f.src, err)
	}
	return nil
}

// truncatePhase runs OffsetForLeaderEpoch for partitions entering a new
// epoch and truncates each to where its log stops agreeing with the
// leader's (KIP-101/KIP-279).
func (f *fetcher) truncatePhase(parts []*fpart) error {
	var need []*fpart
	now := f.m.cfg.Now()
	for _, fp := range parts {
		if fp.truncating && !now.Before(fp.backoffUntil) {
			need = append(need, fp)
		}
	}
	if len(need) == 0 {
		return nil
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(epochQueryVersion)
	req.ReplicaID = f.m.cfg.BrokerID
	byTopic := map[string]int{}
	type ask struct {
		fp     *fpart
		latest int32
	}
	asks := map[tp]ask{}
	var noEpoch []*fpart
	for _, fp := range need {
		latest := fp.log.LeaderEpoch()
		if fp.log.EpochStartOffset() < 0 {
			noEpoch = append(noEpoch, fp)
			continue
		}
		i, ok := byTopic[fp.p.key.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[fp.p.key.topic] = i
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = fp.p.key.topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition = fp.p.key.part
		rp.CurrentLeaderEpoch = fp.epoch
		rp.LeaderEpoch = latest
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		asks[fp.p.key] = ask{fp, latest}
	}
	// An empty epoch cache means an empty log (every append records an
	// epoch): nothing can diverge.
	if len(noEpoch) > 0 {
		f.procMu.Lock()
		for _, fp := range noEpoch {
			if f.member(fp) {
				f.setFetching(fp)
			}
		}
		f.procMu.Unlock()
	}
	if len(req.Topics) == 0 {
		return nil
	}
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	if err := f.roundTrip(req, resp, 0); err != nil {
		return err
	}
	f.procMu.Lock()
	defer f.procMu.Unlock()
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			a, ok := asks[tp{rt.Topic, rp.Partition}]
			if !ok || !f.member(a.fp) {
				continue
			}
			delete(asks, tp{rt.Topic, rp.Partition})
			fp := a.fp
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				f.partitionBackoff(fp, "offset for leader epoch", err, leaderBehind(rp.ErrorCode))
				continue
			}
			if err := f.truncate(fp, a.latest, rp.LeaderEpoch, rp.EndOffset); err != nil {
				// The log failed (offline, closed): this partition only.
				f.partitionBackoff(fp, "truncate", err, false)
				f.m.log.Warn("replica fetcher: truncation failed", "log", fp.log.String(), "err", err)
				continue
			}
			fp.retried = 0
		}
	}
	for _, a := range asks { // not answered: ask again
		f.partitionBackoff(a.fp, "offset for leader epoch", errors.New("partition missing from the response"), false)
	}
	return nil
}

// truncate cuts fp's log where it diverges from the leader. Caller holds procMu.
func (f *fetcher) truncate(fp *fpart, asked, leaderEpoch int32, leaderEnd int64) error {
	l := fp.log
	oursEnd := int64(-1)
	if leaderEpoch >= 0 && leaderEpoch != asked {
		_, oursEnd = l.EndOffsetForEpoch(leaderEpoch)
	}
	before := l.LogEndOffset()
	to := truncationOffset(before, l.HighWatermark(), asked, leaderEpoch, leaderEnd, oursEnd)
	if to < before {
		newEnd, err := l.TruncateTo(to)
		if err != nil {
			return fmt.Errorf("truncating %s to %d: %w", l, to, err)
		}
		f.m.log.Info("truncated divergent tail", "log", l.String(), "from", before, "to", newEnd,
			"leaderEpoch", leaderEpoch, "leaderEndOffset", leaderEnd)
	}
	f.setFetching(fp)
	return nil
}

// setTruncating sends fp back through truncation before it fetches again.
func (f *fetcher) setTruncating(fp *fpart) {
	fp.truncating = true
	fp.p.fstate.Store(fetchTruncating)
}

// setFetching ends fp's truncation: it fetches from its log end.
func (f *fetcher) setFetching(fp *fpart) {
	fp.truncating = false
	fp.p.fstate.Store(fetchFetching)
}

// partitionBackoff parks fp until the backoff passes (retryAfter: short
// and growing when the error may only mean that the leader is behind);
// errors that mean our view is stale send it through truncation again.
func (f *fetcher) partitionBackoff(fp *fpart, what string, err error, behind bool) {
	fp.retried = retryAfter(fp.retried, behind, time.Duration(f.m.cfg.FetchBackoffMs)*time.Millisecond)
	fp.backoffUntil = f.m.cfg.Now().Add(fp.retried)
	if !f.stopped() {
		f.m.log.Debug("replica fetcher: partition error", "source", f.src, "log", fp.log.String(), "during", what, "err", err, "retry_in", fp.retried)
	}
}

// fetchPhase issues one Fetch for every partition whose log is durable to
// its end, appends the answer, and waits until what it appended is durable
// (so the next fetch offset is a durable offset).
func (f *fetcher) fetchPhase(parts []*fpart) error {
	cfg := &f.m.cfg
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(fetchVersion)
	req.ReplicaID = -1 // v15+: in ReplicaState
	req.ReplicaState.ID = cfg.BrokerID
	req.ReplicaState.Epoch = f.m.brokerEpoch()
	req.MaxWaitMillis = cfg.FetchWaitMaxMs
	req.MinBytes = cfg.FetchMinBytes
	req.MaxBytes = cfg.FetchResponseMaxBytes
	req.SessionEpoch = -1
	byTopic := map[[16]byte]int{}
	sent := map[idp]*fpart{}
	pendingDurable := false
	now := f.m.cfg.Now()
	soonest := time.Duration(-1)
	for _, fp := range parts {
		l := fp.log
		end := l.LogEndOffset()
		plan := planFetch(fp.truncating, fp.backoffUntil, now, end, l.DurableEnd())
		if plan.wait > 0 && (soonest < 0 || plan.wait < soonest) {
			soonest = plan.wait
		}
		pendingDurable = pendingDurable || plan.flushing
		if !plan.send {
			continue
		}
		id := l.TopicID()
		i, ok := byTopic[id]
		if !ok {
			i = len(req.Topics)
			byTopic[id] = i
			t := kmsg.NewFetchRequestTopic()
			t.TopicID = id
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = fp.p.key.part
		rp.CurrentLeaderEpoch = fp.epoch
		rp.FetchOffset = end
		rp.LastFetchedEpoch = l.LeaderEpoch()
		rp.LogStartOffset = l.LogStartOffset()
		rp.PartitionMaxBytes = cfg.FetchMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		sent[idp{id, fp.p.key.part}] = fp
	}
	if len(sent) == 0 {
		wait := time.Second
		if pendingDurable {
			wait = 100 * time.Millisecond // a flush is running; its Durable pokes us
		}
		if soonest >= 0 && soonest < wait {
			wait = soonest
		}
		f.sleep(wait, true)
		return nil
	}
	if pendingDurable {
		// Do not long-poll while another partition waits for its flush:
		// its next fetch would wait for ours.
		req.MaxWaitMillis = 0
	}
	if w := time.Duration(req.MaxWaitMillis) * time.Millisecond; soonest >= 0 && soonest < w {
		// Nor past a parked partition's retry.
		req.MaxWaitMillis = int32((soonest + time.Millisecond - 1) / time.Millisecond)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if err := f.roundTrip(req, resp, time.Duration(req.MaxWaitMillis)*time.Millisecond); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("fetch from broker %d: %w", f.src, err)
	}
	var appended []*fpart
	f.procMu.Lock()
	apply := func(withError bool) {
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			for j := range rt.Partitions {
				rp := &rt.Partitions[j]
				if (rp.ErrorCode != 0) != withError {
					continue
				}
				fp := sent[idp{rt.TopicID, rp.Partition}]
				if fp == nil || !f.member(fp) {
					continue
				}
				delete(sent, idp{rt.TopicID, rp.Partition})
				ok, err := f.handlePartition(fp, rp)
				if err != nil {
					// The log failed (offline, closed, deleted): this partition
					// backs off; the others go on.
					f.partitionBackoff(fp, "append", err, false)
					f.m.log.Warn("replica fetcher: log error", "log", fp.log.String(), "err", err)
					continue
				}
				if ok {
					appended = append(appended, fp)
				}
			}
		}
	}
	// Partitions with an error first, without the hold: one may restart
	// its log from remote storage (tiered.go), and no append of this
	// broker should wait for that. The others after, under the hold when
	// more than one carries records; it ends before the wait below, for
	// the group the appends share is written once it ends.
	apply(true)
	hold := countRecords(resp) > 1 && f.m.cfg.HoldAppends != nil && f.m.cfg.ReleaseAppends != nil
	if hold {
		f.m.cfg.HoldAppends()
	}
	apply(false)
	if hold {
		f.m.cfg.ReleaseAppends()
	}
	f.procMu.Unlock()
	return f.awaitDurable(appended)
}

// countRecords counts the partitions of a fetch response without an error
// that carry records.
func countRecords(resp *kmsg.FetchResponse) int {
	n := 0
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if rp := &resp.Topics[i].Partitions[j]; rp.ErrorCode == 0 && len(rp.RecordBatches) > 0 {
				n++
			}
		}
	}
	return n
}

// handlePartition applies one partition of a fetch response. Caller holds
// procMu. ok reports that records were appended.
func (f *fetcher) handlePartition(fp *fpart, rp *kmsg.FetchResponseTopicPartition) (ok bool, err error) {
	l := fp.log
	if code := rp.ErrorCode; code != 0 {
		step := onFetchError(code, l.LogEndOffset(), rp.LogStartOffset)
		if step.restartAt >= 0 {
			// Our whole log is below the leader's start: restart there
			// (tiered.go: from remote storage after error 109).
			return false, f.restartLog(fp, code, step.restartAt)
		}
		if step.retruncate {
			f.setTruncating(fp)
		}
		if step.backoff {
			f.partitionBackoff(fp, "fetch", kerr.ErrorForCode(code), leaderBehind(code))
		}
		return false, nil
	}
	fp.retried = 0
	if rp.HighWatermark >= 0 {
		fp.p.leaderHW.Store(rp.HighWatermark)
	}
	if len(rp.RecordBatches) > 0 {
		var sums *crcsum.Sums
		at, summed := f.sums.Offset(rp.RecordBatches, f.sumsAt)
		if summed {
			sums, f.sumsAt = &f.sums, at+len(rp.RecordBatches)
		}
		info, err := l.AppendAsFollowerSummed(rp.RecordBatches, sums, at)
		if errors.Is(err, engine.ErrOffsetOutOfRange) {
			info, err = f.appendStraddling(l, rp.RecordBatches, err)
		}
		switch onAppendError(err) {
		case appendResync:
			// Our log end moved (a concurrent truncation); re-sync.
			f.setTruncating(fp)
			return false, nil
		case appendBadBatches:
			f.partitionBackoff(fp, "append", err, false)
			f.m.log.Warn("replica fetcher: bad batches from the leader", "log", l.String(), "err", err)
			return false, nil
		case appendNoResource:
			// Out of descriptors, memory or space for the next segment:
			// this partition backs off and fetches the same offset again;
			// the directory and the other partitions go on.
			f.partitionBackoff(fp, "append", err, false)
			return false, nil
		case appendFailed:
			return false, err // the engine is offline or the log closed
		}
		ok = info.BaseOffset >= 0
	}
	if rp.HighWatermark >= 0 {
		hw := l.AdvanceHighWatermark(rp.HighWatermark)
		// The leader's log start moved (retention, DeleteRecords): follow
		// it as far as our HW allows (Kafka's maybeIncrementLogStartOffset).
		if start, ok := followLogStart(rp.LogStartOffset, hw, l.LogStartOffset()); ok {
			if _, err := l.DeleteRecords(start); err != nil {
				f.m.log.Warn("following the leader's log start", "log", l.String(), "start", start, "err", err)
			}
		}
		if refetched(l.Damaged(), l.LogEndOffset(), rp.HighWatermark) {
			if err := l.ClearDamaged(); err != nil {
				f.m.log.Warn("clearing damaged mark", "log", l.String(), "err", err)
			} else {
				f.m.log.Info("damaged log re-fetched up to the leader's HW; eligible to lead again", "log", l.String())
			}
		}
	}
	return ok, nil
}

// appendStraddling handles Kafka's UnexpectedAppendOffset case: an empty
// log (start == end, e.g. just restarted at the leader's log start) gets a
// first batch that begins below its end because the leader's log start
// falls inside that batch (DeleteRecords). The log restarts at the batch's
// base offset and takes it. Anything else returns err unchanged.
func (f *fetcher) appendStraddling(l *engine.Log, batches []byte, err error) (engine.AppendInfo, error) {
	h, herr := record.ParseHeader(batches)
	end := l.LogEndOffset()
	if herr != nil || !straddles(h.BaseOffset, h.LastOffset(), l.LogStartOffset(), end) {
		return engine.AppendInfo{BaseOffset: -1}, err
	}
	f.m.log.Info("first fetched batch starts below the empty follower log's start; restarting the log at it",
		"log", l.String(), "logStart", end, "batchBase", h.BaseOffset)
	if terr := l.TruncateFullyAndStartAt(h.BaseOffset); terr != nil {
		return engine.AppendInfo{BaseOffset: -1}, terr
	}
	return l.AppendAsFollower(batches)
}

// awaitDurable waits until every appended log is durable to its end (the
// follower's flush pipeline pokes the fetcher), bounded by the socket
// timeout and Close.
func (f *fetcher) awaitDurable(appended []*fpart) error {
	if len(appended) == 0 {
		return nil
	}
	deadline := f.m.cfg.Now().Add(time.Duration(f.m.cfg.SocketTimeoutMs) * time.Millisecond)
	for {
		done := true
		for _, fp := range appended {
			l := fp.log
			if l.DurableEnd() < l.LogEndOffset() {
				done = false
				break
			}
		}
		if done {
			return nil
		}
		d := deadline.Sub(f.m.cfg.Now())
		if d <= 0 {
			return nil // the next round skips logs still not durable
		}
		if !f.sleep(min(d, 50*time.Millisecond), true) {
			return nil
		}
	}
}
