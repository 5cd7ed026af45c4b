package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/partitioner"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// runStrataCLI runs the strata binary with args against addr (through
// $STRATA_BROKERS, the brokers' default) with stdin, and returns its
// standard output; a non-zero exit fails the test with its stderr.
func runStrataCLI(ctx context.Context, t *testing.T, addr, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, strataBin, args...)
	cmd.Env = append(os.Environ(), "STRATA_BROKERS="+addr)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("strata %q: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// sortedByPartition sorts "partition|..." lines by partition, keeping each
// partition's order (the offsets'), so that two readers' outputs compare.
func sortedByPartition(out string) []string {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	sort.SliceStable(lines, func(a, b int) bool {
		return strings.SplitN(lines[a], "|", 2)[0] < strings.SplitN(lines[b], "|", 2)[0]
	})
	return lines
}

// anyPartitionUnkeyed writes the partition of "partition|key|..." lines
// without a key as "?" and sorts them after the others, keeping each
// partition's order.
func anyPartitionUnkeyed(lines []string) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if f := strings.SplitN(l, "|", 3); len(f) == 3 && f[1] == "" {
			l = "?|" + f[1] + "|" + f[2]
		}
		out[i] = l
	}
	return strings.Join(sortedByPartition(strings.Join(out, "\n")), "\n")
}

// batchCodecs fetches partition p of topic from offset 0 with a raw Fetch
// and returns the compression codec (attributes & 7) of every record batch
// it got: what the broker stored, as the producer compressed it.
func batchCodecs(ctx context.Context, t *testing.T, b *broker, topic string, p int32) []int16 {
	t.Helper()
	cl := b.client(kgo.MaxVersions(kversion.V2_8_0())) // Fetch by topic name (before v13's ids)
	defer cl.Close()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MaxBytes = 64 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = p
	rp.PartitionMaxBytes = 64 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("fetch %s/%d: %v %+v", topic, p, err, resp)
	}
	raw := resp.Topics[0].Partitions[0].RecordBatches
	var codecs []int16
	for n := 0; len(raw) >= 23 && n < 10000; n++ {
		length := int(int32(binary.BigEndian.Uint32(raw[8:12])))
		if length <= 0 || 12+length > len(raw) {
			break // a partial batch at the end
		}
		codecs = append(codecs, int16(binary.BigEndian.Uint16(raw[21:23]))&7)
		raw = raw[12+length:]
	}
	return codecs
}

// The issue's "strata produce | strata consume round trips (keys, headers,
// all codecs) in the e2e suite, and against the same data kcat reads",
// with the binary and real pipes, for every codec:
//   - strata produce -K : -H ... -z CODEC writes lines with keys (one
//     without) and two headers; the broker holds batches of that codec, and
//     keyed records are on their key's murmur2 partition;
//   - strata consume -e -f json | strata produce --format json -z CODEC
//     copies the topic through an OS pipe between the two processes;
//   - strata consume and kcat -C read the copy the same, record for record
//     (partition, key, value, headers, timestamp), equal to the source;
//   - kcat -P -K: -H -z CODEC writes, and strata consume reads it back.
func TestOps22ProduceConsumeKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: scripts/test installs it (apt-get install kcat)")
	}
	b := startBroker(t, "")
	ctx := testCtx(t, 4*time.Minute)
	const partitions, n, keys = 3, 60, 7
	codecIDs := map[string]int16{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		src, dst, fromKcat := "ops22-src-"+codec, "ops22-copy-"+codec, "ops22-kcat-"+codec
		for _, topic := range []string{src, dst, fromKcat} {
			runStrataCLI(ctx, t, b.addr, "", "topics", "create", topic, "--partitions", fmt.Sprint(partitions))
		}
		var in strings.Builder
		wantKeyed := map[string]int32{} // "key|value" → partition
		for i := range n {
			k, v := fmt.Sprintf("k%d", i%keys), fmt.Sprintf("%s %d: a=b é %s", codec, i, strings.Repeat("v", 40))
			fmt.Fprintf(&in, "%s:%s\n", k, v)
			wantKeyed[k+"|"+v] = partitioner.KeyPartition([]byte(k), partitions)
		}
		// Every record compresses on its own: franz-go sends a batch
		// uncompressed when the codec would not make it smaller, and the
		// unkeyed record can be alone in its batch.
		unkeyedValue := "no key here " + strings.Repeat("n", 60)
		in.WriteString(unkeyedValue + "\n")
		headers := "src=strata,codec=" + codec + "=x"
		runStrataCLI(ctx, t, b.addr, in.String(), "produce", src, "-K", ":", "-H", "src=strata", "-H", "codec="+codec+"=x", "-z", codec)

		// The pipe: consume's JSON into produce, two processes.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		env := append(os.Environ(), "STRATA_BROKERS="+b.addr)
		cons := exec.CommandContext(ctx, strataBin, "consume", src, "-e", "-f", "json")
		prod := exec.CommandContext(ctx, strataBin, "produce", dst, "--format", "json", "-z", codec)
		var consErr, prodErr bytes.Buffer
		cons.Env, prod.Env = env, env
		cons.Stdout, cons.Stderr = w, &consErr
		prod.Stdin, prod.Stderr = r, &prodErr
		if err := cons.Start(); err != nil {
			t.Fatal(err)
		}
		if err := prod.Start(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		w.Close()
		if err := cons.Wait(); err != nil {
			t.Fatalf("%s: strata consume (pipe): %v %s", codec, err, consErr.String())
		}
		if err := prod.Wait(); err != nil {
			t.Fatalf("%s: strata produce (pipe): %v %s", codec, err, prodErr.String())
		}

		// Both topics hold batches of the codec.
		for _, topic := range []string{src, dst} {
			seen := 0
			for p := range int32(partitions) {
				for _, c := range batchCodecs(ctx, t, b, topic, p) {
					seen++
					if c != codecIDs[codec] {
						t.Errorf("%s/%d: a batch with codec %d, want %d (%s)", topic, p, c, codecIDs[codec], codec)
					}
				}
			}
			if seen == 0 {
				t.Errorf("%s: no batches fetched", topic)
			}
		}

		// strata consume and kcat read the same records, in the source and
		// in the copy.
		read := func(topic string) (strataOut, kcatOut []string) {
			s := runStrataCLI(ctx, t, b.addr, "", "consume", topic, "-e", "-f", `%p|%k|%v|%h|%T\n`)
			kc := exec.CommandContext(ctx, kcat, "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
				"-f", `%p|%k|%s|%h|%T\n`)
			var kerr bytes.Buffer
			kc.Stderr = &kerr
			k, err := kc.Output()
			if err != nil {
				t.Fatalf("%s: kcat -C %s: %v %s", codec, topic, err, kerr.String())
			}
			return sortedByPartition(s), sortedByPartition(string(k))
		}
		srcStrata, srcKcat := read(src)
		dstStrata, dstKcat := read(dst)
		if strings.Join(srcStrata, "\n") != strings.Join(srcKcat, "\n") {
			t.Errorf("%s: source: strata consume\n%s\nkcat\n%s", codec, strings.Join(srcStrata, "\n"), strings.Join(srcKcat, "\n"))
		}
		if strings.Join(dstStrata, "\n") != strings.Join(dstKcat, "\n") {
			t.Errorf("%s: copy: strata consume\n%s\nkcat\n%s", codec, strings.Join(dstStrata, "\n"), strings.Join(dstKcat, "\n"))
		}
		// The record without a key may land on another partition in the
		// copy: compared without its partition.
		if srcN, dstN := anyPartitionUnkeyed(srcStrata), anyPartitionUnkeyed(dstStrata); srcN != dstN {
			t.Errorf("%s: the copy differs from the source:\nsource\n%s\ncopy\n%s", codec, srcN, dstN)
		}
		keyed, unkeyed := 0, 0
		for _, l := range dstStrata {
			f := strings.Split(l, "|")
			if len(f) != 5 || f[3] != headers || f[4] == "" || f[4] == "-1" {
				t.Errorf("%s: copy line %q: want partition|key|value|%s|timestamp", codec, l, headers)
				continue
			}
			if f[1] == "" {
				unkeyed++
				if f[2] != unkeyedValue {
					t.Errorf("%s: unkeyed record %q", codec, l)
				}
				continue
			}
			keyed++
			if p, ok := wantKeyed[f[1]+"|"+f[2]]; !ok || fmt.Sprint(p) != f[0] {
				t.Errorf("%s: record %q: want partition %d (known %v)", codec, l, p, ok)
			}
		}
		if keyed != n || unkeyed != 1 {
			t.Errorf("%s: copy has %d keyed and %d unkeyed records, want %d and 1", codec, keyed, unkeyed, n)
		}

		// kcat -P, strata consume.
		var kin strings.Builder
		var want []string
		for i := range n {
			k, v := fmt.Sprintf("k%d", i%keys), fmt.Sprintf("kcat-%s-%d", codec, i)
			fmt.Fprintf(&kin, "%s:%s\n", k, v)
			want = append(want, fmt.Sprintf("%d|%s|%s|src=kcat", partitioner.KeyPartition([]byte(k), partitions), k, v))
		}
		kp := exec.CommandContext(ctx, kcat, "-b", b.addr, "-P", "-t", fromKcat, "-K:", "-z", codec, "-H", "src=kcat",
			"-X", "partitioner=murmur2_random", "-X", "acks=all")
		kp.Stdin = strings.NewReader(kin.String())
		if out, err := kp.CombinedOutput(); err != nil {
			t.Fatalf("%s: kcat -P: %v %s", codec, err, out)
		}
		got := sortedByPartition(runStrataCLI(ctx, t, b.addr, "", "consume", fromKcat, "-e", "-f", `%p|%k|%v|%h\n`))
		if strings.Join(got, "\n") != strings.Join(sortedByPartition(strings.Join(want, "\n")), "\n") {
			t.Errorf("%s: kcat -P, strata consume: got\n%s\nwant\n%s", codec, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// readyz GETs http://addr/readyz: its status code and body (0 when the
// endpoint does not answer).
func readyz(addr string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// /readyz in a cluster, with the binary: a broker whose controller quorum
// has no majority (the other voter not started) serves its Kafka port and
// /healthz but answers /readyz 503, not registered with the controller;
// once the second voter starts, both brokers register, catch up on the
// metadata, are unfenced and answer 200 ready (a ready broker's own
// Metadata lists it), and a topic created through one is served by both.
func TestOps22ReadyzClusterRegistered(t *testing.T) {
	quorum := fmt.Sprintf("0@%s,1@%s", freeAddr(t), freeAddr(t))
	props := writeProps(t, clusterProps)
	metricsAddr := []string{freeAddr(t), freeAddr(t)}
	start := func(id int) *broker {
		return startBroker(t, "", "--node-id", fmt.Sprint(id), "--controller-quorum", quorum, "--config", props,
			"--metrics-listeners", "http://"+metricsAddr[id])
	}
	b1 := start(1)
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + metricsAddr[1] + "/healthz")
	if err != nil {
		t.Fatalf("/healthz: %v\n%s", err, b1.logs)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %s", resp.Status)
	}
	// Alone, broker 1 cannot register: /readyz answers 503, first while
	// the broker starts, then saying it is not registered, and stays so
	// (checked five more times over a second).
	for n, seen := 0, 0; seen < 5; n++ {
		code, body := readyz(metricsAddr[1])
		if code != 503 || !strings.HasPrefix(body, "not ready: ") {
			t.Fatalf("/readyz of a broker without a controller majority: %d %q", code, body)
		}
		if strings.Contains(body, "not registered") {
			seen++
		} else if seen > 0 || n > 150 {
			t.Fatalf("/readyz of a broker without a controller majority: %q (after %d answers)", body, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b0 := start(0)
	ctx := testCtx(t, 90*time.Second)
	// brokersSeen is the broker ids b's Metadata lists: the unfenced ones.
	brokersSeen := func(b *broker) []int {
		var d struct {
			Brokers []struct {
				ID int `json:"id"`
			} `json:"brokers"`
		}
		if err := json.Unmarshal([]byte(runStrataCLI(ctx, t, b.addr, "", "cluster", "describe", "--format", "json")), &d); err != nil {
			t.Fatal(err)
		}
		var ids []int
		for _, x := range d.Brokers {
			ids = append(ids, x.ID)
		}
		return ids
	}
	for id, b := range []*broker{b0, b1} {
		deadline := time.Now().Add(60 * time.Second)
		for n := 0; ; n++ {
			code, body := readyz(metricsAddr[id])
			if code == 200 && body == "ready\n" {
				break
			}
			if time.Now().After(deadline) || n > 3000 {
				t.Fatalf("broker %d not ready after 60 s: %d %q\n%s", id, code, body, b.logs)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Ready means unfenced: the broker's own Metadata lists it.
		if ids := brokersSeen(b); !slices.Contains(ids, id) {
			t.Fatalf("broker %d is ready but its Metadata lists brokers %v (fenced)", id, ids)
		}
	}
	// Each broker's metadata catches up with the other's unfencing.
	for n := 0; len(brokersSeen(b0)) != 2; n++ {
		if n > 300 {
			t.Fatalf("broker 0 lists brokers %v", brokersSeen(b0))
		}
		time.Sleep(20 * time.Millisecond)
	}
	runStrataCLI(ctx, t, b0.addr, "", "topics", "create", "ops22-ready", "--partitions", "2", "--replication-factor", "2")
	runStrataCLI(ctx, t, b0.addr, "a\nb\n", "produce", "ops22-ready")
	if got := runStrataCLI(ctx, t, b1.addr, "", "consume", "ops22-ready", "-e", "-f", `%v\n`); len(strings.Fields(got)) != 2 {
		t.Fatalf("consume through broker 1: %q", got)
	}
}
