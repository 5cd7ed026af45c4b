package partitioner

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Vectors from Apache Kafka's UtilsTest.testMurmur2 (signed, as Java returns them).
var javaVectors = []struct {
	key  string
	want int32
}{
	{"21", -973932308},
	{"foobar", -790332482},
	{"a-little-bit-long-string", -985981536},
	{"a-little-bit-longer-string", -1486304829},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
	{"abc", 479470107},
	{"", 275646681},
}

func TestMurmur2JavaVectors(t *testing.T) {
	for _, v := range javaVectors {
		if got := int32(Murmur2([]byte(v.key))); got != v.want {
			t.Errorf("Murmur2(%q) = %d, want %d", v.key, got, v.want)
		}
	}
}

func TestKeyPartitionKnown(t *testing.T) {
	// toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16.
	if got := KeyPartition([]byte("foobar"), 50); got != 16 {
		t.Fatalf("KeyPartition(foobar, 50) = %d, want 16", got)
	}
	if got := KeyPartition([]byte("anything"), 1); got != 0 {
		t.Fatalf("one partition: got %d", got)
	}
}

func TestKeyPartitionPanicsOnNoPartitions(t *testing.T) {
	for _, n := range []int32{0, -3} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("KeyPartition(_, %d) did not panic", n)
				}
			}()
			KeyPartition([]byte("k"), n)
		}()
	}
}

// TestKeyPartitionMatchesFranzGo checks many keys, of every length up to
// 64 bytes (all four tail cases), against franz-go's default partitioner.
func TestKeyPartitionMatchesFranzGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	key := make([]byte, 64)
	for i := range 20000 {
		k := key[:i%65]
		for j := range k {
			k[j] = byte(rng.Uint32())
		}
		if i%7 == 0 {
			k = fmt.Appendf(k[:0], "user-%d", i) // printable keys like real ones
		}
		n := int32(1 + rng.IntN(1000))
		want := tp.Partition(&kgo.Record{Key: k}, int(n))
		if got := KeyPartition(k, n); int(got) != want {
			t.Fatalf("key %x over %d partitions: got %d, franz-go %d", k, n, got, want)
		}
	}
}

func TestKeyPartitionInRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		k := []byte(fmt.Sprint(rng.Uint64()))
		n := int32(1 + rng.IntN(64))
		if p := KeyPartition(k, n); p < 0 || p >= n {
			t.Fatalf("KeyPartition(%q, %d) = %d out of range", k, n, p)
		}
	}
}

func BenchmarkMurmur2(b *testing.B) {
	for _, size := range []int{8, 32, 256} {
		key := make([]byte, size)
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var sink uint32
			for b.Loop() {
				sink += Murmur2(key)
			}
			_ = sink
		})
	}
}
