package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/internal/uring"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/segment"
)

// RunLayoutProbe measures each of cfg.Layouts in turn (device_layout.go
// describes them) in a temporary directory under cfg.Dir, removed before it
// returns. It stops early when ctx ends.
func RunLayoutProbe(ctx context.Context, cfg LayoutProbeConfig) ([]LayoutResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	var out []LayoutResult
	for _, l := range cfg.Layouts {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		fmt.Fprintf(logw, "device probe: layout %s: %d files x %d bytes per round, up to %v\n", l, cfg.Files, cfg.AppendBytes, cfg.Duration)
		r, err := runLayout(ctx, cfg, l, logw, false)
		if err != nil {
			return out, fmt.Errorf("layout %s: %w", l, err)
		}
		out = append(out, *r)
		fmt.Fprintf(logw, "device probe: layout %s: %d rounds, %.1f MB/s, %.3f device bytes per data byte, %.1f device writes and %.2f flushes per round\n",
			l, r.Rounds, r.MBPerSec, r.BytesPerDataByte, r.WritesPerRound, r.FlushesPerRound)
	}
	return out, nil
}

// probeJournalHalf is LayoutJournalHalf (tests make it smaller).
var probeJournalHalf int64 = LayoutJournalHalf

// layoutProbe is one layout's run. The round loop runs on the caller's
// goroutine; the journal's copier and zerofill's zero writer have one
// goroutine each, owned by runLayout.
type layoutProbe struct {
	cfg          LayoutProbeConfig
	layout       string
	align, app   int64
	dir          string
	ring         *uring.Ring
	pool         *uring.Pool
	src, zeros   []byte
	period       int64 // the byte at file offset x is src[x%period]
	files        []*uring.File
	appended     []atomic.Int64 // bytes appended to each file (written by the round loop)
	zeroed       []atomic.Int64 // zerofill: the zeroed and fdatasynced prefix of each file
	wrap         int64          // recycled: appends wrap around at this offset
	fileSize     int64
	anchor       *os.File
	journal      *uring.File
	jOff         int64
	done         chan *uring.Op // the round loop's completions
	doneFn       func(*uring.Op)
	issuedBytes  atomic.Int64
	issuedWrites atomic.Int64
	syncs        atomic.Int64
	counting     atomic.Bool // in the measured window
}

// runLayout runs one layout. keep leaves the files in place for a test
// (it removes them itself) and makes every layout's files hold src's
// pattern.
func runLayout(ctx context.Context, cfg LayoutProbeConfig, layout string, logw io.Writer, keep bool) (_ *LayoutResult, err error) {
	p := &layoutProbe{cfg: cfg, layout: layout, align: int64(cfg.Align), app: int64(cfg.AppendBytes)}
	F := int64(cfg.Files)
	round := F * p.app
	maxRounds := cfg.MaxBytes / round

	if p.dir, err = os.MkdirTemp(cfg.Dir, "strata-layout-probe-"); err != nil {
		return nil, err
	}
	if !keep {
		defer func() {
			if rerr := os.RemoveAll(p.dir); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}()
	}
	out := &LayoutResult{Layout: layout, Files: cfg.Files, AppendBytes: cfg.AppendBytes}
	dev, devErr := lookupDevice(p.dir)
	if devErr != nil {
		fmt.Fprintf(logw, "device probe: no device counters: %v\n", devErr)
	} else {
		out.Device = dev.name
	}

	// Buffers: src (two periods, so any write of up to a period is one
	// slice of it) and 1 MiB of zeros.
	p.period = alignUp(max(round+2*p.align, LayoutCopyBytes+p.align, p.app+2*p.align), 1<<20)
	if p.pool, err = uring.NewPool(int(2*p.period), 2); err != nil {
		return nil, err
	}
	defer p.pool.Close()
	p.src, p.zeros = p.pool.Get(), p.pool.Get()
	defer func() { p.pool.Put(p.src); p.pool.Put(p.zeros) }()
	seed := uint64(0x9e3779b97f4a7c15)
	for i := range p.src { // incompressible; nothing below may skip it
		if i%8 == 0 {
			seed ^= seed << 13
			seed ^= seed >> 7
			seed ^= seed << 17
		}
		p.src[i] = byte(seed >> (8 * (i % 8)))
	}
	clear(p.zeros)

	entries := min(4096, 2*cfg.Files+64)
	p.ring, err = uring.New(uring.Config{Backend: probeBackend, Entries: entries, FileSlots: cfg.Files + 8,
		Workers: min(256, cfg.Files+8), Pools: []*uring.Pool{p.pool}, Logger: slog.New(slog.NewTextHandler(logw, nil))})
	if err != nil {
		return nil, err
	}
	defer p.ring.Close()
	out.Backend = string(p.ring.Backend())
	p.done = make(chan *uring.Op, cfg.Files+16)
	p.doneFn = func(op *uring.Op) { p.done <- op }

	// Each file's size: every append (and zerofill's lead, the journal's
	// last partial copy) fits.
	p.fileSize = alignUp(maxRounds*p.app+2*p.align, 1<<20)
	switch layout {
	case "zerofill":
		p.fileSize += 2 * LayoutZeroStep
	case "journal":
		p.fileSize = alignUp(p.fileSize, LayoutCopyBytes) + LayoutCopyBytes
	case "recycled":
		p.wrap = max(LayoutRecycledMax/p.app, 1) * p.app
		p.fileSize = alignUp(p.wrap+p.align, 1<<20)
	}
	defer func() { // after the background goroutines stop (deferred below)
		if cerr := p.closeFiles(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if err := p.setup(); err != nil {
		return nil, err
	}

	// Background work, stopped (and waited for) before the files close.
	var (
		wg     sync.WaitGroup
		bgErr  atomic.Pointer[error]
		stop   = make(chan struct{})
		jobs   chan copyJob
		wake   = make(chan struct{}, 1) // round loop -> zero writer
		zeroUp = make(chan struct{}, 1) // zero writer -> round loop
	)
	setBgErr := func(e error) { bgErr.CompareAndSwap(nil, &e) }
	defer func() {
		if jobs != nil {
			close(jobs)
		}
		close(stop)
		wg.Wait()
	}()
	switch layout {
	case "journal":
		jobs = make(chan copyJob, 4*cfg.Files)
		wg.Go(func() { p.copier(jobs, setBgErr) })
	case "zerofill":
		wg.Go(func() { p.zeroWriter(stop, wake, zeroUp, setBgErr) })
	}

	appendOps := make([]*uring.Op, cfg.Files)
	syncOps := make([]*uring.Op, cfg.Files)
	for i, f := range p.files {
		appendOps[i] = &uring.Op{Code: uring.OpWrite, File: f}
		syncOps[i] = &uring.Op{Code: uring.OpFsync, File: f, Datasync: true}
	}
	var jWrite, jSync *uring.Op
	var ckpt chan error // the journal's checkpoint in progress
	if p.journal != nil {
		jWrite = &uring.Op{Code: uring.OpWrite, File: p.journal}
		jSync = &uring.Op{Code: uring.OpFsync, File: p.journal, Datasync: true}
	}
	copied := make([]int64, cfg.Files)

	var d0 devSample
	if dev != nil {
		if d0, err = dev.sample(); err != nil {
			dev = nil
		}
	}
	p.counting.Store(true)
	cpu0 := clientCPU()
	t0 := cfg.Now()
	deadline := t0.Add(cfg.Duration)
	lat := make([]time.Duration, 0, 1024)
	var rounds int64
	for now := t0; rounds < maxRounds && now.Before(deadline); rounds++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if e := bgErr.Load(); e != nil {
			return nil, *e
		}
		if layout == "zerofill" {
			if err := p.waitZeroed(ctx, zeroUp, &bgErr); err != nil {
				return nil, err
			}
		}
		rs := cfg.Now()
		switch layout {
		case "journal":
			jlen := alignUp(round, p.align)
			if p.jOff+jlen > 2*probeJournalHalf {
				p.jOff = 0
			}
			if rounds > 0 && p.jOff == 0 || p.jOff/probeJournalHalf != (p.jOff+jlen-1)/probeJournalHalf {
				// Entering the other half: checkpoint the copies so far
				// (the previous checkpoint must be done first).
				if ckpt != nil {
					if err := <-ckpt; err != nil {
						return nil, err
					}
				}
				ckpt = make(chan error, 1)
				jobs <- copyJob{barrier: ckpt}
			}
			jWrite.Off, jWrite.Buf = p.jOff, p.srcAt(p.jOff, jlen)
			if err := p.do(jWrite); err != nil {
				return nil, err
			}
			if err := p.do(jSync); err != nil {
				return nil, err
			}
			p.jOff += jlen
			for i := range p.files {
				end := p.appended[i].Add(p.app)
				if end-copied[i] >= LayoutCopyBytes {
					jobs <- copyJob{file: i, off: copied[i], n: LayoutCopyBytes}
					copied[i] += LayoutCopyBytes
				}
			}
		default:
			for i, op := range appendOps {
				pos := p.appended[i].Load()
				if p.wrap > 0 {
					pos %= p.wrap
				}
				s, e := alignDown(pos, p.align), alignUp(pos+p.app, p.align)
				op.Off, op.Buf = s, p.srcAt(s, e-s)
			}
			if err := p.do(appendOps...); err != nil {
				return nil, err
			}
			for i := range p.files {
				p.appended[i].Add(p.app)
			}
			switch layout {
			case "unwritten":
				err = p.do(syncOps...)
			case "unwritten-syncfs":
				err = p.syncFS()
			default: // zerofill, recycled: a device cache flush
				err = p.flushAnchor()
			}
			if err != nil {
				return nil, err
			}
			if layout == "zerofill" {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
		now = cfg.Now()
		lat = append(lat, now.Sub(rs))
	}
	// Drain: the journal's last copies and checkpoint; then an fsync of
	// every file, which writes what their inodes still hold (timestamps),
	// so every layout pays for its metadata inside the window.
	if layout == "journal" {
		if ckpt != nil {
			if err := <-ckpt; err != nil {
				return nil, err
			}
		}
		for i := range p.files {
			if end := alignUp(p.appended[i].Load(), p.align); end > copied[i] {
				jobs <- copyJob{file: i, off: copied[i], n: end - copied[i]}
				copied[i] = end
			}
		}
		ckpt = make(chan error, 1)
		jobs <- copyJob{barrier: ckpt}
		if err := <-ckpt; err != nil {
			return nil, err
		}
	}
	if e := bgErr.Load(); e != nil {
		return nil, *e
	}
	for _, f := range p.files {
		if err := f.OSFile().Sync(); err != nil {
			return nil, err
		}
	}
	t1 := cfg.Now()
	cpu1 := clientCPU()
	p.counting.Store(false)

	out.Rounds, out.DataBytes = rounds, rounds*round
	out.DurationS = t1.Sub(t0).Seconds()
	out.MBPerSec = float64(out.DataBytes) / max(out.DurationS, 1e-9) / 1e6
	out.RoundP50Ms, out.RoundP99Ms = percentileMs(lat, 0.5), percentileMs(lat, 0.99)
	out.IssuedBytes, out.IssuedWrites, out.Syncs = p.issuedBytes.Load(), p.issuedWrites.Load(), p.syncs.Load()
	if out.DataBytes > 0 {
		out.CPUNsPerByte = float64(cpu1-cpu0) / float64(out.DataBytes)
	}
	out.CPUShare = (cpu1 - cpu0).Seconds() / max(out.DurationS, 1e-9)
	if dev != nil {
		if d1, err := dev.sample(); err == nil {
			t := deviceTraffic(dev.name, d0, d1, out.DataBytes)
			out.DeviceWriteBytes, out.WriteRequests, out.Flushes, out.BytesPerDataByte = t.WriteBytes, t.WriteRequests, t.Flushes, t.BytesPerRecordByte
			if rounds > 0 {
				out.WritesPerRound = float64(t.WriteRequests) / float64(rounds)
				out.MetaBytesPerRound = float64(t.WriteBytes-out.IssuedBytes) / float64(rounds)
				if t.Flushes != nil {
					out.FlushesPerRound = float64(*t.Flushes) / float64(rounds)
				}
			}
		}
	}
	return out, nil
}

// srcAt is the pattern's bytes for file offsets [off, off+n).
func (p *layoutProbe) srcAt(off, n int64) []byte {
	s := off % p.period
	return p.src[s : s+n]
}

// setup makes the layout's files, anchor and journal and makes them
// durable; nothing of it is measured.
func (p *layoutProbe) setup() error {
	F := p.cfg.Files
	p.appended = make([]atomic.Int64, F)
	p.zeroed = make([]atomic.Int64, F)
	var err error
	if p.anchor, err = os.OpenFile(filepath.Join(p.dir, ".anchor"), os.O_CREATE|os.O_RDWR, 0o644); err != nil {
		return err
	}
	if _, err := p.anchor.WriteAt(make([]byte, 4096), 0); err != nil {
		return err
	}
	for i := range F {
		dir := p.dir
		if p.cfg.Subdirs {
			dir = filepath.Join(p.dir, fmt.Sprintf("probe-%d", i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
		}
		f, err := p.createFile(filepath.Join(dir, fmt.Sprintf("%020d.log", i)), p.fileSize, p.layout == "unwritten" || p.layout == "unwritten-syncfs")
		if err != nil {
			return err
		}
		p.files = append(p.files, f)
	}
	switch p.layout {
	case "recycled":
		for _, f := range p.files {
			if err := p.fill(f, 0, p.fileSize, false); err != nil {
				return err
			}
		}
	case "zerofill": // the first step of each file, as a segment's creation does
		for i, f := range p.files {
			if err := p.fill(f, 0, LayoutZeroStep, true); err != nil {
				return err
			}
			p.zeroed[i].Store(LayoutZeroStep)
		}
	case "journal": // recycled journal files
		if p.journal, err = p.createFile(filepath.Join(p.dir, "journal"), 2*probeJournalHalf, false); err != nil {
			return err
		}
		if err := p.fill(p.journal, 0, 2*probeJournalHalf, false); err != nil {
			return err
		}
	}
	// Everything made so far (inodes, directories, allocations) durable,
	// so the window starts clean.
	for _, f := range append([]*uring.File{p.journal}, p.files...) {
		if f != nil {
			if err := f.OSFile().Sync(); err != nil {
				return err
			}
		}
	}
	dirs := []string{p.dir}
	if p.cfg.Subdirs {
		for _, f := range p.files {
			dirs = append(dirs, filepath.Dir(f.Name()))
		}
	}
	for _, d := range dirs {
		if err := vfs.SyncDir(d); err != nil {
			return err
		}
	}
	if err := segment.SyncFS(p.anchor); err != nil {
		return err
	}
	return nil
}

// createFile creates an O_DIRECT file registered with the ring: size bytes
// fallocated with i_size covering them, or with keepSize reserved without
// moving i_size (FALLOC_FL_KEEP_SIZE).
func (p *layoutProbe) createFile(name string, size int64, keepSize bool) (*uring.File, error) {
	c, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := c.Close(); err != nil {
		return nil, err
	}
	var osf *os.File
	if keepSize {
		osf, err = vfs.OpenDirect(name)
	} else {
		osf, err = segment.OpenDirectAllocated(name, size)
	}
	if err != nil {
		return nil, err
	}
	f, err := p.ring.RegisterFile(osf)
	if err != nil {
		osf.Close()
		return nil, err
	}
	if keepSize {
		if handled, err := f.Preallocate(size); err != nil || !handled {
			f.Close()
			return nil, errors.Join(err, fmt.Errorf("%s: fallocate(FALLOC_FL_KEEP_SIZE) not supported", name))
		}
	}
	return f, nil
}

// fill writes [off, off+n) of f in 1 MiB writes (zeros or the pattern),
// one at a time, then fdatasyncs it.
func (p *layoutProbe) fill(f *uring.File, off, n int64, zeros bool) error {
	op := &uring.Op{Code: uring.OpWrite, File: f}
	for end := off + n; off < end; {
		k := min(int64(LayoutZeroWrite), end-off)
		op.Off = off
		if zeros {
			op.Buf = p.zeros[:k]
		} else {
			op.Buf = p.srcAt(off, k)
		}
		if err := p.do(op); err != nil {
			return err
		}
		off += k
	}
	return p.do(&uring.Op{Code: uring.OpFsync, File: f, Datasync: true})
}

// do submits ops and waits for all of them on p.done (the round loop's
// goroutine only).
func (p *layoutProbe) do(ops ...*uring.Op) error {
	var first error
	n := 0
	for _, op := range ops {
		op.Done = p.doneFn
		if err := p.ring.Submit(op); err != nil {
			first = err
			break
		}
		p.count(op)
		n++
	}
	for range n {
		if err := opErr(<-p.done); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// count adds a submitted op to the window's counters.
func (p *layoutProbe) count(op *uring.Op) {
	if !p.counting.Load() {
		return
	}
	switch op.Code {
	case uring.OpWrite:
		p.issuedBytes.Add(int64(len(op.Buf)))
		p.issuedWrites.Add(1)
	case uring.OpFsync:
		p.syncs.Add(1)
	}
}

func opErr(op *uring.Op) error {
	if op.Err != nil {
		return op.Err
	}
	if op.Code == uring.OpWrite && op.N != len(op.Buf) {
		return fmt.Errorf("%s: short write of %d of %d bytes at %d", op.File.Name(), op.N, len(op.Buf), op.Off)
	}
	return nil
}

// flushAnchor is a device cache flush: an fdatasync of a file with nothing
// dirty.
func (p *layoutProbe) flushAnchor() error {
	if p.counting.Load() {
		p.syncs.Add(1)
	}
	return segment.Fdatasync(p.anchor)
}

// syncFS is the shared flush of unwritten extents: syncfs, then a cache
// flush after the inode-table writes it started.
func (p *layoutProbe) syncFS() error {
	if p.counting.Load() {
		p.syncs.Add(1)
	}
	if err := segment.SyncFS(p.anchor); err != nil {
		return err
	}
	return p.flushAnchor()
}

// closeFiles closes every file the probe opened.
func (p *layoutProbe) closeFiles() error {
	var errs []error
	for _, f := range append([]*uring.File{p.journal}, p.files...) {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	if p.anchor != nil {
		errs = append(errs, p.anchor.Close())
	}
	return errors.Join(errs...)
}

// copyJob is one write-behind copy of the journal layout (file's bytes
// [off, off+n)), or, with barrier set, a checkpoint: once every copy
// before it is written, syncfs and a cache flush; the result goes to
// barrier.
type copyJob struct {
	file    int
	off, n  int64
	barrier chan error
}

// copierDepth is the write-behind copies in flight at once.
const copierDepth = 4

// copier writes the journal layout's copies behind the rounds until jobs
// is closed.
func (p *layoutProbe) copier(jobs <-chan copyJob, fail func(error)) {
	done := make(chan *uring.Op, copierDepth)
	free := make([]*uring.Op, 0, copierDepth)
	for range copierDepth {
		free = append(free, &uring.Op{Code: uring.OpWrite, Done: func(op *uring.Op) { done <- op }})
	}
	inflight := 0
	var first error
	reap := func() {
		op := <-done
		inflight--
		free = append(free, op)
		if err := opErr(op); err != nil && first == nil {
			first = err
			fail(err)
		}
	}
	defer func() {
		for inflight > 0 {
			reap()
		}
	}()
	for job := range jobs {
		if job.barrier != nil {
			for inflight > 0 {
				reap()
			}
			err := first
			if err == nil {
				err = p.syncFS()
			}
			job.barrier <- err
			continue
		}
		if first != nil {
			continue
		}
		if len(free) == 0 {
			reap()
		}
		op := free[len(free)-1]
		free = free[:len(free)-1]
		op.File, op.Off, op.Buf = p.files[job.file], job.off, p.srcAt(job.off, job.n)
		if err := p.ring.Submit(op); err != nil {
			free = append(free, op)
			first = err
			fail(err)
			continue
		}
		p.count(op)
		inflight++
	}
}

// zeroWriter keeps every zerofill file zeroed LayoutZeroStep ahead of its
// appends: the file with the least lead gets its next step (1 MiB zero
// writes one at a time, then an fdatasync, as segment PreWrite does), and
// zeroUp is signalled after each step. It waits on wake while every file
// has its lead, and returns when stop closes.
func (p *layoutProbe) zeroWriter(stop <-chan struct{}, wake <-chan struct{}, zeroUp chan<- struct{}, fail func(error)) {
	done := make(chan *uring.Op, 1)
	op := &uring.Op{Done: func(op *uring.Op) { done <- op }}
	run := func() error {
		if err := p.ring.Submit(op); err != nil {
			return err
		}
		p.count(op)
		return opErr(<-done)
	}
	for {
		best, lead := -1, int64(0)
		for i := range p.files {
			z := p.zeroed[i].Load()
			if l := z - p.appended[i].Load(); z+LayoutZeroStep <= p.fileSize && (best < 0 || l < lead) {
				best, lead = i, l
			}
		}
		if best < 0 || lead >= LayoutZeroStep {
			select {
			case <-stop:
				return
			case <-wake:
			}
			continue
		}
		f, z := p.files[best], p.zeroed[best].Load()
		for k := int64(0); k < LayoutZeroStep; k += LayoutZeroWrite {
			op.Code, op.File, op.Off, op.Buf = uring.OpWrite, f, z+k, p.zeros[:LayoutZeroWrite]
			if err := run(); err != nil {
				fail(err)
				return
			}
		}
		op.Code, op.Buf, op.Datasync = uring.OpFsync, nil, true
		if err := run(); err != nil {
			fail(err)
			return
		}
		p.zeroed[best].Store(z + LayoutZeroStep)
		select {
		case zeroUp <- struct{}{}:
		default:
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

// waitZeroed waits until every zerofill file is zeroed past its next
// append.
func (p *layoutProbe) waitZeroed(ctx context.Context, zeroUp <-chan struct{}, bgErr *atomic.Pointer[error]) error {
	for {
		ok := true
		for i := range p.files {
			if alignUp(p.appended[i].Load()+p.app, p.align) > p.zeroed[i].Load() {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		if e := bgErr.Load(); e != nil {
			return *e
		}
		select {
		case <-zeroUp:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
