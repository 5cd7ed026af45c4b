package e2e

// Exactly-once inside the log (issue 8): a consume-transform-produce copier
// built on franz-go's GroupTransactSession copies topic "in" to topic "out"
// on a 3-broker cluster, committing its input offsets in the same
// transaction as its output, while the copier process and a broker are
// SIGKILLed and restarted. Afterwards a read_committed consumer of "out"
// must find every input record exactly once, in order per key, and nothing
// a read_committed consumer saw during the run may be missing from that
// final committed view (aborted records are never visible to it).
//
// The copier is this test binary re-executed with STRATA_E2E_COPIER set
// (see TestMain), so it can be killed like any process.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const copierEnv = "STRATA_E2E_COPIER"

// copierArgs is what the test passes to a copier process (JSON would do as
// well; a ;-separated list keeps it readable in ps).
type copierArgs struct {
	seeds            []string
	group, in, out   string
	txnID, instance  string
	txnTimeoutMillis int
}

func (a copierArgs) env() string {
	return strings.Join([]string{strings.Join(a.seeds, ","), a.group, a.in, a.out, a.txnID, a.instance,
		strconv.Itoa(a.txnTimeoutMillis)}, ";")
}

func parseCopierArgs(s string) (copierArgs, error) {
	f := strings.Split(s, ";")
	if len(f) != 7 {
		return copierArgs{}, fmt.Errorf("%s=%q: want 7 fields", copierEnv, s)
	}
	ms, err := strconv.Atoi(f[6])
	if err != nil {
		return copierArgs{}, err
	}
	return copierArgs{seeds: strings.Split(f[0], ","), group: f[1], in: f[2], out: f[3], txnID: f[4],
		instance: f[5], txnTimeoutMillis: ms}, nil
}

// runCopier is the copier process's main: it copies until killed (or for
// at most 10 minutes) and returns an exit code.
func runCopier(spec string) int {
	a, err := parseCopierArgs(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(a.seeds...),
		kgo.TransactionalID(a.txnID),
		kgo.TransactionTimeout(time.Duration(a.txnTimeoutMillis)*time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumerGroup(a.group),
		kgo.ConsumeTopics(a.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6*time.Second),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "copier:", err)
		return 1
	}
	defer sess.Close()
	seq := 0
	for ctx.Err() == nil {
		fs := sess.PollRecords(ctx, 2000)
		if fs.IsClientClosed() {
			return 0
		}
		fs.EachError(func(t string, p int32, err error) {
			fmt.Fprintf(os.Stderr, "copier %s: fetch %s-%d: %v\n", a.instance, t, p, err)
		})
		if err := sess.Begin(); err != nil {
			fmt.Fprintf(os.Stderr, "copier %s: begin: %v\n", a.instance, err)
			return 1
		}
		fs.EachRecord(func(r *kgo.Record) {
			seq++
			v := append(append([]byte{}, r.Value...), fmt.Sprintf("|%s.%d", a.instance, seq)...)
			sess.Produce(ctx, &kgo.Record{Topic: a.out, Key: r.Key, Value: v}, nil)
		})
		// Hold the transaction open a little (a slow transform), so the
		// kills of the test land inside transactions with records written.
		if err := sess.Client().Flush(ctx); err == nil {
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := sess.End(ctx, kgo.TryCommit); err != nil {
			fmt.Fprintf(os.Stderr, "copier %s: end: %v\n", a.instance, err)
		}
	}
	return 0
}

// copierProc is one copier child process.
type copierProc struct {
	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan struct{}
}

func startCopier(t *testing.T, a copierArgs) *copierProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &copierProc{logs: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(exe, "-test.run", "^$")
	p.cmd.Env = append(os.Environ(), copierEnv+"="+a.env())
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	dieWithTest(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.kill)
	return p
}

func (p *copierProc) kill() {
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// txnCopyRecords is the size of the copy: small enough for CI under -race
// by default; STRATA_TXN_COPY_RECORDS=1000000 runs the full size.
func txnCopyRecords(t *testing.T) int {
	if s := os.Getenv("STRATA_TXN_COPY_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("STRATA_TXN_COPY_RECORDS=%q", s)
		}
		return n
	}
	return 20_000
}

func TestClusterTransactionalCopyExactlyOnce(t *testing.T) {
	n := txnCopyRecords(t)
	c := startCluster(t, 3)
	ctx := testCtx(t, 15*time.Minute)
	cl := c.client()
	adm := kadm.NewClient(cl)
	for id := int32(0); id < 3; id++ {
		c.waitBrokers(ctx, cl, id, 3)
	}
	const in, out, group, partitions = "txn-in", "txn-out", "txn-copier", 6
	minISR := "2"
	for _, topic := range []string{in, out} {
		resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &minISR}, topic)
		if err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
	}

	// The input: n keyed records, values "key:seq" with seq increasing per
	// key, written idempotently and fully acknowledged before the copy.
	const keys = 97
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	perKey := make([]int, keys)
	for i := 0; i < n; i += 5000 {
		var recs []*kgo.Record
		for j := i; j < i+5000 && j < n; j++ {
			k := j % keys
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("k%02d", k)),
				Value: []byte(fmt.Sprintf("k%02d:%d", k, perKey[k]))})
			perKey[k]++
		}
		if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce input: %v", err)
		}
	}
	inEnd, err := adm.ListEndOffsets(ctx, in)
	if err != nil {
		t.Fatal(err)
	}

	// A read_committed consumer of the output for the whole run: everything
	// it sees must be in the final committed output.
	watchCtx, stopWatch := context.WithCancel(ctx)
	var (
		watchMu   sync.Mutex
		watchSeen = map[string]bool{}
	)
	watchDone := make(chan struct{})
	go func() { // owner: this test; stopped by stopWatch
		defer close(watchDone)
		wcl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics(out),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return
		}
		defer wcl.Close()
		for watchCtx.Err() == nil {
			fs := wcl.PollFetches(watchCtx)
			fs.EachRecord(func(r *kgo.Record) {
				watchMu.Lock()
				watchSeen[string(r.Value)] = true
				watchMu.Unlock()
			})
		}
	}()

	args := copierArgs{seeds: c.seeds(), group: group, in: in, out: out, txnID: "copier", txnTimeoutMillis: 10_000}
	committed := func() int64 {
		resps, err := adm.FetchOffsets(ctx, group)
		if err != nil || resps.Error() != nil {
			return -1
		}
		var sum int64
		resps.Each(func(o kadm.OffsetResponse) {
			if o.Topic == in && o.Err == nil {
				sum += o.At
			}
		})
		return sum
	}
	var total int64
	inEnd.Each(func(o kadm.ListedOffset) { total += o.Offset })

	// Kill the copier three times at growing progress, and one broker once.
	instance := 0
	next := func() *copierProc {
		instance++
		args.instance = fmt.Sprintf("c%d", instance)
		return startCopier(t, args)
	}
	cp := next()
	for round, frac := range []float64{0.15, 0.35, 0.55, 0.75} {
		target := int64(frac * float64(total))
		waitFor(t, 5*time.Minute, func() string {
			if got := committed(); got < target {
				return fmt.Sprintf("round %d: committed %d of %d, want %d\ncopier log:\n%s\n%s",
					round, got, total, target, tail(cp.logs.String(), 40), c.warnings())
			}
			return ""
		})
		if round == 2 {
			victim := c.brokers[1]
			t.Logf("round %d: SIGKILL broker 1", round)
			victim.kill()
			time.Sleep(2 * time.Second)
			victim.start()
			continue
		}
		t.Logf("round %d: SIGKILL copier %s at %d/%d committed", round, args.instance, committed(), total)
		cp.kill()
		cp = next()
	}
	waitFor(t, 10*time.Minute, func() string {
		if got := committed(); got < total {
			return fmt.Sprintf("committed %d of %d\ncopier log:\n%s\n%s", got, total, tail(cp.logs.String(), 40), c.warnings())
		}
		return ""
	})
	cp.kill()

	// The final committed output: every input exactly once, in order per key.
	final := consumeQuiet(t, ctx, c.seeds(), out, n, kgo.ReadCommitted())
	stopWatch()
	<-watchDone
	rep := checkCopy(final, perKey)
	all := consumeQuiet(t, ctx, c.seeds(), out, len(final), kgo.ReadUncommitted()) // aborted records too
	t.Logf("copied %d records with %d copier instances: %s; read_uncommitted sees %d (%d aborted)",
		n, instance, rep, len(all), len(all)-len(final))
	if !rep.ok() {
		t.Fatalf("copy: %s\n%s", rep, c.warnings())
	}
	finalSet := make(map[string]bool, len(final))
	for _, r := range final {
		finalSet[string(r.Value)] = true
	}
	watchMu.Lock()
	t.Logf("the read_committed watcher saw %d records during the run", len(watchSeen))
	if len(watchSeen) == 0 {
		t.Errorf("the read_committed watcher saw nothing")
	}
	var aborted []string
	for v := range watchSeen {
		if !finalSet[v] {
			aborted = append(aborted, v)
		}
	}
	watchMu.Unlock()
	if len(aborted) > 0 {
		sort.Strings(aborted)
		t.Fatalf("a read_committed consumer saw %d records that are not in the committed output (aborted): %v",
			len(aborted), aborted[:min(10, len(aborted))])
	}
}

// consumeQuiet reads topic from the start with the given isolation level
// until it has at least atLeast records and two polls of 2 s brought
// nothing more, and returns the records.
func consumeQuiet(t *testing.T, ctx context.Context, seeds []string, topic string, atLeast int, iso kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(iso), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	deadline := time.Now().Add(3 * time.Minute)
	quiet := 0
	for time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		before := len(out)
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
		if len(out) == before && len(out) >= atLeast {
			quiet++
			if quiet >= 2 {
				break
			}
		} else {
			quiet = 0
		}
	}
	return out
}

type copyReport struct {
	Inputs, Read, Lost, Dup, Reordered int
	Examples                           []string
}

func (r copyReport) ok() bool { return r.Lost == 0 && r.Dup == 0 && r.Reordered == 0 }

func (r copyReport) String() string {
	return fmt.Sprintf("inputs %d, read %d: lost %d, duplicated %d, reordered %d %v",
		r.Inputs, r.Read, r.Lost, r.Dup, r.Reordered, r.Examples)
}

// checkCopy checks output values "kNN:seq|instance.n" against the inputs
// (perKey[k] values per key, seq 0..perKey[k]-1): each input exactly once,
// seq increasing per key in partition order.
func checkCopy(read []*kgo.Record, perKey []int) copyReport {
	var r copyReport
	note := func(format string, args ...any) {
		if len(r.Examples) < 10 {
			r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
		}
	}
	seen := make([][]int, len(perKey))
	for k, c := range perKey {
		r.Inputs += c
		seen[k] = make([]int, c)
	}
	last := make([]int, len(perKey))
	for i := range last {
		last[i] = -1
	}
	for _, rec := range read {
		r.Read++
		in, _, _ := strings.Cut(string(rec.Value), "|")
		ks, ss, ok := strings.Cut(in, ":")
		k, err1 := strconv.Atoi(strings.TrimPrefix(ks, "k"))
		s, err2 := strconv.Atoi(ss)
		if !ok || err1 != nil || err2 != nil || k < 0 || k >= len(perKey) || s < 0 || s >= perKey[k] {
			note("foreign record %q", rec.Value)
			r.Dup++
			continue
		}
		seen[k][s]++
		if seen[k][s] == 2 {
			r.Dup++
			note("dup %s", rec.Value)
		}
		if s < last[k] {
			r.Reordered++
			note("reordered %s after seq %d", rec.Value, last[k])
		}
		last[k] = s
	}
	for k := range seen {
		for s, c := range seen[k] {
			if c == 0 {
				r.Lost++
				note("lost k%02d:%d", k, s)
			}
		}
	}
	return r
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
