package e2e

// Idempotent produce under faults: franz-go's default (idempotent)
// producer writes through a TCP proxy that drops connections after the
// broker answered a Produce request but before the answer reaches the
// client, so the client retries batches the broker already wrote; the
// broker is also SIGKILLed and restarted mid-run. Every record must be in
// the log exactly once, in order per key.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/kframe"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// dropProxy forwards Kafka connections to a broker and, with probability
// dropProb (seeded), closes a connection instead of forwarding a Produce
// response, at most maxDrops times. It owns every goroutine it starts;
// close stops them and waits.
type dropProxy struct {
	t        *testing.T
	ln       net.Listener
	target   atomic.Pointer[string]
	dropProb float64

	mu        sync.Mutex
	rng       *rand.Rand
	dropsLeft int
	drops     int
	conns     map[net.Conn]struct{}
	closed    bool

	wg sync.WaitGroup
}

func startDropProxy(t *testing.T, seed uint64, dropProb float64, maxDrops int) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{t: t, ln: ln, dropProb: dropProb, rng: rand.New(rand.NewPCG(seed, seed)),
		dropsLeft: maxDrops, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *dropProxy) addr() string { return p.ln.Addr().String() }

func (p *dropProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

// track registers a connection for close; false once the proxy is closed.
func (p *dropProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *dropProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// dialBroker connects to the broker, waiting up to 10 s for one that is
// being restarted. Closing the client's connection at once instead would
// be a fault no real broker makes: a stopped broker refuses connections,
// which clients retry, whereas franz-go (by design) fails the records of a
// connection that is accepted and closed before its first answer, taking
// it for a TLS or SASL mismatch.
func (p *dropProxy) dialBroker() (net.Conn, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", *p.target.Load(), 5*time.Second)
		if err == nil || time.Now().After(deadline) || p.isClosed() {
			return c, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *dropProxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// maxFrame bounds a proxied frame (the broker's own request limit).
const maxFrame = 100 << 20

// readFrame reads one frame and returns it with its size prefix, to be
// forwarded as it came.
func readFrame(r io.Reader) ([]byte, error) {
	b, err := kframe.ReadFrame(r, maxFrame, nil)
	if err != nil {
		return nil, err
	}
	return kframe.AppendFrame(make([]byte, 0, kframe.HeaderBytes+len(b)), b), nil
}

// handle proxies one client connection: requests go through unchanged
// (their api keys queued in order), responses are matched to them (Kafka
// answers in order on a connection) and a Produce response may be dropped
// together with the connection.
func (p *dropProxy) handle(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	broker, err := p.dialBroker()
	if err != nil {
		return // the broker stayed down: the client sees a closed connection
	}
	if !p.track(broker) {
		broker.Close()
		return
	}
	defer p.untrack(broker)
	keys := make(chan int16, 4096)
	p.wg.Add(1)
	go func() { // client -> broker
		defer p.wg.Done()
		defer broker.Close()
		defer close(keys)
		for {
			f, err := readFrame(client)
			if err != nil || len(f) < 6 {
				return
			}
			key := int16(binary.BigEndian.Uint16(f[4:]))
			select {
			case keys <- key:
			default:
				return // more pipelined requests than any client sends
			}
			if _, err := broker.Write(f); err != nil {
				return
			}
		}
	}()
	for { // broker -> client
		f, err := readFrame(broker)
		if err != nil {
			return
		}
		key, ok := <-keys
		if !ok {
			return
		}
		if key == 0 && p.drop() {
			return // the deferred closes drop both sides: the answer is lost
		}
		if _, err := client.Write(f); err != nil {
			return
		}
	}
}

func (p *dropProxy) drop() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropsLeft == 0 || p.rng.Float64() >= p.dropProb {
		return false
	}
	p.dropsLeft--
	p.drops++
	return true
}

func (p *dropProxy) dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drops
}

func (p *dropProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// TestIdempotentProduceThroughFaults: 3 partitions, 40 keys, 24,000
// records; produce answers dropped (seeded) and the broker SIGKILLed twice.
// The log must hold every record once, per key in send order.
func TestIdempotentProduceThroughFaults(t *testing.T) {
	const (
		topic      = "idem"
		partitions = 3
		keys       = 40
		total      = 24_000
		seed       = 20261130
	)
	proxy := startDropProxy(t, seed, 0.3, 60)
	props := fmt.Sprintf("advertised.listeners=PLAINTEXT://%s\nlog.segment.bytes=262144\n", proxy.addr())
	b := startBroker(t, "", "--config", writeProps(t, props))
	proxy.target.Store(&b.addr)
	ctx := testCtx(t, 4*time.Minute)
	if resp, err := b.admin().CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(proxy.addr()), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(2*time.Millisecond), kgo.MaxBufferedRecords(2000),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		// A dropped answer or a killed broker makes franz-go refresh
		// metadata before it retries, at most once per MetadataMinAge
		// (5 s by default): each such refresh stalled the run 5 s.
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var (
		acked   atomic.Int64
		errMu   sync.Mutex
		errs    []error
		wg      sync.WaitGroup
		killsAt = map[int64]bool{total / 3: true, 2 * total / 3: true}
	)
	for i := 0; i < total; i++ {
		k := i % keys
		rec := &kgo.Record{Key: []byte("key-" + strconv.Itoa(k)), Value: []byte(fmt.Sprintf("%d:%d", k, i/keys))}
		wg.Add(1)
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
				return
			}
			acked.Add(1)
		})
		if killsAt[int64(i)] {
			// Let some of what was sent be acknowledged, then SIGKILL the
			// broker with requests in flight and start it again.
			for acked.Load() < int64(i)/2 && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			b.kill()
			time.Sleep(500 * time.Millisecond)
			b.start()
			t.Logf("killed and restarted the broker after %d sends, %d acknowledged", i, acked.Load())
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d produce errors, first: %v\n%s", len(errs), errs[0], b.logs)
	}
	if proxy.dropped() == 0 {
		t.Fatal("the proxy dropped no produce answer: the test proved nothing")
	}
	t.Logf("seed %d: %d produce answers dropped, %d records acknowledged", uint64(seed), proxy.dropped(), acked.Load())

	checkExactlyOnce(t, ctx, []string{b.addr}, topic, partitions, keys, total)
}

// checkExactlyOnce reads topic back from the start: the log must hold
// exactly total records whose values "<key>:<n>" run 0, 1, 2, ... per key,
// total/keys of them per key (no duplicate, no gap, no reordering).
func checkExactlyOnce(t *testing.T, ctx context.Context, seeds []string, topic string, partitions, keys, total int) {
	t.Helper()
	adm, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	var inLog int64
	waitFor(t, time.Minute, func() string { // leaders may still be moving
		ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return fmt.Sprintf("end offsets of %s: %v", topic, err)
		}
		inLog = 0
		n := 0
		ends.Each(func(o kadm.ListedOffset) { inLog += o.Offset; n++ })
		if n != partitions {
			return fmt.Sprintf("end offsets of %d partitions, want %d", n, partitions)
		}
		return ""
	})
	if inLog != int64(total) {
		t.Errorf("the log holds %d records, %d were produced", inLog, total)
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	next := map[string]int{} // key -> next expected sequence
	read := int64(0)
	for read < inLog && ctx.Err() == nil {
		fs := rd.PollFetches(ctx)
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s/%d: %v", tp, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			read++
			k, seqStr, _ := strings.Cut(string(r.Value), ":")
			seq, _ := strconv.Atoi(seqStr)
			if want := next[k]; seq != want {
				t.Fatalf("key %s at %s/%d@%d: sequence %d, want %d (a duplicate, gap or reorder)", k, r.Topic, r.Partition, r.Offset, seq, want)
			}
			next[k]++
		})
	}
	if read != int64(total) {
		t.Fatalf("read %d records, want %d", read, total)
	}
	for k := 0; k < keys; k++ {
		if got := next[strconv.Itoa(k)]; got != total/keys {
			t.Fatalf("key %d: %d records read, want %d", k, got, total/keys)
		}
	}
}

// TestIdempotentProduceLeaderKilled: three brokers, replication factor 3;
// the broker leading partition 0 is SIGKILLed while franz-go's idempotent
// producer runs. The new leaders know the producers from the replicated
// log, so retried batches are answered as duplicates: every record is in
// the log once, in order per key.
func TestIdempotentProduceLeaderKilled(t *testing.T) {
	const (
		topic      = "idem-failover"
		partitions = 3
		keys       = 30
		total      = 9_000
	)
	c := startCluster(t, 3)
	ctx := testCtx(t, 4*time.Minute)
	admCl := c.client()
	for id := int32(0); id < 3; id++ {
		c.waitBrokers(ctx, admCl, id, 3)
	}
	resp, err := kadm.NewClient(admCl).CreateTopic(ctx, partitions, 3, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	var leader int32 = -1
	waitFor(t, 30*time.Second, func() string {
		md, err := metadataFrom(ctx, admCl, 0)
		if err != nil {
			return err.Error()
		}
		mt := topicOf(md, topic)
		if mt == nil || len(mt.Partitions) != partitions || mt.Partitions[0].Leader < 0 {
			return "topic not ready"
		}
		leader = mt.Partitions[0].Leader
		return ""
	})

	cl := c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(2*time.Millisecond),
		kgo.MaxBufferedRecords(1000), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	var (
		acked atomic.Int64
		errMu sync.Mutex
		errs  []error
		wg    sync.WaitGroup
	)
	for i := 0; i < total; i++ {
		k := i % keys
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte("key-" + strconv.Itoa(k)), Value: []byte(fmt.Sprintf("%d:%d", k, i/keys))},
			func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
					return
				}
				acked.Add(1)
			})
		if i == total/3 {
			for acked.Load() < int64(i)/2 && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			c.brokers[leader].kill()
			t.Logf("killed broker %d (leader of partition 0) after %d sends, %d acknowledged", leader, i, acked.Load())
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d produce errors, first: %v\n%s", len(errs), errs[0], c.warnings())
	}
	c.brokers[leader].start() // back as a follower: truncates and catches up
	checkExactlyOnce(t, ctx, c.seeds(), topic, partitions, keys, total)
}
