package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
)

// BlockSize is the number of producer ids in a block (Kafka's
// ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
const BlockSize = 1000

// ErrIDsExhausted means no producer id is left below math.MaxInt64.
var ErrIDsExhausted = errors.New("txn: producer ids exhausted")

// Block is the producer ids [First, First+Size).
type Block struct {
	First int64
	Size  int64
}

// BlockSource hands out blocks of producer ids that no other caller, on this
// broker or another, ever receives, before or after a restart (Kafka's
// AllocateProducerIds). An error is retriable: the caller tries again later.
type BlockSource interface {
	AllocateBlock(ctx context.Context) (Block, error)
}

// IDManager hands out producer ids one at a time from blocks of a
// BlockSource (Kafka's ProducerIdManager).
type IDManager struct {
	src BlockSource

	mu   sync.Mutex
	next int64 // next id to hand out
	end  int64 // end of the current block (exclusive); next == end: fetch one
}

// NewIDManager returns a manager that takes blocks from src when it needs
// them (the first on the first Next).
func NewIDManager(src BlockSource) *IDManager { return &IDManager{src: src} }

// Next returns a producer id no one else has received.
func (m *IDManager) Next(ctx context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next >= m.end {
		b, err := m.src.AllocateBlock(ctx)
		if err != nil {
			return -1, err
		}
		if b.First < 0 || b.Size <= 0 || b.First > math.MaxInt64-b.Size {
			return -1, fmt.Errorf("txn: block source returned an invalid block [%d, +%d)", b.First, b.Size)
		}
		m.next, m.end = b.First, b.First+b.Size
	}
	id := m.next
	m.next++
	return id, nil
}
