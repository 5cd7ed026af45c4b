package txn

import (
	"testing"
)

// harness executes a Coordinator's steps the way the broker will: writes
// go to an in-memory copy of the __transaction_state partition (encoded
// records, so reload tests read real bytes), markers are recorded.
type harness struct {
	t           *testing.T
	c           *Coordinator
	now         int64
	nextID      int64
	log         [][2][]byte
	markers     []Markers
	failWrites  bool
	holdMarkers bool // leave markers unacknowledged (Prepare* stays)
	onWrite     func(*Metadata)
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, c: NewCoordinator(Config{}, 3), now: 1_000_000, nextID: 100}
}

func (h *harness) newID() (int64, error) { h.nextID++; return h.nextID, nil }

// run executes s and everything it leads to; the reply is Err -1 when
// the client got none.
func (h *harness) run(s Step) Reply {
	h.t.Helper()
	r := Reply{Err: -1}
	got := false
	for {
		if s.HasReply && !got {
			r, got = s.Reply, true
		}
		switch {
		case s.Write != nil:
			id := s.Write.TransactionalID
			ok := !h.failWrites
			if ok {
				h.log = append(h.log, [2][]byte{EncodeKey(nil, id), EncodeValue(nil, s.Write)})
				if h.onWrite != nil {
					h.onWrite(s.Write)
				}
			}
			s = h.c.WriteDone(id, ok, h.now)
			continue
		case s.Markers != nil:
			h.markers = append(h.markers, *s.Markers)
			if h.holdMarkers {
				return r
			}
			s = h.c.MarkersDone(s.Markers.TransactionalID, h.now)
			continue
		}
		return r
	}
}

func (h *harness) init(id string, timeout int32, exp *ProducerIDAndEpoch) Reply {
	h.t.Helper()
	s, err := h.c.InitProducerID(id, timeout, exp, h.now, h.newID)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.run(s)
}

func (h *harness) add(id string, pid int64, epoch int16, tps ...TopicPartition) Reply {
	return h.run(h.c.AddPartitions(id, pid, epoch, tps, h.now))
}

func (h *harness) end(id string, pid int64, epoch int16, commit, tv2 bool) Reply {
	h.t.Helper()
	s, err := h.c.EndTxn(id, pid, epoch, commit, tv2, h.now, h.newID)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.run(s)
}

func (h *harness) tick() {
	for _, s := range h.c.Tick(h.now) {
		h.run(s)
	}
}

func (h *harness) md(id string) Metadata {
	h.t.Helper()
	md, _, ok := h.c.Get(id)
	if !ok {
		h.t.Fatalf("%s unknown", id)
	}
	return md
}

// reload rebuilds the coordinator from the log, as a new leader does.
func (h *harness) reload() {
	h.t.Helper()
	c := NewCoordinator(Config{}, h.c.CoordinatorEpoch()+1)
	for _, kv := range h.log {
		if err := c.Load(kv[0], kv[1]); err != nil {
			h.t.Fatal(err)
		}
	}
	h.c = c
	for _, s := range c.Recover(h.now) {
		h.run(s)
	}
}

func wantErr(t *testing.T, what string, r Reply, want ErrorCode) {
	t.Helper()
	if r.Err != want {
		t.Fatalf("%s: error %d, want %d", what, r.Err, want)
	}
}
