package loadgen

// --verify: every acknowledged record is recorded compactly while the run
// produces, and at the end the topic is read back from its first offsets
// and every acknowledged record is looked for.
//
// Each record's value carries a unique id after the send stamp:
//
//	bytes  0..8   send stamp (keys.go)
//	bytes  8..12  the run's nonce (uint32, big endian): records of other
//	              runs, or of the warm-up, are told apart by it
//	bytes 12..16  the producer's index (uint32)
//	bytes 16..24  the producer's sequence number (uint64), 0, 1, 2, ... in
//	              the order the producer handed its records to the client
//
// While producing, every acknowledgement appends (sequence, offset) to its
// producer's log for its partition, as two zigzag varint deltas from the
// previous entry of that log: a producer's records reach one partition in
// sequence order and land at growing offsets, so an entry is 2-4 bytes.
// The check afterwards keeps two bitmaps per producer over its sequence
// numbers (acknowledged, read), 2 bits a record, and walks the read-back
// records once as they arrive.

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// verifyIDOff and verifyIDBytes place the record id in a value.
	verifyIDOff   = stampBytes
	verifyIDBytes = 16
	// MinVerifyRecordBytes is the smallest value --verify can mark.
	MinVerifyRecordBytes = verifyIDOff + verifyIDBytes
	// DefaultVerifyMaxRecords bounds the records a --verify run may
	// produce (its logs take a few bytes per record).
	DefaultVerifyMaxRecords = 50_000_000
	// verifyExamples bounds the examples of each problem kept for the
	// report.
	verifyExamples = 10
	// verifyStall is how long the read-back waits on a partition that
	// makes no progress while the broker's end offset stays where it is.
	verifyStall = 5 * time.Second
	// VerifyVersion is the version of the report's "verify" object.
	VerifyVersion = 1
)

// putVerifyID writes the record id into value (len >= MinVerifyRecordBytes).
func putVerifyID(value []byte, nonce uint32, producer int, seq uint64) {
	binary.BigEndian.PutUint32(value[verifyIDOff:], nonce)
	binary.BigEndian.PutUint32(value[verifyIDOff+4:], uint32(producer))
	binary.BigEndian.PutUint64(value[verifyIDOff+8:], seq)
}

// readVerifyID reads a record id; ok is false when the value is too short
// or carries another run's nonce.
func readVerifyID(value []byte, nonce uint32) (producer int, seq uint64, ok bool) {
	if len(value) < MinVerifyRecordBytes || binary.BigEndian.Uint32(value[verifyIDOff:]) != nonce {
		return 0, 0, false
	}
	return int(binary.BigEndian.Uint32(value[verifyIDOff+4:])), binary.BigEndian.Uint64(value[verifyIDOff+8:]), true
}

// verifyCount is the most records a run of cfg can produce (lead-in
// included), or -1 when nothing bounds it in advance (closed loop without
// --records).
func verifyCount(cfg *Config) int64 {
	n := int64(-1)
	if cfg.Rate > 0 && cfg.Duration > 0 {
		n = int64(cfg.Rate*(cfg.Duration+stepLead(cfg.Duration)).Seconds()) + int64(cfg.Producers)
	}
	if cfg.Records > 0 && (n < 0 || cfg.Records < n) {
		n = cfg.Records
	}
	return n
}

// ackLog is one producer's acknowledgements, per partition.
type ackLog struct {
	mu    sync.Mutex
	parts map[int32]*partLog
	seqs  uint64 // sequence numbers handed out: ids 0..seqs-1 exist
}

// partLog is one producer's acknowledgements in one partition: zigzag
// varint deltas of (sequence, offset) from the previous entry.
type partLog struct {
	buf     []byte
	n       int64
	lastSeq int64
	lastOff int64
}

func (l *partLog) add(seq uint64, off int64) {
	l.buf = binary.AppendVarint(l.buf, int64(seq)-l.lastSeq)
	l.buf = binary.AppendVarint(l.buf, off-l.lastOff)
	l.lastSeq, l.lastOff = int64(seq), off
	l.n++
}

// each calls fn for every entry in order; false if the log is corrupt.
func (l *partLog) each(fn func(seq uint64, off int64)) bool {
	b := l.buf
	var seq, off int64
	for len(b) > 0 {
		ds, n := binary.Varint(b)
		if n <= 0 {
			return false
		}
		b = b[n:]
		do, n := binary.Varint(b)
		if n <= 0 {
			return false
		}
		b = b[n:]
		seq += ds
		off += do
		fn(uint64(seq), off)
	}
	return true
}

// verifier records one run's acknowledged records: one ackLog per
// producer, each written by its own client's promise.
type verifier struct {
	nonce uint32
	logs  []ackLog
}

func newVerifier(producers int, nonce uint32) *verifier {
	v := &verifier{nonce: nonce, logs: make([]ackLog, producers)}
	for i := range v.logs {
		v.logs[i].parts = map[int32]*partLog{}
	}
	return v
}

// next hands out producer k's next sequence number. Only k's producing
// goroutine calls it.
func (v *verifier) next(k int) uint64 {
	l := &v.logs[k]
	l.mu.Lock()
	s := l.seqs
	l.seqs++
	l.mu.Unlock()
	return s
}

// ack records producer k's record seq acknowledged at (partition, offset).
func (v *verifier) ack(k int, seq uint64, partition int32, offset int64) {
	l := &v.logs[k]
	l.mu.Lock()
	pl := l.parts[partition]
	if pl == nil {
		pl = &partLog{}
		l.parts[partition] = pl
	}
	pl.add(seq, offset)
	l.mu.Unlock()
}

// logBytes is the memory the logs take (their buffers' capacity).
func (v *verifier) logBytes() int64 {
	var n int64
	for i := range v.logs {
		l := &v.logs[i]
		l.mu.Lock()
		for _, pl := range l.parts {
			n += int64(cap(pl.buf))
		}
		l.mu.Unlock()
	}
	return n
}

// bitmap is a fixed-size bit set.
type bitmap []uint64

func newBitmap(n uint64) bitmap    { return make(bitmap, (n+63)/64) }
func (b bitmap) has(i uint64) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitmap) set(i uint64)      { b[i/64] |= 1 << (i % 64) }

// VerifyPartition is one partition's accounting.
type VerifyPartition struct {
	Partition int32 `json:"partition"`
	Acked     int64 `json:"acked"`
	// Read counts this run's records read back, duplicates included.
	Read       int64 `json:"read"`
	Lost       int64 `json:"lost"`
	Duplicated int64 `json:"duplicated"`
	Reordered  int64 `json:"reordered"`
	// UnackedRead counts records read back that were never acknowledged
	// (sent, then failed or timed out: Kafka may still have written them).
	UnackedRead int64 `json:"unacked_read"`
	// EndOffset is where the read-back stopped (the next offset it would
	// have read); LastAckedOffset the highest acknowledged offset (-1:
	// none).
	EndOffset       int64 `json:"end_offset"`
	LastAckedOffset int64 `json:"last_acked_offset"`
}

func (p *VerifyPartition) problems() int64 { return p.Lost + p.Duplicated + p.Reordered }

// VerifyExample is one lost, duplicated or reordered record.
type VerifyExample struct {
	Kind      string `json:"kind"` // lost, duplicated, reordered
	Partition int32  `json:"partition"`
	Producer  int    `json:"producer"`
	Seq       uint64 `json:"seq"`
	// Offset is where it was acknowledged (lost) or read (the others).
	Offset int64 `json:"offset"`
}

// VerifyResult is --verify's finding: the report's "verify" object.
type VerifyResult struct {
	Version int `json:"version"`
	// Verdict is "ok", "failed" (lost, or duplicated or reordered beyond
	// what the producer's settings allow) or "error" (the read-back could
	// not run; Error says why).
	Verdict     string `json:"verdict"`
	Error       string `json:"error,omitempty"`
	Acked       int64  `json:"acked"`
	Read        int64  `json:"read"`
	Lost        int64  `json:"lost"`
	Duplicated  int64  `json:"duplicated"`
	Reordered   int64  `json:"reordered"`
	UnackedRead int64  `json:"unacked_read"`
	// Foreign counts records read back that are not this run's (an
	// existing topic, the warm-up).
	Foreign int64 `json:"foreign"`
	// DuplicatesAllowed and ReorderAllowed say what the producer's
	// settings permit: a producer that is not idempotent may write a
	// retried batch twice, and with more than one request in flight out
	// of order.
	DuplicatesAllowed bool `json:"duplicates_allowed"`
	ReorderAllowed    bool `json:"reorder_allowed"`
	// Incomplete says which partitions the read-back gave up on before
	// their last acknowledged offset ("" when it read everything).
	Incomplete string `json:"incomplete,omitempty"`
	// ReadBackS is how long the read-back took; LogBytes the memory the
	// acknowledgement logs took.
	ReadBackS  float64           `json:"read_back_s"`
	LogBytes   int64             `json:"log_bytes"`
	Partitions []VerifyPartition `json:"partitions"`
	Examples   []VerifyExample   `json:"examples,omitempty"`
}

// Failed reports whether the verdict is not "ok".
func (r *VerifyResult) Failed() bool { return r.Verdict != "ok" }

// Summary is the one-line verdict, also the error a failed run returns.
func (r *VerifyResult) Summary() string {
	if r.Verdict == "error" {
		return "verify: read-back failed: " + r.Error
	}
	return fmt.Sprintf("verify %s: %s acknowledged, %s read back, %s lost, %s duplicated%s, %s reordered%s",
		strings.ToUpper(r.Verdict), commas(float64(r.Acked), 0), commas(float64(r.Read), 0), commas(float64(r.Lost), 0),
		commas(float64(r.Duplicated), 0), allowedNote(r.DuplicatesAllowed), commas(float64(r.Reordered), 0), allowedNote(r.ReorderAllowed))
}

func allowedNote(allowed bool) string {
	if allowed {
		return " (allowed: not idempotent)"
	}
	return ""
}

// check is the accounting of one read-back: built from the verifier's logs
// (the acknowledged bitmaps), fed every record read, finished into a
// VerifyResult.
type check struct {
	v       *verifier
	seqs    []uint64 // sequence numbers handed out, by producer
	acked   []bitmap // by producer, over its sequence numbers
	read    []bitmap
	parts   map[int32]*VerifyPartition
	lastSeq map[int32][]int64 // highest sequence read, by partition and producer (-1: none)
	res     VerifyResult
}

func (v *verifier) newCheck(numPartitions int32, dupAllowed, reorderAllowed bool) *check {
	c := &check{v: v, parts: map[int32]*VerifyPartition{}, lastSeq: map[int32][]int64{}}
	c.res = VerifyResult{Version: VerifyVersion, DuplicatesAllowed: dupAllowed, ReorderAllowed: reorderAllowed, LogBytes: v.logBytes()}
	for p := range numPartitions {
		c.part(p)
	}
	c.seqs = make([]uint64, len(v.logs))
	c.acked = make([]bitmap, len(v.logs))
	c.read = make([]bitmap, len(v.logs))
	for k := range v.logs {
		l := &v.logs[k]
		l.mu.Lock()
		c.seqs[k] = l.seqs
		c.acked[k], c.read[k] = newBitmap(l.seqs), newBitmap(l.seqs)
		for p, pl := range l.parts {
			vp := c.part(p)
			pl.each(func(seq uint64, off int64) {
				if seq < l.seqs {
					c.acked[k].set(seq)
				}
				vp.Acked++
				vp.LastAckedOffset = max(vp.LastAckedOffset, off)
			})
		}
		l.mu.Unlock()
	}
	return c
}

func (c *check) part(p int32) *VerifyPartition {
	vp := c.parts[p]
	if vp == nil {
		vp = &VerifyPartition{Partition: p, LastAckedOffset: -1}
		c.parts[p] = vp
	}
	return vp
}

func (c *check) example(kind string, p int32, k int, seq uint64, off int64) {
	n := 0
	for _, e := range c.res.Examples {
		if e.Kind == kind {
			n++
		}
	}
	if n < verifyExamples {
		c.res.Examples = append(c.res.Examples, VerifyExample{Kind: kind, Partition: p, Producer: k, Seq: seq, Offset: off})
	}
}

// record accounts one record read back from partition p at offset off.
// A partition's records must come in offset order.
func (c *check) record(p int32, off int64, value []byte) {
	vp := c.part(p)
	vp.EndOffset = max(vp.EndOffset, off+1)
	k, seq, ok := readVerifyID(value, c.v.nonce)
	if !ok || k >= len(c.seqs) || seq >= c.seqs[k] {
		c.res.Foreign++
		return
	}
	vp.Read++
	if c.read[k].has(seq) {
		vp.Duplicated++
		c.example("duplicated", p, k, seq, off)
		return
	}
	c.read[k].set(seq)
	if !c.acked[k].has(seq) {
		vp.UnackedRead++
	}
	last := c.lastSeq[p]
	if last == nil {
		last = make([]int64, len(c.read))
		for i := range last {
			last[i] = -1
		}
		c.lastSeq[p] = last
	}
	if int64(seq) < last[k] {
		vp.Reordered++
		c.example("reordered", p, k, seq, off)
		return
	}
	last[k] = int64(seq)
}

// finish looks for every acknowledged record among those read and returns
// the result.
func (c *check) finish() *VerifyResult {
	for k := range c.v.logs {
		l := &c.v.logs[k]
		l.mu.Lock()
		for p, pl := range l.parts {
			vp := c.part(p)
			pl.each(func(seq uint64, off int64) {
				if seq >= c.seqs[k] || !c.read[k].has(seq) {
					vp.Lost++
					c.example("lost", p, k, seq, off)
				}
			})
		}
		l.mu.Unlock()
	}
	r := &c.res
	r.Partitions = r.Partitions[:0]
	for _, vp := range c.parts {
		r.Partitions = append(r.Partitions, *vp)
		r.Acked += vp.Acked
		r.Read += vp.Read
		r.Lost += vp.Lost
		r.Duplicated += vp.Duplicated
		r.Reordered += vp.Reordered
		r.UnackedRead += vp.UnackedRead
	}
	slices.SortFunc(r.Partitions, func(a, b VerifyPartition) int { return int(a.Partition) - int(b.Partition) })
	slices.SortStableFunc(r.Examples, func(a, b VerifyExample) int { return strings.Compare(a.Kind, b.Kind) })
	r.Verdict = "ok"
	if r.Lost > 0 || (r.Duplicated > 0 && !r.DuplicatesAllowed) || (r.Reordered > 0 && !r.ReorderAllowed) {
		r.Verdict = "failed"
	}
	return r
}

// readBack reads the topic from its first offsets until every partition
// has been read past its last acknowledged offset and up to the end offset
// the brokers list, or the partition makes no progress for verifyStall
// while its end stays put, or timeout passes, and accounts every record.
func readBack(ctx context.Context, now func() time.Time, seeds []string, sec []kgo.Opt, admin *kgo.Client, topic string, partitions int32, c *check, timeout time.Duration, logw io.Writer) error {
	start := now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(loadgenClientID + "-verify"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(200 * time.Millisecond)}, sec...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(admin)
	type progress struct {
		end    int64 // the brokers' end offset, last listed
		since  time.Time
		seen   int64 // EndOffset when since was set
		gaveUp bool
		listed bool
	}
	prog := make([]progress, partitions)
	for p := range prog {
		prog[p].since = now()
	}
	relist := func() {
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		defer lcancel()
		ends, err := adm.ListEndOffsets(lctx, topic)
		if err != nil {
			return
		}
		ends.Each(func(lo kadm.ListedOffset) {
			if lo.Topic != topic || lo.Err != nil || lo.Partition < 0 || lo.Partition >= partitions {
				return
			}
			pr := &prog[lo.Partition]
			if !pr.listed || lo.Offset != pr.end {
				pr.since = now()
			}
			pr.end, pr.listed = lo.Offset, true
		})
	}
	done := func(now time.Time) bool {
		all := true
		for p := range partitions {
			pr, vp := &prog[p], c.part(p)
			if pr.gaveUp {
				continue
			}
			if vp.EndOffset != pr.seen {
				pr.seen, pr.since = vp.EndOffset, now
			}
			if pr.listed && vp.EndOffset >= pr.end && vp.EndOffset > vp.LastAckedOffset {
				continue
			}
			if pr.listed && vp.EndOffset >= pr.end && now.Sub(pr.since) >= verifyStall {
				pr.gaveUp = true // nothing more to read, the end stays put
				continue
			}
			all = false
		}
		return all
	}
	relist()
	lastList := now()
	for !done(now()) {
		if ctx.Err() != nil {
			break
		}
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic == topic {
				c.record(r.Partition, r.Offset, r.Value)
			}
		})
		if now().Sub(lastList) >= time.Second {
			relist()
			lastList = now()
		}
	}
	var short []string
	for p := range partitions {
		vp := c.part(p)
		if vp.EndOffset <= vp.LastAckedOffset {
			short = append(short, fmt.Sprintf("partition %d read to offset %d, last acknowledged %d (brokers' end %d)", p, vp.EndOffset, vp.LastAckedOffset, prog[p].end))
		}
	}
	if len(short) > 0 {
		why := "no progress"
		if ctx.Err() != nil {
			why = fmt.Sprintf("read-back timed out after %v", timeout)
		}
		c.res.Incomplete = fmt.Sprintf("%s: %s", why, strings.Join(short[:min(len(short), 5)], "; "))
		if len(short) > 5 {
			c.res.Incomplete += fmt.Sprintf("; and %d more", len(short)-5)
		}
	}
	c.res.ReadBackS = now().Sub(start).Seconds()
	fmt.Fprintf(logw, "verify: read back %s records in %.1f s\n", commas(float64(c.totalRead()), 0), c.res.ReadBackS)
	return nil
}

func (c *check) totalRead() int64 {
	n := c.res.Foreign
	for _, vp := range c.parts {
		n += vp.Read
	}
	return n
}

// verifyTableRows bounds the partitions the table lists one by one; past
// it, only partitions with a problem are listed (the JSON has them all).
const verifyTableRows = 32

// writeVerify prints the verify section of the table.
func writeVerify(b *strings.Builder, r *VerifyResult) {
	fmt.Fprintf(b, "\nverify: every acknowledged record looked for in the topic, read back from its first offsets\n")
	if r.Verdict == "error" {
		fmt.Fprintf(b, "  read-back failed: %s\n", r.Error)
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "partition\tacked\tread back\tlost\tduplicated\treordered\tunacked read\t")
	listed, hidden := 0, 0
	for _, p := range r.Partitions {
		if len(r.Partitions) > verifyTableRows && p.problems() == 0 {
			hidden++
			continue
		}
		listed++
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.Partition, commas(float64(p.Acked), 0), commas(float64(p.Read), 0),
			commas(float64(p.Lost), 0), commas(float64(p.Duplicated), 0), commas(float64(p.Reordered), 0), commas(float64(p.UnackedRead), 0))
	}
	fmt.Fprintf(tw, "total\t%s\t%s\t%s\t%s\t%s\t%s\t\n", commas(float64(r.Acked), 0), commas(float64(r.Read), 0),
		commas(float64(r.Lost), 0), commas(float64(r.Duplicated), 0), commas(float64(r.Reordered), 0), commas(float64(r.UnackedRead), 0))
	tw.Flush()
	if hidden > 0 {
		fmt.Fprintf(b, "  (%d partitions without a problem not listed; the JSON has every partition)\n", hidden)
	}
	if r.Foreign > 0 {
		fmt.Fprintf(b, "  %s records of other runs (or the warm-up) read and ignored\n", commas(float64(r.Foreign), 0))
	}
	if r.Incomplete != "" {
		fmt.Fprintf(b, "  READ-BACK INCOMPLETE: %s\n", r.Incomplete)
	}
	for _, e := range r.Examples {
		fmt.Fprintf(b, "  %s: partition %d producer %d seq %d offset %d\n", e.Kind, e.Partition, e.Producer, e.Seq, e.Offset)
	}
	fmt.Fprintf(b, "  %s (read back in %.1f s; acknowledgement logs %s, %.1f B/record)\n", r.Summary(), r.ReadBackS,
		logSize(r.LogBytes), float64(r.LogBytes)/float64(max(r.Acked, 1)))
}

// logSize is a log's size in KiB or MiB.
func logSize(b int64) string {
	if b < 1<<20 {
		return kib(float64(b))
	}
	return mib(b)
}
