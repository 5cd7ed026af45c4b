package e2e

// Round trips with two more Go clients that implement the protocol
// themselves rather than through kmsg: IBM/sarama and segmentio/kafka-go.
// Each produces keyed records at acks=all, plain and snappy, reads them back
// partition by partition without a consumer group, and checks every record
// once, order per key, the placement and offsets the produce acks reported,
// and the log start/end offsets the client's ListOffsets sees.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/stratalog/strata/partitioner"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
)

const (
	clientRecords    = 2000
	clientKeys       = 50
	clientPartitions = 3
)

// keyedRecord is record i of a client round trip: key "k<i%50>", value
// "<i/50>-<padding>", so the value's prefix is the record's sequence number
// within its key.
func keyedRecord(i int) (key, value []byte) {
	key = []byte("k" + strconv.Itoa(i%clientKeys))
	value = []byte(strconv.Itoa(i/clientKeys) + "-" + strings.Repeat("v", 100))
	return key, value
}

// consumedRecord is one record as a client read it back.
type consumedRecord struct {
	partition int32
	offset    int64
	key       []byte
	value     []byte
}

// runClientScript runs cmd, a client script driving b, and decodes the one
// JSON line it prints on stdout into out; a failure shows the script's
// stderr and the broker's log.
func runClientScript(t *testing.T, b *broker, cmd *exec.Cmd, out any) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	name := filepath.Base(cmd.Path) + " " + filepath.Base(cmd.Args[1])
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s\nbroker:\n%s", name, err, &stderr, b.logs)
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("%s printed %q: %v\nstderr:\n%s", name, &stdout, err, &stderr)
	}
}

// scriptRecords decodes the [partition, offset, key, value] records a client
// script printed as JSON and orders them partition by partition, each
// partition's records in the order the script read them (the order
// consumeFromStart returns).
func scriptRecords(t *testing.T, raw [][4]any, partitions int32) []consumedRecord {
	t.Helper()
	byPartition := make([][]consumedRecord, partitions)
	for _, r := range raw {
		p, pok := r[0].(float64)
		off, ook := r[1].(float64)
		key, kok := r[2].(string)
		value, vok := r[3].(string)
		if !pok || !ook || !kok || !vok || p < 0 || p >= float64(partitions) {
			t.Fatalf("record %v from the client script", r)
		}
		byPartition[int(p)] = append(byPartition[int(p)], consumedRecord{int32(p), int64(off), []byte(key), []byte(value)})
	}
	var recs []consumedRecord
	for _, rs := range byPartition {
		recs = append(recs, rs...)
	}
	return recs
}

// requireSameRecords fails unless who read exactly want, in want's order.
func requireSameRecords(t *testing.T, who string, got, want []consumedRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s read %d records, want %d", who, len(got), len(want))
	}
	for i, g := range got {
		if w := want[i]; g.partition != w.partition || g.offset != w.offset || !bytes.Equal(g.key, w.key) || !bytes.Equal(g.value, w.value) {
			t.Fatalf("record %d: %s read %d/%d %s=%s, want %d/%d %s=%s",
				i, who, g.partition, g.offset, g.key, g.value, w.partition, w.offset, w.key, w.value)
		}
	}
}

// checkKeyedRecords checks records consumed partition by partition (each
// partition's records in the order read) against what keyedRecord produced:
// n records in all, each partition's offsets contiguous from 0, each key's
// sequence numbers 0, 1, 2... in order and all on one partition, which is
// wantPartition(key) when wantPartition is not nil. It returns how many
// records each partition holds.
func checkKeyedRecords(t *testing.T, recs []consumedRecord, n int, wantPartition func(key []byte) int32) map[int32]int64 {
	t.Helper()
	if len(recs) != n {
		t.Fatalf("consumed %d records, want %d", len(recs), n)
	}
	perPartition := map[int32]int64{}
	nextSeq := map[string]int{}
	keyPartition := map[string]int32{}
	for _, r := range recs {
		if r.offset != perPartition[r.partition] {
			t.Fatalf("partition %d: record at offset %d, want %d", r.partition, r.offset, perPartition[r.partition])
		}
		perPartition[r.partition]++
		key := string(r.key)
		if p, ok := keyPartition[key]; ok && p != r.partition {
			t.Fatalf("key %s on partitions %d and %d", key, p, r.partition)
		}
		keyPartition[key] = r.partition
		if wantPartition != nil {
			if want := wantPartition(r.key); r.partition != want {
				t.Fatalf("key %s on partition %d, want %d", key, r.partition, want)
			}
		}
		seqText, pad, ok := bytes.Cut(r.value, []byte("-"))
		seq, err := strconv.Atoi(string(seqText))
		if !ok || err != nil || len(pad) != 100 {
			t.Fatalf("partition %d offset %d: bad value %q", r.partition, r.offset, r.value)
		}
		if seq != nextSeq[key] {
			t.Fatalf("key %s: got seq %d at %d/%d, want %d", key, seq, r.partition, r.offset, nextSeq[key])
		}
		nextSeq[key]++
	}
	if len(nextSeq) != clientKeys {
		t.Fatalf("consumed %d distinct keys, want %d", len(nextSeq), clientKeys)
	}
	return perPartition
}

func createTopic(t *testing.T, ctx context.Context, b *broker, topic string, partitions int32) {
	t.Helper()
	resp, err := b.admin().CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
}

// TestSaramaRoundTrip produces with sarama's SyncProducer and consumes with
// its partition consumer, speaking a modern protocol (Kafka 3.6: Produce v9,
// Fetch v12, Metadata v11, ListOffsets v6) and an old one (Kafka 0.11:
// Produce v3 and Fetch v5, the first versions carrying RecordBatch, Metadata
// v4, ListOffsets v2).
//
// sarama's default partitioner hashes keys with FNV-1a, not Kafka's murmur2,
// so placement is checked against sarama's own partitioner and against the
// partition and offset each record was acked with.
func TestSaramaRoundTrip(t *testing.T) {
	b := startBroker(t, "")
	versions := []struct {
		name string
		v    sarama.KafkaVersion
	}{{"v3.6", sarama.V3_6_0_0}, {"v0.11", sarama.V0_11_0_0}}
	codecs := []struct {
		name  string
		codec sarama.CompressionCodec
	}{{"none", sarama.CompressionNone}, {"snappy", sarama.CompressionSnappy}}
	for _, v := range versions {
		for _, c := range codecs {
			t.Run(v.name+"-"+c.name, func(t *testing.T) {
				ctx := testCtx(t, 2*time.Minute)
				topic := "sarama-" + strings.ReplaceAll(v.name, ".", "") + "-" + c.name
				createTopic(t, ctx, b, topic, clientPartitions)
				saramaRoundTrip(t, ctx, b, topic, v.v, c.codec)
			})
		}
	}
}

func saramaRoundTrip(t *testing.T, ctx context.Context, b *broker, topic string, version sarama.KafkaVersion, codec sarama.CompressionCodec) {
	cfg := sarama.NewConfig()
	cfg.ClientID = "strata-e2e-sarama"
	cfg.Version = version
	cfg.Metadata.AllowAutoTopicCreation = false
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Idempotent = false
	cfg.Producer.Compression = codec
	cfg.Producer.Retry.Max = 0 // a retry could reorder a key; the broker must not need one
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 50 * time.Millisecond // Close waits out a fetch parked at the log end
	client, err := sarama.NewClient([]string{b.addr}, cfg)
	if err != nil {
		t.Fatalf("sarama client: %v\n%s", err, b.logs)
	}
	defer client.Close()

	// sarama's Broker.Open marks the broker opened before it takes the lock
	// its dial holds, so when the producer's partition goroutines ask for the
	// leader at once, one may send in that window and fail with "broker not
	// connected" (seen about once in 20 runs; Retry.Max is 0 here). Open each
	// leader from this goroutine and wait for its dial first: Leader returns
	// with the dial's lock taken, Connected waits for it.
	for p := int32(0); p < clientPartitions; p++ {
		leader, err := client.Leader(topic, p)
		if err != nil {
			t.Fatalf("sarama leader of %s/%d: %v", topic, p, err)
		}
		if ok, err := leader.Connected(); !ok {
			t.Fatalf("sarama could not connect to the leader of %s/%d: %v\n%s", topic, p, err, b.logs)
		}
	}

	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]*sarama.ProducerMessage, clientRecords)
	for i := range msgs {
		k, v := keyedRecord(i)
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(k), Value: sarama.ByteEncoder(v)}
	}
	if err := producer.SendMessages(msgs); err != nil {
		var perrs sarama.ProducerErrors
		if errors.As(err, &perrs) && len(perrs) > 0 {
			err = fmt.Errorf("%d failed, first: %w", len(perrs), perrs[0].Err)
		}
		t.Fatalf("sarama produce: %v\nbroker:\n%s", err, b.logs)
	}
	if err := producer.Close(); err != nil {
		t.Fatal(err)
	}

	// Each message now carries the partition and offset its ack reported.
	type at struct {
		p   int32
		off int64
	}
	acked := make(map[at]*sarama.ProducerMessage, len(msgs))
	hash := sarama.NewHashPartitioner(topic)
	for _, m := range msgs {
		want, err := hash.Partition(m, clientPartitions)
		if err != nil {
			t.Fatal(err)
		}
		if m.Partition != want {
			t.Fatalf("record acked on partition %d, sarama's hash partitioner says %d", m.Partition, want)
		}
		if _, dup := acked[at{m.Partition, m.Offset}]; dup {
			t.Fatalf("two records acked at %d/%d", m.Partition, m.Offset)
		}
		acked[at{m.Partition, m.Offset}] = m
	}
	ackedPer := map[int32]int64{}
	for k := range acked {
		ackedPer[k.p]++
	}

	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var recs []consumedRecord
	for p := int32(0); p < clientPartitions; p++ {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consume partition %d: %v", p, err)
		}
		for got := int64(0); got < ackedPer[p]; got++ {
			select {
			case m := <-pc.Messages():
				want := acked[at{p, m.Offset}]
				if want == nil {
					t.Fatalf("consumed %d/%d, which no ack reported", p, m.Offset)
				}
				wk, _ := want.Key.Encode()
				wv, _ := want.Value.Encode()
				if !bytes.Equal(m.Key, wk) || !bytes.Equal(m.Value, wv) {
					t.Fatalf("%d/%d: consumed %s=%.8q..., acked %s=%.8q...", p, m.Offset, m.Key, m.Value, wk, wv)
				}
				recs = append(recs, consumedRecord{p, m.Offset, m.Key, m.Value})
			case err := <-pc.Errors():
				t.Fatalf("consume partition %d: %v\nbroker:\n%s", p, err, b.logs)
			case <-ctx.Done():
				t.Fatalf("partition %d: consumed %d of %d records before the deadline", p, got, ackedPer[p])
			}
		}
		if hwm := pc.HighWaterMarkOffset(); hwm != ackedPer[p] {
			t.Errorf("partition %d: high watermark %d, want %d", p, hwm, ackedPer[p])
		}
		if err := pc.Close(); err != nil {
			t.Fatal(err)
		}
	}
	checkKeyedRecords(t, recs, clientRecords, nil)

	for p := int32(0); p < clientPartitions; p++ {
		newest, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil || newest != ackedPer[p] {
			t.Fatalf("partition %d: newest offset %d (%v), want %d", p, newest, err, ackedPer[p])
		}
		oldest, err := client.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil || oldest != 0 {
			t.Fatalf("partition %d: oldest offset %d (%v), want 0", p, oldest, err)
		}
	}
}

// TestKafkaGoRoundTrip creates a topic with kafka-go's Conn (CreateTopics on
// the controller that Metadata v1 names), produces with kafka.Writer and its
// Java-compatible Murmur2Balancer, reads each partition back with a
// group-less kafka.Reader, checks the first and last offsets through
// DialLeader (ListOffsets v1), and deletes the topic with Conn.DeleteTopics.
func TestKafkaGoRoundTrip(t *testing.T) {
	b := startBroker(t, "")
	for _, c := range []struct {
		name  string
		codec kafka.Compression
	}{{"none", 0}, {"snappy", kafka.Snappy}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t, 2*time.Minute)
			topic := "kafkago-" + c.name
			ctrl := kafkaGoController(t, ctx, b)
			if err := ctrl.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: clientPartitions, ReplicationFactor: 1}); err != nil {
				t.Fatalf("kafka-go CreateTopics: %v\nbroker:\n%s", err, b.logs)
			}
			if topics, err := b.admin().ListTopics(ctx, topic); err != nil || !topics.Has(topic) {
				t.Fatalf("kafka-go CreateTopics returned no error but %s is not listed (%v)\nbroker:\n%s", topic, err, b.logs)
			}
			kafkaGoRoundTrip(t, ctx, b, topic, c.codec)

			if err := ctrl.DeleteTopics(topic); err != nil {
				t.Fatalf("kafka-go DeleteTopics: %v\nbroker:\n%s", err, b.logs)
			}
			topics, err := b.admin().ListTopics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if topics.Has(topic) {
				t.Fatalf("%s still listed after DeleteTopics", topic)
			}
		})
	}
}

// kafkaGoController dials the broker, asks it for the controller (Metadata
// v1) and dials that, as kafka-go's docs say to before CreateTopics.
func kafkaGoController(t *testing.T, ctx context.Context, b *broker) *kafka.Conn {
	t.Helper()
	conn, err := kafka.DialContext(ctx, "tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctrl, err := conn.Controller()
	if err != nil {
		t.Fatalf("kafka-go Controller: %v", err)
	}
	if ctrl.Host == "" || ctrl.Port == 0 {
		t.Fatalf("kafka-go found no controller: %+v", ctrl)
	}
	cc, err := kafka.DialContext(ctx, "tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func kafkaGoRoundTrip(t *testing.T, ctx context.Context, b *broker, topic string, codec kafka.Compression) {
	type at struct {
		p   int32
		off int64
	}
	var (
		mu      sync.Mutex
		acked   = map[at]kafka.Message{}
		ackErrs []error
	)
	// A Writer's Transport answers metadata from a cache it refreshes every
	// 6s, so a topic created after kafka.DefaultTransport first filled its
	// cache (by an earlier subtest) would look unknown: each writer gets
	// its own.
	transport := &kafka.Transport{ClientID: "strata-e2e-kafka-go"}
	defer transport.CloseIdleConnections()
	w := &kafka.Writer{
		Addr:         kafka.TCP(b.addr),
		Transport:    transport,
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		Compression:  codec,
		BatchSize:    100,
		BatchTimeout: 5 * time.Millisecond,
		MaxAttempts:  1, // a retry could reorder a key; the broker must not need one
		Completion: func(msgs []kafka.Message, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				ackErrs = append(ackErrs, err)
				return
			}
			for _, m := range msgs {
				acked[at{int32(m.Partition), m.Offset}] = m
			}
		},
	}
	msgs := make([]kafka.Message, clientRecords)
	for i := range msgs {
		msgs[i].Key, msgs[i].Value = keyedRecord(i)
	}
	err := w.WriteMessages(ctx, msgs...)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("kafka-go produce: %v\nbroker:\n%s", err, b.logs)
	}
	mu.Lock()
	if len(ackErrs) > 0 || len(acked) != clientRecords {
		t.Fatalf("kafka-go acks: %d distinct (partition, offset) for %d records, errors %v", len(acked), clientRecords, ackErrs)
	}
	mu.Unlock()
	ackedPer := map[int32]int64{}
	for k, m := range acked {
		if want := partitioner.KeyPartition(m.Key, clientPartitions); k.p != want {
			t.Fatalf("key %s acked on partition %d, murmur2 says %d", m.Key, k.p, want)
		}
		ackedPer[k.p]++
	}

	var recs []consumedRecord
	for p := int32(0); p < clientPartitions; p++ {
		recs = append(recs, kafkaGoReadPartition(t, ctx, b, topic, p, ackedPer[p])...)
	}
	for _, r := range recs {
		want, ok := acked[at{r.partition, r.offset}]
		if !ok || !bytes.Equal(want.Key, r.key) || !bytes.Equal(want.Value, r.value) {
			t.Fatalf("%d/%d: consumed key %s, acked %q (acked: %v)", r.partition, r.offset, r.key, want.Key, ok)
		}
	}
	checkKeyedRecords(t, recs, clientRecords, func(k []byte) int32 { return partitioner.KeyPartition(k, clientPartitions) })

	for p := int32(0); p < clientPartitions; p++ {
		conn, err := kafka.DialLeader(ctx, "tcp", b.addr, topic, int(p))
		if err != nil {
			t.Fatalf("DialLeader %s/%d: %v", topic, p, err)
		}
		first, ferr := conn.ReadFirstOffset()
		last, lerr := conn.ReadLastOffset()
		conn.Close()
		if ferr != nil || lerr != nil || first != 0 || last != ackedPer[p] {
			t.Fatalf("partition %d: first %d (%v), last %d (%v), want 0 and %d", p, first, ferr, last, lerr, ackedPer[p])
		}
	}
}

// kafkaGoReadPartition reads want records from partition p with a
// group-less kafka.Reader starting at the first offset.
func kafkaGoReadPartition(t *testing.T, ctx context.Context, b *broker, topic string, p int32, want int64) []consumedRecord {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   []string{b.addr},
		Topic:     topic,
		Partition: int(p),
		MinBytes:  1,
		MaxBytes:  1 << 20,
		MaxWait:   100 * time.Millisecond,
	})
	defer r.Close()
	if err := r.SetOffset(kafka.FirstOffset); err != nil {
		t.Fatal(err)
	}
	recs := make([]consumedRecord, 0, want)
	for int64(len(recs)) < want {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go read partition %d after %d of %d records: %v\nbroker:\n%s", p, len(recs), want, err, b.logs)
		}
		if int32(m.Partition) != p {
			t.Fatalf("reader for partition %d returned partition %d", p, m.Partition)
		}
		recs = append(recs, consumedRecord{p, m.Offset, m.Key, m.Value})
	}
	if lag := r.Lag(); lag != 0 {
		t.Errorf("partition %d: reader lag %d after reading everything", p, lag)
	}
	return recs
}

// kadmOffsets returns each partition's log start and end offsets.
func kadmOffsets(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) (start, end map[int32]int64) {
	t.Helper()
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	start, end = map[int32]int64{}, map[int32]int64{}
	starts.Each(func(o kadm.ListedOffset) { start[o.Partition] = o.Offset })
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	return start, end
}
