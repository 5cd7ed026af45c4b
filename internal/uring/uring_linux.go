//go:build linux

package uring

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Test seams for feature detection: the io_uring_setup syscall and the
// sysctl that disables io_uring.
var (
	setupHook      = sysSetup
	disabledSysctl = "/proc/sys/kernel/io_uring_disabled"
)

const (
	// wakeUserData marks the internal eventfd read's CQE. Op user_data is
	// slot | generation<<32 with slot < 1<<16, so it never collides.
	wakeUserData = ^uint64(0)
	// maxOpRetries bounds resubmissions of an op completing with EINTR or
	// EAGAIN.
	maxOpRetries = 16
	// maxEnterStalls bounds consecutive io_uring_enter EAGAIN/EBUSY results
	// (about 1 ms apart when nothing can be reaped) before the owner gives
	// up: ten seconds without the kernel accepting work is a broken host.
	maxEnterStalls = 10000
	// yieldEvery is how often a busy owner passes through the scheduler.
	// The runtime's sysmon treats a P whose goroutine has not been
	// rescheduled for 10 ms as hogging it and retakes it from the
	// io_uring_enter sleep; every retake drops sysmon back to 20 µs polls
	// for about a millisecond. The owner never parks in Go while ops are
	// in flight, so without a yield that happened every 10 ms under load.
	yieldEvery = 5 * time.Millisecond
)

// wakeBytes is the 8-byte eventfd increment submitters write.
var wakeBytes = [8]byte{1}

func sysSetup(entries uint32, p *params) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

func sysEnter(fd int, toSubmit, minComplete, flags uint32) (int, error) {
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags), 0, 0)
	if errno != 0 {
		return int(n), errno
	}
	return int(n), nil
}

// sysRegister is io_uring_register(2), EINTR retried. arg must stay live
// for the call (callers use runtime.KeepAlive).
func sysRegister(fd int, opcode uint32, arg unsafe.Pointer, nrArgs uint32) (int, error) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd), uintptr(opcode), uintptr(arg), uintptr(nrArgs), 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return -1, errno
	}
}

// readDisabled returns kernel.io_uring_disabled (0 allowed, 1 only for the
// io_uring_group, 2 nobody); ok is false on kernels without the sysctl.
func readDisabled() (int, bool) {
	b, err := os.ReadFile(disabledSysctl)
	if err != nil {
		return 0, false
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, false
	}
	return v, true
}

// bufRegion is one registered buffer: [base, end) is buffer index idx.
type bufRegion struct {
	base, end uintptr
	idx       uint16
}

// uringEngine owns one io_uring instance. Every field below mu is touched
// only by the owner goroutine (run), which is locked to its OS thread.
type uringEngine struct {
	r   *Ring
	cfg Config

	ready chan error    // setup result, once
	done  chan struct{} // closed when run returns

	// Shared with submitters; see the package doc for the protocol.
	mu          sync.Mutex
	queue       []*Op // accepted, not yet taken by the owner
	sleeping    bool  // owner is (about to be) blocked in io_uring_enter
	wakePending bool  // an eventfd write is in flight; no need for another
	closing     bool
	efd         int // eventfd written under mu by submitters to wake the owner

	// Set by setup, read-only afterwards (describe may read them anywhere).
	fd          int
	setupFl     uint32
	features    uint32
	sqEntries   uint32
	cqEntries   uint32
	sqMask      uint32
	cqMask      uint32
	ringMem     []byte // SQ ring (and the CQ ring with IORING_FEAT_SINGLE_MMAP)
	cqMem       []byte // CQ ring when mapped separately
	sqeMem      []byte
	sqHead      *uint32 // written by the kernel
	sqTail      *uint32 // written by us, read by the kernel
	cqHead      *uint32 // written by us
	cqTail      *uint32 // written by the kernel
	sqes        []sqe
	cqes        []cqe
	regions     []bufRegion // owner-only after setup (RegisterPool appends)
	pools       []*Pool
	bufTable    int          // sparse registered-buffer table size; 0: none
	bufRefused  bool         // a pool registration failed (logged once)
	nbufs       atomic.Int32 // len(regions), for describe
	fileSlots   int
	maxInflight int

	// Owner-only state.
	sqLocalTail uint32
	slots       []*Op    // in-flight table: slot -> op
	gens        []uint32 // slot generation, bumped on release
	freeSlots   []uint32
	inflight    int
	pending     opFIFO // taken from queue, not yet in the SQ
	retry       []*Op  // in flight, needing another SQE (continuation/EINTR)
	freeFiles   []uint32
	efdArmed    bool   // the eventfd read is in the ring
	efdBuf      uint64 // the kernel writes the eventfd counter here
	stalls      int
	lastYield   time.Time // see yieldEvery
}

func newUringEngine(r *Ring, cfg Config) (engine, error) {
	if err := checkABI(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if v, ok := readDisabled(); ok && v >= 2 {
		return nil, fmt.Errorf("%w: kernel.io_uring_disabled=%d", ErrUnavailable, v)
	}
	u := &uringEngine{r: r, cfg: cfg, ready: make(chan error, 1), done: make(chan struct{}), fd: -1, efd: -1}
	go u.run()
	if err := <-u.ready; err != nil {
		<-u.done
		return nil, err
	}
	return u, nil
}

// run is the ring owner goroutine. It stays locked to its OS thread for its
// whole life (SINGLE_ISSUER and DEFER_TASKRUN tie the ring to that thread);
// the thread exits with it.
func (u *uringEngine) run() {
	defer close(u.done)
	runtime.LockOSThread()
	if err := u.setup(); err != nil {
		u.unmap()
		u.ready <- err
		return
	}
	u.ready <- nil
	u.loop()
	u.teardown()
}

func (u *uringEngine) setup() error {
	entries := uint32(u.cfg.Entries)
	var p params
	var fd int
	var err error
	for _, fl := range []uint32{
		setupCQSize | setupClamp | setupSingleIssuer | setupDeferTaskrun, // 6.1+
		setupCQSize | setupClamp, // 5.6+
	} {
		p = params{flags: fl, cqEntries: 2 * entries}
		fd, err = setupHook(entries, &p)
		if err != unix.EINVAL {
			break
		}
	}
	if err != nil {
		return classifySetupErr(err)
	}
	u.fd, u.setupFl, u.features = fd, p.flags, p.features
	if p.features&featNoDrop == 0 {
		return fmt.Errorf("%w: kernel lacks IORING_FEAT_NODROP (needs 5.5+)", ErrUnavailable)
	}
	if err := u.mapRings(&p); err != nil {
		return err
	}
	if err := u.probe(); err != nil {
		return err
	}
	u.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return &os.SyscallError{Syscall: "eventfd", Err: err}
	}
	u.maxInflight = int(u.cqEntries) - 1 // one CQ entry for the eventfd read
	u.slots = make([]*Op, u.maxInflight)
	u.gens = make([]uint32, u.maxInflight)
	u.freeSlots = make([]uint32, u.maxInflight)
	for i := range u.freeSlots {
		u.freeSlots[i] = uint32(u.maxInflight - 1 - i)
	}
	u.registerFileTable()
	u.registerPools()
	if n := u.cfg.MaxIOWorkers; n > 0 {
		vals := [2]uint32{uint32(n), uint32(n)} // bounded, unbounded
		if _, err := sysRegister(u.fd, registerIOWQMaxWorkers, unsafe.Pointer(&vals[0]), 2); err != nil {
			u.r.log.Info("uring: cannot cap io-wq workers", "err", err.Error())
		}
		runtime.KeepAlive(&vals)
	}
	return nil
}

func classifySetupErr(err error) error {
	switch err {
	case unix.ENOSYS:
		return fmt.Errorf("%w: io_uring_setup: ENOSYS (kernel built without io_uring)", ErrUnavailable)
	case unix.EPERM, unix.EACCES:
		v, _ := readDisabled()
		return fmt.Errorf("%w: io_uring_setup: %v (kernel.io_uring_disabled=%d or a seccomp filter)", ErrUnavailable, err, v)
	case unix.EINVAL, unix.ENOMEM:
		return fmt.Errorf("%w: io_uring_setup: %v (kernel too old or memlock limit)", ErrUnavailable, err)
	}
	return &os.SyscallError{Syscall: "io_uring_setup", Err: err}
}

// mapRings maps the SQ ring, CQ ring and SQE array and checks the offsets
// the kernel returned before forming pointers from them.
func (u *uringEngine) mapRings(p *params) error {
	sqLen := int(p.sqOff.array) + 4*int(p.sqEntries)
	cqLen := int(p.cqOff.cqes) + int(unsafe.Sizeof(cqe{}))*int(p.cqEntries)
	single := p.features&featSingleMmap != 0
	if single {
		sqLen = max(sqLen, cqLen)
		cqLen = sqLen
	}
	if err := checkRingOffsets(p, sqLen, cqLen); err != nil {
		return err
	}
	const prot, flags = unix.PROT_READ | unix.PROT_WRITE, unix.MAP_SHARED | unix.MAP_POPULATE
	var err error
	if u.ringMem, err = unix.Mmap(u.fd, offSQRing, sqLen, prot, flags); err != nil {
		return &os.SyscallError{Syscall: "mmap sq ring", Err: err}
	}
	cqMem := u.ringMem
	if !single {
		if u.cqMem, err = unix.Mmap(u.fd, offCQRing, cqLen, prot, flags); err != nil {
			return &os.SyscallError{Syscall: "mmap cq ring", Err: err}
		}
		cqMem = u.cqMem
	}
	if u.sqeMem, err = unix.Mmap(u.fd, offSQEs, int(unsafe.Sizeof(sqe{}))*int(p.sqEntries), prot, flags); err != nil {
		return &os.SyscallError{Syscall: "mmap sqes", Err: err}
	}
	at := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	sq, cq := &p.sqOff, &p.cqOff
	u.sqHead, u.sqTail = at(u.ringMem, sq.head), at(u.ringMem, sq.tail)
	u.cqHead, u.cqTail = at(cqMem, cq.head), at(cqMem, cq.tail)
	u.sqEntries, u.cqEntries = p.sqEntries, p.cqEntries
	u.sqMask, u.cqMask = *at(u.ringMem, sq.ringMask), *at(cqMem, cq.ringMask)
	if u.sqMask != u.sqEntries-1 || *at(u.ringMem, sq.ringEntries) != u.sqEntries ||
		u.cqMask != u.cqEntries-1 || *at(cqMem, cq.ringEntries) != u.cqEntries {
		return fmt.Errorf("uring: ring masks/entries in shared memory disagree with io_uring_params")
	}
	array := unsafe.Slice((*uint32)(unsafe.Pointer(&u.ringMem[sq.array])), u.sqEntries)
	for i := range array {
		array[i] = uint32(i) // SQE i sits in slot i; we fill SQEs in tail order
	}
	u.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&u.sqeMem[0])), u.sqEntries)
	u.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&cqMem[cq.cqes])), u.cqEntries)
	u.sqLocalTail = atomic.LoadUint32(u.sqTail)
	return nil
}

// probe checks that the kernel supports every opcode this package issues
// (IORING_OP_READ/WRITE need 5.6).
func (u *uringEngine) probe() error {
	const nOps = 256
	buf := make([]uint64, (int(unsafe.Sizeof(probeHeader{}))+nOps*int(unsafe.Sizeof(probeOp{})))/8)
	_, err := sysRegister(u.fd, registerProbe, unsafe.Pointer(&buf[0]), nOps)
	runtime.KeepAlive(buf)
	if err != nil {
		return fmt.Errorf("%w: IORING_REGISTER_PROBE: %v (kernel older than 5.6)", ErrUnavailable, err)
	}
	hdr := (*probeHeader)(unsafe.Pointer(&buf[0]))
	ops := unsafe.Slice((*probeOp)(unsafe.Pointer(&buf[2])), nOps)
	for _, op := range []uint8{opNop, opFsync, opFallocate, opReadFixed, opWriteFixed, opRead, opWrite} {
		if op > hdr.lastOp || int(op) >= int(hdr.opsLen) || ops[op].flags&probeOpSupported == 0 {
			return fmt.Errorf("%w: kernel does not support io_uring opcode %d", ErrUnavailable, op)
		}
	}
	return nil
}

// registerFileTable registers an all-empty fixed-file table; RegisterFile
// fills slots with IORING_REGISTER_FILES_UPDATE.
func (u *uringEngine) registerFileTable() {
	n := u.cfg.FileSlots
	if n == 0 {
		return
	}
	fds := make([]int32, n)
	for i := range fds {
		fds[i] = -1
	}
	_, err := sysRegister(u.fd, registerFiles, unsafe.Pointer(&fds[0]), uint32(n))
	runtime.KeepAlive(fds)
	if err != nil {
		u.r.log.Info("uring: registered files unavailable, using plain descriptors", "err", err.Error())
		return
	}
	u.fileSlots = n
	u.freeFiles = make([]uint32, n)
	for i := range u.freeFiles {
		u.freeFiles[i] = uint32(n - 1 - i)
	}
}

// bufSlots is the size of the sparse registered-buffer table: pools added
// after setup (Ring.RegisterPool) take its slots, one per pool.
const bufSlots = 1024

// registerPools sets up the registered-buffer table: a sparse table of
// bufSlots filled with cfg.Pools and later RegisterPool calls, or, where
// the kernel has no sparse tables (before 5.19), cfg.Pools alone.
func (u *uringEngine) registerPools() {
	reg := rsrcRegister{nr: bufSlots, flags: rsrcRegisterSparse}
	if _, err := sysRegister(u.fd, registerBuffers2, unsafe.Pointer(&reg), uint32(unsafe.Sizeof(reg))); err == nil {
		u.bufTable = bufSlots
		for _, p := range u.cfg.Pools {
			u.addPool(p)
		}
		return
	}
	if len(u.cfg.Pools) == 0 {
		return
	}
	iovs := make([]unix.Iovec, len(u.cfg.Pools))
	for i, p := range u.cfg.Pools {
		iovs[i].Base = unsafe.SliceData(p.mem)
		iovs[i].SetLen(len(p.mem))
	}
	_, err := sysRegister(u.fd, registerBuffers, unsafe.Pointer(&iovs[0]), uint32(len(iovs)))
	runtime.KeepAlive(iovs)
	if err != nil {
		u.r.log.Info("uring: registered buffers unavailable, using plain reads and writes", "err", err.Error())
		return
	}
	for i, p := range u.cfg.Pools {
		u.added(p, uint16(i))
	}
}

// addPool registers p in the next free slot of the sparse table (owner
// goroutine, or setup). Best effort: without a slot, or when the kernel
// refuses (RLIMIT_MEMLOCK for an unprivileged user), I/O on p's chunks
// uses plain reads and writes.
func (u *uringEngine) addPool(p *Pool) {
	slot := len(u.regions)
	if slot >= u.bufTable {
		u.r.log.Debug("uring: registered-buffer table full, pool not registered", "slots", u.bufTable)
		return
	}
	iov := unix.Iovec{Base: unsafe.SliceData(p.mem)}
	iov.SetLen(len(p.mem))
	upd := rsrcUpdate2{offset: uint32(slot), data: uint64(uintptr(unsafe.Pointer(&iov))), nr: 1}
	n, err := sysRegister(u.fd, registerBuffersUpdate, unsafe.Pointer(&upd), uint32(unsafe.Sizeof(upd)))
	runtime.KeepAlive(&iov)
	if err == nil && n != 1 {
		err = fmt.Errorf("updated %d slots, want 1", n)
	}
	if err != nil {
		if !u.bufRefused {
			u.bufRefused = true
			u.r.log.Info("uring: pool not registered, using plain reads and writes for it", "err", err.Error())
		}
		return
	}
	u.added(p, uint16(slot))
}

// added records p as registered buffer idx.
func (u *uringEngine) added(p *Pool, idx uint16) {
	base, end := p.span()
	u.regions = append(u.regions, bufRegion{base: base, end: end, idx: idx})
	p.regs.Add(1)
	u.pools = append(u.pools, p)
	u.nbufs.Add(1)
}

// unmap releases whatever setup acquired (after a failed setup or at the end
// of teardown).
func (u *uringEngine) unmap() {
	for _, m := range [][]byte{u.sqeMem, u.cqMem, u.ringMem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	u.sqeMem, u.cqMem, u.ringMem = nil, nil, nil
	if u.fd >= 0 {
		unix.Close(u.fd)
		u.fd = -1
	}
	u.mu.Lock()
	if u.efd >= 0 {
		unix.Close(u.efd)
		u.efd = -1
	}
	u.mu.Unlock()
}

func (u *uringEngine) describe() string {
	return fmt.Sprintf("io_uring sq=%d cq=%d flags=%#x features=%#x fixed-files=%d fixed-buffers=%d",
		u.sqEntries, u.cqEntries, u.setupFl, u.features, u.fileSlots, u.nbufs.Load())
}

func (u *uringEngine) registeredBuffers() []*Pool { return u.pools }

// submit queues op for the owner and wakes it if it sleeps in the kernel.
func (u *uringEngine) submit(op *Op) error {
	u.mu.Lock()
	if u.closing {
		u.mu.Unlock()
		return ErrClosed
	}
	u.queue = append(u.queue, op)
	u.wakeLocked()
	u.mu.Unlock()
	return nil
}

func (u *uringEngine) control(op *Op) error {
	u.mu.Lock()
	if u.closing {
		u.mu.Unlock()
		return ErrClosed
	}
	u.queue = append(u.queue, op)
	u.wakeLocked()
	u.mu.Unlock()
	return nil
}

// wakeLocked writes the eventfd if the owner sleeps and no write is already
// on its way. The write happens under mu so teardown, which closes the
// eventfd under mu, cannot race with it.
func (u *uringEngine) wakeLocked() {
	if !u.sleeping || u.wakePending {
		return
	}
	u.wakePending = true
	u.writeEventfd()
}

func (u *uringEngine) writeEventfd() {
	for {
		_, err := unix.Write(u.efd, wakeBytes[:])
		if err == nil {
			u.r.st.wakeups.Add(1)
			return
		}
		if err != unix.EINTR {
			panic(fmt.Sprintf("uring: eventfd write: %v", err)) // fd owned by us: cannot fail
		}
	}
}

func (u *uringEngine) close() {
	u.mu.Lock()
	u.closing = true
	u.wakeLocked()
	u.mu.Unlock()
	<-u.done
}

// loop is the owner's cycle: take queued ops, fill the SQ, submit and
// (when there is nothing else to do) wait in one io_uring_enter, reap CQEs
// and run callbacks. It returns once closing is set and nothing accepted is
// left.
func (u *uringEngine) loop() {
	u.lastYield = u.cfg.Now()
	for {
		if now := u.cfg.Now(); now.Sub(u.lastYield) >= yieldEvery {
			u.lastYield = now
			runtime.Gosched()
			u.r.st.yields.Add(1)
		}
		u.mu.Lock()
		u.pending.pushAll(u.queue)
		clear(u.queue)
		u.queue = u.queue[:0]
		closing := u.closing
		u.mu.Unlock()

		u.fill()
		if closing && u.inflight == 0 && u.pending.empty() && len(u.retry) == 0 {
			return // no Submit can add more: closing was seen with the queue empty
		}
		u.enterAndReap()
	}
}

// fill moves work into free SQ entries: the eventfd read if it is not armed,
// continuations, then queued ops while in-flight slots last.
func (u *uringEngine) fill() {
	tail0 := u.sqLocalTail
	space := u.sqEntries - (u.sqLocalTail - atomic.LoadUint32(u.sqHead))
	if !u.efdArmed && space > 0 {
		u.prepWake()
		space--
	}
	n := 0
	for n < len(u.retry) && space > 0 {
		u.prep(u.retry[n])
		n++
		space--
	}
	if n > 0 {
		m := copy(u.retry, u.retry[n:])
		clear(u.retry[m:])
		u.retry = u.retry[:m]
	}
	for !u.pending.empty() {
		op := u.pending.peek()
		if op.Code == opRegister || op.Code == opUnregister || op.Code == opRegisterPool {
			u.pending.pop()
			u.doControl(op)
			continue
		}
		if space == 0 || len(u.freeSlots) == 0 {
			break
		}
		u.pending.pop()
		slot := u.freeSlots[len(u.freeSlots)-1]
		u.freeSlots = u.freeSlots[:len(u.freeSlots)-1]
		u.slots[slot] = op
		op.slot = slot
		u.inflight++
		u.prep(op)
		space--
	}
	if u.sqLocalTail != tail0 {
		atomic.StoreUint32(u.sqTail, u.sqLocalTail) // release: SQEs before tail
	}
}

func (u *uringEngine) nextSQE() *sqe {
	s := &u.sqes[u.sqLocalTail&u.sqMask]
	u.sqLocalTail++
	return s
}

func (u *uringEngine) prepWake() {
	*u.nextSQE() = sqe{
		opcode:   opRead,
		fd:       int32(u.efd),
		addr:     uint64(uintptr(unsafe.Pointer(&u.efdBuf))),
		len:      8,
		userData: wakeUserData,
	}
	u.efdArmed = true
}

// prep writes the SQE for op (or for the rest of a partly done op).
func (u *uringEngine) prep(op *Op) {
	s := u.nextSQE()
	*s = sqe{fd: -1, userData: uint64(op.slot) | uint64(u.gens[op.slot])<<32}
	switch op.Code {
	case OpNop:
		s.opcode = opNop
	case OpFsync:
		s.opcode = opFsync
		if op.Datasync {
			s.opFlags = fsyncDatasync
		}
	case OpFallocate:
		s.opcode = opFallocate
		s.off = uint64(op.Off)
		s.addr = uint64(op.Len) // the length; sqe.len holds the mode (0)
	case OpWrite, OpRead:
		rest := op.Buf[op.done:]
		n := min(len(rest), maxRW)
		s.opcode = opWrite
		if op.Code == OpRead {
			s.opcode = opRead
		}
		s.off = uint64(op.Off) + uint64(op.done)
		s.len = uint32(n)
		if n > 0 {
			addr := uintptr(unsafe.Pointer(unsafe.SliceData(rest)))
			s.addr = uint64(addr)
			if idx, ok := u.fixedBuf(addr, n); ok {
				s.opcode = opWriteFixed
				if op.Code == OpRead {
					s.opcode = opReadFixed
				}
				s.bufIndex = idx
				u.r.st.fixedBufs.Add(1)
			}
		}
	}
	if f := op.File; f != nil {
		if f.slot >= 0 {
			s.fd = f.slot
			s.flags |= sqeFixedFile
			u.r.st.fixedFile.Add(1)
		} else {
			s.fd = int32(f.fd)
		}
	}
	u.r.st.sqes.Add(1)
}

// fixedBuf reports the registered buffer holding [addr, addr+n).
func (u *uringEngine) fixedBuf(addr uintptr, n int) (uint16, bool) {
	for _, r := range u.regions {
		if addr >= r.base && addr < r.end && uintptr(n) <= r.end-addr {
			return r.idx, true
		}
	}
	return 0, false
}

// doControl updates the fixed-file table for a register/unregister op.
func (u *uringEngine) doControl(op *Op) {
	f := op.File
	switch {
	case op.Code == opRegisterPool:
		u.addPool(op.pool)
	case op.Code == opRegister && len(u.freeFiles) > 0:
		slot := u.freeFiles[len(u.freeFiles)-1]
		if err := u.updateFileSlot(slot, int32(f.fd)); err != nil {
			u.r.log.Debug("uring: file not registered", "file", f.Name(), "err", err.Error())
			break
		}
		u.freeFiles = u.freeFiles[:len(u.freeFiles)-1]
		f.slot = int32(slot)
	case op.Code == opUnregister && f.slot >= 0:
		slot := uint32(f.slot)
		if err := u.updateFileSlot(slot, -1); err != nil {
			// The slot keeps a reference to the file until the ring
			// closes; it is not reused.
			u.r.log.Warn("uring: cannot unregister file", "file", f.Name(), "err", err.Error())
		} else {
			u.freeFiles = append(u.freeFiles, slot)
		}
		f.slot = -1
	}
	op.Done(op)
}

func (u *uringEngine) updateFileSlot(slot uint32, fd int32) error {
	fds := []int32{fd}
	upd := filesUpdate{offset: slot, fds: uint64(uintptr(unsafe.Pointer(&fds[0])))}
	n, err := sysRegister(u.fd, registerFilesUpdate, unsafe.Pointer(&upd), 1)
	runtime.KeepAlive(fds)
	if err == nil && n != 1 {
		err = fmt.Errorf("updated %d slots, want 1", n)
	}
	return err
}

func (u *uringEngine) cqReady() uint32 {
	return atomic.LoadUint32(u.cqTail) - *u.cqHead
}

// enterAndReap submits what fill prepared and, when there is nothing else to
// do, sleeps in the kernel until at least one completion (or the eventfd
// read) arrives; then it reaps.
func (u *uringEngine) enterAndReap() {
	toSubmit := u.sqLocalTail - atomic.LoadUint32(u.sqHead)
	wait := false
	if u.cqReady() == 0 && (u.inflight > 0 || u.efdArmed) {
		// Sleep only if nothing a waker could have changed since loop read
		// it: new ops, or Close (whose wake found the owner awake) with
		// nothing left in flight to wake us.
		u.mu.Lock()
		if len(u.queue) == 0 && (!u.closing || u.inflight > 0) {
			u.sleeping = true
			wait = true
		}
		u.mu.Unlock()
	}
	if toSubmit > 0 || wait {
		var minComplete uint32
		if wait {
			minComplete = 1
		}
		_, err := sysEnter(u.fd, toSubmit, minComplete, enterGetEvents)
		u.r.st.enters.Add(1)
		switch err {
		case nil, unix.EINTR:
			u.stalls = 0
		case unix.EAGAIN, unix.EBUSY:
			// Out of kernel resources or completions backed up: reap
			// below and try again; give up only if it never clears.
			u.stalls++
			if u.stalls > maxEnterStalls {
				panic(fmt.Sprintf("uring: io_uring_enter: %v, %d times in a row", err, u.stalls))
			}
			if u.cqReady() == 0 {
				time.Sleep(time.Millisecond)
			}
		default:
			panic(fmt.Sprintf("uring: io_uring_enter: %v", err)) // EBADF/EFAULT/EINVAL: a bug here
		}
	}
	if wait {
		u.mu.Lock()
		u.sleeping = false
		u.mu.Unlock()
	}
	u.reap()
}

// reap consumes every CQE present and completes its op.
func (u *uringEngine) reap() {
	head := *u.cqHead
	tail := atomic.LoadUint32(u.cqTail) // acquire: CQE contents before tail
	for ; head != tail; head++ {
		c := &u.cqes[head&u.cqMask]
		ud, res := c.userData, c.res
		atomic.StoreUint32(u.cqHead, head+1) // release the entry to the kernel
		u.complete(ud, res)
	}
}

// complete handles one CQE: continuations and retries keep the op's slot;
// everything else releases it and runs Done.
func (u *uringEngine) complete(ud uint64, res int32) {
	if ud == wakeUserData {
		u.efdArmed = false
		u.mu.Lock()
		u.wakePending = false
		u.mu.Unlock()
		return
	}
	slot, gen := uint32(ud), uint32(ud>>32)
	if int(slot) >= len(u.slots) || u.slots[slot] == nil || u.gens[slot] != gen {
		panic(fmt.Sprintf("uring: completion for unknown request %#x", ud))
	}
	u.r.st.cqes.Add(1)
	op := u.slots[slot]
	var err error
	if res < 0 {
		errno := syscall.Errno(-res)
		if (errno == unix.EINTR || errno == unix.EAGAIN) && op.retries < maxOpRetries {
			op.retries++
			u.retry = append(u.retry, op)
			return
		}
		err = opError(op, errno)
	} else if op.Code == OpWrite || op.Code == OpRead {
		op.done += int(res)
		if op.done < len(op.Buf) {
			switch {
			case res > 0:
				u.retry = append(u.retry, op) // short transfer: do the rest
				return
			case op.Code == OpRead:
				err = io.EOF
			default:
				err = opError(op, io.ErrShortWrite)
			}
		}
	}
	u.slots[slot] = nil
	u.gens[slot]++
	u.freeSlots = append(u.freeSlots, slot)
	u.inflight--
	u.r.finish(op, op.done, err)
}

// teardown runs after the last op completed: it retires the eventfd read
// (so the kernel never writes into freed memory), then unmaps and closes.
func (u *uringEngine) teardown() {
	if u.efdArmed {
		u.mu.Lock()
		u.writeEventfd()
		u.mu.Unlock()
		for i := 0; u.efdArmed && i < 1000; i++ {
			toSubmit := u.sqLocalTail - atomic.LoadUint32(u.sqHead)
			sysEnter(u.fd, toSubmit, 1, enterGetEvents)
			u.reap()
		}
		if u.efdArmed {
			u.r.log.Error("uring: eventfd read did not complete at close; leaking the ring")
			leaked.Store(u)
			return
		}
	}
	u.unmap()
}

// leaked keeps a ring that could not be retired reachable forever.
var leaked atomic.Pointer[uringEngine]

func opError(op *Op, err error) error {
	name := "io_uring " + opName(op.Code)
	if op.Code == OpFsync && op.Datasync {
		name = "io_uring fdatasync"
	}
	path := ""
	if op.File != nil {
		path = op.File.Name()
	}
	return &os.PathError{Op: name, Path: path, Err: err}
}

func opName(c Opcode) string {
	switch c {
	case OpWrite:
		return "write"
	case OpRead:
		return "read"
	case OpFsync:
		return "fsync"
	case OpFallocate:
		return "fallocate"
	}
	return "nop"
}
