package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"github.com/stratalog/strata/partitioner"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKcatRoundTrip produces and consumes with kcat (librdkafka), plain and
// with snappy compression, and checks order per key and Kafka's partitioning
// (librdkafka's default partitioner is consistent_random, which is CRC32-based;
// we ask it for murmur2_random, the Java client's, so partitions match).
func TestKcatRoundTrip(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: scripts/test installs it (apt-get install kcat)")
	}
	b := startBroker(t, "")
	ctx := testCtx(t, 3*time.Minute)
	const partitions = 3
	for _, codec := range []string{"none", "snappy", "gzip", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "kcat-" + codec
			if resp, err := b.admin().CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
				t.Fatalf("create: %v %v", err, resp.Err)
			}
			const n, keys = 5000, 50
			var in bytes.Buffer
			for i := 0; i < n; i++ {
				fmt.Fprintf(&in, "k%d:%d-%s\n", i%keys, i/keys, strings.Repeat("v", 200))
			}
			prod := exec.CommandContext(ctx, kcat, "-b", b.addr, "-P", "-t", topic, "-K:", "-z", codec,
				"-X", "partitioner=murmur2_random", "-X", "acks=all")
			prod.Stdin = &in
			if out, err := prod.CombinedOutput(); err != nil {
				t.Fatalf("kcat produce: %v\n%s\nbroker:\n%s", err, out, b.logs)
			}
			cons := exec.CommandContext(ctx, kcat, "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e",
				"-f", "%p %k %s\n")
			out, err := cons.Output()
			if err != nil {
				t.Fatalf("kcat consume: %v\n%s", err, out)
			}
			next := map[string]int{}
			count := 0
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) != 3 {
					t.Fatalf("bad kcat line %q", sc.Text())
				}
				p, _ := strconv.Atoi(f[0])
				key := f[1]
				if want := partitioner.KeyPartition([]byte(key), partitions); int32(p) != want {
					t.Fatalf("key %s on partition %d, murmur2 says %d", key, p, want)
				}
				seq, _ := strconv.Atoi(strings.SplitN(f[2], "-", 2)[0])
				if seq != next[key] {
					t.Fatalf("key %s: got seq %d, want %d", key, seq, next[key])
				}
				next[key]++
				count++
			}
			if count != n {
				t.Fatalf("kcat consumed %d records, want %d", count, n)
			}
		})
	}
}
