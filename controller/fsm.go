package controller

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
)

// maxSnapshotBytes bounds what Restore reads from a snapshot.
const maxSnapshotBytes = 1 << 30

// fsm adapts the pure State to raft.FSM. Raft calls Apply, Snapshot and
// Restore from its single FSM goroutine; readers take mu for reading.
type fsm struct {
	mu      sync.RWMutex
	state   *State
	changed chan struct{} // closed (and replaced) after every apply or restore

	notify func() // wakes watchers; called without mu held
	onBad  func(index uint64, err error)
}

func newFSM(notify func(), onBad func(uint64, error)) *fsm {
	return &fsm{state: NewState(), changed: make(chan struct{}), notify: notify, onBad: onBad}
}

// Apply decodes and applies one committed log entry. An entry that does not
// decode (written by a newer version, say) still advances the metadata
// offset, on every node alike, and returns INVALID_REQUEST.
func (f *fsm) Apply(l *raft.Log) any {
	cmd, err := DecodeCommand(l.Data)
	f.mu.Lock()
	var r Result
	if err != nil {
		f.state.offset++
		r = failed(kerr.InvalidRequest, "undecodable command: %v", err)
		r.Offset = f.state.offset
	} else {
		r = f.state.Apply(cmd)
	}
	ch := f.changed
	f.changed = make(chan struct{})
	f.mu.Unlock()
	close(ch)
	if err != nil && f.onBad != nil {
		f.onBad(l.Index, err)
	}
	f.notify()
	return r
}

// Snapshot encodes the state now (Apply is not running: same goroutine);
// Persist then writes the bytes from another goroutine.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	data := f.state.AppendTo(nil)
	f.mu.RUnlock()
	return &fsmSnapshot{data: data}, nil
}

// Restore replaces the state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxSnapshotBytes+1))
	if err != nil {
		return fmt.Errorf("controller: reading snapshot: %w", err)
	}
	if len(data) > maxSnapshotBytes {
		return fmt.Errorf("controller: snapshot larger than %d bytes", maxSnapshotBytes)
	}
	s, err := DecodeState(data)
	if err != nil {
		return fmt.Errorf("controller: snapshot: %w", err)
	}
	f.mu.Lock()
	f.state = s
	ch := f.changed
	f.changed = make(chan struct{})
	f.mu.Unlock()
	close(ch)
	f.notify()
	return nil
}

type fsmSnapshot struct{ data []byte }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
