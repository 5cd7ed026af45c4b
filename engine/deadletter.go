package engine

// Dead-letter topics (KIP-1191) for the embedded API and consumer groups,
// what `strata dlq move|redrive` (cmd/strata/dlq.go) does over the network:
// consumer groups commit offsets, not per-record acknowledgements, so
// they have no dead-letter path of their own (share groups on a broker do:
// broker/sharehost/dlq.go).
//
// MoveToDeadLetter copies the records [from, to) of one partition to a
// dead-letter topic, read_committed: control batches and the batches of
// aborted transactions (the partition's aborted-transaction index,
// txnindex.go) are left out, and to must not pass the last stable offset.
// Each dead letter goes to the source partition modulo the dead-letter
// topic's partitions, in order, with the record's key, value and headers
// (less any __dlq.errors.* ones) and the context headers the broker's
// share groups write, package share's names:
//
//	__dlq.errors.topic      the source topic
//	__dlq.errors.partition  the source partition
//	__dlq.errors.offset     the source offset
//	__dlq.errors.group      DeadLetterOptions.Group (only when set)
//	__dlq.errors.message    DeadLetterOptions.Reason (default "moved")
//
// and the engine's time as its timestamp. With a group, the group's
// committed offset (Engine.Committed) is set to to afterwards when it lies
// in [from, to), so the group resumes after what was moved.
//
// RedriveDeadLetters reads dead letters back (read_committed) and appends
// each one's key, value and headers without the __dlq.errors.* ones to a
// topic: to the partition in __dlq.errors.partition when the topic has it,
// else by key (Kafka's murmur2) or round robin for a null key. A dead
// letter with a null key and value (a share group's, written without
// errors.deadletterqueue.copy.record.enable) has no record: it is skipped
// and counted.
//
// The dead-letter topic is checked as `strata dlq move` and the broker's
// share groups check it: it exists, has errors.deadletterqueue.group.enable
// =true, its name does not start with "__" and starts with
// share.DefaultDeadLetterTopicPrefix ("dlq."; the engine has no
// errors.deadletterqueue.topic.name.prefix of its own).
//
// Both read one chunk at a time (at most consumeReadBytes, or one larger
// batch) into one reused buffer, and append batches of at most
// deadLetterBatchBytes in all (or one larger record): the pending batches
// are appended, and waited for until durable, before more records are
// added. Memory does not grow with the range, and no record is allocated
// on its own. A call stopped by an error returns the records it had
// written (durable) with the error; they stay written. Running a call
// again writes its records again.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/stratalog/strata/partitioner"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/share"
)

// ErrGroupNotEmpty: the group's committed offsets cannot be changed while
// it has members (NON_EMPTY_GROUP (68)).
var ErrGroupNotEmpty = errors.New("engine: group has members")

// DefaultDeadLetterReason is the __dlq.errors.message of records
// MoveToDeadLetter moves without a DeadLetterOptions.Reason.
const DefaultDeadLetterReason = "moved"

// deadLetterBatchBytes bounds the batches the dead-letter writer appends
// (and so its memory), below the topic's max.message.bytes.
const deadLetterBatchBytes = 1 << 20

// DeadLetterOptions configure MoveToDeadLetter.
type DeadLetterOptions struct {
	// Group, when set, is named in each dead letter's __dlq.errors.group
	// header, and its committed offset for the source partition is set to
	// the end of the range if it lies inside it. The group must have no
	// embedded members (ErrGroupNotEmpty) and must not be a share group.
	Group string
	// Reason is the __dlq.errors.message header ("": DefaultDeadLetterReason).
	Reason string
}

// DeadLetterResult is what MoveToDeadLetter did.
type DeadLetterResult struct {
	Topic     string // the dead-letter topic
	Partition int32  // its partition: the source partition modulo its partitions
	Moved     int    // dead letters written (durable)
	// FirstOffset and LastOffset are the dead-letter topic's offsets of
	// the first and last dead letter written (-1 when none).
	FirstOffset, LastOffset int64
	// Committed is the group's committed offset on the source partition
	// before the move (-1: no group, or none committed).
	Committed int64
	// CommittedMoved: Committed was in [from, to) and is now to.
	CommittedMoved bool
}

// RedriveOptions configure RedriveDeadLetters; the zero value re-drives
// every committed dead letter of every partition.
type RedriveOptions struct {
	// Partitions are the dead-letter topic's partitions to read (nil:
	// every one).
	Partitions []int32
	// From is the first offset to read in each partition (0: its log
	// start). A From above 0 but below a partition's log start is
	// refused (ErrOffsetOutOfRange).
	From int64
	// To is the offset to stop before in each partition (0: its last
	// stable offset, which also caps a larger To).
	To int64
	// SourceTopic, when set, keeps only the dead letters whose
	// __dlq.errors.topic is SourceTopic (a dead-letter topic shared by
	// several topics).
	SourceTopic string
}

// RedriveResult is what RedriveDeadLetters did.
type RedriveResult struct {
	Redriven int // records appended to the target (durable)
	// SkippedNoRecord counts dead letters with a null key and value: no
	// record to re-drive.
	SkippedNoRecord int
	// SkippedOtherTopic counts dead letters of another source topic than
	// RedriveOptions.SourceTopic.
	SkippedOtherTopic int
	// Partitions are the dead-letter partitions read, in order (a
	// partition is listed once it has been read to its end).
	Partitions []RedrivenPartition
}

// RedrivenPartition is one dead-letter partition RedriveDeadLetters read:
// the offsets [From, To) and how many of its records it re-drove.
type RedrivenPartition struct {
	Partition int32
	From, To  int64
	Redriven  int
}

// MoveToDeadLetter copies the committed records [from, to) of src to the
// dead-letter topic dlq ("": "dlq." then src's topic) with the context
// headers (see deadletter.go's file comment), each append durable, and
// then, with opts.Group, sets the group's committed offset on src to to if
// it lies in [from, to). The source records stay where they are. Nothing is
// written when the dead-letter topic is refused (ErrUnknownTopic,
// ErrInvalidConfig), the range is outside [log start, last stable offset]
// (ErrOffsetOutOfRange) or the group has members (ErrGroupNotEmpty).
func (e *Engine) MoveToDeadLetter(src TopicPartition, from, to int64, dlq string, opts DeadLetterOptions) (DeadLetterResult, error) {
	res := DeadLetterResult{Topic: dlq, Partition: -1, FirstOffset: -1, LastOffset: -1, Committed: -1}
	if from < 0 || to <= from {
		return res, fmt.Errorf("%w: dead-letter range [%d, %d) (to must be above from)", ErrInvalidConfig, from, to)
	}
	if len(opts.Group) > 32767 {
		return res, fmt.Errorf("%w: group id of %d bytes", ErrInvalidConfig, len(opts.Group))
	}
	st := e.Topic(src.Topic)
	if st == nil || st.Deleted() {
		return res, fmt.Errorf("%w: %s", ErrUnknownTopic, src.Topic)
	}
	sl, err := st.partition(src.Partition)
	if err != nil {
		return res, err
	}
	if dlq == "" {
		dlq = share.DefaultDeadLetterTopicPrefix + src.Topic
		res.Topic = dlq
	}
	if dlq == src.Topic {
		return res, fmt.Errorf("%w: the dead-letter topic %s is the source topic", ErrInvalidConfig, dlq)
	}
	dt, err := e.deadLetterTopic(dlq)
	if err != nil {
		return res, err
	}
	res.Partition = src.Partition % dt.Partitions()
	dl, err := dt.partition(res.Partition)
	if err != nil {
		return res, err
	}
	if start := sl.LogStartOffset(); from < start {
		return res, fmt.Errorf("%w: from %d is below %s's log start offset %d", ErrOffsetOutOfRange, from, sl, start)
	}
	if end := sl.LastStableOffset(); to > end {
		return res, fmt.Errorf("%w: to %d is past %s's end %d (its last stable offset)", ErrOffsetOutOfRange, to, sl, end)
	}
	if opts.Group != "" {
		if _, err := e.deadLetterGroup(opts.Group); err != nil {
			return res, err
		}
	}
	reason := opts.Reason
	if reason == "" {
		reason = DefaultDeadLetterReason
	}

	// The context headers' values, but the offset's, are the same for
	// every record.
	var (
		topicV  = []byte(src.Topic)
		partV   = strconv.AppendInt(nil, int64(src.Partition), 10)
		groupV  = []byte(opts.Group)
		reasonV = []byte(reason)
		offV    []byte
		hdrs    []record.RecordHeader
	)
	w := newLetterWriter(e, dt)
	defer w.close()
	rd := committedReader{l: sl}
	err = rd.each(from, to, func(off int64, r *record.Record) error {
		hdrs = hdrs[:0]
		for _, h := range r.Headers {
			if !strings.HasPrefix(h.Key, share.DeadLetterHeaderPrefix) {
				hdrs = append(hdrs, h)
			}
		}
		offV = strconv.AppendInt(offV[:0], off, 10)
		hdrs = append(hdrs,
			record.RecordHeader{Key: share.DeadLetterHeaderTopic, Value: topicV},
			record.RecordHeader{Key: share.DeadLetterHeaderPartition, Value: partV},
			record.RecordHeader{Key: share.DeadLetterHeaderOffset, Value: offV})
		if opts.Group != "" {
			hdrs = append(hdrs, record.RecordHeader{Key: share.DeadLetterHeaderGroup, Value: groupV})
		}
		hdrs = append(hdrs, record.RecordHeader{Key: share.DeadLetterHeaderMessage, Value: reasonV})
		n, err := w.add(res.Partition, dl, r.Key, r.Value, hdrs)
		res.Moved += n
		return err
	})
	if err == nil {
		var n int
		n, err = w.flush()
		res.Moved += n
	}
	res.FirstOffset, res.LastOffset = w.first, w.last
	if err != nil {
		return res, fmt.Errorf("engine: moving %s [%d, %d) to %s (%d records were moved before this): %w", sl, from, to, dlq, res.Moved, err)
	}
	if opts.Group == "" {
		return res, nil
	}
	if err := e.skipDeadLettered(opts.Group, src, from, to, &res); err != nil {
		return res, fmt.Errorf("engine: moved %d records of %s to %s, but moving group %s's committed offset: %w", res.Moved, sl, dlq, opts.Group, err)
	}
	return res, nil
}

// skipDeadLettered sets group's committed offset on src to to if it lies in
// [from, to), under the embedded group's lock if there is one (its members'
// commits hold it), after checking again that it has no members.
func (e *Engine) skipDeadLettered(group string, src TopicPartition, from, to int64, res *DeadLetterResult) error {
	g, err := e.deadLetterGroup(group)
	if err != nil {
		return err
	}
	if g != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
		if n := len(g.members); n > 0 {
			return fmt.Errorf("%w: group %s has %d members", ErrGroupNotEmpty, group, n)
		}
	}
	committed, err := e.Committed(group, src.Topic, src.Partition)
	if err != nil {
		return err
	}
	res.Committed = committed
	if committed < from || committed >= to {
		return nil
	}
	if err := e.commitOffsets(group, map[TopicPartition]int64{src: to}); err != nil {
		return err
	}
	res.CommittedMoved = true
	return nil
}

// deadLetterGroup returns the embedded consumer group id (nil if there is
// none: the group may still have committed offsets), refusing a share
// group and a consumer group with members.
func (e *Engine) deadLetterGroup(id string) (*ConsumerGroup, error) {
	if _, ok := e.groups.Load(shareGroupKey{id}); ok {
		return nil, fmt.Errorf("%w: group %s is a share group: it has no committed offsets to move", ErrInvalidConfig, id)
	}
	v, ok := e.groups.Load(id)
	if !ok {
		return nil, nil
	}
	g := v.(*ConsumerGroup)
	g.mu.Lock()
	n := len(g.members)
	g.mu.Unlock()
	if n > 0 {
		return nil, fmt.Errorf("%w: group %s has %d members: they must leave first; nothing was moved", ErrGroupNotEmpty, id, n)
	}
	return g, nil
}

// deadLetterTopic returns topic name if it may be a dead-letter topic, with
// cmd/strata's checks in their order.
func (e *Engine) deadLetterTopic(name string) (*Topic, error) {
	if strings.HasPrefix(name, "__") {
		return nil, fmt.Errorf("%w: dead-letter topic %s: a name starting with __ is refused", ErrInvalidConfig, name)
	}
	if prefix := share.DefaultDeadLetterTopicPrefix; !strings.HasPrefix(name, prefix) {
		return nil, fmt.Errorf("%w: dead-letter topic %s does not start with the %s %q", ErrInvalidConfig,
			name, share.BrokerConfigDeadLetterTopicPrefix, prefix)
	}
	t := e.Topic(name)
	if t == nil || t.Deleted() {
		return nil, fmt.Errorf("%w: dead-letter topic %s does not exist (create it with %s=true)", ErrUnknownTopic,
			name, share.TopicConfigDeadLetterEnable)
	}
	if !t.Config().DLQGroupEnable {
		return nil, fmt.Errorf("%w: dead-letter topic %s does not have %s=true", ErrInvalidConfig, name, share.TopicConfigDeadLetterEnable)
	}
	if t.Partitions() == 0 {
		return nil, fmt.Errorf("%w: dead-letter topic %s has no partitions", ErrUnknownTopic, name)
	}
	return t, nil
}

// RedriveDeadLetters appends the committed dead letters of topic dlq (the
// partitions and offsets opts names) to topic target, without their
// __dlq.errors.* headers: to the partition in __dlq.errors.partition when
// target has it, else by key (Kafka's murmur2), or round robin for a null
// key. Each append is durable before the next chunk is read. Dead letters
// with a null key and value are skipped and counted; with
// opts.SourceTopic, so are those of other source topics. The dead letters
// stay in dlq: re-driving the same range again appends them again.
func (e *Engine) RedriveDeadLetters(dlq, target string, opts RedriveOptions) (RedriveResult, error) {
	res := RedriveResult{Partitions: []RedrivenPartition{}}
	if dlq == target {
		return res, fmt.Errorf("%w: the target %s is the dead-letter topic", ErrInvalidConfig, target)
	}
	if opts.From < 0 || opts.To < 0 || (opts.From > 0 && opts.To > 0 && opts.To <= opts.From) {
		return res, fmt.Errorf("%w: re-drive offsets from %d to %d", ErrInvalidConfig, opts.From, opts.To)
	}
	dt := e.Topic(dlq)
	if dt == nil || dt.Deleted() {
		return res, fmt.Errorf("%w: dead-letter topic %s", ErrUnknownTopic, dlq)
	}
	tt := e.Topic(target)
	if tt == nil || tt.Deleted() || tt.Partitions() == 0 {
		return res, fmt.Errorf("%w: %s", ErrUnknownTopic, target)
	}
	nTarget := tt.Partitions()
	parts := opts.Partitions
	if parts == nil {
		parts = make([]int32, dt.Partitions())
		for i := range parts {
			parts[i] = int32(i)
		}
	}
	// Every partition is checked before anything is written.
	logs := make([]*Log, len(parts))
	for i, p := range parts {
		l, err := dt.partition(p)
		if err != nil {
			return res, err
		}
		if start := l.LogStartOffset(); opts.From > 0 && opts.From < start {
			return res, fmt.Errorf("%w: from %d is below %s's log start offset %d", ErrOffsetOutOfRange, opts.From, l, start)
		}
		logs[i] = l
	}
	filter := opts.SourceTopic
	w := newLetterWriter(e, tt)
	defer w.close()
	var (
		rr   uint32 // round robin for null keys without a partition header
		hdrs []record.RecordHeader
	)
	for i, l := range logs {
		from, to := l.LogStartOffset(), l.LastStableOffset()
		if opts.From > 0 {
			from = opts.From
		}
		if opts.To > 0 {
			to = min(opts.To, to)
		}
		po := RedrivenPartition{Partition: parts[i], From: from, To: max(from, to)}
		rd := committedReader{l: l}
		err := rd.each(from, to, func(_ int64, r *record.Record) error {
			srcPart, srcMatch := int32(-1), filter == ""
			hdrs = hdrs[:0]
			for _, h := range r.Headers {
				switch {
				case h.Key == share.DeadLetterHeaderTopic:
					srcMatch = srcMatch || string(h.Value) == filter
				case h.Key == share.DeadLetterHeaderPartition:
					if p, ok := parsePartition(h.Value); ok {
						srcPart = p
					}
				case strings.HasPrefix(h.Key, share.DeadLetterHeaderPrefix):
				default:
					hdrs = append(hdrs, h)
				}
			}
			if !srcMatch {
				res.SkippedOtherTopic++
				return nil
			}
			if r.Key == nil && r.Value == nil {
				res.SkippedNoRecord++
				return nil
			}
			p := srcPart
			switch {
			case srcPart >= 0 && srcPart < nTarget:
			case r.Key != nil:
				p = partitioner.KeyPartition(r.Key, nTarget)
			default:
				p = int32(rr % uint32(nTarget))
				rr++
			}
			tl, err := tt.partition(p)
			if err != nil {
				return err
			}
			n, err := w.add(p, tl, r.Key, r.Value, hdrs)
			po.Redriven += n
			res.Redriven += n
			return err
		})
		if err == nil {
			var n int
			n, err = w.flush()
			po.Redriven += n
			res.Redriven += n
		}
		if err != nil {
			return res, fmt.Errorf("engine: re-driving %s to %s (%d records were re-driven before this): %w", l, target, res.Redriven, err)
		}
		res.Partitions = append(res.Partitions, po)
	}
	return res, nil
}

// parsePartition parses a decimal partition number (a
// __dlq.errors.partition value) without allocating.
func parsePartition(b []byte) (int32, bool) {
	if len(b) == 0 || len(b) > 10 {
		return -1, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > 1<<31-1 {
		return -1, false
	}
	return int32(n), true
}

// committedReader reads one log's committed records, a chunk at a time
// into one reused buffer.
type committedReader struct {
	l       *Log
	buf     []byte
	aborted []abortedTxn
}

// each calls fn with each committed record of the offsets [from, to), in
// order: control batches and the batches of aborted transactions are left
// out. fn's record and its bytes are valid only during the call. to must
// not pass the last stable offset (a transaction still open there would
// be read as committed).
func (r *committedReader) each(from, to int64, fn func(offset int64, rec *record.Record) error) error {
	l := r.l
	visit := func(h *record.Header, rec *record.Record) error {
		off := h.BaseOffset + int64(rec.OffsetDelta)
		if off < from || off >= to {
			return nil
		}
		return fn(off, rec)
	}
	for from < to {
		data, err := r.read(from)
		if err != nil || len(data) == 0 {
			return err
		}
		// The aborted transactions that overlap the chunk's batches.
		lo, hi := int64(-1), int64(-1)
		for rest := data; len(rest) > 0; {
			_, next, h, err := record.Next(rest)
			if err != nil {
				return fmt.Errorf("%s at %d: %w", l, from, err)
			}
			if lo < 0 {
				lo = h.BaseOffset
			}
			hi, rest = h.LastOffset(), next
		}
		r.aborted = l.abortedRange(r.aborted[:0], lo, hi+1)
		next := from
		for rest := data; len(rest) > 0 && next < to; {
			batch, tail, h, _ := record.Next(rest) // parsed above
			rest = tail
			if h.LastOffset() < from {
				continue
			}
			if h.BaseOffset >= to {
				break
			}
			next = h.LastOffset() + 1
			if h.Control() || (h.Transactional() && abortedBatch(r.aborted, &h)) {
				continue
			}
			if err := record.Iterate(batch, visit); err != nil {
				return fmt.Errorf("%s at %d: %w", l, h.BaseOffset, err)
			}
		}
		if next <= from {
			return nil // nothing past from in the chunk: the end of the log
		}
		from = next
	}
	return nil
}

// read returns the batches of one Read at from (at most consumeReadBytes,
// or one larger batch), copied into r.buf; none at the high watermark.
func (r *committedReader) read(from int64) ([]byte, error) {
	res, err := r.l.Read(from, consumeReadBytes, true)
	if err != nil {
		return nil, err
	}
	defer res.Release()
	if len(res.Chunks) == 0 {
		return nil, nil
	}
	c := res.Chunks[0]
	if int64(cap(r.buf)) < c.Len {
		r.buf = make([]byte, c.Len)
	}
	buf := r.buf[:c.Len]
	if c.File != nil {
		_, err = c.File.ReadAt(buf, c.Pos)
	} else { // a segment on another file system (Options.fs): no *os.File
		_, err = res.seg.seg.ReadAt(buf, c.Pos)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: reading %s: %w", r.l, err)
	}
	return buf, nil
}

// abortedBatch reports whether h, a transactional data batch, belongs to
// one of the aborted transactions: its producer's, between the
// transaction's first offset and its ABORT marker.
func abortedBatch(aborted []abortedTxn, h *record.Header) bool {
	for _, a := range aborted {
		if a.pid == h.ProducerID && a.firstOffset <= h.BaseOffset && h.BaseOffset <= a.lastOffset {
			return true
		}
	}
	return false
}

// letterWriter appends records to a topic's partitions in batches of at
// most deadLetterBatchBytes each (a larger record alone), durable before
// flush returns.
type letterWriter struct {
	e     *Engine
	t     *Topic
	bs    map[int32]*letterBatch // by partition: at most one per partition written to
	bytes int                    // pending in every batch
	buf   []byte                 // the encoded batch, reused
	wait  pending
	ts    int64 // the timestamp of the pending records: when the first was added
	// first and last are the offsets of the first and last record
	// written (-1 before any).
	first, last int64
}

type letterBatch struct {
	l *Log
	b *record.Builder
}

func newLetterWriter(e *Engine, t *Topic) *letterWriter {
	return &letterWriter{e: e, t: t, bs: map[int32]*letterBatch{}, first: -1, last: -1}
}

// add adds one record for partition p (log l), flushing every pending
// batch first when it would not fit: it returns how many records such a
// flush wrote.
func (w *letterWriter) add(p int32, l *Log, key, value []byte, hdrs []record.RecordHeader) (int, error) {
	size := 40 + len(key) + len(value)
	for _, h := range hdrs {
		size += 10 + len(h.Key) + len(h.Value)
	}
	lb := w.bs[p]
	flushed := 0
	if w.bytes > 0 && (w.bytes+size > deadLetterBatchBytes ||
		(lb != nil && lb.b.Len() > 0 && lb.b.Size()+size > int(l.config().MaxMessageBytes))) {
		n, err := w.flush()
		if err != nil {
			return n, err
		}
		flushed = n
	}
	if w.bytes == 0 {
		w.ts = w.e.nowMs() // the timestamp of the next batches' records
	}
	if lb == nil {
		lb = &letterBatch{l: l, b: builderPool.Get().(*record.Builder)}
		lb.b.Reset(record.CodecNone, w.ts)
		w.bs[p] = lb
	} else if lb.b.Len() == 0 {
		lb.b.Reset(record.CodecNone, w.ts)
	}
	lb.b.Add(w.ts, key, value, hdrs)
	w.bytes += size
	return flushed, nil
}

// flush appends every pending batch, waits until they are durable and
// returns how many records they held.
func (w *letterWriter) flush() (int, error) {
	if w.bytes == 0 {
		return 0, nil
	}
	n := 0
	w.wait = w.wait[:0]
	var err error
	for _, lb := range w.bs {
		if lb.b.Len() == 0 {
			continue
		}
		if w.buf, err = lb.b.AppendTo(w.buf[:0]); err != nil {
			err = fmt.Errorf("engine: encoding dead letters: %w", err)
			break
		}
		info, aerr := lb.l.Append(w.buf, lb.l.LeaderEpoch())
		if aerr != nil {
			err = fmt.Errorf("appending to %s: %w", lb.l, aerr)
			break
		}
		w.wait = append(w.wait, struct {
			l   *Log
			off int64
		}{lb.l, info.LastOffset})
		if w.first < 0 {
			w.first = info.BaseOffset
		}
		w.last = info.LastOffset
		n += lb.b.Len()
		lb.b.Reset(record.CodecNone, w.ts)
	}
	if werr := w.wait.wait(); werr != nil {
		return 0, errors.Join(err, werr) // what was appended is not known to be durable
	}
	if err != nil {
		return n, err // the batches appended before the failure are durable
	}
	w.bytes = 0
	return n, nil
}

// close gives the builders back.
func (w *letterWriter) close() {
	for p, lb := range w.bs {
		builderPool.Put(lb.b)
		delete(w.bs, p)
	}
}
