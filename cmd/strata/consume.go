package main

// `strata consume`: records from topics of any Kafka-compatible cluster to
// standard output, with franz-go's consumer. What kcat -C,
// kafka-console-consumer and rpk topic consume do: from the start, the end,
// an offset, N before the end or a time; as a group member (committing
// exactly the records printed); --num N and --exit-at-end to stop; values
// only, JSON lines, or a kcat-style format string.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var consumeDoc = cmdDoc{name: "consume",
	usage: "strata consume TOPIC ... [-o start|end|N|-N|@TIME] [-p 0,1,...] [-g GROUP] [-n N] [-e]\n" +
		"    [-f value|json|FORMAT] [--read-committed]",
	about: `Prints the records of the named topics until SIGINT or SIGTERM (then exits 0), or until
--num records are printed, or with --exit-at-end when every partition's end (as it was
when the command started) is reached.

--offset: start (also beginning, earliest; the default), end (latest: only new records),
N (that offset, clamped to the log), -N (N records before the end), @TIME (the first
record at or after TIME: milliseconds since the epoch, RFC 3339, or -DURATION before now,
as in @-1h). Per partition; --partition limits the partitions.

--group GROUP consumes as a member of GROUP: the group assigns the partitions, consuming
starts at the group's committed offsets (--offset applies where it has none) and the
offsets of exactly the records printed are committed (at least every 5 s and at exit).

--format: value (the default: each value and a newline), json (one object a line:
topic, partition, offset, timestamp in ms, key, value, headers; a null key or value is
null; bytes that are not UTF-8 are replaced by U+FFFD), or a format string as kcat's -f:
%t topic, %p partition, %o offset, %T timestamp (ms), %k key, %v or %s value, %h headers
(k=v,...), %K key length, %S value length, %%; \n, \t, \r and \\ escapes.

Examples:
  strata consume events -n 10
  strata consume events -o -5 -e -f '%p %o %k=%v\n'
  strata consume events -g billing -f json
  strata consume events -o @2026-12-02T10:00:00Z -e`}

type consumeFlags struct {
	fs            *flag.FlagSet
	brokers       string
	timeout       time.Duration
	offset        string
	fromBeginning bool
	partitions    string
	group         string
	num           int
	exitAtEnd     bool
	format        string
	readCommitted bool
}

func newConsumeFlags() *consumeFlags {
	f := &consumeFlags{fs: flag.NewFlagSet("strata consume", flag.ContinueOnError)}
	f.fs.StringVar(&f.brokers, "brokers", "", brokersHelp)
	f.fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the cluster's metadata, offsets and the final commit")
	f.fs.StringVar(&f.offset, "offset", "", "`WHERE` to start: start, end, N, -N or @TIME (default start)")
	f.fs.StringVar(&f.offset, "o", "", "short for --offset")
	f.fs.BoolVar(&f.fromBeginning, "from-beginning", false, "same as --offset start (kafka-console-consumer's flag)")
	f.fs.StringVar(&f.partitions, "partition", "", "comma-separated `PARTITIONS` to consume (default: all; not with --group)")
	f.fs.StringVar(&f.partitions, "p", "", "short for --partition")
	f.fs.StringVar(&f.group, "group", "", "consume as a member of consumer group `GROUP`, committing what is printed")
	f.fs.StringVar(&f.group, "g", "", "short for --group")
	f.fs.IntVar(&f.num, "num", 0, "exit after printing `N` records (0: no limit)")
	f.fs.IntVar(&f.num, "n", 0, "short for --num")
	f.fs.BoolVar(&f.exitAtEnd, "exit-at-end", false, "exit when every partition's end, as it was at start, is reached (not with --group)")
	f.fs.BoolVar(&f.exitAtEnd, "e", false, "short for --exit-at-end")
	f.fs.StringVar(&f.format, "format", "value", "output `FORMAT`: value, json or a kcat-style format string (%t %p %o %T %k %v %h ...)")
	f.fs.StringVar(&f.format, "f", "value", "short for --format")
	f.fs.BoolVar(&f.readCommitted, "read-committed", false, "skip records of aborted and open transactions (isolation read_committed)")
	return f
}

// offsetKind is where consuming starts.
type offsetKind int

const (
	offsetStart   offsetKind = iota
	offsetEnd                // the end
	offsetExact              // n
	offsetFromEnd            // n before the end
	offsetTime               // the first record at or after n (ms)
)

type offsetSpec struct {
	kind offsetKind
	n    int64
}

// parseOffset reads --offset; now resolves @-DURATION.
func parseOffset(s string, now time.Time) (offsetSpec, error) {
	switch strings.ToLower(s) {
	case "", "start", "beginning", "earliest", "oldest":
		return offsetSpec{kind: offsetStart}, nil
	case "end", "latest", "newest":
		return offsetSpec{kind: offsetEnd}, nil
	}
	bad := fmt.Errorf("--offset %q: want start, end, N, -N or @TIME (ms, RFC 3339 or -DURATION)", s)
	if t, ok := strings.CutPrefix(s, "@"); ok {
		if ms, err := strconv.ParseInt(t, 10, 64); err == nil && ms >= 0 {
			return offsetSpec{kind: offsetTime, n: ms}, nil
		}
		if d, ok := strings.CutPrefix(t, "-"); ok {
			if dur, err := time.ParseDuration(d); err == nil && dur >= 0 {
				return offsetSpec{kind: offsetTime, n: now.Add(-dur).UnixMilli()}, nil
			}
			return offsetSpec{}, bad
		}
		if ts, err := time.Parse(time.RFC3339Nano, t); err == nil {
			return offsetSpec{kind: offsetTime, n: ts.UnixMilli()}, nil
		}
		return offsetSpec{}, bad
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return offsetSpec{}, bad
	case strings.HasPrefix(s, "-"):
		return offsetSpec{kind: offsetFromEnd, n: -n}, nil
	default:
		return offsetSpec{kind: offsetExact, n: n}, nil
	}
}

// kgoOffset is spec as a franz-go offset (the group's reset offset).
func (o offsetSpec) kgoOffset() kgo.Offset {
	switch o.kind {
	case offsetEnd:
		return kgo.NewOffset().AtEnd()
	case offsetExact:
		return kgo.NewOffset().At(o.n)
	case offsetFromEnd:
		return kgo.NewOffset().AtEnd().Relative(-o.n)
	case offsetTime:
		return kgo.NewOffset().AfterMilli(o.n)
	}
	return kgo.NewOffset().AtStart()
}

// consumeSettings are the checked flags.
type consumeSettings struct {
	topics     []string
	from       offsetSpec
	partitions []int32 // nil: all
	printer    *recordPrinter
}

func (f *consumeFlags) check(pos []string, now time.Time) (consumeSettings, error) {
	var s consumeSettings
	if len(pos) == 0 {
		return s, errors.New("name at least one topic")
	}
	seen := map[string]bool{}
	for _, t := range pos {
		if !seen[t] {
			s.topics = append(s.topics, t)
			seen[t] = true
		}
	}
	if f.fromBeginning {
		if f.offset != "" {
			return s, errors.New("--from-beginning and --offset: give one")
		}
		f.offset = "start"
	}
	var err error
	if s.from, err = parseOffset(f.offset, now); err != nil {
		return s, err
	}
	if f.partitions != "" {
		for _, p := range strings.Split(f.partitions, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
			if err != nil || n < 0 {
				return s, fmt.Errorf("--partition %q: want comma-separated partition numbers", f.partitions)
			}
			s.partitions = append(s.partitions, int32(n))
		}
	}
	if f.group != "" && s.partitions != nil {
		return s, errors.New("--partition and --group: the group assigns the partitions")
	}
	if f.group != "" && f.exitAtEnd {
		return s, errors.New("--exit-at-end and --group: a member does not know which partitions it will be given; use --num")
	}
	if f.num < 0 {
		return s, fmt.Errorf("--num %d: want 0 (no limit) or more", f.num)
	}
	if s.printer, err = newRecordPrinter(f.format); err != nil {
		return s, err
	}
	return s, nil
}

func consumeMain(args []string, stdout, stderr io.Writer) error {
	ctx, stop := interruptContext()
	defer stop()
	return consumeMainEnv(ctx, args, stdout, stderr, os.Getenv, time.Now())
}

// consumeMainEnv is consume with its interrupt (ctx), environment and
// clock given. It returns nil when ctx ends.
func consumeMainEnv(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, now time.Time) error {
	f := newConsumeFlags()
	pos, err := parseFlags(f.fs, args, consumeDoc, true, stdout)
	if err != nil {
		return err
	}
	f.brokers = resolveBrokers(f.brokers, getenv)
	s, err := f.check(pos, now)
	if err != nil {
		return asUsage(consumeDoc, err)
	}
	return consume(ctx, f, s, stdout, stderr)
}

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// consumePlan is where each partition starts and, for --exit-at-end, ends.
type consumePlan struct {
	start map[string]map[int32]kgo.Offset
	end   map[tp]int64
}

// planPartitions resolves the partitions and their starting offsets
// (consuming without a group).
func planPartitions(ctx context.Context, adm *kadm.Client, f *consumeFlags, s consumeSettings) (consumePlan, error) {
	plan := consumePlan{start: map[string]map[int32]kgo.Offset{}, end: map[tp]int64{}}
	starts, err := adm.ListStartOffsets(ctx, s.topics...)
	if err != nil {
		return plan, err
	}
	list := adm.ListEndOffsets
	if f.readCommitted {
		list = adm.ListCommittedOffsets // the last stable offset
	}
	ends, err := list(ctx, s.topics...)
	if err != nil {
		return plan, err
	}
	var times kadm.ListedOffsets
	if s.from.kind == offsetTime {
		if times, err = adm.ListOffsetsAfterMilli(ctx, s.from.n, s.topics...); err != nil {
			return plan, err
		}
	}
	for _, t := range s.topics {
		var parts []int32
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic == t {
				parts = append(parts, o.Partition)
			}
		})
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		if s.partitions != nil {
			have := map[int32]bool{}
			for _, p := range parts {
				have[p] = true
			}
			for _, p := range s.partitions {
				if !have[p] {
					return plan, fmt.Errorf("topic %s has no partition %d (it has %d)", t, p, len(parts))
				}
			}
			parts = s.partitions
		}
		for _, p := range parts {
			so, _ := starts.Lookup(t, p)
			eo, _ := ends.Lookup(t, p)
			if so.Err != nil || eo.Err != nil {
				return plan, fmt.Errorf("topic %s partition %d: %w", t, p, errors.Join(so.Err, eo.Err))
			}
			lo, hi := so.Offset, eo.Offset
			at := lo
			switch s.from.kind {
			case offsetEnd:
				at = hi
			case offsetExact:
				at = min(max(s.from.n, lo), hi)
			case offsetFromEnd:
				at = max(hi-s.from.n, lo)
			case offsetTime:
				at = hi // no record at or after the time: the end
				if o, ok := times.Lookup(t, p); ok && o.Err == nil && o.Offset >= 0 {
					at = min(max(o.Offset, lo), hi)
				}
			}
			if plan.start[t] == nil {
				plan.start[t] = map[int32]kgo.Offset{}
			}
			plan.start[t][p] = kgo.NewOffset().At(at)
			if f.exitAtEnd && at < hi {
				plan.end[tp{t, p}] = hi
			}
		}
	}
	return plan, nil
}

func consume(ctx context.Context, f *consumeFlags, s consumeSettings, stdout, stderr io.Writer) error {
	seeds := splitSeeds(f.brokers)
	adm, admCl, err := adminClient(seeds, f.timeout)
	if err != nil {
		return err
	}
	defer admCl.Close()
	lookup, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	td, err := adm.ListTopics(lookup, s.topics...)
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted
		}
		return err
	}
	for _, t := range s.topics {
		if d, ok := td[t]; !ok || d.Err != nil {
			if ok {
				return fmt.Errorf("topic %s: %w", t, d.Err)
			}
			return fmt.Errorf("topic %q does not exist", t)
		}
	}

	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.KeepControlRecords(), kgo.FetchMaxWait(500 * time.Millisecond)}
	if f.readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	var plan consumePlan
	if f.group != "" {
		opts = append(opts, kgo.ConsumerGroup(f.group), kgo.ConsumeTopics(s.topics...),
			kgo.ConsumeResetOffset(s.from.kgoOffset()), kgo.AutoCommitMarks(), kgo.AutoCommitInterval(5*time.Second))
	} else {
		if plan, err = planPartitions(lookup, adm, f, s); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if f.exitAtEnd && len(plan.end) == 0 {
			return nil // every partition is at its end already
		}
		opts = append(opts, kgo.ConsumePartitions(plan.start))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close() // leaves the group

	out := bufio.NewWriterSize(stdout, 64<<10)
	printed := 0
	runErr := func() error {
		for {
			max := 10000
			if f.num > 0 {
				max = f.num - printed
			}
			fetches := cl.PollRecords(ctx, max)
			if ctx.Err() != nil {
				return nil
			}
			for _, fe := range fetches.Errors() {
				var loss *kgo.ErrDataLoss
				if errors.As(fe.Err, &loss) {
					fmt.Fprintf(stderr, "strata consume: %v\n", fe.Err)
					continue
				}
				if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, kgo.ErrClientClosed) {
					return nil
				}
				return fmt.Errorf("topic %s partition %d: %w", fe.Topic, fe.Partition, fe.Err)
			}
			var werr error
			fetches.EachRecord(func(r *kgo.Record) {
				if werr != nil || f.num > 0 && printed >= f.num {
					return
				}
				key := tp{r.Topic, r.Partition}
				if f.exitAtEnd {
					end, ok := plan.end[key]
					if !ok || r.Offset >= end {
						return // past the end this run stops at
					}
					if r.Offset+1 >= end {
						delete(plan.end, key)
					}
				}
				if !r.Attrs.IsControl() {
					werr = s.printer.print(out, r)
					printed++
				}
				cl.MarkCommitRecords(r)
			})
			if werr == nil {
				werr = out.Flush()
			}
			if werr != nil {
				return fmt.Errorf("writing output: %w", werr)
			}
			if f.num > 0 && printed >= f.num || f.exitAtEnd && len(plan.end) == 0 {
				return nil
			}
		}
	}()
	if err := out.Flush(); err != nil && runErr == nil {
		runErr = fmt.Errorf("writing output: %w", err)
	}
	if f.group != "" {
		commitCtx, cancel := context.WithTimeout(context.Background(), f.timeout)
		defer cancel()
		if err := cl.CommitMarkedOffsets(commitCtx); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("committing the offsets of group %s: %w", f.group, err))
		}
	}
	return runErr
}

// recordPrinter prints a record in the --format chosen.
type recordPrinter struct {
	json bool
	tmpl []fmtOp // value: [%v \n]
}

// fmtOp is one piece of a format string: literal text, or a directive
// (verb != 0).
type fmtOp struct {
	lit  string
	verb byte
}

func newRecordPrinter(format string) (*recordPrinter, error) {
	switch format {
	case "json":
		return &recordPrinter{json: true}, nil
	case "value", "text", "":
		return &recordPrinter{tmpl: []fmtOp{{verb: 'v'}, {lit: "\n"}}}, nil
	}
	if !strings.Contains(format, "%") {
		return nil, fmt.Errorf("--format %q: want value, json, or a format string with %% directives (%%v the value, ...)", format)
	}
	var ops []fmtOp
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			ops = append(ops, fmtOp{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch {
		case c == '%' && i+1 < len(format):
			i++
			switch v := format[i]; v {
			case '%':
				lit.WriteByte('%')
			case 't', 'p', 'o', 'T', 'k', 'v', 's', 'h', 'K', 'S':
				flush()
				ops = append(ops, fmtOp{verb: v})
			default:
				return nil, fmt.Errorf("--format: unknown directive %%%c (want %%t %%p %%o %%T %%k %%v %%s %%h %%K %%S %%%%)", v)
			}
		case c == '%':
			return nil, errors.New("--format: a lone % at the end (write %% for a percent sign)")
		case c == '\\' && i+1 < len(format):
			i++
			switch e := format[i]; e {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case 'r':
				lit.WriteByte('\r')
			case '\\':
				lit.WriteByte('\\')
			default:
				lit.WriteByte('\\')
				lit.WriteByte(e)
			}
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return &recordPrinter{tmpl: ops}, nil
}

// jsonRecord is a record in consume --format json (and what produce
// --format json reads back).
type jsonRecord struct {
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"`
	Key       *string      `json:"key"`
	Value     *string      `json:"value"`
	Headers   []jsonHeader `json:"headers"`
}

func bytesPtr(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func (p *recordPrinter) print(w *bufio.Writer, r *kgo.Record) error {
	if p.json {
		j := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(),
			Key: bytesPtr(r.Key), Value: bytesPtr(r.Value), Headers: []jsonHeader{}}
		for _, h := range r.Headers {
			j.Headers = append(j.Headers, jsonHeader{Key: h.Key, Value: bytesPtr(h.Value)})
		}
		enc := json.NewEncoder(w) // one line, and <, >, & as they are
		enc.SetEscapeHTML(false)
		return enc.Encode(j)
	}
	for _, op := range p.tmpl {
		switch op.verb {
		case 0:
			w.WriteString(op.lit)
		case 't':
			w.WriteString(r.Topic)
		case 'p':
			w.WriteString(strconv.FormatInt(int64(r.Partition), 10))
		case 'o':
			w.WriteString(strconv.FormatInt(r.Offset, 10))
		case 'T':
			w.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
		case 'k':
			w.Write(r.Key)
		case 'v', 's':
			w.Write(r.Value)
		case 'K':
			w.WriteString(strconv.Itoa(len(r.Key)))
		case 'S':
			w.WriteString(strconv.Itoa(len(r.Value)))
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					w.WriteByte(',')
				}
				w.WriteString(h.Key)
				w.WriteByte('=')
				w.Write(h.Value)
			}
		}
	}
	return nil
}
