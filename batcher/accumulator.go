package batcher

// The producer-side accumulator: records in, closed RecordBatch v2 batches
// out, with time passed in by the caller.
//
// Life of a batch:
//
//	Append ──► open batch of partition p (one per partition, a record.Builder)
//	             │ closes when the next record would not fit (MaxBatchBytes),
//	             │ when the batch is full after an append, when its linger
//	             │ expires (Drain(now) with now >= opened+Linger), or on Flush
//	             ▼
//	           closed queue (FIFO) ──► Drain: encoded (CRC32C, compression,
//	             producer id/sequence) into the Batch's reused buffer
//	                                    ──► caller sends it ──► Release
//
// Keyed records go to partitioner.KeyPartition(key, partitions), Kafka's murmur2
// partitioner. Keyless records use the KIP-480 sticky partitioner (what the
// Java client did from 2.4 to 3.2, and franz-go's StickyKeyPartitioner): they
// all go to one partition until the batch they are filling closes, then a
// partition different from the last is picked at random for the next one.
//
// Memory: a Batch, its record.Builder's records buffer, its Tags slice and
// its encoded-bytes buffer are recycled through Release, so once the pool has
// grown to the number of batches in flight, Append, Drain and Release
// allocate nothing for uncompressed batches (compression codecs may allocate
// per batch inside the compressor, never per record).

import (
	"errors"
	"fmt"
	"github.com/stratalog/strata/partitioner"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/stratalog/strata/record"
)

const (
	// DefaultLinger is how long a batch waits for more records after its
	// first one: Kafka's linger.ms as franz-go and Strata's loadgen default it.
	DefaultLinger = 5 * time.Millisecond
	// DefaultMaxBatchBytes is the size at which a batch closes: Kafka's
	// batch.size raised to 64 KiB, the size Strata is tuned for.
	DefaultMaxBatchBytes = 64 << 10
	// MaxPartitions bounds Config.Partitions; the per-partition state is a
	// slice indexed by partition.
	MaxPartitions = 1 << 20

	// recordOverheadBound is the most bytes a record adds beyond its key
	// and value bytes when it has no headers: length varint (5), attributes
	// (1), timestamp delta varlong (10), offset delta varint (5), key and
	// value length varints (5 each), header count (1).
	recordOverheadBound = 5 + 1 + 10 + 5 + 5 + 5 + 1
)

// Config configures an Accumulator.
type Config struct {
	// Partitions is the topic's partition count, 1..MaxPartitions.
	Partitions int32
	// Linger is how long a batch stays open after its first record. Zero
	// means DefaultLinger; a negative value means no linger: a batch is
	// ready as soon as it holds a record.
	Linger time.Duration
	// MaxBatchBytes closes a batch when the next record would take its
	// uncompressed size (record.HeaderSize plus encoded records) past it.
	// A record bigger than this on its own gets a batch of its own. Zero
	// means DefaultMaxBatchBytes. Compressed batches are smaller than this
	// bound on the wire, as with Kafka's batch.size.
	MaxBatchBytes int
	// Codec compresses each batch's records section.
	Codec record.Codec
	// Seed seeds the sticky partitioner's random choice, so a run can be
	// replayed. Zero is a valid seed.
	Seed uint64
}

// Batch is one closed, encoded record batch for one partition. The
// accumulator owns it until Drain returns it; the caller then owns it until
// it calls Release, after which it must not touch it.
type Batch struct {
	// Partition is the partition every record of the batch went to.
	Partition int32
	// Records is the number of records.
	Records int
	// Bytes is the encoded RecordBatch v2 (baseOffset 0, leader epoch -1,
	// CRC-32C set), valid from Drain until Release.
	Bytes []byte
	// Tags are the caller's tags of the records, in append order (the
	// loadgen stores each record's scheduled send time here).
	Tags []int64
	// Opened is the now passed to the Append that opened the batch.
	Opened time.Time
	// BaseSequence is the idempotent producer sequence of the first
	// record, or -1 without a producer id.
	BaseSequence int32

	builder  record.Builder
	buf      []byte // backing array of Bytes, reused
	deadline time.Time
}

// Accumulator groups records into per-partition batches. It is not safe for
// concurrent use: one goroutine calls Append, Ready, Deadline, Drain, Flush
// and Buffered. Release alone may be called from any goroutine (a response
// reader returning batches), and is internally synchronised.
type Accumulator struct {
	cfg      Config
	linger   time.Duration // effective, >= 0
	open     []*Batch      // by partition, nil when none is open
	nOpen    int
	closed   []*Batch // FIFO of closed batches not yet drained
	buffered int      // uncompressed bytes of open and closed batches

	// earliest is the smallest deadline of the open batches; valid only
	// when !earliestStale and nOpen > 0.
	earliest      time.Time
	earliestStale bool

	// Sticky partitioning for keyless records.
	sticky     *Batch // the batch keyless records are filling; nil = pick anew
	lastSticky int32  // the partition the last sticky batch was on, -1 = none
	rng        *rand.Rand

	// Idempotent producer state, used when producerID >= 0.
	producerID    int64
	producerEpoch int16
	sequences     []int32 // next base sequence by partition

	mu   sync.Mutex // guards free
	free []*Batch
}

// ErrRecordTooLarge is returned by Append for a record whose encoded size
// cannot fit in an int32 batch length.
var ErrRecordTooLarge = errors.New("batcher: record too large for a batch")

// NewAccumulator validates cfg and returns an empty accumulator.
func NewAccumulator(cfg Config) (*Accumulator, error) {
	if cfg.Partitions < 1 || cfg.Partitions > MaxPartitions {
		return nil, fmt.Errorf("batcher: partitions %d out of range 1..%d", cfg.Partitions, MaxPartitions)
	}
	if cfg.MaxBatchBytes == 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if cfg.MaxBatchBytes < record.HeaderSize+1 || cfg.MaxBatchBytes > math.MaxInt32/2 {
		return nil, fmt.Errorf("batcher: max batch bytes %d out of range %d..%d", cfg.MaxBatchBytes, record.HeaderSize+1, math.MaxInt32/2)
	}
	if cfg.Codec < record.CodecNone || cfg.Codec > record.CodecZstd {
		return nil, fmt.Errorf("batcher: unknown codec %v", cfg.Codec)
	}
	linger := cfg.Linger
	switch {
	case linger == 0:
		linger = DefaultLinger
	case linger < 0:
		linger = 0
	}
	return &Accumulator{
		cfg:        cfg,
		linger:     linger,
		open:       make([]*Batch, cfg.Partitions),
		lastSticky: -1,
		rng:        rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		producerID: -1,
	}, nil
}

// SetProducer makes every batch encoded from now on idempotent: producer id
// and epoch from InitProducerID, and per-partition base sequences starting
// at 0 and advancing by each batch's record count (wrapping at MaxInt32 as
// Kafka's do). A negative id turns idempotence off again.
func (a *Accumulator) SetProducer(id int64, epoch int16) {
	a.producerID, a.producerEpoch = id, epoch
	if id >= 0 && a.sequences == nil {
		a.sequences = make([]int32, a.cfg.Partitions)
	}
	clear(a.sequences)
}

// Partitions is the partition count the accumulator was built for.
func (a *Accumulator) Partitions() int32 { return a.cfg.Partitions }

// Append adds one record with the caller's tag and returns the partition it
// went to. now is the current time (it opens batches, which start their
// linger); timestampMs is the record's CreateTime. A nil key is a keyless
// record (sticky partitioner); a nil value is a null value. key and value
// are copied; the caller may reuse them when Append returns.
func (a *Accumulator) Append(now time.Time, timestampMs int64, key, value []byte, tag int64) (int32, error) {
	need := recordOverheadBound + len(key) + len(value)
	if need > math.MaxInt32/2 {
		return -1, ErrRecordTooLarge
	}
	var p int32
	if key != nil {
		p = partitioner.KeyPartition(key, a.cfg.Partitions)
	} else {
		p = a.stickyPartition(need)
	}
	b := a.open[p]
	if b != nil && !a.fits(b, need) {
		a.closePartition(p)
		b = nil
	}
	if b == nil {
		b = a.openBatch(p, now, timestampMs)
	}
	before := b.builder.Size()
	b.builder.Add(timestampMs, key, value, nil)
	b.Tags = append(b.Tags, tag)
	b.Records++
	added := b.builder.Size() - before
	a.buffered += added
	if key == nil {
		a.sticky = b
	}
	if b.builder.Size()+added > a.cfg.MaxBatchBytes {
		// Full: a record like this one would not fit any more.
		a.closePartition(p)
	}
	return p, nil
}

// stickyPartition is the partition for a keyless record needing need bytes.
func (a *Accumulator) stickyPartition(need int) int32 {
	if s := a.sticky; s != nil {
		if a.fits(s, need) {
			return s.Partition
		}
		a.closePartition(s.Partition) // clears a.sticky, sets lastSticky
	}
	n := a.cfg.Partitions
	if n == 1 {
		return 0
	}
	if a.lastSticky < 0 {
		return int32(a.rng.IntN(int(n)))
	}
	p := int32(a.rng.IntN(int(n - 1)))
	if p >= a.lastSticky {
		p++
	}
	return p
}

func (a *Accumulator) fits(b *Batch, need int) bool {
	return b.Records == 0 || b.builder.Size()+need <= a.cfg.MaxBatchBytes
}

func (a *Accumulator) openBatch(p int32, now time.Time, timestampMs int64) *Batch {
	a.mu.Lock()
	var b *Batch
	if n := len(a.free); n > 0 {
		b = a.free[n-1]
		a.free[n-1] = nil
		a.free = a.free[:n-1]
	}
	a.mu.Unlock()
	if b == nil {
		b = new(Batch)
	}
	b.Partition = p
	b.Opened = now
	b.deadline = now.Add(a.linger)
	b.BaseSequence = -1
	b.builder.Reset(a.cfg.Codec, timestampMs)
	a.open[p] = b
	a.nOpen++
	if a.nOpen == 1 || (!a.earliestStale && b.deadline.Before(a.earliest)) {
		a.earliest = b.deadline
		a.earliestStale = false
	}
	return b
}

// closePartition moves p's open batch to the closed queue.
func (a *Accumulator) closePartition(p int32) {
	b := a.open[p]
	if b == nil {
		return
	}
	a.open[p] = nil
	a.nOpen--
	if b.deadline.Equal(a.earliest) {
		a.earliestStale = true
	}
	if b == a.sticky {
		a.sticky = nil
		a.lastSticky = p
	}
	a.closed = append(a.closed, b)
}

// Deadline is the earliest time at which Drain will return a batch: the zero
// time when a closed batch is waiting already, otherwise the first linger
// expiry of the open batches. ok is false when nothing is buffered.
func (a *Accumulator) Deadline() (t time.Time, ok bool) {
	if len(a.closed) > 0 {
		return time.Time{}, true
	}
	if a.nOpen == 0 {
		return time.Time{}, false
	}
	if a.earliestStale {
		first := true
		for _, b := range a.open {
			if b != nil && (first || b.deadline.Before(a.earliest)) {
				a.earliest, first = b.deadline, false
			}
		}
		a.earliestStale = false
	}
	return a.earliest, true
}

// Ready reports whether Drain(now) would return at least one batch.
func (a *Accumulator) Ready(now time.Time) bool {
	t, ok := a.Deadline()
	return ok && !now.Before(t)
}

// Flush closes every open batch, whatever its linger, so the next Drain
// returns everything buffered.
func (a *Accumulator) Flush() {
	if a.nOpen == 0 {
		return
	}
	for p := range a.open {
		a.closePartition(int32(p))
	}
}

// Drain closes the open batches whose linger has expired at now, encodes
// every closed batch and appends them to dst in the order they closed
// (batches of one partition always come out in append order). The caller
// owns the returned batches until it Releases them.
//
// If encoding fails (only a compressor error can make it), the failed
// batch and every batch after it stay queued and the error is returned
// with the batches encoded so far.
func (a *Accumulator) Drain(now time.Time, dst []*Batch) ([]*Batch, error) {
	if a.nOpen > 0 {
		if t, _ := a.Deadline(); !now.Before(t) {
			for p, b := range a.open {
				if b != nil && !now.Before(b.deadline) {
					a.closePartition(int32(p))
				}
			}
		}
	}
	done := 0
	var err error
	for _, b := range a.closed {
		if err = a.encode(b); err != nil {
			break
		}
		a.buffered -= b.builder.Size() - record.HeaderSize
		dst = append(dst, b)
		done++
	}
	n := copy(a.closed, a.closed[done:])
	clear(a.closed[n:])
	a.closed = a.closed[:n]
	return dst, err
}

func (a *Accumulator) encode(b *Batch) error {
	if a.producerID >= 0 {
		seq := a.sequences[b.Partition]
		b.BaseSequence = seq
		b.builder.SetProducer(a.producerID, a.producerEpoch, seq)
		if next := int64(seq) + int64(b.Records); next > math.MaxInt32 {
			a.sequences[b.Partition] = int32(next - math.MaxInt32 - 1)
		} else {
			a.sequences[b.Partition] = int32(next)
		}
	}
	var err error
	b.buf, err = b.builder.AppendTo(b.buf[:0])
	if err != nil {
		return fmt.Errorf("batcher: encoding a batch for partition %d: %w", b.Partition, err)
	}
	b.Bytes = b.buf
	return nil
}

// Buffered is the uncompressed size of the records appended but not yet
// drained: a bound for the caller's memory limit.
func (a *Accumulator) Buffered() int { return a.buffered }

// Release returns a drained batch for reuse. Safe from any goroutine.
func (a *Accumulator) Release(b *Batch) {
	b.Records = 0
	b.Bytes = nil
	b.Tags = b.Tags[:0]
	b.Partition = -1
	a.mu.Lock()
	a.free = append(a.free, b)
	a.mu.Unlock()
}
