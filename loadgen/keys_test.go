package loadgen

import (
	"bytes"
	"math"
	"testing"

	"github.com/stratalog/strata/record"
)

func sampleKeys(t *testing.T, dist string, n int64, share, s float64, draws int) []int {
	t.Helper()
	k := newKeyPicker(dist, n, share, s, 42)
	counts := make([]int, n)
	for range draws {
		i := k.next()
		if i >= uint64(n) {
			t.Fatalf("%s: key %d out of range %d", dist, i, n)
		}
		counts[i]++
	}
	return counts
}

func TestHotKeyShare(t *testing.T) {
	const draws = 200_000
	for _, share := range []float64{0.4, 0.9, 0} {
		counts := sampleKeys(t, KeyDistHot, 1000, share, 0, draws)
		got := float64(counts[0]) / draws
		if math.Abs(got-share) > 0.01 {
			t.Fatalf("hot key share %.4f, want %.2f ± 0.01", got, share)
		}
		// The rest is uniform over keys 1..999.
		if share < 0.95 {
			mean := float64(draws-counts[0]) / 999
			for i := 1; i < 1000; i++ {
				if math.Abs(float64(counts[i])-mean) > 6*math.Sqrt(mean)+1 {
					t.Fatalf("share %.1f: cold key %d drawn %d times, mean %.1f", share, i, counts[i], mean)
				}
			}
		}
	}
}

func TestZipfSkew(t *testing.T) {
	const (
		n     = 1000
		s     = 1.1
		draws = 400_000
	)
	counts := sampleKeys(t, KeyDistZipf, n, 0, s, draws)
	// P(k) ∝ (1+k)^-s.
	norm := 0.0
	for k := range n {
		norm += math.Pow(float64(1+k), -s)
	}
	for k := range 5 {
		want := math.Pow(float64(1+k), -s) / norm
		got := float64(counts[k]) / draws
		if math.Abs(got-want)/want > 0.05 {
			t.Fatalf("zipf key %d share %.4f, want %.4f ± 5%%", k, got, want)
		}
	}
	if r := float64(counts[0]) / float64(counts[1]); math.Abs(r-math.Pow(2, s)) > 0.15 {
		t.Fatalf("P(0)/P(1) = %.3f, want 2^%.1f = %.3f", r, s, math.Pow(2, s))
	}
}

func TestUniformKeys(t *testing.T) {
	const draws = 100_000
	counts := sampleKeys(t, KeyDistUniform, 10, 0, 0, draws)
	for k, c := range counts {
		if math.Abs(float64(c)/draws-0.1) > 0.01 {
			t.Fatalf("uniform key %d share %.4f, want 0.1 ± 0.01", k, float64(c)/draws)
		}
	}
}

func TestFormatKey(t *testing.T) {
	buf := make([]byte, 0, keyBytes)
	a := string(formatKey(buf, 42))
	if a != "key-000000000042" {
		t.Fatalf("formatKey(42) = %q", a)
	}
	if b := string(formatKey(buf, 999999999999)); b != "key-999999999999" || len(b) != keyBytes {
		t.Fatalf("formatKey(max) = %q", b)
	}
}

func TestPayloads(t *testing.T) {
	const recordBytes = 1024
	for _, compressible := range []bool{false, true} {
		p := newPayload(recordBytes, compressible, 7)
		var batch []byte
		for i := range 64 {
			v := p.next(int64(1000 + i))
			if len(v) != recordBytes {
				t.Fatalf("value of %d bytes", len(v))
			}
			if st, ok := readStamp(v); !ok || st != int64(1000+i) {
				t.Fatalf("stamp %d, want %d", st, 1000+i)
			}
			batch = append(batch, v...)
		}
		z, err := record.Compress(record.CodecZstd, nil, batch)
		if err != nil {
			t.Fatal(err)
		}
		ratio := float64(len(batch)) / float64(len(z))
		if compressible && ratio < 2 {
			t.Fatalf("compressible payload compresses only %.2f:1", ratio)
		}
		if !compressible && ratio > 1.05 {
			t.Fatalf("incompressible payload compresses %.2f:1", ratio)
		}
		// fill gives the same bytes a fresh copy would.
		q := newPayload(recordBytes, compressible, 7)
		dst := make([]byte, recordBytes)
		q.fill(dst, 1000)
		if !bytes.Equal(dst, batch[:recordBytes]) {
			t.Fatal("fill and next disagree")
		}
	}
}

func TestPayloadWrapsWithinItsPool(t *testing.T) {
	p := newPayload(1000, false, 1) // pool not a multiple of 1000
	for i := range 3 * payloadPoolBytes / 1000 {
		if v := p.next(int64(i)); len(v) != 1000 {
			t.Fatalf("value %d has %d bytes", i, len(v))
		}
	}
}

// TestKeyTable: a key space up to keyTableMax is formatted once, and each
// key from the table equals the formatted one and cannot be appended into
// its neighbour; larger spaces format into the caller's buffer.
func TestKeyTable(t *testing.T) {
	k := newKeyPicker(KeyDistUniform, 1000, 0, 0, 1)
	if k.table == nil {
		t.Fatal("no table for 1,000 keys")
	}
	var buf [keyBytes]byte
	for _, i := range []uint64{0, 1, 42, 999} {
		got := k.key(nil, i)
		if want := formatKey(buf[:], i); string(got) != string(want) || cap(got) != keyBytes {
			t.Fatalf("key(%d) = %q (cap %d), want %q", i, got, cap(got), want)
		}
	}
	next := string(k.key(nil, 43))
	_ = append(k.key(nil, 42), 'x') // must not write into key 43
	if string(k.key(nil, 43)) != next {
		t.Fatalf("appending to key 42 changed key 43 to %q", k.key(nil, 43))
	}
	big := newKeyPicker(KeyDistUniform, keyTableMax+1, 0, 0, 1)
	if big.table != nil {
		t.Fatal("a table for more than keyTableMax keys")
	}
	if got := string(big.key(buf[:], 7)); got != "key-000000000007" {
		t.Fatalf("key(7) without a table = %q", got)
	}
}

// TestKgoRecordRestamped: a kgo record taken from the pool again carries
// the new send's stamp, in its value (what the consumer reads) and beside
// it (what the promise reads), and keeps its payload. sync.Pool does not
// promise to hand a record back (the race detector drops some puts, a
// goroutine that moved to another P misses its private slot), so the loop
// runs until records came back often enough, bounded.
func TestKgoRecordRestamped(t *testing.T) {
	p := &kgoProducer{env: &runEnv{cfg: &Config{RecordBytes: 1000}}, pay: newPayload(1000, false, 1)}
	payloads := map[*stampedRecord][]byte{} // each record's value when it was new
	reused := 0
	for i := int64(1); i <= 10_000 && reused < 20; i++ {
		stamp := i * 1000
		sr := p.record(stamp)
		if ts, ok := readStamp(sr.Value); !ok || ts != stamp || sr.stamp.unixNs != stamp {
			t.Fatalf("record %d: stamp %d (%v), beside it %d; want %d", i, ts, ok, sr.stamp.unixNs, stamp)
		}
		if len(sr.Value) != 1000 || stamped(&sr.Record) != sr {
			t.Fatalf("record %d: value of %d bytes, stamp holder %p, want 1000 and %p", i, len(sr.Value), stamped(&sr.Record), sr)
		}
		if first, ok := payloads[sr]; ok {
			reused++
			if !bytes.Equal(sr.Value[stampBytes:], first[stampBytes:]) {
				t.Fatalf("record %d: a reused record's payload changed beyond its stamp", i)
			}
		} else {
			payloads[sr] = append([]byte(nil), sr.Value...)
		}
		p.put(&sr.Record)
	}
	if reused == 0 {
		t.Fatal("the pool never handed a record back: nothing reused was checked")
	}
}
