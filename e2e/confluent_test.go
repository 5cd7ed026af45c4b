package e2e

import (
	"bytes"
	"context"
	"fmt"
	"github.com/stratalog/strata/partitioner"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// confluentResult is the JSON line confluent/roundtrip.py prints.
type confluentResult struct {
	Acks      [][2]int64 `json:"acks"`      // [partition, offset] per delivery report
	Records   [][4]any   `json:"records"`   // [partition, offset, key, value] in the order consumed
	Committed [][2]int64 `json:"committed"` // [partition, offset] read back after the commit
}

// TestConfluentPythonRoundTrip runs confluent/roundtrip.py with
// confluent-kafka-python (Debian's python3-confluent-kafka over the system
// librdkafka, which scripts/test installs): AdminClient.create_topics, an
// idempotent acks=all producer with the murmur2_random partitioner, and a
// group consumer that subscribes, commits synchronously and reads its
// committed offsets back, once per codec. The test checks every record once,
// order per key, Kafka's murmur2 placement, that the delivery reports name
// exactly the stored offsets, that franz-go reads the same log, and that the
// group's offsets the broker stored are the log ends.
func TestConfluentPythonRoundTrip(t *testing.T) {
	python := confluentPython(t)
	script, err := filepath.Abs(filepath.Join("confluent", "roundtrip.py"))
	if err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, "")
	for _, codec := range []string{"none", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			ctx := testCtx(t, 2*time.Minute)
			topic, group := "confluent-"+codec, "confluent-group-"+codec
			var res confluentResult
			runClientScript(t, b, pythonCommand(ctx, python, script, b.addr, topic, group, codec), &res)

			recs := scriptRecords(t, res.Records, clientPartitions)
			keyPartition := func(k []byte) int32 { return partitioner.KeyPartition(k, clientPartitions) }
			perPartition := checkKeyedRecords(t, recs, clientRecords, keyPartition)

			// Delivery reports: one per record, each at a distinct stored offset.
			acked := map[[2]int64]bool{}
			for _, a := range res.Acks {
				if acked[a] || a[0] < 0 || a[0] >= clientPartitions || a[1] < 0 || a[1] >= perPartition[int32(a[0])] {
					t.Fatalf("delivery report %v (duplicate or outside the partition's %d records)", a, perPartition[int32(a[0])])
				}
				acked[a] = true
			}
			if len(acked) != clientRecords {
				t.Fatalf("%d delivery reports, want %d", len(acked), clientRecords)
			}

			// franz-go reads the same log.
			fromGo := consumeFromStart(t, ctx, b, topic, clientPartitions, clientRecords)
			checkKeyedRecords(t, fromGo, clientRecords, keyPartition)
			requireSameRecords(t, "the python group consumer", recs, fromGo)

			// The commit: what the consumer read back and what the broker
			// serves to another client are each partition's end.
			if len(res.Committed) != clientPartitions {
				t.Fatalf("committed offsets %v, want %d partitions", res.Committed, clientPartitions)
			}
			for _, c := range res.Committed {
				if c[1] != perPartition[int32(c[0])] {
					t.Fatalf("partition %d: committed %d, want the end %d", c[0], c[1], perPartition[int32(c[0])])
				}
			}
			if got := committedOffsets(t, ctx, b, group); fmt.Sprint(got) != fmt.Sprint(perPartition) {
				t.Fatalf("group %s: the broker has offsets %v, want the ends %v", group, got, perPartition)
			}
		})
	}
}

// confluentPython returns a python3 that imports confluent_kafka: the one on
// PATH, else Debian's /usr/bin/python3 (where apt-get installs the module
// when PATH leads to another Python, such as pyenv's).
func confluentPython(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(name)
		if err != nil {
			tried = append(tried, name+": "+err.Error())
			continue
		}
		out, err := exec.Command(path, "-c", "import confluent_kafka").CombinedOutput()
		if err == nil {
			return path
		}
		tried = append(tried, fmt.Sprintf("%s: %v: %s", path, err, bytes.TrimSpace(out)))
	}
	t.Fatalf("no python3 imports confluent_kafka (scripts/test installs python3-confluent-kafka with apt-get):\n%s", strings.Join(tried, "\n"))
	return ""
}

// confluentTxnResult is the JSON line confluent/txn.py prints.
type confluentTxnResult struct {
	Aborted           int         `json:"aborted"`
	CommittedReader   [][3]string `json:"committed_reader"` // [partition, key, value]; partition as text
	UncommittedReader int         `json:"uncommitted_reader"`
}

// TestConfluentPythonTransactions runs confluent/txn.py: librdkafka's
// consume-transform-produce (init_transactions, send_offsets_to_transaction,
// commit_transaction, and abort_transaction after the records were flushed)
// copies 600 records from one topic to another, aborting every second
// transaction and redoing it. A read_committed consumer must see every input
// record exactly once, per key in order and on its murmur2 partition; a
// read_uncommitted one must see the aborted copies too; the group's
// committed offsets must be the input's ends.
func TestConfluentPythonTransactions(t *testing.T) {
	python := confluentPython(t)
	script, err := filepath.Abs(filepath.Join("confluent", "txn.py"))
	if err != nil {
		t.Fatal(err)
	}
	const records, keys = 600, 10
	b := startBroker(t, "")
	ctx := testCtx(t, 3*time.Minute)
	in, out, group := "confluent-txn-in", "confluent-txn-out", "confluent-txn-copier"
	var res confluentTxnResult
	runClientScript(t, b, pythonCommand(ctx, python, script, b.addr, in, out, group, "confluent-txn-1"), &res)
	if res.Aborted == 0 {
		t.Fatal("no transaction was aborted: the test proves nothing about aborts")
	}
	if res.UncommittedReader != records+res.Aborted {
		t.Fatalf("read_uncommitted read %d records, want %d copied + %d aborted", res.UncommittedReader, records, res.Aborted)
	}

	seen := make([]bool, records)
	last := map[string]int{} // key -> last value read, in read order
	for _, r := range res.CommittedReader {
		p, perr := strconv.Atoi(r[0])
		v, verr := strconv.Atoi(r[2])
		if perr != nil || verr != nil || v < 0 || v >= records {
			t.Fatalf("read_committed record %v", r)
		}
		if seen[v] {
			t.Fatalf("read_committed read input %d twice (an aborted copy or a duplicate)", v)
		}
		seen[v] = true
		key := r[1]
		if key != "k"+strconv.Itoa(v%keys) {
			t.Fatalf("record %v: key does not belong to value", r)
		}
		if want := partitioner.KeyPartition([]byte(key), clientPartitions); int32(p) != want {
			t.Fatalf("record %v on partition %d, murmur2 says %d", r, p, want)
		}
		if prev, ok := last[key]; ok && v <= prev {
			t.Fatalf("key %s: value %d read after %d", key, v, prev)
		}
		last[key] = v
	}
	if len(res.CommittedReader) != records {
		t.Fatalf("read_committed read %d records, want %d", len(res.CommittedReader), records)
	}

	_, ends := kadmOffsets(t, ctx, b.admin(), in)
	if got := committedOffsets(t, ctx, b, group); fmt.Sprint(got) != fmt.Sprint(ends) {
		t.Fatalf("group %s: offsets %v, want the input's ends %v", group, got, ends)
	}
}

// pythonCommand runs a script of confluent/ (which imports e2ecommon.py from
// beside it) without writing __pycache__ into the source tree.
func pythonCommand(ctx context.Context, python string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	return cmd
}
