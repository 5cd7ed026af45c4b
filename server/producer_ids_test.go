package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/broker/txnhost"
	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fileRangeEnd is where txn.FileBlockSource's id ranges end and the
// controller's begin.
const fileRangeEnd = (txn.MaxFileNodeID + 1) << txn.NodeRangeBits

func TestControllerProducerIDConstants(t *testing.T) {
	if controller.FirstProducerID != fileRangeEnd {
		t.Fatalf("controller.FirstProducerID %d, file ranges end at %d", controller.FirstProducerID, int64(fileRangeEnd))
	}
	if controller.ProducerIDBlockSize != txn.BlockSize {
		t.Fatalf("block sizes differ: controller %d, txn %d", controller.ProducerIDBlockSize, txn.BlockSize)
	}
}

// pidConn sends InitProducerId v4 (idempotent, no transactional id) on one
// connection; safe to use from a goroutine (no t.Fatal).
type pidConn struct {
	c    net.Conn
	corr int32
}

func dialPID(addr string) (*pidConn, error) {
	c, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		return nil, err
	}
	return &pidConn{c: c}, nil
}

// next returns a producer id, retrying COORDINATOR_LOAD_IN_PROGRESS (as
// clients do) until deadline.
func (p *pidConn) next(deadline time.Time) (int64, error) {
	for {
		p.corr++
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = 4
		req.TransactionTimeoutMillis = 60000
		p.c.SetDeadline(deadline)
		payload := encodeRequest(req, p.corr, "pid-test")
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
		if _, err := p.c.Write(append(frame, payload...)); err != nil {
			return -1, err
		}
		var size [4]byte
		if _, err := io.ReadFull(p.c, size[:]); err != nil {
			return -1, err
		}
		b := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(p.c, b); err != nil {
			return -1, err
		}
		if len(b) < 5 || int32(binary.BigEndian.Uint32(b)) != p.corr || b[4] != 0 {
			return -1, fmt.Errorf("bad response header % x", b[:min(len(b), 5)])
		}
		resp := kmsg.NewPtrInitProducerIDResponse()
		resp.Version = 4
		if err := resp.ReadFrom(b[5:]); err != nil {
			return -1, err
		}
		switch {
		case resp.ErrorCode == 0:
			if resp.ProducerEpoch != 0 {
				return -1, fmt.Errorf("producer id %d with epoch %d", resp.ProducerID, resp.ProducerEpoch)
			}
			return resp.ProducerID, nil
		case resp.ErrorCode == kerr.CoordinatorLoadInProgress.Code && time.Now().Before(deadline):
			time.Sleep(20 * time.Millisecond)
		default:
			return -1, kerr.ErrorForCode(resp.ErrorCode)
		}
	}
}

// pidLedger collects ids and checks they are unique and above the file
// ranges.
type pidLedger struct {
	mu   sync.Mutex
	seen map[int64]int32 // id → broker that handed it out
}

func (l *pidLedger) add(id int64, broker int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id < fileRangeEnd {
		return fmt.Errorf("broker %d handed out id %d below the file ranges' end %d", broker, id, int64(fileRangeEnd))
	}
	if prev, dup := l.seen[id]; dup {
		return fmt.Errorf("id %d handed out by broker %d and again by broker %d", id, prev, broker)
	}
	l.seen[id] = broker
	return nil
}

// initProducerIDs asks every given broker for n ids over conns connections
// each, concurrently, recording them in l.
func initProducerIDs(t *testing.T, l *pidLedger, brokers []*inCluster, conns, n int) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	var wg sync.WaitGroup
	errs := make(chan error, len(brokers)*conns)
	for _, b := range brokers {
		for range conns {
			wg.Add(1)
			go func(id int32, addr string) {
				defer wg.Done()
				p, err := dialPID(addr)
				if err != nil {
					errs <- err
					return
				}
				defer p.c.Close()
				for range n {
					pid, err := p.next(deadline)
					if err == nil {
						err = l.add(pid, id)
					}
					if err != nil {
						errs <- fmt.Errorf("broker %d: %w", id, err)
						return
					}
				}
			}(b.id, b.addr)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestProducerIDsUniqueAcrossCluster: InitProducerId on every broker of a
// 3-broker cluster hands out ids from blocks the controller quorum
// allocates: unique across brokers, across a controller leader kill and
// restart and a broker restart, and all above the FileBlockSource ranges.
// Without a quorum a broker still serves its current and prefetched
// blocks, and a new block cannot be had: the source gives up when its
// context ends instead of hanging.
func TestProducerIDsUniqueAcrossCluster(t *testing.T) {
	brokers, voters := startInCluster(t, 3)
	l := &pidLedger{seen: map[int64]int32{}}

	// 2 x 600 ids per broker: every broker needs a second block.
	initProducerIDs(t, l, brokers, 2, 600)
	if len(l.seen) != 3*1200 {
		t.Fatalf("%d ids", len(l.seen))
	}

	// Kill the broker whose controller leads the quorum; the others take
	// new blocks from the next leader.
	var leader *inCluster
	deadline := time.Now().Add(testTimeout)
	for leader == nil && time.Now().Before(deadline) {
		for _, b := range brokers {
			if b.ctl.IsLeader() {
				leader = b
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if leader == nil {
		t.Fatal("no controller leader")
	}
	leader.stop(t)
	var rest []*inCluster
	for _, b := range brokers {
		if b != leader {
			rest = append(rest, b)
		}
	}
	initProducerIDs(t, l, rest, 2, 600)

	// The old leader comes back (broker and controller restart); then a
	// broker restarts on its own. Both continue with fresh blocks.
	leader.restart(t, voters)
	initProducerIDs(t, l, []*inCluster{leader}, 1, 50)
	rest[0].stop(t)
	rest[0].restart(t, voters)
	initProducerIDs(t, l, brokers, 1, 50)
	if want := 3*1200 + 2*1200 + 50 + 3*50; len(l.seen) != want {
		t.Fatalf("%d ids, want %d", len(l.seen), want)
	}
	// Blocks, not single ids, go to brokers: each block belongs to one broker.
	owner := map[int64]int32{}
	for id, b := range l.seen {
		blk := (id - fileRangeEnd) / txn.BlockSize
		if o, ok := owner[blk]; ok && o != b {
			t.Fatalf("block %d used by brokers %d and %d", blk, o, b)
		}
		owner[blk] = b
	}

	// Without a quorum (two of three voters down) no new block can be
	// had, but a broker keeps answering from its current and prefetched
	// blocks: 1000 more ids always fit in them.
	last := brokers[2]
	src := last.s.cfg.Txn.ProducerIDs.(*txnhost.ControllerBlocks)
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(10 * time.Millisecond) {
		if src.Prefetched() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no block prefetched")
		}
	}
	for _, b := range brokers[:2] {
		b.stop(t)
	}
	initProducerIDs(t, l, []*inCluster{last}, 1, txn.BlockSize)
	// The source itself ends with its context, retriably, instead of hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := src.Allocate(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("allocate without a quorum: %v", err)
	}
}

// TestProducerIDsAfterRegistrationReplaced: when the broker's registration
// is replaced (another incarnation registered with its id), the controller
// refuses its old epoch with STALE_BROKER_EPOCH; the source keeps retrying
// while the heartbeat loop registers again, then gets a fresh block.
func TestProducerIDsAfterRegistrationReplaced(t *testing.T) {
	brokers, _ := startInCluster(t, 1)
	b := brokers[0]
	src := b.s.cfg.Txn.ProducerIDs.(*txnhost.ControllerBlocks)
	ctx := testCtx(t)
	first, err := src.Allocate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := b.s.BrokerEpoch()
	r, err := b.ctl.Propose(ctx, controller.RegisterBroker{ID: b.id, IncarnationID: controller.NewIncarnationID(), Host: "127.0.0.1", Port: 1})
	if err != nil || r.Code != 0 {
		t.Fatalf("replacing the registration: %v %v", err, r.Err())
	}
	if stale, err := b.ctl.Propose(ctx, controller.AllocateProducerIDs{BrokerID: b.id, BrokerEpoch: old}); err != nil || stale.Code != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("old epoch: %v %+v", err, stale)
	}
	next, err := src.Allocate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next.First < first.First+first.Size || next.Size != txn.BlockSize {
		t.Fatalf("block %+v after %+v", next, first)
	}
	if e := b.s.BrokerEpoch(); e <= r.BrokerEpoch {
		t.Fatalf("broker epoch %d, the replacing registration had %d", e, r.BrokerEpoch)
	}
}
