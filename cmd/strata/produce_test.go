package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// brokerEnv is a getenv whose $STRATA_BROKERS is addr.
func brokerEnv(addr string) func(string) string {
	return func(k string) string {
		if k == brokersEnv {
			return addr
		}
		return ""
	}
}

// runProduce runs `strata produce args` with stdin as its input.
func runProduce(t *testing.T, addr, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := produceMainEnv(context.Background(), args, strings.NewReader(stdin), &out, &errb, brokerEnv(addr))
	return out.String() + errb.String(), err
}

// runConsume runs `strata consume args` (with now as its clock), bounded:
// after groupsTestTimeout it is interrupted, so a consume that does not
// stop by itself returns what it printed and the test fails on that.
func runConsumeAt(t *testing.T, addr string, now time.Time, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	err := consumeMainEnv(ctx, args, &out, &errb, brokerEnv(addr), now)
	if ctx.Err() != nil {
		t.Errorf("consume %q did not stop by itself", args)
	}
	if errb.Len() > 0 {
		t.Logf("consume %q stderr: %s", args, errb.String())
	}
	return out.String(), err
}

func runConsume(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	return runConsumeAt(t, addr, time.Now(), args...)
}

// decodeRecords parses consume --format json output.
func decodeRecords(t *testing.T, out string) []jsonRecord {
	t.Helper()
	var recs []jsonRecord
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r jsonRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

func strp(s string) *string { return &s }

func createTopic(t *testing.T, addr, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	adm, cl, err := adminClient([]string{addr}, groupsTestTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, name); err != nil {
		t.Fatal(err)
	}
}

// Lines in, records out: keys split at -K, headers on every record, keyed
// records on their key's partition, offsets dense from 0, and the same
// records in the value and format-string outputs.
func TestProduceConsumeRoundTrip(t *testing.T) {
	addr := startGroupsBroker(t)
	createTopic(t, addr, "rt", 3)
	const n = 60
	var in strings.Builder
	wantKey := map[string]*string{} // value -> key
	for i := range n {
		v := fmt.Sprintf("value-%d", i)
		if i%4 == 3 {
			fmt.Fprintf(&in, "%s\n", v) // no delimiter: a null key
			wantKey[v] = nil
			continue
		}
		k := fmt.Sprintf("key-%d", i%7)
		fmt.Fprintf(&in, "%s:%s\n", k, v)
		wantKey[v] = strp(k)
	}
	before := time.Now().Add(-time.Second).UnixMilli()
	if out, err := runProduce(t, addr, in.String(), "rt", "-K", ":", "-H", "src=cli", "--header", "trace=a=b"); err != nil || out != "" {
		t.Fatalf("produce: %v %q", err, out)
	}
	after := time.Now().Add(time.Second).UnixMilli()

	out, err := runConsume(t, addr, "rt", "--format", "json", "--exit-at-end")
	if err != nil {
		t.Fatal(err)
	}
	recs := decodeRecords(t, out)
	if len(recs) != n {
		t.Fatalf("consumed %d records, produced %d:\n%s", len(recs), n, out)
	}
	wantHeaders := []jsonHeader{{"src", strp("cli")}, {"trace", strp("a=b")}}
	next := map[int32]int64{}
	keyPartition := map[string]int32{}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.Topic != "rt" || r.Value == nil {
			t.Fatalf("record %+v", r)
		}
		v := *r.Value
		k, ok := wantKey[v]
		if !ok || seen[v] {
			t.Fatalf("value %q unexpected or seen twice", v)
		}
		seen[v] = true
		if !reflect.DeepEqual(r.Key, k) {
			t.Errorf("%s: key %v, want %v", v, r.Key, k)
		}
		if !reflect.DeepEqual(r.Headers, wantHeaders) {
			t.Errorf("%s: headers %+v", v, r.Headers)
		}
		if r.Offset != next[r.Partition] {
			t.Errorf("%s: partition %d offset %d, want %d (dense, in order)", v, r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition] = r.Offset + 1
		if r.Timestamp < before || r.Timestamp > after {
			t.Errorf("%s: timestamp %d outside [%d, %d]", v, r.Timestamp, before, after)
		}
		if k != nil {
			if p, ok := keyPartition[*k]; ok && p != r.Partition {
				t.Errorf("key %s on partitions %d and %d", *k, p, r.Partition)
			}
			keyPartition[*k] = r.Partition
		}
	}
	if len(next) < 2 {
		t.Errorf("seven keys all went to partitions %v", next)
	}

	// The default format: the values, a line each.
	out, err = runConsume(t, addr, "rt", "-e")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	sort.Strings(got)
	var want []string
	for v := range wantKey {
		want = append(want, v)
	}
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("values:\n%q\nwant\n%q", got, want)
	}

	// A format string, against the JSON of the same record.
	r0 := recs[0]
	out, err = runConsume(t, addr, "rt", "-p", fmt.Sprint(r0.Partition), "-o", fmt.Sprint(r0.Offset), "-n", "1",
		"-f", `%t/%p/%o@%T %k=%v [%h] %K,%S 100%%\n`)
	if err != nil {
		t.Fatal(err)
	}
	key := ""
	if r0.Key != nil {
		key = *r0.Key
	}
	if want := fmt.Sprintf("rt/%d/%d@%d %s=%s [src=cli,trace=a=b] %d,%d 100%%\n", r0.Partition, r0.Offset, r0.Timestamp,
		key, *r0.Value, len(key), len(*r0.Value)); out != want {
		t.Errorf("format string: %q, want %q", out, want)
	}
}

// Every codec and acks setting, to one partition: the records arrive, in
// batches compressed with the codec asked for.
func TestProduceCodecsAcksPartition(t *testing.T) {
	addr := startGroupsBroker(t)
	cases := []struct {
		codec string
		attr  uint8 // RecordAttrs.CompressionType
		acks  string
	}{{"none", 0, "all"}, {"gzip", 1, "1"}, {"snappy", 2, "0"}, {"lz4", 3, "-1"}, {"zstd", 4, "all"}}
	for _, c := range cases {
		topic := "codec-" + c.codec
		createTopic(t, addr, topic, 3)
		var in strings.Builder
		for i := range 20 {
			fmt.Fprintf(&in, "k%d\t%s-%d\n", i, strings.Repeat("x", 100), i)
		}
		if out, err := runProduce(t, addr, in.String(), topic, "-K", "\t", "--partition", "2", "-z", c.codec, "--acks", c.acks); err != nil {
			t.Fatalf("%s: %v %s", c.codec, err, out)
		}
		// -n rather than -e: with acks=0 the records may land after
		// produce returns.
		out, err := runConsume(t, addr, topic, "-n", "20", "-f", "json")
		if err != nil {
			t.Fatal(err)
		}
		recs := decodeRecords(t, out)
		if len(recs) != 20 {
			t.Fatalf("%s: %d records", c.codec, len(recs))
		}
		for i, r := range recs {
			if r.Partition != 2 || r.Offset != int64(i) || r.Key == nil || *r.Key != fmt.Sprintf("k%d", i) ||
				r.Value == nil || !strings.HasSuffix(*r.Value, fmt.Sprintf("-%d", i)) {
				t.Fatalf("%s: record %d: %+v", c.codec, i, r)
			}
		}
		// The batches as stored carry the codec.
		ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {2: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if got := r.Attrs.CompressionType(); got != c.attr {
				t.Errorf("%s: offset %d stored with compression %d, want %d", c.codec, r.Offset, got, c.attr)
			}
		})
		if fs.NumRecords() == 0 {
			t.Errorf("%s: direct fetch got nothing: %v", c.codec, fs.Errors())
		}
		cl.Close()
		cancel()
	}
	// A partition the topic does not have: the record fails, exit 1.
	if out, err := runProduce(t, addr, "x\n", "codec-none", "--partition", "7", "--timeout", "5s"); err == nil || !strings.Contains(err.Error(), "1 of 1 records not produced") {
		t.Errorf("produce to partition 7 of 3: %v %s", err, out)
	}
}

// --format json in both directions: nulls, header values, timestamps survive
// consume | produce into another topic, byte for byte as JSON.
func TestProduceJSONCopiesATopic(t *testing.T) {
	addr := startGroupsBroker(t)
	createTopic(t, addr, "src", 1)
	createTopic(t, addr, "dst", 1)
	input := strings.Join([]string{
		`{"key":"k1","value":"v1","headers":[{"key":"h","value":"1"},{"key":"h","value":"2"}],"timestamp":1700000000000}`,
		`{"key":null,"value":"no key"}`,
		`{"key":"tomb","value":null,"headers":[{"key":"nullvalue","value":null}]}`,
		`{"value":"<tags> & \"quotes\" ✓","timestamp":1700000000123}`,
		`{"key":"","value":""}`,
	}, "\n") // no newline after the last line: it is a record too
	if out, err := runProduce(t, addr, input, "src", "--format", "json"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	src, err := runConsume(t, addr, "src", "-f", "json", "-e")
	if err != nil {
		t.Fatal(err)
	}
	recs := decodeRecords(t, src)
	if len(recs) != 5 {
		t.Fatalf("%d records:\n%s", len(recs), src)
	}
	type kv struct {
		key, value *string
		headers    []jsonHeader
	}
	want := []kv{
		{strp("k1"), strp("v1"), []jsonHeader{{"h", strp("1")}, {"h", strp("2")}}},
		{nil, strp("no key"), []jsonHeader{}},
		{strp("tomb"), nil, []jsonHeader{{"nullvalue", nil}}},
		{nil, strp(`<tags> & "quotes" ✓`), []jsonHeader{}},
		{strp(""), strp(""), []jsonHeader{}},
	}
	for i, r := range recs {
		if got := (kv{r.Key, r.Value, r.Headers}); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	if recs[0].Timestamp != 1700000000000 || recs[3].Timestamp != 1700000000123 {
		t.Errorf("timestamps %d %d", recs[0].Timestamp, recs[3].Timestamp)
	}
	if !strings.Contains(src, `"value":"<tags> & \"quotes\" ✓"`) {
		t.Errorf("JSON escapes more than it must:\n%s", src)
	}
	if out, err := runProduce(t, addr, src, "dst", "--format", "json"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	dst, err := runConsume(t, addr, "dst", "-f", "json", "-e")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.ReplaceAll(src, `"topic":"src"`, `"topic":"dst"`); dst != want {
		t.Errorf("the copy differs:\n%s\nwant\n%s", dst, want)
	}

	// Text with --null-empty: an empty line is a tombstone; without it an
	// empty value.
	createTopic(t, addr, "tomb", 1)
	if out, err := runProduce(t, addr, "a\n\nb\n", "tomb", "--null-empty"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := runProduce(t, addr, "\n", "tomb"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	out, err := runConsume(t, addr, "tomb", "-f", "json", "-e")
	if err != nil {
		t.Fatal(err)
	}
	tr := decodeRecords(t, out)
	if len(tr) != 4 || tr[1].Value != nil || tr[3].Value == nil || *tr[3].Value != "" || *tr[2].Value != "b" {
		t.Errorf("tombstones:\n%s", out)
	}

	// A line that is not JSON: the records before it are produced, exit 1
	// naming the line.
	createTopic(t, addr, "bad", 1)
	_, err = runProduce(t, addr, `{"value":"ok"}`+"\nnot json\n"+`{"value":"never"}`+"\n", "bad", "--format", "json")
	if err == nil || !strings.Contains(err.Error(), "line 2:") || !strings.Contains(err.Error(), "the 1 records before it were produced") {
		t.Errorf("bad JSON line: %v", err)
	}
	if out, _ := runConsume(t, addr, "bad", "-e"); out != "ok\n" {
		t.Errorf("after the bad line: %q", out)
	}
	// A line over --max-line-bytes.
	_, err = runProduce(t, addr, "short\n"+strings.Repeat("y", 100)+"\n", "bad", "--max-line-bytes", "99")
	if err == nil || !strings.Contains(err.Error(), "line 2 is longer than --max-line-bytes 99") {
		t.Errorf("long line: %v", err)
	}
	if _, err = runProduce(t, addr, strings.Repeat("y", 99)+"\n", "bad", "--max-line-bytes", "99"); err != nil {
		t.Errorf("a line of exactly --max-line-bytes: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// committedTotal sums group's committed offsets on topic.
func committedTotal(t *testing.T, adm *kadm.Client, group string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	o, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	o.Each(func(r kadm.OffsetResponse) { sum += r.At })
	return sum
}

// SIGINT (here: the context) while the input is still open: what was read
// is delivered, the command says so and returns nil.
func TestProduceInterrupted(t *testing.T) {
	addr := startGroupsBroker(t)
	createTopic(t, addr, "int", 1)
	pr, pw := io.Pipe()
	defer pw.Close() // ends produce's reader goroutine, blocked on the pipe
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() { done <- produceMainEnv(ctx, []string{"int"}, pr, &out, &errb, brokerEnv(addr)) }()
	if _, err := io.WriteString(pw, "one\ntwo\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := runConsume(t, addr, "int", "-n", "2"); err != nil || got != "one\ntwo\n" {
		t.Fatalf("consumed %q %v", got, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil || errb.String() != "strata produce: interrupted: 2 records read, 2 acknowledged\n" {
			t.Errorf("after the interrupt: %v %q", err, errb.String())
		}
	case <-time.After(groupsTestTimeout):
		t.Fatal("produce did not return after the interrupt")
	}
}
