package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config configures an S3 store (see config.go for the property names).
type S3Config struct {
	// Endpoint is the server's URL, "http://127.0.0.1:8333" or
	// "https://s3.eu-west-1.amazonaws.com" (a bare host:port means https).
	Endpoint string
	Bucket   string
	// Region signs the requests; "us-east-1" when empty. Set, it also
	// spares the client a bucket-location request before the first call.
	Region string
	// PathStyle addresses the bucket in the path (http://host/bucket/key)
	// instead of the host name (http://bucket.host/key): what most
	// S3-compatible servers on one address need.
	PathStyle bool
	// Static credentials; empty AccessKeyID means anonymous requests.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// PartSize is the multipart part size; objects larger than it are
	// uploaded in parts of that size (S3's minimum, 5 MiB, when smaller;
	// 16 MiB when 0). Each part in flight is buffered in memory.
	PartSize int64
	// Transport replaces the HTTP transport (tests).
	Transport http.RoundTripper
}

const (
	minPartSize     = 5 << 20
	defaultPartSize = 16 << 20
	// sumMetaKey is the user metadata holding an object's CRC-32C (sent
	// as the x-amz-meta-strata-crc32c header), sha256MetaKey the SHA-256
	// of an object stored before CRC-32C.
	sumMetaKey    = "Strata-Crc32c"
	sha256MetaKey = "Strata-Sha256"
)

// S3 is a store over the S3 API (AWS S3 or a compatible server) through
// minio-go. The client's own retries are off: every error goes back to
// the caller, classified.
type S3 struct {
	c        *minio.Client
	core     minio.Core
	bucket   string
	partSize uint64
}

var _ ObjectStore = (*S3)(nil)

// NewS3 builds the store; it makes no request.
func NewS3(cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("objstore: s3: bucket is required")
	}
	host, secure, err := parseEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	lookup := minio.BucketLookupDNS
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	var creds *credentials.Credentials
	if cfg.AccessKeyID != "" {
		creds = credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)
	} else {
		creds = credentials.New(&credentials.Static{Value: credentials.Value{SignerType: credentials.SignatureAnonymous}})
	}
	c, err := minio.New(host, &minio.Options{
		Creds:        creds,
		Secure:       secure,
		Region:       region,
		BucketLookup: lookup,
		Transport:    cfg.Transport,
		MaxRetries:   1, // no retries: the caller backs off
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: s3: %w", err)
	}
	ps := cfg.PartSize
	switch {
	case ps == 0:
		ps = defaultPartSize
	case ps < minPartSize:
		ps = minPartSize
	}
	return &S3{c: c, core: minio.Core{Client: c}, bucket: cfg.Bucket, partSize: uint64(ps)}, nil
}

func parseEndpoint(ep string) (host string, secure bool, err error) {
	if ep == "" {
		return "", false, errors.New("objstore: s3: endpoint is required")
	}
	if !strings.Contains(ep, "://") {
		return ep, true, nil
	}
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", false, fmt.Errorf("objstore: s3: bad endpoint %q (want scheme://host[:port])", ep)
	}
	switch u.Scheme {
	case "http":
		return u.Host, false, nil
	case "https":
		return u.Host, true, nil
	}
	return "", false, fmt.Errorf("objstore: s3: bad endpoint scheme %q", u.Scheme)
}

// CreateBucket creates the bucket if it does not exist (a convenience
// for tests and first starts; production buckets are made by operators).
func (s *S3) CreateBucket(ctx context.Context) error {
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err != nil {
		return s3Err("create-bucket", s.bucket, ctx, err)
	}
	if ok {
		return nil
	}
	if err := s.c.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{}); err != nil {
		if c := minio.ToErrorResponse(err).Code; c == "BucketAlreadyOwnedByYou" || c == "BucketAlreadyExists" {
			return nil
		}
		return s3Err("create-bucket", s.bucket, ctx, err)
	}
	return nil
}

// s3Err classifies a minio-go error.
func s3Err(op, key string, ctx context.Context, err error) error {
	if errors.Is(err, ErrChecksumMismatch) {
		return newErr(op, key, Permanent, ErrChecksumMismatch)
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return newErr(op, key, Transient, err)
	}
	resp := minio.ToErrorResponse(err)
	if resp.Code == "" && resp.StatusCode == 0 {
		// Not an answer from the server: a refused or dropped connection,
		// a timeout, a body cut short. Worth a retry.
		return newErr(op, key, Transient, err)
	}
	switch resp.Code {
	case "NoSuchKey", "NotFound":
		return newErr(op, key, NotFound, err)
	case "InvalidRange":
		return newErr(op, key, Permanent, fmt.Errorf("%w: %v", ErrInvalidRange, err))
	case "BadDigest", "XAmzContentSHA256Mismatch", "InvalidDigest":
		return newErr(op, key, Permanent, fmt.Errorf("%w: %v", ErrChecksumMismatch, err))
	case "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "RequestTimeTooSkewed", "OperationAborted":
		return newErr(op, key, Transient, err)
	}
	if resp.StatusCode == http.StatusNotFound && resp.Code != "NoSuchBucket" {
		return newErr(op, key, NotFound, err)
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout {
		return newErr(op, key, Transient, err)
	}
	return newErr(op, key, Permanent, err)
}

// Put implements ObjectStore: a single PUT up to the part size, a
// multipart upload beyond it (aborted on failure, so no object appears).
// The content is checked against sum as it streams (the last bytes are
// held back until it matches, so a mismatch cuts the request and the
// server keeps no object), and the sum is stored as user metadata.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, sum Sum) (Info, error) {
	const op = "put"
	if err := ValidKey(key); err != nil {
		return Info{}, newErr(op, key, Permanent, err)
	}
	if size < 0 {
		return Info{}, newErr(op, key, Permanent, fmt.Errorf("negative size %d", size))
	}
	v := newVerifyReader(ctx, r, size, sum)
	up, err := s.c.PutObject(ctx, s.bucket, key, v, size, minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		UserMetadata: map[string]string{metaKeyOf(sum): metaValueOf(sum)},
		PartSize:     s.partSize,
	})
	if errors.Is(v.err, ErrChecksumMismatch) {
		return Info{}, newErr(op, key, Permanent, ErrChecksumMismatch)
	}
	if err != nil {
		return Info{}, s3Err(op, key, ctx, err)
	}
	if v.check() != nil {
		// The client stopped reading before the end yet the server took
		// an object: remove it (best effort) and refuse.
		s.c.RemoveObject(context.WithoutCancel(ctx), s.bucket, key, minio.RemoveObjectOptions{})
		return Info{}, newErr(op, key, Permanent, ErrChecksumMismatch)
	}
	if up.Size != size {
		return Info{}, newErr(op, key, Transient, fmt.Errorf("server stored %d bytes of %d", up.Size, size))
	}
	return Info{Key: key, Size: size, ETag: up.ETag, Sum: sum}, nil
}

// metaKeyOf and metaValueOf are the user metadata holding sum: the CRC in
// 8 hex digits, or a SHA-256 in 64.
func metaKeyOf(sum Sum) string {
	if sum.alg() == SHA256 {
		return sha256MetaKey
	}
	return sumMetaKey
}

func metaValueOf(sum Sum) string {
	if sum.alg() == SHA256 {
		return sum.String()
	}
	return strings.TrimPrefix(sum.String(), "crc32c:")
}

func (s *S3) info(key string, oi minio.ObjectInfo) (Info, error) {
	info := Info{Key: key, Size: oi.Size, ETag: oi.ETag}
	meta := func(k string) string {
		if h := oi.Metadata.Get("X-Amz-Meta-" + k); h != "" {
			return h
		}
		return oi.UserMetadata[k]
	}
	h := meta(sumMetaKey)
	if h != "" {
		h = "crc32c:" + h
	} else if h = meta(sha256MetaKey); h == "" {
		return Info{}, fmt.Errorf("object has no %s metadata", sumMetaKey)
	}
	sum, err := ParseSum(h)
	if err != nil {
		return Info{}, fmt.Errorf("object has no valid checksum metadata: %w", err)
	}
	info.Sum = sum
	return info, nil
}

// Get implements ObjectStore.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	const op = "get"
	if err := ValidKey(key); err != nil {
		return nil, Info{}, newErr(op, key, Permanent, err)
	}
	body, oi, _, err := s.core.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, s3Err(op, key, ctx, err)
	}
	info, err := s.info(key, oi)
	if err != nil {
		body.Close()
		return nil, Info{}, newErr(op, key, Permanent, err)
	}
	return newSumReadCloser(&s3Reader{body: body, ctx: ctx, op: op, key: key}, info, op), info, nil
}

// s3Reader classifies the errors of an object's body and fails once ctx is
// done.
type s3Reader struct {
	body io.ReadCloser
	ctx  context.Context
	op   string
	key  string
}

func (r *s3Reader) Read(p []byte) (int, error) {
	// Checked first, as the local store's reader does: bytes the HTTP
	// client already buffered would otherwise still be read after ctx
	// ended (the conformance test's read after cancel passed or failed
	// by timing).
	if err := ctxErr(r.op, r.key, r.ctx); err != nil {
		return 0, err
	}
	n, err := r.body.Read(p)
	if err != nil && err != io.EOF {
		err = s3Err(r.op, r.key, r.ctx, err)
	}
	return n, err
}

func (r *s3Reader) Close() error { return r.body.Close() }

// GetRange implements ObjectStore.
func (s *S3) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	const op = "get"
	if err := ValidKey(key); err != nil {
		return nil, newErr(op, key, Permanent, err)
	}
	if off < 0 {
		return nil, newErr(op, key, Permanent, fmt.Errorf("%w: offset %d", ErrInvalidRange, off))
	}
	if n == 0 {
		// No byte to ask for (S3 has no empty range): check the object
		// and the offset with a HEAD.
		info, err := s.Head(ctx, key)
		if err != nil {
			return nil, err
		}
		if off > info.Size {
			return nil, newErr(op, key, Permanent, fmt.Errorf("%w: offset %d, size %d", ErrInvalidRange, off, info.Size))
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	var opts minio.GetObjectOptions
	end := int64(0) // to the end
	if n > 0 {
		end = off + n - 1
	}
	if err := opts.SetRange(off, end); err != nil {
		return nil, newErr(op, key, Permanent, err)
	}
	if n < 0 && off == 0 {
		opts = minio.GetObjectOptions{} // SetRange(0, 0) means the first byte only
	}
	body, _, _, err := s.core.GetObject(ctx, s.bucket, key, opts)
	if err != nil {
		err = s3Err(op, key, ctx, err)
		if errors.Is(err, ErrInvalidRange) {
			// S3 refuses a range starting at the size; the local store
			// answers it with no bytes. Tell the two apart.
			if info, herr := s.Head(ctx, key); herr == nil && off == info.Size {
				return io.NopCloser(strings.NewReader("")), nil
			}
		}
		return nil, err
	}
	return &s3Reader{body: body, ctx: ctx, op: op, key: key}, nil
}

// Head implements ObjectStore.
func (s *S3) Head(ctx context.Context, key string) (Info, error) {
	const op = "head"
	if err := ValidKey(key); err != nil {
		return Info{}, newErr(op, key, Permanent, err)
	}
	oi, err := s.c.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s3Err(op, key, ctx, err)
	}
	info, err := s.info(key, oi)
	if err != nil {
		return Info{}, newErr(op, key, Permanent, err)
	}
	return info, nil
}

// Delete implements ObjectStore (S3's DELETE of a missing key succeeds).
func (s *S3) Delete(ctx context.Context, key string) error {
	const op = "delete"
	if err := ValidKey(key); err != nil {
		return newErr(op, key, Permanent, err)
	}
	if err := s.c.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		err = s3Err(op, key, ctx, err)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// List implements ObjectStore through ListObjectsV2 (one request per page
// of up to max+1 keys; the extra one tells whether a next page exists).
// The Sum of listed objects is zero: S3 lists no user metadata.
func (s *S3) List(ctx context.Context, prefix, after string, max int) (Page, error) {
	const op = "list"
	if !validPrefix(prefix) {
		return Page{}, newErr(op, prefix, Permanent, ErrInvalidKey)
	}
	if max <= 0 || max > MaxListPage {
		max = MaxListPage
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops minio's listing goroutine
	ch := s.c.ListObjects(lctx, s.bucket, minio.ListObjectsOptions{
		Prefix:     prefix,
		Recursive:  true,
		StartAfter: after,
		MaxKeys:    max + 1,
	})
	var pg Page
	for oi := range ch {
		if oi.Err != nil {
			return Page{}, s3Err(op, prefix, ctx, oi.Err)
		}
		if oi.Key <= after || !strings.HasPrefix(oi.Key, prefix) {
			continue
		}
		if len(pg.Objects) == max {
			pg.Next = pg.Objects[max-1].Key
			break
		}
		pg.Objects = append(pg.Objects, Info{Key: oi.Key, Size: oi.Size, ETag: oi.ETag})
	}
	if err := ctx.Err(); err != nil {
		return Page{}, newErr(op, prefix, Transient, err)
	}
	return pg, nil
}
