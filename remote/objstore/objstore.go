package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strings"
)

// Sum is a checksum of an object's whole content: CRC-32C for every
// object stored now, SHA-256 for objects stored by brokers before
// (2026-12-05), which stay readable. The caller computes it before Put
// (or has PutSum compute it), the store refuses content that does not
// match it, keeps it with the object, and returns it from Head and Get so
// a full read can be checked against it. CRC-32C because a copy hashes
// every byte it uploads: with SHA-256 (the CPU's SHA extensions) that was
// 9 % of a broker's CPU in a keyed 100,000 records/s run with uploads
// (docs/tiered-storage.md); an object's checksum guards against torn and
// damaged objects, not against a forger, and Kafka's batches inside carry
// CRC-32C too. Sums are comparable with ==; the zero Sum is none.
type Sum struct {
	Alg Alg
	v   [sha256.Size]byte // CRC32C: big-endian in the first 4 bytes
}

// Alg is a Sum's algorithm.
type Alg uint8

const (
	// CRC32C is CRC-32 with the Castagnoli polynomial, as Kafka's record
	// batches and S3's x-amz-checksum-crc32c.
	CRC32C Alg = 1
	// SHA256 is the algorithm of objects stored before CRC32C.
	SHA256 Alg = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SumOf is the CRC32C Sum of b.
func SumOf(b []byte) Sum { return Sum{Alg: CRC32C}.Of(b) }

// Of is the Sum of b by s's algorithm (CRC32C for the zero Sum).
func (s Sum) Of(b []byte) Sum {
	h := s.newHash()
	h.Write(b)
	return sumFrom(s.alg(), h)
}

// SumReader is the CRC32C Sum of everything r holds, read through buf,
// and its length.
func SumReader(r io.Reader, buf []byte) (Sum, int64, error) {
	h := Sum{}.newHash()
	n, err := io.CopyBuffer(h, r, buf)
	return sumFrom(CRC32C, h), n, err
}

func (s Sum) alg() Alg {
	if s.Alg == SHA256 {
		return SHA256
	}
	return CRC32C
}

// newHash is a hash of s's algorithm.
func (s Sum) newHash() hash.Hash {
	if s.alg() == SHA256 {
		return sha256.New()
	}
	return crc32.New(castagnoli)
}

func sumFrom(alg Alg, h hash.Hash) Sum {
	out := Sum{Alg: alg}
	h.Sum(out.v[:0])
	return out
}

// IsZero reports whether s is no sum.
func (s Sum) IsZero() bool { return s.Alg == 0 }

// String is "crc32c:" and the CRC in 8 lower-case hex digits, or a
// SHA-256 in 64 (the form metadata written before CRC32C holds); "" for
// the zero Sum.
func (s Sum) String() string {
	switch s.Alg {
	case CRC32C:
		return "crc32c:" + hex.EncodeToString(s.v[:4])
	case SHA256:
		return hex.EncodeToString(s.v[:])
	}
	return ""
}

// ParseSum parses a Sum's String.
func ParseSum(s string) (Sum, error) {
	out := Sum{Alg: SHA256}
	n := sha256.Size
	h := s
	if c, ok := strings.CutPrefix(s, "crc32c:"); ok {
		out.Alg, n, h = CRC32C, 4, c
	}
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != n {
		return Sum{}, fmt.Errorf("objstore: bad checksum %q", s)
	}
	copy(out.v[:], b)
	return out, nil
}

// Info describes a stored object.
type Info struct {
	Key  string
	Size int64
	// ETag is the store's entity tag: opaque, equal for equal uploads of
	// the same store kind, not comparable across kinds.
	ETag string
	// Sum is the content's checksum given to Put (zero in List results of
	// stores that cannot list it cheaply: S3).
	Sum Sum
}

// Page is one page of a List.
type Page struct {
	Objects []Info
	// Next is the key to pass as List's after to read the next page; ""
	// when this page is the last.
	Next string
}

// ObjectStore is the object store under tiered storage: whole segments
// and their indexes, written once under a key and read back whole or by
// ranges. Every call is bounded by its ctx (a cancelled or expired ctx
// makes the call, and reads of a returned reader, fail with a Transient
// error). Errors are *Error values: errors.Is(err, ErrNotFound),
// IsTransient (retry with backoff) and IsPermanent (do not retry) classify
// them. Implementations are safe for concurrent use and never retry on
// their own: the caller owns the backoff.
type ObjectStore interface {
	// Put stores size bytes read from r under key, replacing any object
	// there. The content must hash to sum and be exactly size bytes long,
	// or Put fails with ErrChecksumMismatch (permanent) and no object (or
	// the old one) is visible under key: a put is all or nothing.
	Put(ctx context.Context, key string, r io.Reader, size int64, sum Sum) (Info, error)
	// Get reads the whole object. The reader fails with
	// ErrChecksumMismatch at its end if the bytes read do not hash to the
	// stored sum (so a full read is verified); the caller closes it.
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// GetRange reads n bytes from offset off (n < 0: to the end). A range
	// past the end is cut at the end; off beyond the size is
	// ErrInvalidRange. Ranges are not checked against the sum (the
	// segment formats carry their own CRCs).
	GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	// Head describes the object.
	Head(ctx context.Context, key string) (Info, error)
	// Delete removes the object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns up to max (1..1000; 0 means 1000) objects whose keys
	// start with prefix and sort after the key after (""= from the
	// start), in byte order of their keys.
	List(ctx context.Context, prefix, after string, max int) (Page, error)
}

// SumPutter is an ObjectStore that can take the content's sum from the
// bytes it stores (the local-directory store writes its header last), so a
// caller with no sum yet reads the content once instead of twice: once to
// hash it and again to store it.
type SumPutter interface {
	// PutSum is Put with the sum computed from the size bytes read from
	// r (CRC32C) and returned in Info.Sum; a content shorter or longer than
	// size fails with ErrChecksumMismatch, all or nothing as Put.
	PutSum(ctx context.Context, key string, r io.Reader, size int64) (Info, error)
}

// MaxListPage is the largest page List returns.
const MaxListPage = 1000

// Kind classifies an error for the caller's retry decision.
type Kind int

const (
	// Transient errors may succeed on a retry after a backoff: the store
	// is down or slow, the network failed, the ctx expired, the server
	// answered 5xx/429/503 SlowDown, the local disk failed.
	Transient Kind = iota + 1
	// Permanent errors will fail again the same way: a bad key, bad
	// credentials, a missing bucket, a checksum mismatch.
	Permanent
	// NotFound is a missing object (permanent for that key).
	NotFound
)

func (k Kind) String() string {
	switch k {
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	case NotFound:
		return "not found"
	}
	return "unknown"
}

// Sentinel errors, matched with errors.Is through an *Error.
var (
	ErrNotFound         = errors.New("object not found")
	ErrChecksumMismatch = errors.New("content does not match its checksum or size")
	ErrInvalidKey       = errors.New("invalid object key")
	ErrInvalidRange     = errors.New("range starts past the end of the object")
)

// Error is every error a store returns.
type Error struct {
	Op   string // "put", "get", "head", "delete", "list"
	Key  string
	Kind Kind
	Err  error
}

func (e *Error) Error() string {
	return fmt.Sprintf("objstore %s %q (%s): %v", e.Op, e.Key, e.Kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotFound) true for every NotFound error,
// whatever the underlying cause.
func (e *Error) Is(target error) bool { return target == ErrNotFound && e.Kind == NotFound }

// KindOf is err's Kind (0 for nil or an error not from a store).
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// IsTransient reports whether err is worth a retry after a backoff.
func IsTransient(err error) bool { return KindOf(err) == Transient }

// IsPermanent reports whether err will not go away on a retry (NotFound
// included).
func IsPermanent(err error) bool { k := KindOf(err); return k == Permanent || k == NotFound }

func newErr(op, key string, kind Kind, err error) error {
	return &Error{Op: op, Key: key, Kind: kind, Err: err}
}

// ctxErr is Transient for a ctx error: the caller's deadline ran out,
// the call may succeed with more time.
func ctxErr(op, key string, ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return newErr(op, key, Transient, err)
	}
	return nil
}

// ValidKey reports whether key is usable by every store: 1..1024 bytes of
// ASCII letters, digits and "-_.=/", made of non-empty "/"-separated
// components that do not start with "." (so no "." or "..", and the local
// store's temporary files never collide with a key).
func ValidKey(key string) error {
	if key == "" || len(key) > 1024 {
		return ErrInvalidKey
	}
	for _, c := range strings.Split(key, "/") {
		if c == "" || c[0] == '.' || len(c) > 200 {
			return ErrInvalidKey
		}
		for i := 0; i < len(c); i++ {
			b := c[i]
			ok := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' ||
				b == '-' || b == '_' || b == '.' || b == '='
			if !ok {
				return ErrInvalidKey
			}
		}
	}
	return nil
}

// validPrefix accepts "" or anything a key may start with.
func validPrefix(p string) bool {
	if p == "" {
		return true
	}
	// A prefix is a key, a key with a trailing "/", or a partial last
	// component: validate it with a placeholder completing it.
	return ValidKey(p+"x") == nil
}

// verifyReader passes r through, hashing it, and refuses content that is
// not size bytes hashing to want. It decides before handing over the last
// bytes: when the size-th byte arrives it checks the sum and that the
// source is at its end, and on a mismatch returns ErrChecksumMismatch
// instead of those bytes, so a consumer (a file copy, an HTTP request
// body) fails before it has the whole (wrong) content. A source that ends
// early fails the same way. ctx is checked on every Read.
type verifyReader struct {
	ctx     context.Context
	r       io.Reader
	h       hash.Hash
	want    Sum
	anySum  bool // PutSum: the sum is the content's, only the size is checked
	size    int64
	n       int64
	err     error // sticky; io.EOF once verified
	content Sum   // the content's sum, once verified
}

func newVerifyReader(ctx context.Context, r io.Reader, size int64, want Sum) *verifyReader {
	return &verifyReader{ctx: ctx, r: r, h: want.newHash(), want: want, size: size}
}

func (v *verifyReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if err := v.ctx.Err(); err != nil {
		v.err = err
		return 0, err
	}
	pending := 0
	if v.n < v.size {
		if rem := v.size - v.n; int64(len(p)) > rem {
			p = p[:rem]
		}
		k, err := v.r.Read(p)
		v.n += int64(k)
		v.h.Write(p[:k])
		if v.n < v.size {
			switch {
			case err == io.EOF:
				v.err = ErrChecksumMismatch // shorter than size
				return 0, v.err
			case err != nil:
				v.err = err
			}
			return k, err
		}
		pending = k
	}
	// All size bytes read (the last pending ones not yet handed over).
	if err := v.finish(); err != nil {
		return 0, err
	}
	return pending, nil
}

// finish checks, with all size bytes read, the sum and that the source is
// at its end; it sets the sticky state (io.EOF when good).
func (v *verifyReader) finish() error {
	v.content = sumFrom(v.want.alg(), v.h)
	if !v.anySum && v.content != v.want {
		v.err = ErrChecksumMismatch
		return v.err
	}
	if err := atEOF(v.r); err != nil {
		v.err = err
		return err
	}
	v.err = io.EOF
	return nil
}

// atEOF is nil when r has nothing more, ErrChecksumMismatch when it has
// (the source is longer than its size), or r's error.
func atEOF(r io.Reader) error {
	var one [1]byte
	for i := 0; i < 100; i++ {
		n, err := r.Read(one[:])
		if n > 0 {
			return ErrChecksumMismatch
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// check is nil when the whole content was read and verified: false when
// the consumer stopped early or the content was refused.
func (v *verifyReader) check() error {
	switch {
	case v.err == io.EOF:
		return nil
	case v.err == nil && v.n == v.size:
		// The consumer read exactly size bytes (or, for an empty object,
		// none) and stopped: check now.
		if err := v.finish(); err != nil {
			return err
		}
		return nil
	case v.err == nil:
		return ErrChecksumMismatch // the consumer stopped before the end
	}
	return v.err
}

// ctxReadCloser is a reader whose reads fail (Transient) once ctx is
// done; the reader returned by Get and GetRange of the local store.
type ctxReadCloser struct {
	ctx context.Context
	r   io.Reader
	c   io.Closer
	op  string
	key string
}

func (c *ctxReadCloser) Read(p []byte) (int, error) {
	if err := ctxErr(c.op, c.key, c.ctx); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF {
		err = newErr(c.op, c.key, Transient, err)
	}
	return n, err
}

func (c *ctxReadCloser) Close() error { return c.c.Close() }

// sumReadCloser verifies a full read against a Sum: io.EOF becomes
// ErrChecksumMismatch when the bytes read do not hash to want or are not
// size bytes.
type sumReadCloser struct {
	r    io.ReadCloser
	h    hash.Hash
	want Sum
	size int64
	n    int64
	op   string
	key  string
}

func newSumReadCloser(r io.ReadCloser, info Info, op string) *sumReadCloser {
	return &sumReadCloser{r: r, h: info.Sum.newHash(), want: info.Sum, size: info.Size, op: op, key: info.Key}
}

func (s *sumReadCloser) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.h.Write(p[:n])
	s.n += int64(n)
	if err == io.EOF {
		if s.n != s.size || sumFrom(s.want.alg(), s.h) != s.want {
			return n, newErr(s.op, s.key, Permanent, ErrChecksumMismatch)
		}
	}
	return n, err
}

func (s *sumReadCloser) Close() error { return s.r.Close() }
