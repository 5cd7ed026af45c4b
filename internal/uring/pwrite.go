package uring

import (
	"fmt"
	"sync"
)

// pwriteEngine is the fallback: a fixed pool of worker goroutines executing
// each op with one blocking pwrite/pread/fdatasync. Completions are delivered
// under cbMu so Done callbacks never run concurrently, as with io_uring.
//
// Lock order: cbMu may be held while taking mu (a Done that calls Submit);
// mu is never held while taking cbMu.
type pwriteEngine struct {
	r       *Ring
	nWorker int

	mu      sync.Mutex
	cond    sync.Cond // signalled when q grows or closing is set
	q       opFIFO
	closing bool

	cbMu    sync.Mutex // serializes Done callbacks
	workers sync.WaitGroup
}

func newPwriteEngine(r *Ring, workers int) *pwriteEngine {
	e := &pwriteEngine{r: r, nWorker: workers}
	e.cond.L = &e.mu
	e.workers.Add(workers)
	for range workers {
		go e.work()
	}
	return e
}

func (e *pwriteEngine) describe() string {
	return fmt.Sprintf("pwrite, %d workers", e.nWorker)
}

func (e *pwriteEngine) registeredBuffers() []*Pool { return nil }

func (e *pwriteEngine) submit(op *Op) error {
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		return ErrClosed
	}
	e.q.push(op)
	e.mu.Unlock()
	e.cond.Signal()
	return nil
}

// control has nothing to register: descriptors are used as they are.
func (e *pwriteEngine) control(op *Op) error {
	e.mu.Lock()
	closing := e.closing
	e.mu.Unlock()
	if closing && op.Code == opRegister {
		return ErrClosed
	}
	op.Done(op)
	return nil
}

// work is one worker goroutine, owned by the engine; it exits once closing is
// set and the queue is empty.
func (e *pwriteEngine) work() {
	defer e.workers.Done()
	for {
		e.mu.Lock()
		for e.q.empty() && !e.closing {
			e.cond.Wait()
		}
		if e.q.empty() {
			e.mu.Unlock()
			return
		}
		op := e.q.pop()
		e.mu.Unlock()

		n, err := execSync(op)
		e.cbMu.Lock()
		e.r.finish(op, n, err)
		e.cbMu.Unlock()
	}
}

// close lets the workers drain every queued op, then waits for them.
func (e *pwriteEngine) close() {
	e.mu.Lock()
	e.closing = true
	e.mu.Unlock()
	e.cond.Broadcast()
	e.workers.Wait()
}

// execSync performs op with blocking syscalls.
func execSync(op *Op) (int, error) {
	switch op.Code {
	case OpWrite:
		return op.File.f.WriteAt(op.Buf, op.Off)
	case OpRead:
		return op.File.f.ReadAt(op.Buf, op.Off)
	case OpFsync:
		if op.Datasync {
			return 0, datasync(op.File.f)
		}
		return 0, op.File.f.Sync()
	case OpFallocate:
		return 0, fallocate(op.File.f, op.Off, op.Len)
	}
	return 0, nil // OpNop
}
