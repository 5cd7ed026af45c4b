package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/stratalog/strata/internal/diskstats"
	"github.com/stratalog/strata/internal/uring"
	"github.com/stratalog/strata/segment"
)

// lookupDevice finds the block device dir's filesystem is on: st_dev's
// major:minor in /proc/diskstats. Filesystems without one of their own
// (tmpfs, overlay, NFS, btrfs' anonymous device numbers) are not there.
func lookupDevice(dir string) (*blockDevice, error) {
	dev, err := segment.DeviceOf(dir)
	if err != nil {
		return nil, err
	}
	major, minor := segment.DeviceNumbers(dev)
	text, err := os.ReadFile(diskstats.Path)
	if err != nil {
		return nil, err
	}
	name, _, ok, err := diskstats.Find(text, major, minor)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", diskstats.Path, err)
	}
	if !ok {
		return nil, fmt.Errorf("%s is on device %d:%d, which %s does not list: a filesystem without a block device (tmpfs, overlay, network)",
			dir, major, minor, diskstats.Path)
	}
	return &blockDevice{name: name, major: major, minor: minor}, nil
}

// probeBackend is the probe ring's backend (tests run the fallback too).
var probeBackend = uring.BackendAuto

// probeDevice measures dir's filesystem's durable sequential write ceiling:
// a fresh file of total bytes (rounded up to DeviceProbeChunk) allocated
// with fallocate (unwritten extents, i_size covering every write), written
// once front to back with O_DIRECT DeviceProbeChunk writes through an
// internal/uring Ring (registered buffers, DeviceProbeDepth in flight; the
// ring's pwrite fallback with as many workers where io_uring is not
// available), and an fdatasync each time the written prefix passes another
// DeviceProbeSyncBytes (one at a time, writes going on meanwhile, as the
// broker's appender does), one more at the end. It stops submitting after
// maxTime or when ctx ends. The file is removed before it returns.
func probeDevice(ctx context.Context, dir string, total int64, maxTime time.Duration, logw io.Writer) (_ *DeviceBaseline, err error) {
	const chunk, depth, syncEvery = DeviceProbeChunk, DeviceProbeDepth, DeviceProbeSyncBytes
	if total <= 0 {
		return nil, fmt.Errorf("probe size %d", total)
	}
	total = (total + chunk - 1) / chunk * chunk
	if logw == nil {
		logw = io.Discard
	}
	out := &DeviceBaseline{Mode: "device", Dir: dir}
	dev, devErr := lookupDevice(dir)
	if devErr != nil {
		fmt.Fprintf(logw, "device probe: no device counters: %v\n", devErr)
	} else {
		out.Device = dev.name
	}

	tmp, err := os.CreateTemp(dir, "strata-loadgen-probe-")
	if err != nil {
		return nil, err
	}
	name := tmp.Name()
	tmp.Close()
	defer func() {
		if rerr := os.Remove(name); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	osf, err := segment.OpenDirectAllocated(name, total)
	if err != nil {
		return nil, fmt.Errorf("an O_DIRECT file of %d allocated bytes in %s: %w", total, dir, err)
	}
	if err := osf.Sync(); err != nil { // the allocation is not what is measured
		osf.Close()
		return nil, err
	}

	pool, err := uring.NewPool(chunk, depth)
	if err != nil {
		osf.Close()
		return nil, err
	}
	defer pool.Close() // after the ring's Close and every chunk's Put
	ring, err := uring.New(uring.Config{Backend: probeBackend, Entries: 2 * depth, Pools: []*uring.Pool{pool}, Workers: depth,
		Logger: slog.New(slog.NewTextHandler(logw, nil))})
	if err != nil {
		osf.Close()
		return nil, err
	}
	defer ring.Close()
	f, err := ring.RegisterFile(osf) // owns osf now
	if err != nil {
		osf.Close()
		return nil, err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	out.Backend = string(ring.Backend())

	// Done callbacks only hand ops back; this goroutine does the rest.
	completed := make(chan *uring.Op, depth)
	synced := make(chan error, 1)
	idle := make([]*uring.Op, 0, depth)
	seed := uint64(0x9e3779b97f4a7c15)
	for range depth {
		buf := pool.Get()
		for i := 0; i < len(buf); i += 8 { // not zeros: nothing below may skip them
			seed ^= seed << 13
			seed ^= seed >> 7
			seed ^= seed << 17
			buf[i] = byte(seed)
		}
		idle = append(idle, &uring.Op{Code: uring.OpWrite, File: f, Buf: buf, Done: func(op *uring.Op) { completed <- op }})
	}
	defer func() {
		for _, op := range idle {
			pool.Put(op.Buf)
		}
	}()
	syncOp := &uring.Op{Code: uring.OpFsync, File: f, Datasync: true, Done: func(op *uring.Op) { synced <- op.Err }}

	var (
		wm                     uring.Watermark
		off, covered, covering int64
		inflight               int
		syncing, stop          bool
		firstErr               error
		timer                  = time.NewTimer(maxTime)
		timeUp, cancelled      = timer.C, ctx.Done()
		d0                     devSample
		next                   = int64(syncEvery)
	)
	defer timer.Stop()
	fail := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	startSync := func() {
		syncing, covering = true, wm.Value()
		next = (covering/syncEvery + 1) * syncEvery
		if err := ring.Submit(syncOp); err != nil {
			syncing = false
			fail(err)
		}
	}
	if dev != nil {
		var serr error
		if d0, serr = dev.sample(); serr != nil {
			dev = nil
		}
	}
	t0 := wallClock()
	for {
		for len(idle) > 0 && off < total && !stop && firstErr == nil {
			op := idle[len(idle)-1]
			op.Off = off
			if err := ring.Submit(op); err != nil {
				fail(err)
				break
			}
			idle = idle[:len(idle)-1]
			off += chunk
			inflight++
		}
		if inflight == 0 && !syncing {
			if firstErr == nil && wm.Value() > covered {
				startSync() // the tail
				continue
			}
			break
		}
		select {
		case op := <-completed:
			inflight--
			idle = append(idle, op)
			if op.Err != nil {
				fail(op.Err)
				continue
			}
			_, werr := wm.Complete(op.Off, int64(op.N))
			fail(werr)
			if !syncing && firstErr == nil && wm.Value() >= next {
				startSync()
			}
		case serr := <-synced:
			syncing, covered = false, covering
			out.Syncs++
			fail(serr)
			if firstErr == nil && wm.Value() >= next {
				startSync()
			}
		case <-timeUp:
			stop, timeUp = true, nil
		case <-cancelled:
			stop, cancelled = true, nil
			fail(ctx.Err())
		}
	}
	elapsed := wallClock().Sub(t0)
	if firstErr != nil {
		return nil, fmt.Errorf("O_DIRECT writes to %s: %w", name, firstErr)
	}
	out.Bytes, out.DurationS = covered, elapsed.Seconds()
	out.MBPerSec = float64(covered) / max(elapsed.Seconds(), 1e-9) / 1e6
	if dev != nil {
		if d1, err := dev.sample(); err == nil {
			t := deviceTraffic(dev.name, d0, d1, 0)
			out.DeviceWriteBytes, out.WriteRequests, out.MeanWriteBytes, out.Flushes = t.WriteBytes, t.WriteRequests, t.MeanWriteBytes, t.Flushes
		}
	}
	return out, nil
}
