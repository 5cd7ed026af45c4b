package engine

// High-watermark notification for long polls without goroutines.
//
// A Fetch long poll waits on many logs at once for the first whose high
// watermark passes what the fetch saw. Wait's channels need a goroutine (or a
// reflect.Select) per waiting request; an HWWaiter instead registers one small
// record per log and is called back, once, from whoever advances the HW.
//
// Layout: each log that has waiters owns an hwNotify, found through the
// package's notify table (sync.Map keyed by *Log, so Log itself needs no new
// field), holding its registrations in a slice; a registration knows its
// index there, so Cancel is O(1) (swap-remove). The hwNotify is armed with at
// most one Log.WhenDurable callback at a time, at the HW seen when arming:
// every registered offset is >= that HW (a registration whose offset is
// already below the HW wakes at once instead), so the callback fires no
// later than any registration is satisfied. When it fires, fire wakes every
// registration whose offset the HW passed, re-arms at the new HW for the
// rest, or, when none are left, marks the hwNotify dead and removes it from
// the table. So an idle log costs one table entry and one WhenDurable record
// while it has waiters, and nothing afterwards; a log that fails or closes
// fires its WhenDurable callbacks with the error, which wakes everyone.
//
// Locks: hwNotify.mu guards its registrations, armed and dead. It is never
// held while calling WhenDurable (which may call back inline) or a wake
// function. HWWaiter.fired is an atomic: the first satisfied registration
// wins and the wake function runs exactly once per Arm.

import (
	"sync"
	"sync/atomic"
)

// notifyTable maps *Log to its *hwNotify while the log has waiters.
var notifyTable sync.Map

type hwNotify struct {
	log   *Log
	fireF func(error) // n.fire, bound once

	mu    sync.Mutex
	regs  []*hwReg
	armed bool
	dead  bool // removed from notifyTable; register on a new one
}

type hwReg struct {
	w      *HWWaiter
	home   *hwNotify // where it was registered; set before publication, then fixed
	offset int64
	idx    int // index in home.regs, -1 once removed; guarded by home.mu
}

// HWWaiter waits for the high watermark of any of a set of logs to pass an
// offset, calling its wake function once, from the goroutine that advanced
// the HW (a flush worker, or Append with write caching) or inline from Add.
// wake must not block: it should hand the work to another goroutine.
//
// Use: Arm, then Add each log; wake runs once at most per Arm. Cancel removes
// every registration (call it before the next Arm, and when giving up). An
// HWWaiter is used by one goroutine at a time (Arm, Add, Cancel are not safe
// concurrently with each other); wake may run concurrently with them.
type HWWaiter struct {
	wake  func()
	fired atomic.Bool
	regs  []hwReg
	nregs int
}

// NewHWWaiter returns a waiter that calls wake when woken.
func NewHWWaiter(wake func()) *HWWaiter { return &HWWaiter{wake: wake} }

// Arm prepares w for up to n Add calls and allows one wake.
func (w *HWWaiter) Arm(n int) {
	if cap(w.regs) < n {
		w.regs = make([]hwReg, n)
	}
	w.regs = w.regs[:n]
	w.nregs = 0
	w.fired.Store(false)
}

// Add registers w on l: w wakes when l's HW moves past offset (HW > offset)
// or l fails or closes. If that already holds, w wakes now, inline. Add
// beyond the n given to Arm panics (a caller bug).
func (w *HWWaiter) Add(l *Log, offset int64) {
	r := &w.regs[w.nregs]
	w.nregs++
	*r = hwReg{w: w, offset: offset, idx: -1}
	for {
		n := notifyFor(l)
		n.mu.Lock()
		if n.dead {
			n.mu.Unlock()
			continue
		}
		if l.HighWatermark() > offset {
			n.mu.Unlock()
			w.fire()
			return
		}
		r.home, r.idx = n, len(n.regs)
		n.regs = append(n.regs, r)
		arm := !n.armed
		n.armed = true
		hw := l.HighWatermark()
		n.mu.Unlock()
		if arm {
			l.WhenDurable(hw, n.fireF)
		}
		return
	}
}

// Cancel removes every registration of w. A wake already on its way may
// still run after Cancel returns; callers tolerate a spurious wake.
func (w *HWWaiter) Cancel() {
	for i := range w.regs[:w.nregs] {
		r := &w.regs[i]
		if n := r.home; n != nil {
			n.mu.Lock()
			if r.idx >= 0 {
				n.remove(r)
			}
			n.mu.Unlock()
		}
		*r = hwReg{}
	}
	w.nregs = 0
}

func (w *HWWaiter) fire() {
	if w.fired.CompareAndSwap(false, true) {
		w.wake()
	}
}

// notifyFor returns l's live hwNotify, creating it if needed.
func notifyFor(l *Log) *hwNotify {
	if v, ok := notifyTable.Load(l); ok {
		return v.(*hwNotify)
	}
	n := &hwNotify{log: l}
	n.fireF = n.fire
	v, _ := notifyTable.LoadOrStore(l, n)
	return v.(*hwNotify)
}

// remove takes r out of n.regs; n.mu is held.
func (n *hwNotify) remove(r *hwReg) {
	last := len(n.regs) - 1
	if r.idx != last {
		moved := n.regs[last]
		n.regs[r.idx] = moved
		moved.idx = r.idx
	}
	n.regs[last] = nil
	n.regs = n.regs[:last]
	r.idx = -1
}

// fire is the WhenDurable callback: the HW moved past the armed offset, or
// the log failed (err != nil: everyone wakes and re-reads the error).
func (n *hwNotify) fire(err error) {
	var stack [32]*HWWaiter
	woken := stack[:0]
	n.mu.Lock()
	hw := n.log.HighWatermark()
	for i := 0; i < len(n.regs); {
		r := n.regs[i]
		if err == nil && r.offset >= hw {
			i++
			continue
		}
		woken = append(woken, r.w)
		n.remove(r) // moves the last registration to i
	}
	rearm := err == nil && len(n.regs) > 0
	n.armed = rearm
	if !rearm {
		n.dead = true
		notifyTable.CompareAndDelete(n.log, n)
	}
	n.mu.Unlock()
	if rearm {
		n.log.WhenDurable(hw, n.fireF)
	}
	for _, w := range woken {
		w.fire()
	}
}
