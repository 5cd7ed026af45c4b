package loadgen

import (
	"encoding/binary"
	"math/rand/v2"
)

// keyPicker draws key indexes in [0, n) from a distribution:
//
//	uniform  every key equally likely
//	zipf     P(k) ∝ (1+k)^-s (math/rand/v2 Zipf with v = 1): key 0 is the
//	         most popular, key 1 next, and so on
//	hot      key 0 with probability share, otherwise uniform over 1..n-1
//	         ("one tenant is 40% of the traffic")
//
// It never allocates after construction. A keyPicker belongs to one
// goroutine.
type keyPicker struct {
	dist  string
	n     uint64
	share float64
	rng   *rand.Rand
	zipf  *rand.Zipf
	// table holds every key formatted (keyBytes each) when the key space
	// is at most keyTableMax: a record's key is then a slice of it, not
	// formatted per record.
	table []byte
}

// keyTableMax is the largest key space whose keys are formatted once up
// front (16 MiB at keyBytes each).
const keyTableMax = 1 << 20

func newKeyPicker(dist string, n int64, share, s float64, seed uint64) *keyPicker {
	k := &keyPicker{dist: dist, n: uint64(max(n, 1)), share: share, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	if dist == KeyDistZipf && k.n > 1 {
		k.zipf = rand.NewZipf(k.rng, s, 1, k.n-1)
	}
	if k.n <= keyTableMax {
		k.table = make([]byte, k.n*keyBytes)
		for i := range k.n {
			formatKey(k.table[i*keyBytes:(i+1)*keyBytes], i)
		}
	}
	return k
}

// key returns key i formatted: a read-only slice of the table when there
// is one (its capacity ends with it), else formatted into dst.
func (k *keyPicker) key(dst []byte, i uint64) []byte {
	if k.table != nil {
		return k.table[i*keyBytes : (i+1)*keyBytes : (i+1)*keyBytes]
	}
	return formatKey(dst[:0], i)
}

func (k *keyPicker) next() uint64 {
	if k.n == 1 {
		return 0
	}
	switch k.dist {
	case KeyDistZipf:
		return k.zipf.Uint64()
	case KeyDistHot:
		if k.rng.Float64() < k.share {
			return 0
		}
		return 1 + k.rng.Uint64N(k.n-1)
	}
	return k.rng.Uint64N(k.n)
}

// keyBytes is the fixed width of a key: "key-" and 12 decimal digits.
const keyBytes = 16

// formatKey writes key i as "key-000000000042" into dst (len keyBytes).
func formatKey(dst []byte, i uint64) []byte {
	dst = append(dst[:0], "key-000000000000"...)
	for j := keyBytes - 1; j >= 4 && i > 0; j-- {
		dst[j] = byte('0' + i%10)
		i /= 10
	}
	return dst
}

// stampBytes is the size of the send stamp at the start of every value:
// the record's scheduled send time as Unix nanoseconds, big endian.
const stampBytes = 8

func putStamp(value []byte, unixNs int64) {
	binary.BigEndian.PutUint64(value, uint64(unixNs))
}

func readStamp(value []byte) (int64, bool) {
	if len(value) < stampBytes {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(value)), true
}

// payloadPoolBytes is the size of the pre-generated payload each producer
// cycles through: larger than a compressor's window, so incompressible data
// stays incompressible across the records of a batch.
const payloadPoolBytes = 4 << 20

// payload is a producer's pre-generated value bytes: generated once, then
// each record's value is the next recordBytes window of it, walking forward
// and wrapping. The first stampBytes of the window are overwritten with the
// record's send stamp. Incompressible payloads are ChaCha8 random bytes;
// compressible ones are words from a small vocabulary (about 3-4:1 with
// lz4/zstd, like JSON-ish application records).
type payload struct {
	pool        []byte
	recordBytes int
	off         int
}

var words = []string{"order", "user", "id", "status", "shipped", "created", "amount", "currency",
	"EUR", "USD", "timestamp", "region", "eu-west-1", "us-east-1", "item", "quantity", "price",
	"true", "false", "null", "session", "event", "click", "view", "cart", "checkout"}

func newPayload(recordBytes int, compressible bool, seed uint64) *payload {
	size := max(payloadPoolBytes, 4*recordBytes)
	pool := make([]byte, size+recordBytes) // the tail mirrors the head so windows never wrap
	if compressible {
		rng := rand.New(rand.NewPCG(seed, 0xc0de))
		b := pool[:0]
		for len(b) < size {
			b = append(b, `"`...)
			b = append(b, words[rng.IntN(len(words))]...)
			b = append(b, `":"`...)
			b = append(b, words[rng.IntN(len(words))]...)
			b = binary.AppendUvarint(b, rng.Uint64N(1000)) // a little entropy, like ids
			b = append(b, `",`...)
		}
		copy(pool, b[:size])
	} else {
		var s [32]byte
		binary.LittleEndian.PutUint64(s[:], seed)
		rand.NewChaCha8(s).Read(pool[:size])
	}
	copy(pool[size:], pool[:recordBytes])
	return &payload{pool: pool[:size+recordBytes], recordBytes: recordBytes}
}

// next returns the next value window, stamped. It aliases the pool: valid
// until the pool wraps around to it again (payloadPoolBytes later), which
// is long after the accumulator has copied it.
func (p *payload) next(unixNs int64) []byte {
	size := len(p.pool) - p.recordBytes
	v := p.pool[p.off : p.off+p.recordBytes]
	putStamp(v, unixNs)
	p.off += p.recordBytes
	if p.off >= size {
		p.off -= size
	}
	return v
}

// fill copies the next window into dst (len recordBytes), stamped: for
// clients that keep the value until it is acknowledged.
func (p *payload) fill(dst []byte, unixNs int64) {
	copy(dst, p.pool[p.off:p.off+p.recordBytes])
	putStamp(dst, unixNs)
	p.off += p.recordBytes
	if size := len(p.pool) - p.recordBytes; p.off >= size {
		p.off -= size
	}
}
