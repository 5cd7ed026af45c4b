package txn

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// client is one producer instance of a transactional id as the test
// drives it: the id and epoch it was last given.
type client struct {
	id    string
	pid   int64
	epoch int16
	tv2   bool
	ok    bool // has an id
}

// TestRandomSequences drives random calls from several producer
// instances per transactional id, with failed writes, held markers,
// timeouts, expirations and reloads, and checks after every step:
//   - no transaction is both committed and aborted (its Prepare/Complete
//     records and markers all agree);
//   - a producer id's epoch in the log never decreases;
//   - a request whose epoch is below one already handed out for its
//     producer id never changes anything.
func TestRandomSequences(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 20
	}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomSequence(t, uint64(seed)) })
	}
}

func randomSequence(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	h := newHarness(t)
	h.c = NewCoordinator(Config{IDExpirationMs: 50_000}, 0)
	ids := []string{"x", "y"}
	tps := []TopicPartition{{"a", 0}, {"a", 1}, {"b", 0}}
	var clients []*client
	for _, id := range ids {
		for range 3 {
			clients = append(clients, &client{id: id, tv2: rng.IntN(2) == 0})
		}
	}
	maxEpoch := map[int64]int16{}       // highest epoch handed out or logged per producer id
	lastLogged := map[string]Metadata{} // last record per transactional id
	result := map[string]State{}        // outcome of each id's current transaction (0: none yet)
	var stale bool                      // the call in progress came from a stale epoch
	h.onWrite = func(md *Metadata) {
		id := md.TransactionalID
		if stale {
			t.Fatalf("seed %d: a fenced epoch changed %s: %+v", seed, id, md)
		}
		prev, had := lastLogged[id]
		if md.State == Dead {
			delete(lastLogged, id)
			delete(result, id)
			return
		}
		if had && prev.ProducerID == md.ProducerID && md.ProducerEpoch < prev.ProducerEpoch {
			t.Fatalf("seed %d: epoch of %d went back from %d to %d", seed, md.ProducerID, prev.ProducerEpoch, md.ProducerEpoch)
		}
		if md.ProducerEpoch > maxEpoch[md.ProducerID] {
			maxEpoch[md.ProducerID] = md.ProducerEpoch
		}
		switch md.State {
		case Ongoing:
			if !had || prev.State != Ongoing {
				result[id] = 0 // a new transaction
			}
		case PrepareCommit, CompleteCommit, PrepareAbort, CompleteAbort:
			r := CompleteCommit
			if md.State == PrepareAbort || md.State == CompleteAbort {
				r = CompleteAbort
			}
			if had && (prev.State == Ongoing || prev.State == Empty || prev.State == CompleteCommit || prev.State == CompleteAbort) &&
				(md.State == PrepareCommit || md.State == PrepareAbort) {
				result[id] = r // ending: Prepare* opens the outcome
			} else if result[id] != 0 && result[id] != r {
				t.Fatalf("seed %d: %s's transaction both committed and aborted (%v after %v)", seed, id, md.State, result[id])
			}
		}
		lastLogged[id] = *md.clone()
	}
	nMarkers := 0
	checkMarkers := func() {
		for _, m := range h.markers[nMarkers:] {
			want := result[m.TransactionalID]
			if (m.Commit && want != CompleteCommit) || (!m.Commit && want != CompleteAbort) {
				t.Fatalf("seed %d: markers %+v for a transaction whose outcome is %v", seed, m, want)
			}
		}
		nMarkers = len(h.markers)
	}
	for step := 0; step < 300; step++ {
		h.failWrites = rng.IntN(10) == 0
		h.holdMarkers = rng.IntN(4) == 0
		c := clients[rng.IntN(len(clients))]
		stale = c.ok && c.epoch < maxEpoch[c.pid]
		switch op := rng.IntN(10); {
		case op < 2:
			stale = false // InitProducerId may legitimately fence
			var exp *ProducerIDAndEpoch
			if c.ok && rng.IntN(2) == 0 {
				exp = &ProducerIDAndEpoch{c.pid, c.epoch}
			}
			r := h.init(c.id, 1000, exp)
			if r.Err == None {
				if r.ProducerEpoch < maxEpoch[r.ProducerID] && exp == nil {
					t.Fatalf("seed %d: init handed out stale epoch %d < %d", seed, r.ProducerEpoch, maxEpoch[r.ProducerID])
				}
				c.pid, c.epoch, c.ok = r.ProducerID, r.ProducerEpoch, true
			}
		case op < 5:
			if c.ok {
				h.add(c.id, c.pid, c.epoch, tps[rng.IntN(len(tps))])
			}
		case op < 7:
			if c.ok {
				r := h.end(c.id, c.pid, c.epoch, rng.IntN(2) == 0, c.tv2)
				if r.Err == None && c.tv2 {
					c.pid, c.epoch = r.ProducerID, r.ProducerEpoch
				}
			}
		case op < 8:
			stale = false
			h.now += int64(rng.IntN(1500))
			h.tick()
		case op < 9:
			stale = false
			for _, id := range ids {
				if md, pending, ok := h.c.Get(id); ok && !pending && (md.State == PrepareCommit || md.State == PrepareAbort) {
					h.holdMarkers = false
					h.run(h.c.MarkersDone(id, h.now))
				}
			}
		default:
			stale = false
			before := map[string]Metadata{}
			for _, id := range h.c.IDs() {
				if md, pending, _ := h.c.Get(id); !pending {
					before[id] = md
				}
			}
			h.holdMarkers = true
			h.failWrites = false
			h.reload()
			for id, want := range before {
				got, _, ok := h.c.Get(id)
				if !ok {
					t.Fatalf("seed %d: %s lost on reload", seed, id)
				}
				if want.State == PrepareCommit || want.State == PrepareAbort {
					continue // Recover may have completed it
				}
				got.LastProducerEpoch = want.LastProducerEpoch
				if !got.Equal(&want) {
					t.Fatalf("seed %d: %s reloaded as %+v, want %+v", seed, id, got, want)
				}
			}
		}
		checkMarkers()
	}
}
