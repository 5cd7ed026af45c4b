package loadgen

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoProducer produces through a franz-go client configured as an
// application would (linger, batch size, acks, compression, idempotence,
// in-flight limit). Every record is a kgo.Record recycled through a pool
// from the promise, whose Value starts with the send stamp. One goroutine
// runs the schedule; kgo's goroutines call the promise.
type kgoProducer struct {
	env     *runEnv
	k       int       // the producer's index
	ver     *verifier // --verify: ids in values, acknowledgements logged (nil: off)
	cl      *kgo.Client
	sched   schedule
	keys    *keyPicker
	pay     *payload
	rec     *recorder
	pool    sync.Pool // *kgo.Record with Value (and Key) buffers
	promise func(*kgo.Record, error)
	timer   *time.Timer
}

// kgoCodec maps a record codec to franz-go's.
func kgoCodec(c record.Codec) kgo.CompressionCodec {
	switch c {
	case record.CodecGzip:
		return kgo.GzipCompression()
	case record.CodecSnappy:
		return kgo.SnappyCompression()
	case record.CodecLZ4:
		return kgo.Lz4Compression()
	case record.CodecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

func kgoAcks(a int16) kgo.Acks {
	switch a {
	case 0:
		return kgo.NoAck()
	case 1:
		return kgo.LeaderAck()
	}
	return kgo.AllISRAcks()
}

// countingHooks counts batches and produce requests for kgo clients.
type countingHooks struct{ st *runStats }

func (h countingHooks) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	h.st.batches.Add(1)
	h.st.batchRecords.Add(int64(m.NumRecords))
}

func (h countingHooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == produceKey && err == nil {
		h.st.requests.Add(1)
	}
}

func newKgoProducer(ctx context.Context, env *runEnv, k int, rec *recorder) (*kgoProducer, error) {
	cfg := env.cfg
	opts := []kgo.Opt{
		kgo.SeedBrokers(env.seeds...),
		kgo.ClientID(loadgenClientID),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.ProducerLinger(cfg.Linger),
		kgo.ProducerBatchMaxBytes(int32(cfg.BatchBytes)),
		kgo.RequiredAcks(kgoAcks(cfg.Acks)),
		kgo.ProducerBatchCompression(kgoCodec(cfg.Compression)),
		kgo.MaxBufferedRecords(cfg.maxBufferedRecords(int(env.topic.partitions))),
		kgo.RecordDeliveryTimeout(deliveryTimeout(env)),
		kgo.ProduceRequestTimeout(produceTimeoutMs * time.Millisecond),
		kgo.WithHooks(countingHooks{env.st}),
	}
	if !cfg.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(cfg.MaxInflight))
	}
	if env.ver != nil || len(cfg.Faults) > 0 {
		// Retry without a count through faults (kgo's default), within
		// the delivery timeout, and count what the client itself
		// recognises as data loss.
		opts = append(opts, kgo.RecordRetries(math.MaxInt32), kgo.ProducerOnDataLossDetected(func(string, int32) { env.dataLoss.Add(1) }))
	}
	opts, err := cfg.clientOpts(opts...)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	// Connect to the leaders before the clock starts, as a long-running
	// application would be connected.
	leaders := map[int32]bool{}
	for _, l := range env.topic.leaders {
		leaders[l] = true
	}
	ids := make([]int32, 0, len(leaders))
	for l := range leaders {
		ids = append(ids, l)
	}
	if err := cl.EnsureProduceConnectionIsOpen(ctx, ids...); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kgo producer %d: connecting: %w", k, err)
	}
	p := &kgoProducer{
		env:   env,
		k:     k,
		ver:   env.ver,
		cl:    cl,
		pay:   newPayload(cfg.RecordBytes, cfg.Compressible, cfg.Seed+uint64(k)),
		rec:   rec,
		timer: time.NewTimer(time.Hour),
	}
	p.timer.Stop()
	if cfg.Keys > 0 {
		p.keys = newKeyPicker(cfg.KeyDist, cfg.Keys, cfg.HotKeyShare, cfg.ZipfS, cfg.Seed+uint64(k)*7919)
	}
	p.promise = p.done
	return p, nil
}

// stampedRecord is a pooled record with its send stamp beside it. The
// promise reads the stamp from here, not from the value: the value's
// bytes left the cache long before the acknowledgement (a miss per
// record, about 6 % of the producer's CPU in target 3's workload). The
// record's Context is the stamp's holder (a context that never ends), so
// the promise finds it from the *kgo.Record franz-go hands back.
type stampedRecord struct {
	kgo.Record
	stamp sendStamp
}

// sendStamp is a record's Context: context.Background plus the send stamp
// and the stampedRecord it belongs to.
type sendStamp struct {
	context.Context
	unixNs int64
	rec    *stampedRecord
}

// stamped is the stampedRecord r (from get) belongs to.
func stamped(r *kgo.Record) *stampedRecord { return r.Context.(*sendStamp).rec }

// get returns a pooled record; its Value and Key share one buffer
// [value | key] so the promise can recycle both from the record alone.
// The bool is true for a new record, whose value has no payload yet; a
// reused one keeps the payload it was filled with, so only its stamp is
// rewritten: copying a payload window into a recycled (cache-cold) value
// cost about 13 % of the load generator's CPU in target 3's workload,
// work a real producer's payload would not repeat (Kafka's own
// producer-perf-test sends one payload array for every record).
func (p *kgoProducer) get() (*stampedRecord, bool) {
	if r, ok := p.pool.Get().(*stampedRecord); ok {
		r.Context = &r.stamp
		return r, false
	}
	n := p.env.cfg.RecordBytes
	buf := make([]byte, n+keyBytes)
	r := &stampedRecord{Record: kgo.Record{Value: buf[:n], Key: buf[n:]}}
	r.stamp = sendStamp{Context: context.Background(), rec: r}
	r.Context = &r.stamp
	return r, true
}

// record returns a record for the send stamped unixNs: pooled, its value
// stamped, and filled with a payload window when it is new.
func (p *kgoProducer) record(unixNs int64) *stampedRecord {
	sr, fresh := p.get()
	sr.stamp.unixNs = unixNs
	if fresh {
		p.pay.fill(sr.Value, unixNs)
	} else {
		putStamp(sr.Value, unixNs) // the payload from its first use stays
	}
	return sr
}

func (p *kgoProducer) put(r *kgo.Record) {
	sr := stamped(r)
	n := p.env.cfg.RecordBytes
	buf := r.Value[:n+keyBytes]
	*r = kgo.Record{Value: buf[:n], Key: buf[n:]}
	p.pool.Put(sr)
}

// done is the promise: one record acknowledged or failed.
func (p *kgoProducer) done(r *kgo.Record, err error) {
	env := p.env
	if p.ver != nil && err == nil {
		if k, seq, ok := readVerifyID(r.Value, p.ver.nonce); ok && k == p.k {
			p.ver.ack(k, seq, r.Partition, r.Offset)
		}
	}
	stamp := stamped(r).stamp.unixNs
	switch {
	case !env.measured(time.Duration(stamp - env.baseUnix)):
		// the lead-in's: not counted
	case err != nil:
		env.st.failRecords(1, err)
	default:
		p.rec.record(env.now() - time.Duration(stamp-env.baseUnix))
		env.st.acked.Add(1)
		env.st.ackedBytes.Add(int64(len(r.Value)))
	}
	p.put(r)
}

// run produces the schedule, then flushes (at most the drain timeout) and
// closes the client, which fails whatever is still buffered.
func (p *kgoProducer) run(ctx context.Context) error {
	env := p.env
	keyed := p.keys != nil
	for ctx.Err() == nil {
		now := env.now()
		if p.sched.overdue(now, env.cfg.DrainTimeout) {
			owed := p.sched.abandon(env.measureOff)
			env.st.sent.Add(owed) // scheduled, so counted, and failed
			env.st.failRecords(owed, errBacklog)
		}
		t, ok := p.sched.take(now)
		if !ok {
			wait, more := p.sched.wait(now)
			if !more {
				break
			}
			p.timer.Reset(max(wait, minSleep))
			select {
			case <-p.timer.C:
			case <-ctx.Done():
				p.timer.Stop()
			}
			continue
		}
		unixNs := env.baseUnix + int64(t)
		sr := p.record(unixNs)
		r := &sr.Record
		if keyed {
			r.Key = p.keys.key(r.Key, p.keys.next())
		} else {
			r.Key = nil // the key buffer stays reachable through Value's capacity
		}
		if p.ver != nil {
			putVerifyID(r.Value, p.ver.nonce, p.k, p.ver.next(p.k))
		}
		r.Timestamp = time.Unix(0, unixNs)
		if env.measured(t) {
			env.st.sent.Add(1)
		}
		p.cl.Produce(ctx, r, p.promise) // blocks while MaxBufferedRecords are buffered
	}
	fctx, cancel := context.WithTimeout(context.Background(), env.cfg.DrainTimeout)
	defer cancel()
	err := p.cl.Flush(fctx)
	p.cl.Close()
	if err != nil {
		return fmt.Errorf("kgo producer: flushing: %w", err)
	}
	return nil
}

func (p *kgoProducer) setSchedule(s schedule) { p.sched = s }

// deliveryTimeout is how long kgo may try to deliver one record: the drain
// timeout; with --faults the run's whole time bound, so the client keeps
// retrying through every fault.
func deliveryTimeout(env *runEnv) time.Duration {
	if len(env.cfg.Faults) == 0 || env.duration <= 0 {
		return env.cfg.DrainTimeout
	}
	return env.duration + env.cfg.DrainTimeout
}
