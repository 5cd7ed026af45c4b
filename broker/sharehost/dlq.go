package sharehost

// Dead-letter topics for share groups (KIP-1191, issue 24).
//
// A group with errors.deadletterqueue.topic.name set has its
// share-partitions run with share.Config.DeadLetter: a record a member
// REJECTs, or whose delivery count reaches group.share.delivery.count.limit,
// goes to ARCHIVING (persisted in __share_group_state like every state)
// instead of ARCHIVED. This writer, one goroutine of the share state
// (shareDLQLoop, stopped by Close), then appends one record per
// ARCHIVING offset to the dead-letter topic's partition (source partition
// modulo the topic's partitions, as Kafka routes them) with Kafka's context
// headers:
//
//	__dlq.errors.topic           the source topic
//	__dlq.errors.partition       the source partition
//	__dlq.errors.offset          the source offset
//	__dlq.errors.group           the share group
//	__dlq.errors.delivery.count  the record's delivery count
//	__dlq.errors.message         "Offset rejected by client." or
//	                             "Offset delivery count exceeded the threshold."
//
// and the time it was dead-lettered as the record's timestamp; its key and
// value are the source record's with errors.deadletterqueue.copy.record.enable
// (the group config, default false), null otherwise. Only once that append
// is Durable does Partition.DeadLettered archive the records (and that
// state is persisted after the ARCHIVING one): a record is never ARCHIVED
// without its dead letter.
//
// Exactly once: a share-partition restored with ARCHIVING records (a
// restarted broker restores those at once, restoreArchiving; a new
// partition leader when it loads them, load.go) may have had their dead
// letters written before the crash or failover, between the two persists.
// Part.dlqFind is then set (and after any failed write: a produce that
// timed out may have landed), and the next job is a search, not a write
// (findDeadLetters): the dead-letter partition is read from the first
// record stamped at or after the share-partition's ArchivingSince (persisted
// with the state: share.State.ArchivingSinceMs) less dlqScanSlack
// (ListOffsets by timestamp: Log.OffsetForTimestamp here, at the
// partition's leader in a cluster, Cluster.ReadPartitionSince) to its
// high watermark, a chunk at a time; its dead letters are the records
// whose headers name the group, source topic and partition, and the
// offset and delivery count of one of the ARCHIVING records (dlqMatch).
// Those found are archived without a write; the others are written by the
// next jobs. A search that fails is retried with the writes' backoff.
// ArchivingSince 0 (a state from before it was recorded) searches the
// whole partition. Not seen, and so written again: dead letters deleted
// by retention before the search, one not yet below the high watermark,
// one a deposed leader appends after the search, and dead letters routed
// to another partition because the topic's partition count changed.
//
// The write runs off the share state's lock: the share-partition's other
// records are acquired and acknowledged meanwhile. A write that fails (the
// topic is refused by the checks below, or the append fails) is retried
// with a backoff from 100 ms to 10 s, logged once per distinct error, and
// the records stay ARCHIVING: they hold the share-partition's start offset
// and room in its window (group.share.partition.max.record.locks), so a
// dead-letter topic that cannot be written stops new acquisitions
// (back-pressure) instead of growing a backlog. They are kept until the
// topic is fixed, or the group's errors.deadletterqueue.topic.name is
// removed (then they are archived without dead letters: the operator's
// decision).
//
// The topic checks are Kafka's, in its order and with its messages: the
// name does not start with "__"; a topic that exists has the topic config
// errors.deadletterqueue.group.enable=true; a topic that does not exist is
// created only with the broker's errors.deadletterqueue.auto.create.topics.enable
// (Config.DeadLetterAutoCreate); the name starts with
// errors.deadletterqueue.topic.name.prefix (Config.DeadLetterTopicPrefix,
// default "dlq."). A topic auto-created this way (in a cluster, proposed
// to the controller: createDLQ) has
// errors.deadletterqueue.group.enable=true and num.partitions partitions.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/share"
)

// DefaultDeadLetterTopicPrefix is errors.deadletterqueue.topic.name.prefix.
const DefaultDeadLetterTopicPrefix = share.DefaultDeadLetterTopicPrefix

// topicDLQEnable is the topic config that lets a topic be a dead-letter topic.
const topicDLQEnable = share.TopicConfigDeadLetterEnable

// Kafka's dead-letter context headers (package share names them).
const (
	dlqHeaderTopic     = share.DeadLetterHeaderTopic
	dlqHeaderPartition = share.DeadLetterHeaderPartition
	dlqHeaderOffset    = share.DeadLetterHeaderOffset
	dlqHeaderGroup     = share.DeadLetterHeaderGroup
	dlqHeaderCount     = share.DeadLetterHeaderDeliveryCount
	dlqHeaderMessage   = share.DeadLetterHeaderMessage
)

const (
	dlqJobMax = 100 // records per dead-letter append
	// dlqScanSlack is how far before a share-partition's ArchivingSince
	// the dead-letter partition is searched (findDeadLetters): a clock stepped
	// back between the ARCHIVING transition and the write, or the
	// dead-letter partition leader's clock behind this one's with
	// LogAppendTime.
	dlqScanSlack  = 60 * time.Second
	dlqScanBytes  = 1 << 20 // read per round of a local search
	dlqBackoffMin = 100 * time.Millisecond
	dlqBackoffMax = 10 * time.Second
	// dlqRecordOverhead bounds a record's encoding beyond its key, value
	// and header bytes (varint lengths, attributes, deltas).
	dlqRecordOverhead = 128
)

// dlqState is the writer's part of shareState.
type dlqState struct {
	kick     chan struct{} // wakes shareDLQLoop
	done     chan struct{} // closed when it returns
	restored bool          // the stored states with ARCHIVING records were restored
	hold     atomic.Bool   // HoldDeadLettered (tests)

	mu      sync.Mutex // guards results (appended by durability callbacks) and creating
	results []dlqResult
	// creating holds the dead-letter topics whose creation this broker
	// proposed to the controller and the view does not have yet (a
	// cluster).
	creating map[string]bool
}

// dlqJob is one write: ARCHIVING records of one share-partition.
type dlqJob struct {
	k       Key
	sp      *Part
	src     *engine.Log
	srcName string
	letters []share.DeadLetter
	topic   string // the group's dead-letter topic
	copy    bool
	// find: the job writes nothing; it searches the dead-letter
	// partition for letters already written (dlqFind), since is the
	// share-partition's ArchivingSince.
	find  bool
	since int64
}

type dlqResult struct {
	job   *dlqJob
	err   error
	found []int64 // a find job's offsets whose dead letters exist
}

// dlqKick wakes the dead-letter writer; it never blocks.
func (h *Host) dlqKick() {
	select {
	case h.dlq.kick <- struct{}{}:
	default:
	}
}

// shareDLQLoop is the dead-letter writer, until stop closes.
func (h *Host) shareDLQLoop(stop <-chan struct{}) {
	st := h
	defer close(st.dlq.done)
	for {
		select {
		case <-stop:
			return
		case <-st.dlq.kick:
		}
		nowMs := h.now().UnixMilli()
		st.dlq.mu.Lock()
		results := st.dlq.results
		st.dlq.results = nil
		st.dlq.mu.Unlock()
		st.mu.Lock()
		for _, r := range results {
			h.dlqFinish(nowMs, r)
		}
		h.restoreArchiving()
		jobs := h.dlqJobs(nowMs)
		st.mu.Unlock()
		for _, j := range jobs {
			h.writeDeadLetters(j)
		}
	}
}

// restoreArchiving restores, once, the stored share-partitions that hold
// ARCHIVING records, so their dead letters are written without waiting for
// a consumer (st.mu held).
func (h *Host) restoreArchiving() {
	st := h
	if st.dlq.restored {
		return
	}
	st.dlq.restored = true
	for k, state := range st.stored {
		if !slices.ContainsFunc(state.Batches, func(b share.StateBatch) bool { return b.State == share.Archiving }) {
			continue
		}
		t := h.eng.TopicByID(k.TopicID)
		if t == nil || t.Deleted() {
			continue
		}
		var d Durable
		h.Partition(k.Group, t, k.Part, &d)
	}
}

// dlqJobs takes the ARCHIVING records of the share-partitions that have
// some and no write under way (st.mu held).
func (h *Host) dlqJobs(nowMs int64) []*dlqJob {
	st := h
	var jobs []*dlqJob
	for k, sp := range st.parts {
		if !sp.dlqWant || sp.dlqBusy || sp.dlqRetryAt > nowMs {
			continue
		}
		letters := sp.P.DeadLetters()
		if len(letters) == 0 {
			sp.dlqWant, sp.dlqFind = false, false
			continue
		}
		topic := st.configs[k.Group][CfgDLQTopicName]
		if topic == "" {
			continue // SetConfig archives them
		}
		if len(letters) > dlqJobMax && !sp.dlqFind {
			letters = letters[:dlqJobMax] // a search takes them all: the window bounds them
		}
		sp.dlqBusy = true
		jobs = append(jobs, &dlqJob{
			k: k, sp: sp, src: sp.Log, srcName: sp.Name, letters: letters, topic: topic,
			copy: st.configs[k.Group][CfgDLQCopyRecord] == "true",
			find: sp.dlqFind, since: sp.P.ArchivingSince(),
		})
	}
	return jobs
}

// dlqFinish applies a write's outcome (st.mu held): the records written
// are archived and that persisted, or the write is retried later.
func (h *Host) dlqFinish(nowMs int64, r dlqResult) {
	j, sp := r.job, r.job.sp
	sp.dlqBusy = false
	if h.parts[j.k] != sp {
		return // the share-partition was dropped meanwhile
	}
	if r.err != nil {
		// A write that failed may have reached the log all the same (a
		// produce that timed out): the next one looks first.
		sp.dlqFind = true
		sp.dlqBackoff = min(max(2*sp.dlqBackoff, dlqBackoffMin), dlqBackoffMax)
		sp.dlqRetryAt = nowMs + sp.dlqBackoff.Milliseconds()
		if msg := r.err.Error(); msg != sp.dlqErr {
			sp.dlqErr = msg
			h.log.Error("share: dead-letter write failed; the records stay ARCHIVING and are retried",
				"group", j.k.Group, "topic", j.srcName, "partition", j.k.Part, "dlq", j.topic, "err", r.err)
		}
		return
	}
	sp.dlqBackoff, sp.dlqRetryAt, sp.dlqErr = 0, 0, ""
	done := make([]int64, 0, len(j.letters))
	if j.find {
		// The letters not found were never written: the next jobs
		// write them.
		sp.dlqFind = false
		done = r.found
	} else {
		if h.dlq.hold.Load() {
			sp.dlqBusy = true // HoldDeadLettered: stopped before ARCHIVED
			return
		}
		for _, l := range j.letters {
			done = append(done, l.Offset)
		}
	}
	// Each written offset on its own: an offset between two of them
	// that went ARCHIVING later has no dead letter yet. The state is
	// persisted once (persistPart writes the whole snapshot).
	var e share.Effects
	for _, o := range done {
		_, el := sp.P.DeadLettered(o, o)
		e.Write = cmp.Or(el.Write, e.Write)
		e.Available = e.Available || el.Available
	}
	if err := h.Apply(j.k, sp, e, nil); err != nil {
		h.log.Error("share: persisting dead-lettered records", "group", j.k.Group, "err", err)
	}
	h.dlqKick() // more may be ARCHIVING
}

// dlqTopic returns the dead-letter topic of a job after Kafka's checks,
// creating it when the broker allows that.
func (h *Host) dlqTopic(j *dlqJob) (*engine.Topic, error) {
	group, name := j.k.Group, j.topic
	if len(name) >= 2 && name[:2] == "__" {
		return nil, fmt.Errorf("Configured DLQ topic name in share group: %s cannot start with __, topic: %s.", group, name)
	}
	t := h.eng.Topic(name)
	if t != nil && t.Deleted() {
		t = nil
	}
	if t != nil && !dlqEnabledOn(t) {
		return nil, fmt.Errorf("DLQ is not enabled on configured DLQ topic for share group: %s, topic: %s.", group, name)
	}
	if t == nil && !h.cfg.DeadLetterAutoCreate {
		return nil, fmt.Errorf("DLQ topic does not exist and auto create is disabled on cluster for share group: %s, topic: %s.", group, name)
	}
	prefix := DefaultDeadLetterTopicPrefix
	if p := h.cfg.DeadLetterTopicPrefix; p != nil {
		prefix = *p
	}
	if prefix != "" && (len(name) < len(prefix) || name[:len(prefix)] != prefix) {
		return nil, fmt.Errorf("Configured DLQ topic name does not comply with the DLQ topic prefix in share group: %s, topic: %s, prefix: %s.", group, name, prefix)
	}
	if t != nil {
		return t, nil
	}
	if h.cluster != nil {
		h.createDLQ(group, name)
		return nil, fmt.Errorf("DLQ topic is being created for share group: %s, topic: %s.", group, name)
	}
	t, err := h.eng.CreateTopic(name, max(h.numPartitions, 1), map[string]string{topicDLQEnable: "true"})
	if errors.Is(err, engine.ErrTopicExists) {
		t, err = h.eng.Topic(name), nil
	}
	if err != nil || t == nil {
		return nil, fmt.Errorf("creating DLQ topic %s for share group %s: %w", name, group, err)
	}
	h.log.Info("share: created dead-letter topic", "group", group, "topic", name, "partitions", t.Partitions())
	return t, nil
}

// createDLQ proposes dead-letter topic name to the controller (a
// cluster), once at a time: the broker's default partitions and
// replication factor, errors.deadletterqueue.group.enable=true. The
// write is retried with its backoff and finds the topic once this
// broker's view has it.
func (h *Host) createDLQ(group, name string) {
	h.dlq.mu.Lock()
	if h.dlq.creating[name] {
		h.dlq.mu.Unlock()
		return
	}
	if h.dlq.creating == nil {
		h.dlq.creating = map[string]bool{}
	}
	h.dlq.creating[name] = true
	h.dlq.mu.Unlock()
	h.cluster.CreateTopic(name, map[string]string{topicDLQEnable: "true"}, func(err error) {
		h.dlq.mu.Lock()
		delete(h.dlq.creating, name)
		h.dlq.mu.Unlock()
		if err != nil {
			h.log.Error("share: creating the dead-letter topic failed; retried", "group", group, "topic", name, "err", err)
			return
		}
		h.log.Info("share: created dead-letter topic", "group", group, "topic", name)
		h.dlqKick()
	})
}

// dlqEnabledOn reports whether topic t may be a dead-letter topic: its
// errors.deadletterqueue.group.enable is true (default false).
func dlqEnabledOn(t *engine.Topic) bool {
	v, ok := t.Overrides()[topicDLQEnable]
	return ok && strings.EqualFold(strings.TrimSpace(v), "true")
}

// writeDeadLetters appends a job's dead letters and reports the outcome to
// the loop once the append is Durable (or failed). It runs without st.mu.
func (h *Host) writeDeadLetters(j *dlqJob) {
	st := h
	report := func(err error) {
		st.dlq.mu.Lock()
		st.dlq.results = append(st.dlq.results, dlqResult{job: j, err: err})
		st.dlq.mu.Unlock()
		h.dlqKick()
	}
	t, err := h.dlqTopic(j)
	if err != nil {
		report(err)
		return
	}
	if j.find {
		h.findDeadLetters(j, t)
		return
	}
	part := j.k.Part % t.Partitions()
	l := t.Partition(part)
	maxBytes := 1 << 20
	if l != nil {
		maxBytes = int(l.Config().MaxMessageBytes)
	}
	if l == nil && h.cluster == nil {
		report(fmt.Errorf("DLQ topic %s partition %d is not here", t.Name(), j.k.Part%t.Partitions()))
		return
	}
	var sources map[int64]*record.Record
	if j.copy {
		sources = readSources(j.src, j.letters)
	}
	// Batches within the dead-letter topic's max.message.bytes; a source
	// record too large for it on its own is written without its key and
	// value (the headers still say where it is).
	nowMs := h.now().UnixMilli()
	var (
		b     record.Builder
		batch []byte
	)
	b.Reset(record.CodecNone, nowMs)
	for _, dl := range j.letters {
		headers := []record.RecordHeader{
			{Key: dlqHeaderTopic, Value: []byte(j.srcName)},
			{Key: dlqHeaderPartition, Value: strconv.AppendInt(nil, int64(j.k.Part), 10)},
			{Key: dlqHeaderOffset, Value: strconv.AppendInt(nil, dl.Offset, 10)},
			{Key: dlqHeaderGroup, Value: []byte(j.k.Group)},
			{Key: dlqHeaderCount, Value: strconv.AppendInt(nil, int64(dl.Count), 10)},
			{Key: dlqHeaderMessage, Value: []byte(dl.Reason.Message())},
		}
		size := dlqRecordOverhead
		for _, h := range headers {
			size += len(h.Key) + len(h.Value)
		}
		var key, value []byte
		if r := sources[dl.Offset]; r != nil && record.HeaderSize+size+len(r.Key)+len(r.Value) <= maxBytes {
			key, value = r.Key, r.Value
			size += len(key) + len(value)
		}
		if b.Len() > 0 && b.Size()+size > maxBytes {
			if batch, err = b.AppendTo(batch); err != nil {
				report(err)
				return
			}
			b.Reset(record.CodecNone, nowMs)
		}
		b.Add(nowMs, key, value, headers)
	}
	batch, err = b.AppendTo(batch)
	if err != nil {
		report(err)
		return
	}
	if h.cluster != nil {
		// In a cluster the dead-letter topic's partition may be led
		// elsewhere: produced to its leader with acks=all.
		h.bg.Go(func() {
			ctx, cancel := context.WithTimeout(h.ctx, writeTimeout)
			defer cancel()
			report(h.cluster.Produce(ctx, t.Name(), part, batch))
		})
		return
	}
	info, err := l.Append(batch, l.LeaderEpoch())
	if err != nil {
		report(fmt.Errorf("appending to DLQ topic %s: %w", t.Name(), err))
		return
	}
	h.whenAcked(l, info.LastOffset, report)
}

// readSources returns the source records of the dead letters, by offset
// (copy.record.enable). A record that cannot be read (deleted by
// retention meanwhile) is left out: its dead letter has the headers only.
func readSources(l *engine.Log, letters []share.DeadLetter) map[int64]*record.Record {
	var ranges []share.AcquiredRecords
	want := map[int64]bool{}
	for _, dl := range letters {
		want[dl.Offset] = true
		if n := len(ranges); n > 0 && ranges[n-1].Last+1 == dl.Offset {
			ranges[n-1].Last = dl.Offset
			continue
		}
		ranges = append(ranges, share.AcquiredRecords{First: dl.Offset, Last: dl.Offset})
	}
	out := map[int64]*record.Record{}
	data, err := ReadBatches(l, ranges)
	if err != nil {
		return out
	}
	for rest := data; len(rest) > 0; {
		batch, r, _, err := record.Next(rest)
		if err != nil {
			break
		}
		rest = r
		_ = record.Iterate(batch, func(h *record.Header, r *record.Record) error {
			o := h.BaseOffset + int64(r.OffsetDelta)
			if want[o] && h.Attributes&0x20 == 0 { // not a control batch
				c := *r
				c.Key, c.Value = slices.Clone(r.Key), slices.Clone(r.Value)
				c.Headers = nil
				out[o] = &c
			}
			return nil
		})
	}
	return out
}

// HoldDeadLettered, with hold set (tests), stops the dead-letter writer of
// each share-partition once an append of dead letters is durable, before
// the records are archived: the persisted state keeps them ARCHIVING, as
// a broker that stops between the two writes leaves it.
func (h *Host) HoldDeadLettered(hold bool) { h.dlq.hold.Store(hold) }

// findDeadLetters runs a find job (without st.mu): it searches the job's
// dead-letter partition of t for the dead letters already written for its
// records, and reports their offsets (dlqResult.found).
func (h *Host) findDeadLetters(j *dlqJob, t *engine.Topic) {
	report := func(found []int64, err error) {
		h.dlq.mu.Lock()
		h.dlq.results = append(h.dlq.results, dlqResult{job: j, err: err, found: found})
		h.dlq.mu.Unlock()
		h.dlqKick()
	}
	part := j.k.Part % t.Partitions()
	// Dead letters are stamped with the writer's clock when it writes
	// them, after the records went ARCHIVING (or the partition leader's
	// with LogAppendTime): from ArchivingSince, less the slack. Since 0
	// (a state from before it was recorded): the whole partition.
	from := int64(-2) // ListOffsets' earliest
	if j.since > 0 {
		from = max(j.since-dlqScanSlack.Milliseconds(), 0)
	}
	m := newDLQMatch(j)
	if h.cluster != nil {
		// The partition may be led elsewhere: read at its leader.
		h.bg.Go(func() {
			ctx, cancel := context.WithTimeout(h.ctx, writeTimeout)
			defer cancel()
			err := h.cluster.ReadPartitionSince(ctx, t.Name(), part, from, m.batches)
			if err != nil {
				err = fmt.Errorf("searching DLQ topic %s partition %d for dead letters already written: %w", t.Name(), part, err)
			}
			report(m.found(), err)
		})
		return
	}
	l := t.Partition(part)
	if l == nil {
		report(nil, fmt.Errorf("DLQ topic %s partition %d is not here", t.Name(), part))
		return
	}
	if err := scanFrom(h.ctx, l, from, m.batches); err != nil {
		report(nil, fmt.Errorf("searching DLQ topic %s partition %d for dead letters already written: %w", t.Name(), part, err))
		return
	}
	report(m.found(), nil)
}

// scanFrom passes fn the record batches of l from the first offset whose
// timestamp is at or after ts (-2: the log start) to the high watermark,
// dlqScanBytes at a time, until ctx ends (the host closes).
func scanFrom(ctx context.Context, l *engine.Log, ts int64, fn func(batches []byte) error) error {
	from := l.LogStartOffset()
	if ts >= 0 {
		off, _, found := l.OffsetForTimestamp(ts)
		if !found {
			return nil // no record that recent
		}
		from = max(off, from)
	}
	for from < l.HighWatermark() {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := l.ReadMem(from, dlqScanBytes, true)
		if errors.Is(err, engine.ErrOffsetOutOfRange) && l.LogStartOffset() > from {
			from = l.LogStartOffset() // retention under the scan
			continue
		}
		if err != nil {
			return err
		}
		buf, err := chunkBytes(res)
		res.Release()
		if err != nil {
			return err
		}
		next := from
		for rest := buf; len(rest) > 0; {
			batch, r, hdr, err := record.Next(rest)
			if err != nil {
				break // a partial batch at the end of the read
			}
			rest = r
			next = max(next, hdr.LastOffset()+1)
			if err := fn(batch); err != nil {
				return err
			}
		}
		if next == from {
			return nil // nothing more below the high watermark
		}
		from = next
	}
	return nil
}

// dlqMatch finds a job's dead letters among the records of its
// dead-letter partition: a record whose context headers name the job's
// group, source topic and partition, and the offset and delivery count
// of one of its letters.
type dlqMatch struct {
	j    *dlqJob
	want map[int64]int16 // offset -> delivery count
	hit  map[int64]bool
	part string
}

func newDLQMatch(j *dlqJob) *dlqMatch {
	m := &dlqMatch{j: j, want: make(map[int64]int16, len(j.letters)), hit: map[int64]bool{},
		part: strconv.FormatInt(int64(j.k.Part), 10)}
	for _, l := range j.letters {
		m.want[l.Offset] = l.Count
	}
	return m
}

// batches matches the records of a run of record batches.
func (m *dlqMatch) batches(data []byte) error {
	for rest := data; len(rest) > 0; {
		batch, r, _, err := record.Next(rest)
		if err != nil {
			return err
		}
		rest = r
		err = record.Iterate(batch, func(hdr *record.Header, r *record.Record) error {
			if !hdr.Control() {
				m.record(r)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (m *dlqMatch) record(r *record.Record) {
	var group, topic, part, off, count []byte
	for _, h := range r.Headers {
		switch h.Key {
		case dlqHeaderGroup:
			group = h.Value
		case dlqHeaderTopic:
			topic = h.Value
		case dlqHeaderPartition:
			part = h.Value
		case dlqHeaderOffset:
			off = h.Value
		case dlqHeaderCount:
			count = h.Value
		}
	}
	if string(group) != m.j.k.Group || string(topic) != m.j.srcName || string(part) != m.part {
		return
	}
	o, err := strconv.ParseInt(string(off), 10, 64)
	if err != nil {
		return
	}
	n, err := strconv.ParseInt(string(count), 10, 16)
	if c, ok := m.want[o]; ok && err == nil && int16(n) == c {
		m.hit[o] = true
	}
}

// found returns the offsets whose dead letters were found.
func (m *dlqMatch) found() []int64 {
	return slices.Sorted(maps.Keys(m.hit))
}
