package e2e

import (
	"context"
	"github.com/stratalog/strata/partitioner"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkajsResult is the JSON line kafkajs/roundtrip.js prints. kafkajs gives
// offsets as decimal strings.
type kafkajsResult struct {
	Created bool `json:"created"`
	Acks    []struct {
		Partition  int32  `json:"partition"`
		BaseOffset string `json:"baseOffset"`
	} `json:"acks"`
	Offsets []struct {
		Partition int32  `json:"partition"`
		Low       string `json:"low"`
		High      string `json:"high"`
	} `json:"offsets"`
	Records   [][4]any `json:"records"` // the group consumer's [partition, offset, key, value]
	Committed []struct {
		Partition int32  `json:"partition"`
		Offset    string `json:"offset"`
	} `json:"committed"`
}

// TestKafkajsRoundTrip runs kafkajs/roundtrip.js (kafkajs 2.2.4: admin
// createTopics, a non-idempotent acks=-1 producer with the murmur2
// DefaultPartitioner, admin.fetchTopicOffsets, then a group consumer that
// reads everything, commits and admin.fetchOffsets), plain and gzip (kafkajs
// has no built-in snappy). franz-go reads the partitions back here and checks
// every record once, order per key, Kafka's murmur2 placement, that the
// script's produce acks and fetchTopicOffsets agree with what was stored,
// that the kafkajs group consumer read the same records, and that the
// group's committed offsets are the partitions' ends.
func TestKafkajsRoundTrip(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: scripts/test installs the kafkajs test's dependencies when node and npm are present")
	}
	script, err := filepath.Abs(filepath.Join("kafkajs", "roundtrip.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(script), "node_modules", "kafkajs", "package.json")); err != nil {
		t.Fatalf("kafkajs is not installed (%v): scripts/test installs it (npm ci --prefix e2e/kafkajs)", err)
	}
	b := startBroker(t, "")
	for _, codec := range []string{"none", "gzip"} {
		t.Run(codec, func(t *testing.T) {
			ctx := testCtx(t, 2*time.Minute)
			topic := "kafkajs-" + codec
			cmd := exec.CommandContext(ctx, node, script, b.addr, topic, codec)
			cmd.Env = append(os.Environ(), "KAFKAJS_NO_PARTITIONER_WARNING=1")
			var res kafkajsResult
			runClientScript(t, b, cmd, &res)
			if !res.Created {
				t.Fatalf("admin.createTopics reported %s as not created", topic)
			}

			recs := consumeFromStart(t, ctx, b, topic, clientPartitions, clientRecords)
			perPartition := checkKeyedRecords(t, recs, clientRecords,
				func(k []byte) int32 { return partitioner.KeyPartition(k, clientPartitions) })

			// Acks: 20 sends, each acking every partition it wrote to with the
			// offset its batch landed at; per partition those must start at 0
			// and strictly increase below the partition's end.
			lastBase := map[int32]int64{}
			for _, a := range res.Acks {
				base, err := strconv.ParseInt(a.BaseOffset, 10, 64)
				if err != nil {
					t.Fatalf("ack %+v: %v", a, err)
				}
				prev, seen := lastBase[a.Partition]
				if (!seen && base != 0) || (seen && base <= prev) || base >= perPartition[a.Partition] {
					t.Fatalf("partition %d: ack base offset %d after %d (seen %v), end %d", a.Partition, base, prev, seen, perPartition[a.Partition])
				}
				lastBase[a.Partition] = base
			}
			if len(lastBase) != clientPartitions {
				t.Fatalf("acks name %d partitions, want %d", len(lastBase), clientPartitions)
			}

			// The kafkajs group consumer read the same records, each
			// partition's in order, and committed each partition's end.
			requireSameRecords(t, "the kafkajs group consumer", scriptRecords(t, res.Records, clientPartitions), recs)
			if len(res.Committed) != clientPartitions {
				t.Fatalf("fetchOffsets gave %d partitions, want %d: %+v", len(res.Committed), clientPartitions, res.Committed)
			}
			for _, c := range res.Committed {
				if off, err := strconv.ParseInt(c.Offset, 10, 64); err != nil || off != perPartition[c.Partition] {
					t.Fatalf("group offset of partition %d: %q, want the end %d", c.Partition, c.Offset, perPartition[c.Partition])
				}
			}

			start, end := kadmOffsets(t, ctx, b.admin(), topic)
			if len(res.Offsets) != clientPartitions {
				t.Fatalf("fetchTopicOffsets gave %d partitions, want %d: %+v", len(res.Offsets), clientPartitions, res.Offsets)
			}
			for _, o := range res.Offsets {
				low, lerr := strconv.ParseInt(o.Low, 10, 64)
				high, herr := strconv.ParseInt(o.High, 10, 64)
				if lerr != nil || herr != nil || low != 0 || high != perPartition[o.Partition] ||
					low != start[o.Partition] || high != end[o.Partition] {
					t.Fatalf("fetchTopicOffsets partition %d: low %q high %q; franz-go consumed %d, lists %d..%d",
						o.Partition, o.Low, o.High, perPartition[o.Partition], start[o.Partition], end[o.Partition])
				}
			}
		})
	}
}

// consumeFromStart reads n records from every partition of topic with
// franz-go (no group), returning each partition's records in order.
func consumeFromStart(t *testing.T, ctx context.Context, b *broker, topic string, partitions int32, n int) []consumedRecord {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	byPartition := make([][]consumedRecord, partitions)
	got := 0
	for got < n {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records before the deadline", got, n)
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v\nbroker:\n%s", topic, p, err, b.logs)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Partition < 0 || r.Partition >= partitions {
				t.Fatalf("record from partition %d", r.Partition)
			}
			byPartition[r.Partition] = append(byPartition[r.Partition],
				consumedRecord{r.Partition, r.Offset, r.Key, r.Value})
			got++
		})
	}
	var recs []consumedRecord
	for _, rs := range byPartition {
		recs = append(recs, rs...)
	}
	return recs
}
