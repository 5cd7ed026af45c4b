// Package uring submits file I/O through a Linux io_uring ring driven with
// raw syscalls (golang.org/x/sys/unix: io_uring_setup 425, io_uring_enter 426,
// io_uring_register 427 on amd64), with a pwrite/fdatasync fallback behind
// the same API. It knows nothing of Kafka: it moves bytes to and from files
// at explicit positions and flushes them.
//
// # Use
//
//	ring, err := uring.New(uring.Config{Backend: uring.BackendAuto, Pools: []*uring.Pool{pool}})
//	f, err := ring.RegisterFile(osFile)          // ring owns osFile now; f is a segment.File
//	op := &uring.Op{Code: uring.OpWrite, File: f, Buf: chunk, Off: pos, Done: onWritten}
//	err = ring.Submit(op)                        // never blocks, never allocates
//	...
//	func onWritten(op *uring.Op) {               // ring-owned goroutine, one at a time
//		w, _ := written.Complete(op.Off, int64(op.N)) // uring.Watermark: out-of-order -> contiguous
//		if w >= syncTarget && !syncing { ring.Submit(syncOp) } // one fdatasync per flush window
//		pool.Put(op.Buf)
//	}
//
// A segment appender keeps a fixed set of Ops and Pool chunks (its queue
// depth), submits 64 KiB writes at known positions of a preallocated segment,
// advances a Watermark from their completions, and issues one OpFsync with
// Datasync when the watermark passes the flush target — never IO_LINK or
// IO_DRAIN. An fsync covers exactly the writes that completed before it was
// submitted; the package imposes no order between Ops.
//
// # Backends and feature detection
//
// Config.Backend (a config key's value, see ParseBackend) is "auto", "uring"
// or "pwrite". New checks, in order: the Go struct layouts against the kernel
// ABI, kernel.io_uring_disabled (2 means off), io_uring_setup (first with
// SINGLE_ISSUER|DEFER_TASKRUN, 6.1+, then without), IORING_FEAT_NODROP, the
// ring offsets the kernel returned, and IORING_REGISTER_PROBE for every opcode
// used (READ/WRITE need 5.6). Where any of that says io_uring is unavailable
// (ENOSYS, EPERM from seccomp or the sysctl, an old kernel) "auto" logs one
// warning with the reason and uses the pwrite backend: a pool of
// Config.Workers goroutines doing pwrite/pread/fdatasync. "uring" fails with
// an error matching ErrUnavailable (and errors.ErrUnsupported) instead. Other
// setup failures (EMFILE, ...) fail New whatever the backend. Registered
// files and buffers are best effort: if registration is refused, plain
// descriptors and addresses are used, with a log line. A file in the
// fixed-file table can give up its own descriptor (File.DropDescriptor: the
// table holds the open file), so a process with many files written only
// through the ring is not bound by RLIMIT_NOFILE for them; the table itself
// may not be larger than the soft limit (Config.FileSlots, at most 32,768).
//
// # Ring memory
//
// Three shared mappings of the ring descriptor. With IORING_FEAT_SINGLE_MMAP
// (5.4+) the SQ and CQ rings are one mapping; otherwise the CQ ring is mapped
// at its own offset. Field positions inside the rings are the ones the kernel
// returns in io_uring_params (checked against the mapping sizes, entries a
// power of two, mask == entries-1, before any pointer is formed):
//
//	mmap(fd, IORING_OFF_SQ_RING=0)         sq.head sq.tail sq.ring_mask sq.ring_entries sq.flags sq.dropped
//	                                       sq.array[sq_entries] u32  (identity: array[i] = i, filled once)
//	mmap(fd, IORING_OFF_CQ_RING=0x8000000) cq.head cq.tail cq.ring_mask cq.ring_entries cq.overflow
//	                                       cq.cqes[cq_entries]       (cq_entries = 2 * sq_entries)
//	mmap(fd, IORING_OFF_SQES=0x10000000)   sqes[sq_entries]
//
// Submission queue entry, 64 bytes (struct io_uring_sqe, unions flattened to
// the members used; sizes and offsets are asserted at compile time and in
// checkABI):
//
//	off size field
//	 0   1   opcode      NOP=0 FSYNC=3 READ_FIXED=4 WRITE_FIXED=5 READ=22 WRITE=23
//	 1   1   flags       IOSQE_FIXED_FILE=1 for a registered file
//	 2   2   ioprio      0
//	 4   4   fd          descriptor, or index in the registered-file table
//	 8   8   off         file position (explicit; the file offset is never used)
//	16   8   addr        buffer address
//	24   4   len         buffer length (at most 0x7ffff000; the rest is resubmitted)
//	28   4   op_flags    fsync_flags: IORING_FSYNC_DATASYNC=1
//	32   8   user_data   in-flight slot | slot generation<<32; all ones = internal eventfd read
//	40   2   buf_index   registered buffer (one per Pool) for *_FIXED
//	42   2   personality 0
//	44   4   splice_fd_in 0
//	48  16   addr3, pad  0
//
// Completion queue entry, 16 bytes (struct io_uring_cqe):
//
//	 0   8   user_data   as submitted
//	 8   4   res         bytes transferred, or -errno
//	12   4   flags       unused
//
// Memory ordering: SQEs are written, then sq.tail is published with an
// atomic store (release); the kernel publishes CQEs before cq.tail, which is
// read with an atomic load (acquire), and each consumed entry is handed back
// with an atomic store of cq.head. (sync/atomic is sequentially consistent, a
// superset of the acquire/release the ring protocol needs.)
//
// # Concurrency contract
//
// Goroutines. An io_uring Ring has one owner goroutine, started by New and
// ended by Close, locked to its OS thread for its whole life (SINGLE_ISSUER
// and DEFER_TASKRUN bind the ring to the thread that created it; every
// io_uring_enter and io_uring_register is made from it). It alone fills the
// SQ, calls io_uring_enter (submit and wait with IORING_ENTER_GETEVENTS,
// EINTR retried), reaps CQEs, keeps the in-flight table and runs Done
// callbacks. The pwrite backend has Config.Workers worker goroutines, started
// by New and ended by Close. Neither has any other goroutine.
//
// Submitting. Ring.Submit may be called from any goroutine, including from
// inside Done. It appends to the ring's queue under a mutex, never blocks on
// I/O and does not allocate. The number of accepted ops is not bounded by
// the ring (at most 2*Entries-1 are in the kernel at once, the rest wait in
// the queue): callers bound themselves, naturally by the size of their Pool.
//
// Waking the owner. The owner only sleeps inside io_uring_enter, and a read
// of an eventfd is always armed in the ring. Before sleeping it sets sleeping
// under the queue mutex, after seeing the queue empty; a submitter that finds
// sleeping set (and no wake already pending) writes the eventfd while holding
// the mutex, so the sleeping io_uring_enter returns with that read's CQE. A
// busy owner is never woken: it picks the queue up on its next turn, and all
// ops queued meanwhile go to the kernel in one io_uring_enter.
//
// Yielding. A busy owner never parks in Go, so its P would keep one
// schedule tick while it sleeps in io_uring_enter over and over; the
// runtime's sysmon takes that for a goroutine hogging its P for 10 ms,
// retakes the P, and each retake drops sysmon back to polling every 20 µs
// for about a millisecond. The owner therefore calls runtime.Gosched at the
// top of its loop once yieldEvery (5 ms) has passed since the last time
// (Stats.Yields counts them; Config.Now, the wall clock unless a test sets
// it, is the clock it reads). Measured in the broker at 200,000 records/s:
// sysmon's nanosleeps fell from ~3,000/s to ~190/s and the broker's CPU per
// record by about a tenth (docs/performance.md, session 7); on this VM a
// 20 µs nanosleep costs 16.6 µs of CPU.
//
// Completion. Done is called exactly once for every op Submit accepted, with
// N and Err set (a short read at end of file gives io.EOF; short writes are
// continued until complete or failed; -EINTR/-EAGAIN completions are
// resubmitted, at most 16 times; errors are *os.PathError). Done callbacks of
// one Ring never run concurrently. Done must not block: it may call Submit,
// Pool.Put, Pool.TryGet and update a Watermark, but must not call Pool.Get,
// RegisterFile, File.Close or Ring.Close, nor wait for another op.
//
// Buffers. From Submit until Done the ring keeps the Op — and with it Buf —
// referenced in its in-flight table, so the memory stays alive; Go's heap
// does not move objects, and Pool memory is off-heap. The caller must not
// modify Buf until Done. For O_DIRECT (address, length and offset aligned to
// Alignment) use a Pool: 4 KiB-aligned chunks of one anonymous mapping,
// faulted in at creation (first touches of idle VM memory are slow) and
// registered with the ring as one fixed buffer per pool when passed in
// Config.Pools. CopyNT fills such memory with non-temporal stores: the
// device reads it by DMA, so the copy need not pull it into the caches
// (copynt.go).
//
// Files. RegisterFile puts the file in the registered-file table when a slot
// is free (IORING_REGISTER_FILES_UPDATE from the owner) and otherwise uses its
// descriptor. File's synchronous methods (ReadAt, WriteAt, Sync, Truncate,
// Size, Preallocate) are direct syscalls in the caller's goroutine, so a
// *File is a segment.File. File.Close fails with ErrBusy while ops on the
// file are in flight.
//
// Shutdown. Close marks the ring closing (Submit and RegisterFile then fail
// with ErrClosed, also from Done), waits until every accepted op has
// completed and its Done returned — queued ops are still submitted, so
// nothing accepted is dropped — retires the eventfd read, unmaps the rings
// and closes the descriptors. Close the ring before the Pools it registered.
//
// Lock order. Each backend has one queue mutex; it is a leaf: never held
// while calling Done or making a syscall, except the eventfd write that wakes
// the owner (which cannot block). The pwrite backend serializes Done under a
// callback mutex that may be held while taking the queue mutex (Done calling
// Submit), never the reverse.
//
// Invariant failures — a CQE for an unknown request, io_uring_enter failing
// with EBADF/EFAULT/EINVAL, the eventfd refusing a write — panic: they mean
// memory the kernel writes into is no longer what this package thinks.
//
// # Measurements and the default
//
// BenchmarkWrite64K (bench_linux_test.go) writes 1 GiB
// (STRATA_URING_BENCH_BYTES) in 64 KiB writes into a fresh fallocated file,
// as an appender does: QD 1 for the pwrite loop, QD 32 otherwise; "fsync"
// issues an fdatasync each time the written watermark passes another 4 MiB
// (STRATA_URING_BENCH_SYNC_BYTES), one in flight at a time, writes continuing
// meanwhile. Medians of 10 runs (2 sessions x 5) on this 2-vCPU virtio VM
// while other engineers' load tests shared its CPUs and disk, so MB/s varies
// by +-20 % between runs; cpu-s/GiB (getrusage of the process, io-wq workers
// included) is steadier. fsync ms are p50/p99 over each run, median of runs;
// io-wq is the number of kernel worker threads the run started.
//
//	                                     no fsync           fdatasync every 4 MiB
//	engine, file mode                  MB/s cpu-s/GiB    MB/s cpu-s/GiB fsync p50/p99 ms io-wq
//	pwrite loop, buffered, QD 1        4080   0.28       1128   0.37       2.6 / 4.4       0
//	pwrite loop, O_DIRECT, QD 1         456   1.08        447   1.10       0.2 / 0.5       0
//	pwrite backend, buffered, QD 32    4130   0.37       1968   0.44        52 / 210       0
//	pwrite backend, O_DIRECT, QD 32     843   0.74        893   0.74       2.5 / 3.5       0
//	ring, buffered                     4345   0.34       2090   0.46        24 / 134       3
//	ring, O_DIRECT                     1740   0.21       1608   0.22       2.1 / 6.6       1
//	ring, O_DIRECT, fixed buffers      1524   0.19       1395   0.20       3.6 / 50        1
//	ring, O_DIRECT, fixed bufs + file  1608   0.18       1548   0.20       4.3 / 162       1
//	  same, blocks already written     2595   0.13       2403   0.14      0.75 / 28        0
//	  same, KEEP_SIZE (writes extend)   446   1.67        463   1.54       3.4 / 8.0       8
//
// Registered buffers, interleaved A/B (8 runs each, no fsync): 0.236
// cpu-s/GiB plain, 0.192 with the pool registered, 0.196 with the file
// registered too. BenchmarkNop: 2 us per op in batches of 32 (one eventfd
// wake and two io_uring_enter per batch; the cost is cross-thread wakeup on
// this VM), 0 allocations; the pwrite backend's nop is 70 ns.
//
// Default: BackendAuto, and for segment data O_DIRECT through the ring with
// the appender's chunk Pool registered and the file registered, writing below
// an i_size that already covers the write. It costs a fifth of the CPU of
// O_DIRECT pwrite (a blocking syscall per write also makes Go hand off its P)
// and two thirds of buffered writes; no dirty page cache builds up, so an
// fdatasync flushes only its window: the buffered modes' fsync median is
// 24-52 ms with a p99 over 100 ms, far beyond a 15 ms produce p99, while the
// O_DIRECT ring's fsync median is 2-4 ms. Buffered ring writes are punted to
// io-wq workers on ext4 and cost more CPU than buffered pwrite. Registered
// buffers save a fifth of the CPU per GiB (no per-write page pinning), so
// they are on; a registered file saves nothing measurable at 64 KiB and costs
// nothing, so it is on too (it matters for small I/O). Three traps for the
// appender, all measured above:
//
//   - O_DIRECT writes that extend i_size (a KEEP_SIZE preallocation) are
//     punted to io-wq: 8 extra threads, a quarter of the throughput, 8x the
//     CPU. Raise i_size ahead of the writes (fallocate mode 0 or ftruncate in
//     steps) and let recovery find the valid end by walking batches.
//   - First writes into fallocated (unwritten) blocks make every fdatasync
//     commit extent conversions through the journal: the fsync tail (p99 50+
//     ms here) comes from that. Rewriting written blocks (a recycled segment
//     file) gave a 0.75 ms fsync median and 2.4-2.6 GB/s at 0.13 cpu-s/GiB.
//   - Writes kept in flight during the fdatasync lengthen it: holding new
//     submissions back while it runs cut the fsync p99 from 7-73 ms to 1.7-2.6
//     ms (3 paired runs) for about 10 % of the throughput.
package uring
