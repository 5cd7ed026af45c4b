package txnhost

// Producer id blocks from the controller (issue 8, Kafka's
// AllocateProducerIds, KIP-730).
//
// In cluster mode, unless the broker is given another txn.BlockSource, its
// txn.IDManager takes its blocks from ControllerBlocks: each block is an
// AllocateProducerIDs command committed through the metadata quorum
// (controller/producerids.go) with this broker's id and current
// registration epoch, so ids are unique in the whole cluster and never
// repeat after a restart of any broker or controller; they start at
// controller.FirstProducerID, above every id a txn.FileBlockSource handed
// out. A single broker (no controller) keeps txn.FileBlockSource: it has no
// quorum to ask, and its node's own range is already unique.
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
// has a block or the source is closed (Close cancels it and waits). mu is
// never held across a proposal.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrNoProducerIDs is NewProducerID's error when the host has no
// producer id source.
var ErrNoProducerIDs = errors.New("no producer id source")

// IDTimeout bounds the wait for one producer id (a block fetch: a file
// fsync, or a controller round trip).
const IDTimeout = 10 * time.Second

// NewProducerID returns the next producer id from the host's blocks
// (Config.ProducerIDs), waiting at most IDTimeout for a new block; the
// coordinator's newID, and InitProducerId's without a transactional id.
func (h *Host) NewProducerID() (int64, error) {
	if h.ids == nil {
		return -1, fmt.Errorf("%w: %v", ErrNoProducerIDs, h.cfg.NoProducerIDs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), IDTimeout)
	defer cancel()
	return h.ids.Next(ctx)
}

// Proposer commits a command through the metadata quorum
// (*controller.Controller).
type Proposer interface {
	Propose(ctx context.Context, cmd controller.Command) (controller.Result, error)
}

// BlocksConfig configures ControllerBlocks.
type BlocksConfig struct {
	NodeID int32
	// Epoch returns the broker epoch of this broker's current registration
	// (0 or less: not registered yet).
	Epoch      func() int64
	Controller Proposer
	Clock      Clock
	Log        *slog.Logger // nil: slog.Default()
}

// ControllerBlocks is a txn.BlockSource backed by the metadata quorum.
type ControllerBlocks struct {
	cfg    BlocksConfig
	ctx    context.Context // canceled by Close (and by the parent context)
	cancel context.CancelFunc
	wg     sync.WaitGroup // the prefetch goroutine

	mu       sync.Mutex
	closed   bool
	fetching bool      // the prefetch goroutine runs
	ready    txn.Block // prefetched; Size 0: none
}

// NewControllerBlocks returns a source whose work ends with parent or
// Close.
func NewControllerBlocks(parent context.Context, cfg BlocksConfig) *ControllerBlocks {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	src := &ControllerBlocks{cfg: cfg}
	src.ctx, src.cancel = context.WithCancel(parent)
	return src
}

// AllocateBlock hands out the prefetched block if there is one, else
// allocates one now; either way it starts fetching the next.
func (src *ControllerBlocks) AllocateBlock(ctx context.Context) (txn.Block, error) {
	src.mu.Lock()
	b := src.ready
	src.ready = txn.Block{}
	src.mu.Unlock()
	if b.Size == 0 {
		var err error
		if b, err = src.Allocate(ctx); err != nil {
			return txn.Block{}, err
		}
	}
	src.prefetch()
	return b, nil
}

// Prefetched reports whether a block is waiting for the next
// AllocateBlock.
func (src *ControllerBlocks) Prefetched() bool {
	src.mu.Lock()
	defer src.mu.Unlock()
	return src.ready.Size != 0
}

// prefetch starts the prefetch goroutine unless it runs, a block is ready
// or the source is closed.
func (src *ControllerBlocks) prefetch() {
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.closed || src.fetching || src.ready.Size != 0 {
		return
	}
	src.fetching = true
	src.wg.Add(1)
	go func() {
		defer src.wg.Done()
		b, err := src.Allocate(src.ctx)
		src.mu.Lock()
		src.fetching = false
		if err == nil {
			src.ready = b
		}
		src.mu.Unlock()
		if err != nil && src.ctx.Err() == nil {
			src.cfg.Log.Warn("prefetching a producer id block", "err", err)
		}
	}()
}

// Close stops the prefetch goroutine and waits for it.
func (src *ControllerBlocks) Close() {
	src.mu.Lock()
	src.closed = true
	src.mu.Unlock()
	src.cancel()
	src.wg.Wait()
}

// producerIDRetryMax caps the backoff between allocation attempts.
const producerIDRetryMax = 200 * time.Millisecond

// Allocate returns a block of producer ids allocated by the quorum now
// (no prefetch), retrying until ctx ends or the source is closed.
func (src *ControllerBlocks) Allocate(ctx context.Context) (txn.Block, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(src.ctx, cancel) // closed
	defer stop()
	backoff := 10 * time.Millisecond
	var last error
	for {
		if epoch := src.cfg.Epoch(); epoch <= 0 {
			last = errors.New("broker not registered with the controller yet")
		} else {
			r, err := src.cfg.Controller.Propose(ctx, controller.AllocateProducerIDs{BrokerID: src.cfg.NodeID, BrokerEpoch: epoch})
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
		if !sleep(ctx, src.cfg.Clock, backoff) {
			return txn.Block{}, fmt.Errorf("allocating producer ids from the controller: %w (last: %v)", context.Cause(ctx), last)
		}
		backoff = min(2*backoff, producerIDRetryMax)
	}
}

// sleep waits d on clock; false if ctx ends first.
func sleep(ctx context.Context, clock Clock, d time.Duration) bool {
	c, stop := clock.After(d)
	defer stop()
	select {
	case <-c:
		return true
	case <-ctx.Done():
		return false
	}
}
