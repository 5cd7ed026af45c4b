package server

// Producer id blocks from the controller (issue 8, Kafka's
// AllocateProducerIds, KIP-730).
//
// In cluster mode (ClusterConfig.Controller set) and unless
// TxnConfig.ProducerIDs says otherwise, the Server's txn.IDManager takes its
// blocks from controllerBlockSource: each block is an AllocateProducerIDs
// command committed through the metadata quorum (controller/producerids.go)
// with this broker's id and current registration epoch, so ids are unique
// in the whole cluster and never repeat after a restart of any broker or
// controller; they start at controller.FirstProducerID, above every id a
// txn.FileBlockSource handed out. A single broker (no controller) keeps
// txn.FileBlockSource: it has no quorum to ask, and its node's own range is
// already unique.
//
// AllocateBlock retries until its context ends (the InitProducerId
// handler's bound; the handler then answers COORDINATOR_LOAD_IN_PROGRESS,
// which clients retry): while the quorum has no leader (Propose retries
// itself), while this broker has not registered yet, while the controller
// answers STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED (the heartbeat loop
// registers again and the next attempt reads the new epoch), and after an
// unknown outcome (that block, if it was allocated, is skipped: uniqueness
// holds, only ids are wasted). An exhausted id space is final
// (txn.ErrIDsExhausted).
//
// Prefetch (as Kafka's RPCProducerIdManager since KAFKA-14694): once a
// block has been handed to the IDManager, the next one is fetched in the
// background, so InitProducerId rarely waits for a Raft commit and keeps
// being answered through a controller election. A restart wastes at most
// the prefetched block and the rest of the current one (the controller's
// 2^47 ids last 7*10^10 such restarts).
//
// Goroutines and locks: at most one prefetch goroutine, owned by the
// source: started under mu only while the source is open, it runs until it
// has a block or the source is closed (close, from Server.Close via
// closeTxn, cancels it and waits). mu is never held across a proposal.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// controllerBlockSource is a txn.BlockSource backed by the metadata quorum.
type controllerBlockSource struct {
	s      *Server
	ctx    context.Context // canceled by close (and by the Server's cluster context)
	cancel context.CancelFunc
	wg     sync.WaitGroup // the prefetch goroutine

	mu       sync.Mutex
	closed   bool
	fetching bool      // the prefetch goroutine runs
	ready    txn.Block // prefetched; Size 0: none
}

func newControllerBlockSource(s *Server) *controllerBlockSource {
	src := &controllerBlockSource{s: s}
	src.ctx, src.cancel = context.WithCancel(s.cluster.ctx)
	return src
}

// AllocateBlock hands out the prefetched block if there is one, else
// allocates one now; either way it starts fetching the next.
func (src *controllerBlockSource) AllocateBlock(ctx context.Context) (txn.Block, error) {
	src.mu.Lock()
	b := src.ready
	src.ready = txn.Block{}
	src.mu.Unlock()
	if b.Size == 0 {
		var err error
		if b, err = src.allocate(ctx); err != nil {
			return txn.Block{}, err
		}
	}
	src.prefetch()
	return b, nil
}

// prefetch starts the prefetch goroutine unless it runs, a block is ready
// or the source is closed.
func (src *controllerBlockSource) prefetch() {
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.closed || src.fetching || src.ready.Size != 0 {
		return
	}
	src.fetching = true
	src.wg.Add(1)
	go func() {
		defer src.wg.Done()
		b, err := src.allocate(src.ctx)
		src.mu.Lock()
		src.fetching = false
		if err == nil {
			src.ready = b
		}
		src.mu.Unlock()
		if err != nil && src.ctx.Err() == nil {
			src.s.log.Warn("prefetching a producer id block", "err", err)
		}
	}()
}

// close stops the prefetch goroutine and waits for it.
func (src *controllerBlockSource) close() {
	src.mu.Lock()
	src.closed = true
	src.mu.Unlock()
	src.cancel()
	src.wg.Wait()
}

// producerIDRetryMax caps the backoff between allocation attempts.
const producerIDRetryMax = 200 * time.Millisecond

// allocate returns a block of producer ids allocated by the quorum,
// retrying until ctx ends or the source is closed.
func (src *controllerBlockSource) allocate(ctx context.Context) (txn.Block, error) {
	s, c := src.s, &src.s.cluster
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(src.ctx, cancel) // closed
	defer stop()
	backoff := 10 * time.Millisecond
	var last error
	for {
		if epoch := c.epoch.Load(); epoch <= 0 {
			last = errors.New("broker not registered with the controller yet")
		} else {
			r, err := c.ctl.Propose(ctx, controller.AllocateProducerIDs{BrokerID: s.cfg.NodeID, BrokerEpoch: epoch})
			switch {
			case err == nil && r.Code == 0:
				if r.ProducerIDLen <= 0 || r.ProducerIDStart < controller.FirstProducerID {
					return txn.Block{}, fmt.Errorf("controller returned an invalid producer id block [%d, +%d)", r.ProducerIDStart, r.ProducerIDLen)
				}
				return txn.Block{First: r.ProducerIDStart, Size: int64(r.ProducerIDLen)}, nil
			case err == nil && r.Code == kerr.UnknownServerError.Code:
				return txn.Block{}, fmt.Errorf("%w: %v", txn.ErrIDsExhausted, r.Err())
			case err == nil:
				last = r.Err() // STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED: re-registering
			case errors.Is(err, controller.ErrClosed):
				return txn.Block{}, fmt.Errorf("allocating producer ids: %w", err)
			default:
				last = err // no leader until ctx ended, or an unknown outcome
			}
		}
		if !sleepCtx(ctx, backoff) {
			return txn.Block{}, fmt.Errorf("allocating producer ids from the controller: %w (last: %v)", context.Cause(ctx), last)
		}
		backoff = min(2*backoff, producerIDRetryMax)
	}
}
