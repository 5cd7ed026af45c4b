package uring

import (
	"sync"
	"testing"
	"time"
)

// Background ops: at most BackgroundDepth go to the backend at once, none
// while the ring is paused; the others wait in the ring in order and all
// complete once resumed. Ops without the flag are never held.
func TestBackgroundGate(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			r := newTestRing(t, b, func(c *Config) { c.BackgroundDepth = 2 })
			f := openTestFile(t, r, 0)
			var mu sync.Mutex
			done := map[uint64]bool{}
			all := make(chan struct{}, 16)
			r.PauseBackground()
			ops := make([]*Op, 8)
			for i := range ops {
				ops[i] = &Op{Code: OpWrite, File: f, Buf: []byte{byte(i)}, Off: int64(i), Background: true, Tag: uint64(i),
					Done: func(op *Op) {
						mu.Lock()
						done[op.Tag] = true
						mu.Unlock()
						all <- struct{}{}
					}}
				if err := r.Submit(ops[i]); err != nil {
					t.Fatal(err)
				}
			}
			// A foreground op completes while the background ones are held.
			if _, err := do(t, r, &Op{Code: OpWrite, File: f, Buf: []byte("fg"), Off: 100}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // held ops must not complete meanwhile
			mu.Lock()
			n := len(done)
			mu.Unlock()
			if n != 0 {
				t.Fatalf("%d background ops completed while paused", n)
			}
			r.ResumeBackground()
			for range ops {
				select {
				case <-all:
				case <-time.After(10 * time.Second): // a hang guard
					t.Fatal("held background ops never completed after ResumeBackground")
				}
			}
			// The gate counts an op out after its Done returns.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				r.bg.mu.Lock()
				inflight, queued := r.bg.inflight, r.bg.q.len()
				r.bg.mu.Unlock()
				if inflight == 0 && queued == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("gate after completion: %d in flight, %d queued", inflight, queued)
				}
			}
		})
	}
}
