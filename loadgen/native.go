package loadgen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratalog/strata/batcher"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// maxPerWake bounds the records one producer appends between two
	// drains, so a late wake-up cannot buffer an unbounded backlog.
	maxPerWake = 1024
	// minSleep is the shortest wait between wake-ups: shorter sleeps cost
	// more CPU than they save latency (which is measured from the schedule
	// either way).
	minSleep = 200 * time.Microsecond
)

// nativeProducer is the lean producer: a batcher.Accumulator fed from the
// schedule, drained into hand-framed Produce requests pipelined on one
// connection per leader broker (wire.go). One goroutine runs it; each
// connection has a reader goroutine that the producer starts (dialNative)
// and ends (nativeConn.close) before run returns.
type nativeProducer struct {
	env    *runEnv
	sched  schedule
	keys   *keyPicker
	keyBuf [keyBytes]byte
	pay    *payload
	acc    *batcher.Accumulator
	conns  []*nativeConn
	connOf []int    // by partition: index into conns, -1 = no leader
	mark   []uint32 // by partition: serial of the request it is in
	serial uint32
	timer  *time.Timer

	out          []*batcher.Batch
	perConn      [][]*batcher.Batch
	pendA, pendB []*batcher.Batch
}

func newNativeProducer(ctx context.Context, env *runEnv, k int, rec *recorder) (*nativeProducer, error) {
	cfg := env.cfg
	ti := env.topic
	linger := cfg.Linger
	if linger == 0 {
		linger = -1 // batcher: negative = no linger
	}
	acc, err := batcher.NewAccumulator(batcher.Config{
		Partitions:    ti.partitions,
		Linger:        linger,
		MaxBatchBytes: cfg.BatchBytes,
		Codec:         cfg.Compression,
		Seed:          cfg.Seed + uint64(k)*0x9e37,
	})
	if err != nil {
		return nil, err
	}
	p := &nativeProducer{
		env:    env,
		pay:    newPayload(cfg.RecordBytes, cfg.Compressible, cfg.Seed+uint64(k)),
		acc:    acc,
		connOf: make([]int, ti.partitions),
		mark:   make([]uint32, ti.partitions),
		timer:  time.NewTimer(time.Hour),
	}
	p.timer.Stop()
	if cfg.Keys > 0 {
		p.keys = newKeyPicker(cfg.KeyDist, cfg.Keys, cfg.HotKeyShare, cfg.ZipfS, cfg.Seed+uint64(k)*7919)
	}
	if cfg.Idempotent {
		id, epoch, err := initProducerID(ctx, env)
		if err != nil {
			return nil, err
		}
		acc.SetProducer(id, epoch)
	}
	byNode := map[int32]int{}
	for part, leader := range ti.leaders {
		if leader < 0 {
			p.connOf[part] = -1
			continue
		}
		ci, ok := byNode[leader]
		if !ok {
			version, err := ti.produceVersion(leader, cfg.Compression)
			if err == nil {
				var c *nativeConn
				c, err = dialNative(env, ti.addrs[leader], version, acc, rec)
				if err == nil {
					ci = len(p.conns)
					p.conns = append(p.conns, c)
					byNode[leader] = ci
				}
			}
			if err != nil {
				p.closeConns(time.Second)
				return nil, fmt.Errorf("native producer %d: broker %d: %w", k, leader, err)
			}
		}
		p.connOf[part] = ci
	}
	p.perConn = make([][]*batcher.Batch, len(p.conns))
	return p, nil
}

// initProducerID asks the cluster for an idempotent producer id.
func initProducerID(ctx context.Context, env *runEnv) (int64, int16, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp, err := req.RequestWith(ctx, env.admin)
	if err != nil {
		return 0, 0, fmt.Errorf("InitProducerID (needed by --idempotent): %w", err)
	}
	if err := errorForCode(resp.ErrorCode); err != nil {
		return 0, 0, fmt.Errorf("InitProducerID (needed by --idempotent): %w", err)
	}
	return resp.ProducerID, resp.ProducerEpoch, nil
}

// run sends the schedule, then flushes everything buffered and waits for
// the outstanding responses (at most the drain timeout).
func (p *nativeProducer) run(ctx context.Context) error {
	env := p.env
	var runErr error
	for ctx.Err() == nil && runErr == nil {
		now := env.now()
		nowT := env.base.Add(now)
		n, m := 0, int64(0) // taken, measured
		for n < maxPerWake {
			t, ok := p.sched.take(now)
			if !ok {
				break
			}
			n++
			if env.measured(t) {
				m++
			}
			var key []byte
			if p.keys != nil {
				key = p.keys.key(p.keyBuf[:], p.keys.next())
			}
			unixNs := env.baseUnix + int64(t)
			if _, err := p.acc.Append(nowT, unixNs/1e6, key, p.pay.next(unixNs), int64(t)); err != nil && env.measured(t) {
				env.st.failRecords(1, err)
			}
		}
		env.st.sent.Add(m)
		if p.sched.overdue(now, env.cfg.DrainTimeout) {
			owed := p.sched.abandon(env.measureOff)
			env.st.sent.Add(owed) // scheduled, so counted, and failed
			env.st.failRecords(owed, errBacklog)
		}
		if p.acc.Ready(nowT) {
			runErr = p.flushReady(nowT)
		}
		if n == maxPerWake {
			continue // more may be due already
		}
		wait, more := p.sched.wait(now)
		if !more {
			break
		}
		if d, ok := p.acc.Deadline(); ok {
			wait = min(wait, d.Sub(nowT))
		}
		if wait > 0 {
			p.timer.Reset(max(wait, minSleep))
			select {
			case <-p.timer.C:
			case <-ctx.Done():
				p.timer.Stop()
			}
		}
	}
	p.acc.Flush()
	if err := p.flushReady(env.base.Add(env.now())); runErr == nil {
		runErr = err
	}
	p.closeConns(env.cfg.DrainTimeout)
	return runErr
}

// flushReady drains the ready batches and sends them, grouped by leader.
func (p *nativeProducer) flushReady(now time.Time) error {
	var err error
	p.out, err = p.acc.Drain(now, p.out[:0])
	if err != nil {
		err = fmt.Errorf("native producer: %w", err)
	}
	for _, b := range p.out {
		ci := p.connOf[b.Partition]
		if ci < 0 {
			if n := p.env.measuredTags(b.Tags); n > 0 {
				p.env.st.failRecords(n, errNoLeader)
			}
			p.acc.Release(b)
			continue
		}
		p.perConn[ci] = append(p.perConn[ci], b)
	}
	clear(p.out)
	for ci, list := range p.perConn {
		if len(list) > 0 {
			p.sendAll(p.conns[ci], list)
			clear(list)
			p.perConn[ci] = list[:0]
		}
	}
	return err
}

var (
	errNoLeader = errors.New("partition has no leader")
	errBacklog  = errors.New("not sent: the producer fell behind its schedule by more than the drain timeout")
)

// sendAll sends batches to one broker in as few requests as the protocol
// allows: one batch per partition per request (Kafka rejects more), at most
// maxRequestBytes of batches per request unless one batch is bigger. A
// partition's later batches go in later requests, so order is kept.
func (p *nativeProducer) sendAll(c *nativeConn, batches []*batcher.Batch) {
	pending := append(p.pendA[:0], batches...)
	next := p.pendB[:0]
	for len(pending) > 0 {
		req := c.takeReq() // waits while maxInflight requests are outstanding
		p.serial++
		size := 0
		for _, b := range pending {
			if p.mark[b.Partition] == p.serial || (len(req.batches) > 0 && size+len(b.Bytes) > maxRequestBytes) {
				next = append(next, b)
				continue
			}
			p.mark[b.Partition] = p.serial
			req.batches = append(req.batches, b)
			size += len(b.Bytes)
		}
		c.send(req)
		clear(pending)
		pending, next = next, pending[:0]
	}
	p.pendA, p.pendB = pending[:0], next[:0]
}

// closeConns ends every connection, waiting for all of them together at
// most timeout.
func (p *nativeProducer) closeConns(timeout time.Duration) {
	deadline := wallClock().Add(timeout)
	for _, c := range p.conns {
		c.close(max(deadline.Sub(wallClock()), time.Millisecond))
	}
	p.conns = nil
}

func (p *nativeProducer) setSchedule(s schedule) { p.sched = s }
