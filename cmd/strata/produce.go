package main

// `strata produce`: records from standard input, one a line, to a topic of
// any Kafka-compatible cluster, with franz-go's producer. What kcat -P,
// kafka-console-producer and rpk topic produce do: -K splits a line into
// key and value at a delimiter, -H adds headers, --format json reads the
// records `strata consume --format json` prints (keys, values, headers and
// timestamps, nulls included), so a topic can be copied through a pipe.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var produceDoc = cmdDoc{name: "produce",
	usage: "strata produce TOPIC [-K DELIM] [-H key=value ...] [--partition N] [--acks all|1|0]\n" +
		"    [-z none|gzip|snappy|lz4|zstd] [--format text|json]",
	about: `Reads records from standard input, one a line, and produces them to TOPIC; exits when
the input ends and every record is acknowledged (1 if any failed, with the first error).
SIGINT or SIGTERM stops the reading: what was read is still delivered.

--format text (the default): each line is a value, or with -K DELIM a key and a value split
at the first DELIM (a line without DELIM is a value with a null key), as kcat -K does.
--format json: each line is an object {"key": ..., "value": ..., "headers": [{"key": ...,
"value": ...}], "timestamp": MS}, every field optional, null keys and values kept; other
fields (topic, partition, offset: what consume --format json prints) are ignored.

Without --partition, records with a key go to the key's partition (murmur2, as Kafka's
producer does) and records without one to a sticky partition. Topics are auto-created
where the cluster allows it.

Examples:
  printf 'user-1:hello\nuser-2:world\n' | strata produce events -K : -H source=cli
  strata consume events --format json -e | strata produce events-copy --format json`}

type produceFlags struct {
	fs          *flag.FlagSet
	brokers     string
	timeout     time.Duration
	keyDelim    string
	headers     multiFlag
	partition   int
	acks        string
	compression string
	format      outputFormat
	nullEmpty   bool
	maxLine     int
}

func newProduceFlags() *produceFlags {
	f := &produceFlags{fs: flag.NewFlagSet("strata produce", flag.ContinueOnError), format: formatText}
	f.fs.StringVar(&f.brokers, "brokers", "", brokersHelp)
	f.fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait, once the input ends, for the records to be acknowledged")
	f.fs.StringVar(&f.keyDelim, "key-delimiter", "", "split each text line into key and value at the first `DELIM` (kcat's -K)")
	f.fs.StringVar(&f.keyDelim, "K", "", "short for --key-delimiter")
	f.fs.Var(&f.headers, "header", "add header `key=value` to every record (repeatable)")
	f.fs.Var(&f.headers, "H", "short for --header")
	f.fs.IntVar(&f.partition, "partition", -1, "produce every record to this partition (-1: by key, as Kafka's partitioner)")
	f.fs.StringVar(&f.acks, "acks", "all", "acknowledgement to wait for: all (-1: every in-sync replica, idempotent), 1 (the leader) or 0 (none)")
	f.fs.StringVar(&f.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	f.fs.StringVar(&f.compression, "z", "none", "short for --compression")
	f.fs.Var(&f.format, "format", "input `format`: text (lines) or json (one object a line)")
	f.fs.BoolVar(&f.nullEmpty, "null-empty", false, "send an empty text value as null (a tombstone), as kcat's -Z")
	f.fs.IntVar(&f.maxLine, "max-line-bytes", 1<<20, "longest input line accepted")
	return f
}

// produceSettings are the checked flags.
type produceSettings struct {
	acks     kgo.Acks
	acksAll  bool
	codec    kgo.CompressionCodec
	headers  []kgo.RecordHeader
	keyDelim []byte
}

func (f *produceFlags) check(pos []string) (produceSettings, error) {
	var s produceSettings
	if len(pos) != 1 {
		return s, fmt.Errorf("name one topic, got %q", pos)
	}
	switch f.acks {
	case "all", "-1":
		s.acks, s.acksAll = kgo.AllISRAcks(), true
	case "1":
		s.acks = kgo.LeaderAck()
	case "0":
		s.acks = kgo.NoAck()
	default:
		return s, fmt.Errorf("--acks %q: want all, -1, 1 or 0", f.acks)
	}
	switch f.compression {
	case "none":
		s.codec = kgo.NoCompression()
	case "gzip":
		s.codec = kgo.GzipCompression()
	case "snappy":
		s.codec = kgo.SnappyCompression()
	case "lz4":
		s.codec = kgo.Lz4Compression()
	case "zstd":
		s.codec = kgo.ZstdCompression()
	default:
		return s, fmt.Errorf("--compression %q: want none, gzip, snappy, lz4 or zstd", f.compression)
	}
	if f.partition < -1 {
		return s, fmt.Errorf("--partition %d: want -1 or a partition number", f.partition)
	}
	if f.maxLine < 1 || f.maxLine > 1<<30 {
		return s, fmt.Errorf("--max-line-bytes %d: want 1..%d", f.maxLine, 1<<30)
	}
	if f.format == formatJSON && f.keyDelim != "" {
		return s, errors.New("-K splits text lines: with --format json the key is the object's \"key\"")
	}
	s.keyDelim = []byte(f.keyDelim)
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return s, fmt.Errorf("--header %q: want key=value", h)
		}
		s.headers = append(s.headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return s, nil
}

func produceMain(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	ctx, stop := interruptContext()
	defer stop()
	return produceMainEnv(ctx, args, stdin, stdout, stderr, os.Getenv)
}

// produceMainEnv is produce with its interrupt (ctx), input and
// environment given.
func produceMainEnv(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	f := newProduceFlags()
	pos, err := parseFlags(f.fs, args, produceDoc, true, stdout)
	if err != nil {
		return err
	}
	f.brokers = resolveBrokers(f.brokers, getenv)
	s, err := f.check(pos)
	if err != nil {
		return asUsage(produceDoc, err)
	}
	return produce(ctx, f, s, pos[0], stdin, stderr)
}

// inputLine is one line of input (without its newline), or the error that
// ended the input.
type inputLine struct {
	n    int // 1-based line number
	data []byte
	err  error
}

// readLines sends in's lines on out until the input ends (io.EOF is not
// sent) or stop is closed, then closes out. A line longer than max is an
// error. The goroutine running it ends when the input does: a read blocked
// on a terminal or pipe cannot be interrupted, so after an interrupt it
// lives until the process exits or the input ends.
func readLines(in io.Reader, max int, out chan<- inputLine, stop <-chan struct{}) {
	defer close(out)
	br := bufio.NewReaderSize(in, 64<<10)
	send := func(l inputLine) bool {
		select {
		case out <- l:
			return true
		case <-stop:
			return false
		}
	}
	for n := 1; ; n++ {
		var line []byte
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			line = append(line, chunk...)
			if len(bytes.TrimSuffix(line, []byte("\n"))) > max {
				send(inputLine{n: n, err: fmt.Errorf("line %d is longer than --max-line-bytes %d", n, max)})
				return
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if err == nil || len(line) > 0 {
			if !send(inputLine{n: n, data: line}) {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				send(inputLine{n: n, err: fmt.Errorf("reading input: %w", err)})
			}
			return
		}
	}
}

// jsonInRecord is a line of --format json input.
type jsonInRecord struct {
	Key       *string      `json:"key"`
	Value     *string      `json:"value"`
	Headers   []jsonHeader `json:"headers"`
	Timestamp *int64       `json:"timestamp"`
}

// jsonHeader is a record header in JSON (consume's output, produce's input).
type jsonHeader struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

// toRecord turns one input line into a record for topic.
func (s *produceSettings) toRecord(f *produceFlags, topic string, l inputLine) (*kgo.Record, error) {
	r := &kgo.Record{Topic: topic}
	if f.partition >= 0 {
		r.Partition = int32(f.partition)
	}
	if f.format == formatJSON {
		var in jsonInRecord
		if err := json.Unmarshal(l.data, &in); err != nil {
			return nil, fmt.Errorf("line %d: %w", l.n, err)
		}
		if in.Key != nil {
			r.Key = []byte(*in.Key)
		}
		if in.Value != nil {
			r.Value = []byte(*in.Value)
		}
		for _, h := range in.Headers {
			var v []byte
			if h.Value != nil {
				v = []byte(*h.Value)
			}
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: v})
		}
		if in.Timestamp != nil {
			r.Timestamp = time.UnixMilli(*in.Timestamp)
		}
	} else {
		value := l.data
		if len(s.keyDelim) > 0 {
			if k, v, ok := bytes.Cut(l.data, s.keyDelim); ok {
				r.Key, value = k, v
			}
		}
		if len(value) > 0 || !f.nullEmpty {
			r.Value = append([]byte{}, value...) // never nil: an empty value, not a tombstone
		}
		if r.Key != nil {
			r.Key = append([]byte{}, r.Key...)
		}
	}
	r.Headers = append(append([]kgo.RecordHeader{}, s.headers...), r.Headers...)
	return r, nil
}

func produce(ctx context.Context, f *produceFlags, s produceSettings, topic string, in io.Reader, stderr io.Writer) error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(splitSeeds(f.brokers)...),
		kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(s.acks),
		kgo.ProducerBatchCompression(s.codec),
		kgo.ProducerLinger(5 * time.Millisecond),
		// No RecordDeliveryTimeout: franz-go measures it from the
		// record's timestamp, which --format json may set in the past.
	}
	if !s.acksAll {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if f.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			cl.Close()
		}
	}()

	var (
		mu       sync.Mutex
		acked    int
		firstErr error
	)
	done := func(r *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			acked++
		} else if firstErr == nil {
			firstErr = fmt.Errorf("%s partition %d: %w", r.Topic, r.Partition, err)
		}
	}
	// The records' context: not the interrupt's (an interrupt stops the
	// reading, not the delivery of what was read); canceled when the
	// records are still not acknowledged --timeout after the input ended.
	delivery, cancelDelivery := context.WithCancel(context.Background())
	defer cancelDelivery()

	lines := make(chan inputLine)
	stop := make(chan struct{})
	defer close(stop)
	go readLines(in, f.maxLine, lines, stop)

	sent := 0
	var inputErr error
	interrupted := false
read:
	for {
		select {
		case <-ctx.Done():
			interrupted = true
			break read
		case l, ok := <-lines:
			if !ok {
				break read
			}
			if l.err != nil {
				inputErr = l.err
				break read
			}
			r, err := s.toRecord(f, topic, l)
			if err != nil {
				inputErr = err
				break read
			}
			// Blocks only while franz-go's buffer is full (10,000
			// records); a second SIGINT ends the process then.
			cl.Produce(delivery, r, done)
			sent++
		}
	}
	flushCtx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	flushErr := cl.Flush(flushCtx)
	if flushErr != nil {
		cancelDelivery() // fails what can be failed
		flushErr = fmt.Errorf("not acknowledged within --timeout %v", f.timeout)
	}
	cl.Close() // fails whatever is left, so that every promise has run
	closed = true

	mu.Lock()
	defer mu.Unlock()
	if interrupted {
		fmt.Fprintf(stderr, "strata produce: interrupted: %d records read, %d acknowledged\n", sent, acked)
	}
	var errs []error
	if acked < sent {
		cause := firstErr
		if cause == nil || flushErr != nil {
			cause = errors.Join(flushErr, firstErr)
		}
		errs = append(errs, fmt.Errorf("%d of %d records not produced; %w", sent-acked, sent, cause))
	}
	if inputErr != nil {
		errs = append(errs, fmt.Errorf("%w (the %d records before it were produced)", inputErr, acked))
	}
	return errors.Join(errs...)
}
