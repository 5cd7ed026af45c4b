package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stratalog/strata/partitioner"
)

// strata produce and consume against kcat (librdkafka) on the same data,
// with every codec: what strata produce writes (keys split at -K, two
// headers, the codec) kcat reads back record for record, keyed records on
// their key's murmur2 partition; what kcat produces (-K, a header, the
// codec, murmur2 partitioning) strata consume prints the same way.
func TestProduceConsumeKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: scripts/test installs it (apt-get install kcat)")
	}
	addr := startGroupsBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), groupsTestTimeout)
	defer cancel()
	const partitions, n, keys = 3, 40, 7
	lines := func(tag string) (string, []string) {
		var in strings.Builder
		var want []string
		for i := range n {
			k, v := fmt.Sprintf("k%d", i%keys), fmt.Sprintf("%s-%d-%s", tag, i, strings.Repeat("v", 50))
			fmt.Fprintf(&in, "%s:%s\n", k, v)
			want = append(want, fmt.Sprintf("%d|%s|%s", partitioner.KeyPartition([]byte(k), partitions), k, v))
		}
		return in.String(), want
	}
	// got sorts "partition|key|value|headers" lines by partition, keeping
	// each partition's order, and checks the headers.
	check := func(what, out string, want []string, headers string) {
		t.Helper()
		var got []string
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			i := strings.LastIndexByte(l, '|')
			if i < 0 || l[i+1:] != headers {
				t.Errorf("%s: line %q: want headers %q", what, l, headers)
				continue
			}
			got = append(got, l[:i])
		}
		sort.SliceStable(got, func(a, b int) bool { return got[a][0] < got[b][0] })
		sort.SliceStable(want, func(a, b int) bool { return want[a][0] < want[b][0] })
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: got\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		// strata produce -> kcat -C
		topic := "to-kcat-" + codec
		createTopic(t, addr, topic, partitions)
		in, want := lines("s")
		if out, err := runProduce(t, addr, in, topic, "-K", ":", "-H", "src=strata", "-H", "codec="+codec, "-z", codec); err != nil {
			t.Fatalf("%s: strata produce: %v %s", codec, err, out)
		}
		cons := exec.CommandContext(ctx, kcat, "-b", addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
			"-f", `%p|%k|%s|%h\n`)
		var stderr bytes.Buffer
		cons.Stderr = &stderr
		out, err := cons.Output()
		if err != nil {
			t.Fatalf("%s: kcat -C: %v %s", codec, err, stderr.String())
		}
		check(codec+": strata produce, kcat -C", string(out), want, "src=strata,codec="+codec)

		// kcat -P -> strata consume
		topic = "from-kcat-" + codec
		createTopic(t, addr, topic, partitions)
		in, want = lines("k")
		prod := exec.CommandContext(ctx, kcat, "-b", addr, "-P", "-t", topic, "-K:", "-z", codec, "-H", "src=kcat",
			"-X", "partitioner=murmur2_random", "-X", "acks=all")
		prod.Stdin = strings.NewReader(in)
		if out, err := prod.CombinedOutput(); err != nil {
			t.Fatalf("%s: kcat -P: %v %s", codec, err, out)
		}
		got, err := runConsume(t, addr, topic, "-e", "-f", `%p|%k|%v|%h\n`)
		if err != nil {
			t.Fatalf("%s: strata consume: %v", codec, err)
		}
		check(codec+": kcat -P, strata consume", got, want, "src=kcat")
	}
}
