package engine

import (
	"github.com/stratalog/strata/internal/vfs"

	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// The free-space floor (log.dir.min.free.bytes, log.dir.min.free.percent;
// docs/reliability.md, "Disk full").
//
// The data directory's filesystem is asked for its free space (statfs) at
// Open, every floorCheckMs by the flush coordinator (runCoordinator, on the
// engine's clock) and when the floor is changed (SetMinFreeSpace); never on
// the produce path, which reads one atomic pointer. While the usable space
// is below the floor:
//
//   - Log.Append fails with ErrNoSpace (KAFKA_STORAGE_ERROR, retriable)
//     before anything is assigned or written, so a refused batch leaves no
//     trace and the next accepted one takes the next offset;
//   - CreateTopic and CreatePartitions fail with ErrNoSpace (a refused
//     produce never reaches a roll, so no segment is created for it).
//
// Before refusing, the partitions' pools of recycled segment files
// (recycle.go) are emptied, and while below the floor retention and
// DeleteRecords unlink what they delete instead of pooling it.
//
// Not refused, because they free space or are small and needed for what
// keeps working: reads, DeleteRecords, DeleteTopic, retention and
// compaction; appends to the internal topics (committed offsets, group and
// transaction state: consumers keep committing); transaction markers (a
// transaction in flight can end, so its records become readable or are
// aborted); a follower's appends of what its leader accepted, and the
// replicas the controller assigns (refusing them would take this broker out
// of the metadata it follows; the leader's own floor guards what is
// accepted). The floor's headroom is there for these.
//
// Crossing below logs one WARN line; climbing back above the floor plus a
// margin (floorMargin, so a log directory hovering at the floor does not
// log every check) logs one INFO line, and produce is accepted again: the
// broker recovers by itself when space returns.

// ErrNoSpace is what a produce, CreateTopic and CreatePartitions fail with
// while the data directory's filesystem has less usable space than its
// floor: the server answers KAFKA_STORAGE_ERROR (retriable), and the
// directory stays online.
var ErrNoSpace = errors.New("engine: log directory below its free-space floor")

const (
	// DefaultMinFreeBytes is log.dir.min.free.bytes' default: 4 GiB. What
	// still writes below the floor must fit in it: appends already past
	// the check (at most queued.max.request.bytes, 512 MiB, of requests
	// in flight broker-wide), compaction's cleaned copy of a segment
	// before the old one goes (a segment, 1 GiB by default), followers'
	// appends, internal topics, markers, checkpoints, and a segment's
	// preallocation step (16 MiB) per partition that rolls for them.
	DefaultMinFreeBytes = 4 << 30
	// DefaultMinFreePercent is log.dir.min.free.percent's default: the
	// floor is at most 5% of the filesystem, so a small disk (a 20 GiB
	// volume: 1 GiB) keeps most of itself usable.
	DefaultMinFreePercent = 5.0

	// floorCheckMs is how often the coordinator asks for the free space.
	floorCheckMs = 250
	// floorMarginMax caps the margin above the floor that recovery needs.
	floorMarginMax = 256 << 20
)

// FreeSpace is the data directory's filesystem as the floor last saw it.
type FreeSpace struct {
	UsableBytes int64 // available to the broker (statfs f_bavail): Kafka's DescribeLogDirs UsableBytes
	TotalBytes  int64 // the filesystem's size: DescribeLogDirs TotalBytes
	FloorBytes  int64 // the floor in bytes; 0: off
	Below       bool  // produce is refused
	Err         error // the last statfs failed (the floor keeps its last verdict)
}

// diskFloor is the engine's free-space floor. refused is read on every
// produce; the rest is guarded by mu (the coordinator's checks and
// SetMinFreeSpace).
type diskFloor struct {
	refused atomic.Pointer[error] // non-nil while below the floor

	mu        sync.Mutex
	minBytes  int64   // <= 0: off
	minPct    float64 // <= 0: off
	checkedMs int64   // engine clock of the last check
	last      FreeSpace
	statErr   bool // the last statfs failed (logged once per failure run)
	ckptErr   bool // the last recovery-point checkpoint ran out of space
}

// set sets the floor from Options' convention: 0 is the default,
// < 0 turns the floor off.
func (f *diskFloor) set(minBytes int64, minPct float64) {
	switch {
	case minBytes == 0:
		minBytes = DefaultMinFreeBytes
	case minBytes < 0:
		minBytes = 0
	}
	switch {
	case minPct == 0:
		minPct = DefaultMinFreePercent
	case minPct < 0:
		minPct = 0
	}
	f.minBytes, f.minPct = minBytes, min(minPct, 100)
}

// floorBytes is the floor for a filesystem of total bytes: the smaller of
// the two settings, 0 when either is off.
func (f *diskFloor) floorBytes(total int64) int64 {
	if f.minBytes <= 0 || f.minPct <= 0 {
		return 0
	}
	return min(f.minBytes, int64(f.minPct/100*float64(total)))
}

// floorMargin is how far above the floor the usable space must climb
// before produce is accepted again: 1/16 of the floor, at most 256 MiB.
func floorMargin(floor int64) int64 { return min(floor/16, floorMarginMax) }

// checkFloor asks the filesystem for its free space and updates the
// verdict, logging a crossing. Called at Open, by the coordinator when
// floorDue says so and by SetMinFreeSpace.
func (e *Engine) checkFloor(nowMs int64) {
	f := &e.floor
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checkedMs = nowMs
	usable, total, err := vfs.FreeSpace(e.dir)
	if err != nil {
		f.last.Err = err
		if !f.statErr {
			f.statErr = true
			e.logger.Warn("free-space floor: statfs failed; keeping the last verdict", "dir", e.dir, "err", err)
		}
		return
	}
	f.statErr = false
	floor := f.floorBytes(total)
	if floor > 0 && usable < floor && e.drainPools() > 0 {
		// Pooled segment files (recycle.go) hold disk beyond retention:
		// freed first, then the space is asked for again.
		if u, t, err := vfs.FreeSpace(e.dir); err == nil {
			usable, total = u, t
		}
	}
	below := f.last.Below
	switch {
	case floor == 0:
		below = false
	case !below && usable < floor:
		below = true
	case below && usable >= floor+floorMargin(floor):
		below = false
	}
	f.last = FreeSpace{UsableBytes: usable, TotalBytes: total, FloorBytes: floor, Below: below}
	if below == (f.refused.Load() != nil) {
		return
	}
	if below {
		err := fmt.Errorf("%w: %d bytes usable in %s, floor %d (log.dir.min.free.bytes, log.dir.min.free.percent)", ErrNoSpace, usable, e.dir, floor)
		f.refused.Store(&err)
		e.logger.Warn("log directory below its free-space floor: produce and topic creation refused until space returns; reads, deletes and retention go on",
			"dir", e.dir, "usable_bytes", usable, "floor_bytes", floor, "total_bytes", total)
		return
	}
	f.refused.Store(nil)
	e.logger.Info("log directory back above its free-space floor: produce accepted again",
		"dir", e.dir, "usable_bytes", usable, "floor_bytes", floor, "total_bytes", total)
}

// floorDue returns when the coordinator should next check the free space
// (engine clock ms); it checks first when due. With the floor off the
// checks go on, so FreeSpace stays current.
func (e *Engine) floorDue(nowMs int64) int64 {
	f := &e.floor
	f.mu.Lock()
	due := f.checkedMs + floorCheckMs
	f.mu.Unlock()
	if nowMs >= due {
		e.checkFloor(nowMs)
		due = nowMs + floorCheckMs
	}
	return due
}

// noSpace is the error an append to a client topic or a topic creation
// fails with while below the floor, nil otherwise.
func (e *Engine) noSpace(topic string) error {
	if p := e.floor.refused.Load(); p != nil && !floorExempt[topic] {
		return *p
	}
	return nil
}

// floorExempt are the internal topics whose appends go on below the floor
// (Kafka's internal topics that the broker itself writes).
var floorExempt = map[string]bool{
	OffsetsTopic:          true,
	"__transaction_state": true,
	"__share_group_state": true,
}

// SetMinFreeSpace changes the floor (log.dir.min.free.bytes,
// log.dir.min.free.percent; 0 is the default, < 0 turns that bound off)
// and checks the free space at once.
func (e *Engine) SetMinFreeSpace(minBytes int64, minPercent float64) {
	e.floor.mu.Lock()
	e.floor.set(minBytes, minPercent)
	e.floor.mu.Unlock()
	e.checkFloor(e.nowMs())
}

// FreeSpace reports the data directory's filesystem as the floor last saw
// it (at most floorCheckMs old while the floor is on).
func (e *Engine) FreeSpace() FreeSpace {
	e.floor.mu.Lock()
	defer e.floor.mu.Unlock()
	return e.floor.last
}

// recoveryCheckpointWritten takes the result of the coordinator's
// recovery-point checkpoint. Out of space or descriptors the previous file
// is still whole (the new one is written aside and renamed over it) and an
// older recovery point only makes recovery after a crash walk more, so the
// write is retried at the next interval with one WARN line for the whole
// run of failures; any other error takes the directory offline.
func (e *Engine) recoveryCheckpointWritten(err error) {
	f := &e.floor
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err == nil:
		if f.ckptErr {
			f.ckptErr = false
			e.logger.Info("recovery-point checkpoint written again", "dir", e.dir)
		}
	case isResourceErr(err):
		e.fl.ckptDirty.Store(true) // retried at the next interval
		if !f.ckptErr {
			f.ckptErr = true
			e.logger.Warn("recovery-point checkpoint not written: out of a resource; retrying, the log directory stays online", "dir", e.dir, "err", err)
		}
	default:
		e.ioFailure("writing "+recoveryPointFile, err)
	}
}
