//go:build linux

package uring

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI of io_uring (include/uapi/linux/io_uring.h). golang.org/x/sys
// v0.50.0 has the syscall numbers but none of the structures or constants, so
// they are spelled out here and checked by checkABI.

const (
	opNop        = 0  // IORING_OP_NOP
	opFsync      = 3  // IORING_OP_FSYNC
	opReadFixed  = 4  // IORING_OP_READ_FIXED
	opWriteFixed = 5  // IORING_OP_WRITE_FIXED
	opFallocate  = 17 // IORING_OP_FALLOCATE (5.6)
	opRead       = 22 // IORING_OP_READ (5.6)
	opWrite      = 23 // IORING_OP_WRITE (5.6)

	sqeFixedFile = 1 << 0 // IOSQE_FIXED_FILE

	fsyncDatasync = 1 << 0 // IORING_FSYNC_DATASYNC

	setupCQSize       = 1 << 3  // IORING_SETUP_CQSIZE
	setupClamp        = 1 << 4  // IORING_SETUP_CLAMP
	setupSingleIssuer = 1 << 12 // IORING_SETUP_SINGLE_ISSUER (6.0)
	setupDeferTaskrun = 1 << 13 // IORING_SETUP_DEFER_TASKRUN (6.1)

	featSingleMmap = 1 << 0 // IORING_FEAT_SINGLE_MMAP (5.4)
	featNoDrop     = 1 << 1 // IORING_FEAT_NODROP (5.5)

	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS

	offSQRing = 0          // IORING_OFF_SQ_RING
	offCQRing = 0x8000000  // IORING_OFF_CQ_RING
	offSQEs   = 0x10000000 // IORING_OFF_SQES

	registerBuffers        = 0  // IORING_REGISTER_BUFFERS
	registerFiles          = 2  // IORING_REGISTER_FILES
	registerFilesUpdate    = 6  // IORING_REGISTER_FILES_UPDATE
	registerProbe          = 8  // IORING_REGISTER_PROBE
	registerBuffers2       = 15 // IORING_REGISTER_BUFFERS2 (5.13)
	registerBuffersUpdate  = 16 // IORING_REGISTER_BUFFERS_UPDATE (5.13)
	registerIOWQMaxWorkers = 19 // IORING_REGISTER_IOWQ_MAX_WORKERS

	rsrcRegisterSparse = 1 << 0 // IORING_RSRC_REGISTER_SPARSE (5.19)

	probeOpSupported = 1 << 0 // IO_URING_OP_SUPPORTED

	// maxRW is the most one read or write moves (MAX_RW_COUNT); longer
	// buffers are finished by resubmitting the rest.
	maxRW = 0x7ffff000
)

// sqe is struct io_uring_sqe (64 bytes) with the unions flattened to the
// members this package uses.
type sqe struct {
	opcode      uint8  // 0
	flags       uint8  // 1  IOSQE_*
	ioprio      uint16 // 2
	fd          int32  // 4  fd, or fixed-file index with IOSQE_FIXED_FILE
	off         uint64 // 8  file offset
	addr        uint64 // 16 buffer address
	len         uint32 // 24 buffer length
	opFlags     uint32 // 28 rw_flags / fsync_flags
	userData    uint64 // 32 returned in the CQE
	bufIndex    uint16 // 40 registered buffer index for *_FIXED
	personality uint16 // 42
	spliceFdIn  int32  // 44
	addr3       uint64 // 48
	pad2        uint64 // 56
}

// cqe is struct io_uring_cqe (16 bytes, no IORING_SETUP_CQE32).
type cqe struct {
	userData uint64 // 0
	res      int32  // 8  result or -errno
	flags    uint32 // 12
}

// sqringOffsets is struct io_sqring_offsets (40 bytes).
type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqringOffsets is struct io_cqring_offsets (40 bytes).
type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// params is struct io_uring_params (120 bytes).
type params struct {
	sqEntries    uint32 // 0
	cqEntries    uint32 // 4
	flags        uint32 // 8
	sqThreadCPU  uint32 // 12
	sqThreadIdle uint32 // 16
	features     uint32 // 20
	wqFd         uint32 // 24
	resv         [3]uint32
	sqOff        sqringOffsets // 40
	cqOff        cqringOffsets // 80
}

// filesUpdate is struct io_uring_files_update (16 bytes).
type filesUpdate struct {
	offset uint32
	resv   uint32
	fds    uint64 // *int32
}

// rsrcRegister is struct io_uring_rsrc_register.
type rsrcRegister struct {
	nr    uint32
	flags uint32 // IORING_RSRC_REGISTER_*
	resv2 uint64
	data  uint64 // *iovec, 0 with IORING_RSRC_REGISTER_SPARSE
	tags  uint64
}

// rsrcUpdate2 is struct io_uring_rsrc_update2.
type rsrcUpdate2 struct {
	offset uint32
	resv   uint32
	data   uint64 // *iovec
	tags   uint64
	nr     uint32
	resv2  uint32
}

// probeHeader is struct io_uring_probe without its flexible ops array; each
// op is a probeOp.
type probeHeader struct {
	lastOp uint8
	opsLen uint8
	resv   uint16
	resv2  [3]uint32
}

type probeOp struct {
	op    uint8
	resv  uint8
	flags uint16
	resv2 uint32
}

// abiField is one expected (size or offset, kernel value) pair.
type abiField struct {
	name      string
	got, want uintptr
}

// abiFields lists every size and offset the kernel relies on, against the
// values of include/uapi/linux/io_uring.h (checked with offsetof in C).
func abiFields() []abiField {
	var s sqe
	var c cqe
	var p params
	var so sqringOffsets
	var co cqringOffsets
	return []abiField{
		{"sizeof(io_uring_sqe)", unsafe.Sizeof(s), 64},
		{"sqe.opcode", unsafe.Offsetof(s.opcode), 0},
		{"sqe.flags", unsafe.Offsetof(s.flags), 1},
		{"sqe.ioprio", unsafe.Offsetof(s.ioprio), 2},
		{"sqe.fd", unsafe.Offsetof(s.fd), 4},
		{"sqe.off", unsafe.Offsetof(s.off), 8},
		{"sqe.addr", unsafe.Offsetof(s.addr), 16},
		{"sqe.len", unsafe.Offsetof(s.len), 24},
		{"sqe.rw_flags", unsafe.Offsetof(s.opFlags), 28},
		{"sqe.user_data", unsafe.Offsetof(s.userData), 32},
		{"sqe.buf_index", unsafe.Offsetof(s.bufIndex), 40},
		{"sqe.personality", unsafe.Offsetof(s.personality), 42},
		{"sqe.splice_fd_in", unsafe.Offsetof(s.spliceFdIn), 44},
		{"sqe.addr3", unsafe.Offsetof(s.addr3), 48},
		{"sizeof(io_uring_cqe)", unsafe.Sizeof(c), 16},
		{"cqe.user_data", unsafe.Offsetof(c.userData), 0},
		{"cqe.res", unsafe.Offsetof(c.res), 8},
		{"cqe.flags", unsafe.Offsetof(c.flags), 12},
		{"sizeof(io_sqring_offsets)", unsafe.Sizeof(so), 40},
		{"sq_off.array", unsafe.Offsetof(so.array), 24},
		{"sizeof(io_cqring_offsets)", unsafe.Sizeof(co), 40},
		{"cq_off.cqes", unsafe.Offsetof(co.cqes), 20},
		{"sizeof(io_uring_params)", unsafe.Sizeof(p), 120},
		{"params.features", unsafe.Offsetof(p.features), 20},
		{"params.sq_off", unsafe.Offsetof(p.sqOff), 40},
		{"params.cq_off", unsafe.Offsetof(p.cqOff), 80},
		{"sizeof(io_uring_files_update)", unsafe.Sizeof(filesUpdate{}), 16},
		{"sizeof(io_uring_probe)", unsafe.Sizeof(probeHeader{}), 16},
		{"sizeof(io_uring_rsrc_register)", unsafe.Sizeof(rsrcRegister{}), 32},
		{"sizeof(io_uring_rsrc_update2)", unsafe.Sizeof(rsrcUpdate2{}), 32},
		{"sizeof(io_uring_probe_op)", unsafe.Sizeof(probeOp{}), 8},
		{"sizeof(iovec)", unsafe.Sizeof(unix.Iovec{}), 16},
	}
}

// checkABI reports the first Go layout that differs from the kernel's.
func checkABI() error {
	for _, f := range abiFields() {
		if f.got != f.want {
			return fmt.Errorf("uring: ABI mismatch: %s is %d, kernel expects %d", f.name, f.got, f.want)
		}
	}
	return nil
}

// checkRingOffsets validates the offsets the kernel returned in params
// against the sizes it implies, before any pointer is formed from them.
// sqLen and cqLen are the lengths of the mappings the offsets index into.
func checkRingOffsets(p *params, sqLen, cqLen int) error {
	isPow2 := func(v uint32) bool { return v != 0 && v&(v-1) == 0 }
	if !isPow2(p.sqEntries) || !isPow2(p.cqEntries) || p.cqEntries < p.sqEntries {
		return fmt.Errorf("uring: kernel ring sizes sq=%d cq=%d are not powers of two with cq >= sq", p.sqEntries, p.cqEntries)
	}
	so, co := &p.sqOff, &p.cqOff
	for _, o := range []struct {
		name string
		off  uint32
		lim  int
	}{
		{"sq_off.head", so.head, sqLen}, {"sq_off.tail", so.tail, sqLen},
		{"sq_off.ring_mask", so.ringMask, sqLen}, {"sq_off.ring_entries", so.ringEntries, sqLen},
		{"sq_off.flags", so.flags, sqLen}, {"sq_off.dropped", so.dropped, sqLen},
		{"cq_off.head", co.head, cqLen}, {"cq_off.tail", co.tail, cqLen},
		{"cq_off.ring_mask", co.ringMask, cqLen}, {"cq_off.ring_entries", co.ringEntries, cqLen},
		{"cq_off.overflow", co.overflow, cqLen},
	} {
		if o.off%4 != 0 || int(o.off)+4 > o.lim {
			return fmt.Errorf("uring: kernel offset %s=%d outside a %d-byte ring or misaligned", o.name, o.off, o.lim)
		}
	}
	if so.array%4 != 0 || int(so.array)+4*int(p.sqEntries) > sqLen {
		return fmt.Errorf("uring: kernel offset sq_off.array=%d does not fit %d entries in %d bytes", so.array, p.sqEntries, sqLen)
	}
	if co.cqes%8 != 0 || int(co.cqes)+int(unsafe.Sizeof(cqe{}))*int(p.cqEntries) > cqLen {
		return fmt.Errorf("uring: kernel offset cq_off.cqes=%d does not fit %d entries in %d bytes", co.cqes, p.cqEntries, cqLen)
	}
	return nil
}

// Compile-time size checks: each line fails to build if the size differs
// (a negative or overflowing array length). checkABI repeats them with the
// field offsets at ring setup, where a mismatch selects the pwrite backend.
var (
	_ [unsafe.Sizeof(sqe{}) - 64]byte
	_ [64 - unsafe.Sizeof(sqe{})]byte
	_ [unsafe.Sizeof(cqe{}) - 16]byte
	_ [16 - unsafe.Sizeof(cqe{})]byte
	_ [unsafe.Sizeof(params{}) - 120]byte
	_ [120 - unsafe.Sizeof(params{})]byte
)
