package sharehost

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kerr"
)

// gatedCluster is a Cluster without replicas of the state partitions
// (they are read at their leader, ReadPartition) whose first read blocks
// until release closes: a slow load.
type gatedCluster struct {
	remoteCluster
	mu      sync.Mutex
	calls   int
	entered chan struct{} // closed when the first read has begun
	release chan struct{} // the first read returns once it is closed
}

func (c *gatedCluster) ReadPartition(ctx context.Context, topic string, p int32, fn func([]byte) error) error {
	c.mu.Lock()
	c.calls++
	first := c.calls == 1
	c.mu.Unlock()
	if first {
		close(c.entered)
		select {
		case <-c.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if topic != StateTopic {
		return errors.New("wrong topic")
	}
	return fn(nil) // no state: a share-partition new to the group
}

func (c *gatedCluster) reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// loadHost is a cluster-mode Host over eng and c with the maps New makes
// and no goroutine of its own; its group "g" reads from the earliest
// offset.
func loadHost(t *testing.T, eng *engine.Engine, c Cluster) *Host {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{eng: eng, log: slog.Default(), cluster: c, ctx: ctx, cancel: cancel,
		parts: map[Key]*Part{}, stored: map[Key]share.State{}, waiting: map[Waiter]struct{}{},
		configs: map[string]map[string]string{"g": {CfgAutoOffsetReset: "earliest"}}}
	h.groups = share.NewGroups(share.GroupConfig{})
	t.Cleanup(func() {
		h.mu.Lock()
		h.closing = true
		h.mu.Unlock()
		cancel()
		h.bg.Wait()
	})
	return h
}

func loadEngine(t *testing.T) (*engine.Engine, *engine.Topic) {
	t.Helper()
	eng, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if _, err := eng.CreateReplicaTopic(StateTopic, [16]byte{7}, 3, map[string]string{"cleanup.policy": "compact"}, nil); err != nil {
		t.Fatal(err)
	}
	jobs, err := eng.CreateTopic("jobs", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	return eng, jobs
}

// waitFor fails the test when c has not closed within a generous bound
// (a hang, not a timing measure).
func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still blocked", what)
	}
}

// TestLoadDoesNotBlockOtherPartitions: while the state of one
// share-partition is being read (its state partition's leader slow to
// answer), a member fetches and acknowledges on another share-partition
// of the host: the read takes no lock those need. Once the read ends the
// first share-partition is installed without being read again.
func TestLoadDoesNotBlockOtherPartitions(t *testing.T) {
	eng, jobs := loadEngine(t)
	c := &gatedCluster{entered: make(chan struct{}), release: make(chan struct{})}
	h := loadHost(t, eng, c)
	kA := Key{Group: "g", TopicID: jobs.ID(), Part: 0}
	kB := Key{Group: "g", TopicID: jobs.ID(), Part: 1}

	// A handler's path for partition 0: Load without the lock, then the
	// lock and Partition.
	aDone := make(chan struct{})
	var aCode int16
	go func() {
		defer close(aDone)
		h.Load([]Key{kA})
		h.Lock()
		defer h.Unlock()
		var d Durable
		_, aCode = h.Partition("g", jobs, 0, &d)
	}()
	waitFor(t, c.entered, "the read of partition 0's state")

	// The same path for partition 1, then an acquisition and an ACCEPT.
	bDone := make(chan struct{})
	var bErr error
	go func() {
		defer close(bDone)
		h.Load([]Key{kB})
		h.Lock()
		defer h.Unlock()
		var d Durable
		sp, code := h.Partition("g", jobs, 1, &d)
		if code != 0 {
			bErr = kerr.ErrorForCode(code)
			return
		}
		recs, _ := sp.P.Acquire(1000, "m", 10, 3)
		if len(recs) != 1 || recs[0].First != 0 || recs[0].Last != 2 {
			bErr = errors.New("acquired the wrong records")
			return
		}
		if _, aerr := sp.P.Acknowledge(1001, "m", []share.AckBatch{{First: 0, Last: 2, Types: []share.AckType{share.AckAccept}}}); aerr != nil {
			bErr = aerr
		}
	}()
	waitFor(t, bDone, "fetch and acknowledge of partition 1 while partition 0 loads")
	if bErr != nil {
		t.Fatalf("partition 1: %v", bErr)
	}
	select {
	case <-aDone:
		t.Fatal("partition 0 was served before its state was read")
	default:
	}

	close(c.release)
	waitFor(t, aDone, "partition 0 after its read ended")
	if aCode != 0 {
		t.Fatalf("partition 0: code %d, want it installed", aCode)
	}
	h.Lock()
	defer h.Unlock()
	if h.parts[kA] == nil || h.parts[kB] == nil {
		t.Fatalf("share-partitions %v, want both", h.parts)
	}
	// Each load read the state and the group's configs: four reads,
	// none under the lock since.
	if n := c.reads(); n != 4 {
		t.Fatalf("%d reads of the state topic, want 4", n)
	}
}

// TestPartitionWithoutLoadStartsOne: a Partition that finds nothing read
// for its share-partition (a waiting fetch retried after a leader move)
// does not read under the lock: it answers LEADER_NOT_AVAILABLE and
// starts the read, whose result the next call installs.
func TestPartitionWithoutLoadStartsOne(t *testing.T) {
	eng, jobs := loadEngine(t)
	c := &gatedCluster{entered: make(chan struct{}), release: make(chan struct{})}
	h := loadHost(t, eng, c)
	k := Key{Group: "g", TopicID: jobs.ID(), Part: 0}
	h.Lock()
	var d Durable
	sp, code := h.Partition("g", jobs, 0, &d)
	ld := h.loading[k]
	h.Unlock()
	if sp != nil || code != kerr.LeaderNotAvailable.Code || ld == nil {
		t.Fatalf("Partition before any read: %v, code %d, read under way %v; want none, LEADER_NOT_AVAILABLE, a read", sp, code, ld != nil)
	}
	waitFor(t, c.entered, "the read Partition started")
	close(c.release)
	waitFor(t, ld.done, "the read")
	h.Lock()
	defer h.Unlock()
	if sp, code := h.Partition("g", jobs, 0, &d); sp == nil || code != 0 {
		t.Fatalf("Partition after the read: %v, code %d", sp, code)
	}
	if n := c.reads(); n != 2 {
		t.Fatalf("%d reads, want 2 (state and configs, once)", n)
	}
}

// TestDeletedStateIsNotLoadedBack: a read under way when the group's
// state is deleted (DeleteGroups) is dropped, not installed: it may
// predate the tombstone.
func TestDeletedStateIsNotLoadedBack(t *testing.T) {
	eng, jobs := loadEngine(t)
	c := &gatedCluster{entered: make(chan struct{}), release: make(chan struct{})}
	h := loadHost(t, eng, c)
	k := Key{Group: "g", TopicID: jobs.ID(), Part: 0}
	h.Lock()
	ld := h.startLoad(k, 1)
	h.Unlock()
	waitFor(t, c.entered, "the read")
	h.Lock()
	h.forgetLoad(k)
	h.Unlock()
	close(c.release)
	waitFor(t, ld.done, "the read")
	h.Lock()
	defer h.Unlock()
	if _, ok := h.loaded[k]; ok {
		t.Fatal("a read begun before the state was deleted was kept")
	}
}

// TestDeleteGroupReadsWithoutTheLock: DeleteGroups reads this broker's
// replicas of the state topic for the group's share-partitions (all its
// state partitions) before it takes the host's lock: while that read is
// held up, another share-partition is fetched and acknowledged.
func TestDeleteGroupReadsWithoutTheLock(t *testing.T) {
	eng, jobs := loadEngine(t)
	c := &gatedCluster{entered: make(chan struct{}), release: make(chan struct{})}
	h := loadHost(t, eng, c)
	delDone := make(chan struct{})
	var delCode int16
	var delOK bool
	go func() {
		defer close(delDone)
		delCode, _, _, delOK = h.DeleteGroup("other")
	}()
	waitFor(t, c.entered, "DeleteGroups' read of the state topic")

	bDone := make(chan struct{})
	var bErr error
	go func() {
		defer close(bDone)
		h.Load([]Key{{Group: "g", TopicID: jobs.ID(), Part: 1}})
		h.Lock()
		defer h.Unlock()
		var d Durable
		sp, code := h.Partition("g", jobs, 1, &d)
		if code != 0 {
			bErr = kerr.ErrorForCode(code)
			return
		}
		sp.P.Acquire(1000, "m", 10, 3)
		if _, aerr := sp.P.Acknowledge(1001, "m", []share.AckBatch{{First: 0, Last: 2, Types: []share.AckType{share.AckAccept}}}); aerr != nil {
			bErr = aerr
		}
	}()
	waitFor(t, bDone, "fetch and acknowledge of partition 1 while DeleteGroups reads")
	if bErr != nil {
		t.Fatalf("partition 1: %v", bErr)
	}
	close(c.release)
	waitFor(t, delDone, "DeleteGroups after its read ended")
	if delOK || delCode != 0 {
		t.Fatalf("DeleteGroups of a group without state: ok %v code %d, want it left to the group coordinator", delOK, delCode)
	}
}
