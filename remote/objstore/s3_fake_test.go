package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests run the S3 store against fake servers on 127.0.0.1: the
// request shapes it sends (path-style, SigV4-signed with the static keys
// and region, the sum as metadata, Range headers, ListObjectsV2 paging)
// and its classification of what a broken store does. The conformance
// suite against a real S3 server is in s3_test.go.

func newFakeS3(t *testing.T, endpoint string) *S3 {
	t.Helper()
	s, err := NewS3(S3Config{
		Endpoint: endpoint, Bucket: "bkt", Region: "eu-test-1", PathStyle: true,
		AccessKeyID: "AKFAKE", SecretAccessKey: "secretfake",
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type recorded struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// shapeServer answers like S3 for one object and records every request.
type shapeServer struct {
	mu   sync.Mutex
	reqs []recorded
	obj  []byte
	sum  string
}

func (f *shapeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
	w.Header().Set("ETag", `"etag1"`)
	switch {
	case r.Method == http.MethodPut:
		f.obj = decodeChunked(body, r.Header)
		f.sum = r.Header.Get("X-Amz-Meta-Strata-Crc32c")
	case r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2":
		type content struct {
			Key  string
			Size int64
			ETag string
		}
		type result struct {
			XMLName     xml.Name `xml:"ListBucketResult"`
			Name        string
			Prefix      string
			KeyCount    int
			MaxKeys     int
			IsTruncated bool
			Contents    []content
		}
		res := result{Name: "bkt", Prefix: r.URL.Query().Get("prefix"), MaxKeys: 3, IsTruncated: false}
		for _, k := range []string{"p/a", "p/b", "p/c"} {
			if k > r.URL.Query().Get("start-after") {
				res.Contents = append(res.Contents, content{Key: k, Size: 1, ETag: `"e"`})
			}
		}
		res.KeyCount = len(res.Contents)
		w.Header().Set("Content-Type", "application/xml")
		xml.NewEncoder(w).Encode(res)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		w.Header().Set("X-Amz-Meta-Strata-Crc32c", f.sum)
		w.Header().Set("Last-Modified", time.Unix(0, 0).UTC().Format(http.TimeFormat))
		data := f.obj
		if rg := r.Header.Get("Range"); rg != "" {
			var from, to int
			fmt.Sscanf(rg, "bytes=%d-%d", &from, &to)
			data = data[from : to+1]
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(f.obj)))
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.WriteHeader(http.StatusPartialContent)
		} else {
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		}
		if r.Method == http.MethodGet {
			w.Write(data)
		}
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	}
}

// decodeChunked undoes aws-chunked encoding (a streaming-signed body).
func decodeChunked(body []byte, h http.Header) []byte {
	if !strings.HasPrefix(h.Get("X-Amz-Content-Sha256"), "STREAMING-") {
		return body
	}
	var out []byte
	for len(body) > 0 {
		i := bytes.Index(body, []byte("\r\n"))
		if i < 0 {
			break
		}
		var n int
		fmt.Sscanf(string(body[:i]), "%x", &n)
		body = body[i+2:]
		if n == 0 || n > len(body) {
			break
		}
		out = append(out, body[:n]...)
		body = body[n+2:]
	}
	return out
}

func TestS3RequestShapes(t *testing.T) {
	f := &shapeServer{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := newFakeS3(t, srv.URL)
	ctx := testCtx(t)
	data := randBytes(11, 3000)
	if _, err := s.Put(ctx, "topic/0/seg.log", bytes.NewReader(data), int64(len(data)), SumOf(data)); err != nil {
		t.Fatal(err)
	}
	got, err := getRange(s, ctx, "topic/0/seg.log", 10, 100)
	if err != nil || !bytes.Equal(got, data[10:110]) {
		t.Fatalf("range: %v", err)
	}
	full, info := getAll(t, s, "topic/0/seg.log")
	if !bytes.Equal(full, data) || info.Sum != SumOf(data) {
		t.Fatalf("get: %d bytes, info %+v", len(full), info)
	}
	if err := s.Delete(ctx, "topic/0/seg.log"); err != nil {
		t.Fatal(err)
	}
	pg, err := s.List(ctx, "p/", "p/a", 1)
	if err != nil || len(pg.Objects) != 1 || pg.Objects[0].Key != "p/b" || pg.Next != "p/b" {
		t.Fatalf("list: %+v %v", pg, err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	want := []struct{ method, path, queryHas, header, headerHas string }{
		{"PUT", "/bkt/topic/0/seg.log", "", "X-Amz-Meta-Strata-Crc32c", strings.TrimPrefix(SumOf(data).String(), "crc32c:")},
		{"GET", "/bkt/topic/0/seg.log", "", "Range", "bytes=10-109"},
		{"GET", "/bkt/topic/0/seg.log", "", "", ""},
		{"DELETE", "/bkt/topic/0/seg.log", "", "", ""},
		{"GET", "/bkt/", "list-type=2", "", ""},
	}
	if len(f.reqs) != len(want) {
		var seen []string
		for _, r := range f.reqs {
			seen = append(seen, r.method+" "+r.path+"?"+r.query)
		}
		t.Fatalf("%d requests, want %d: %v", len(f.reqs), len(want), seen)
	}
	for i, w := range want {
		r := f.reqs[i]
		if r.method != w.method || r.path != w.path || !strings.Contains(r.query, w.queryHas) {
			t.Fatalf("request %d: %s %s?%s, want %s %s?%s", i, r.method, r.path, r.query, w.method, w.path, w.queryHas)
		}
		if w.header != "" && r.header.Get(w.header) != w.headerHas {
			t.Fatalf("request %d: %s: %q, want %q", i, w.header, r.header.Get(w.header), w.headerHas)
		}
		auth := r.header.Get("Authorization")
		if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKFAKE/") || !strings.Contains(auth, "/eu-test-1/s3/aws4_request") || !strings.Contains(auth, "Signature=") {
			t.Fatalf("request %d not SigV4-signed with the static key and region: %q", i, auth)
		}
	}
	q := f.reqs[4].query
	for _, part := range []string{"prefix=p%2F", "start-after=p%2Fa", "max-keys=2"} {
		if !strings.Contains(q, part) {
			t.Fatalf("list query %q lacks %s", q, part)
		}
	}
	if !bytes.Equal(f.obj, data) {
		t.Fatalf("server received %d bytes, not the content", len(f.obj))
	}
}

// A corrupt upload never completes the PUT: the body fails before its last
// bytes are sent, so the server answers nothing or never sees a whole
// object, and no object is recorded as put.
func TestS3CorruptUploadCutsTheRequest(t *testing.T) {
	f := &shapeServer{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := newFakeS3(t, srv.URL)
	data := randBytes(12, 3000)
	bad := append([]byte(nil), data...)
	bad[2999] ^= 1
	_, err := s.Put(testCtx(t), "k", bytes.NewReader(bad), int64(len(bad)), SumOf(data))
	wantKind(t, "corrupt put", err, Permanent, ErrChecksumMismatch)
	f.mu.Lock()
	defer f.mu.Unlock()
	if bytes.Equal(f.obj, bad) {
		t.Fatal("the server received the whole corrupt object")
	}
}

// The store is down (nothing listens): every call fails at once with a
// Transient error.
func TestS3ServerDownIsTransient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := newFakeS3(t, "http://"+addr)
	if d := checkAllTransient(t, s, 20*time.Second); d != 0 {
		t.Fatalf("%d calls to a closed port waited for their deadline instead of failing", d)
	}
}

// The store accepts connections and never answers: every call returns a
// Transient error when its ctx expires instead of hanging.
func TestS3HungServerBoundedByContext(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	s := newFakeS3(t, srv.URL)
	deadlines := checkAllTransient(t, s, 300*time.Millisecond)
	if deadlines != 6 {
		t.Fatalf("%d of 6 calls to a server that never answers ended by their deadline", deadlines)
	}
}

// checkAllTransient makes each call with its own ctx of the given
// timeout and wants a Transient error from each; it returns how many of
// them ended because their ctx expired.
func checkAllTransient(t *testing.T, s *S3, timeout time.Duration) (deadlines int) {
	t.Helper()
	data := []byte("payload")
	calls := []struct {
		name string
		f    func(ctx context.Context) error
	}{
		{"put", func(ctx context.Context) error {
			_, err := s.Put(ctx, "k", bytes.NewReader(data), int64(len(data)), SumOf(data))
			return err
		}},
		{"get", func(ctx context.Context) error { _, _, err := s.Get(ctx, "k"); return err }},
		{"range", func(ctx context.Context) error { _, err := getRange(s, ctx, "k", 1, 2); return err }},
		{"head", func(ctx context.Context) error { _, err := s.Head(ctx, "k"); return err }},
		{"delete", func(ctx context.Context) error { return s.Delete(ctx, "k") }},
		{"list", func(ctx context.Context) error { _, err := s.List(ctx, "", "", 0); return err }},
	}
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := c.f(ctx)
		wantKind(t, c.name, err, Transient, nil)
		if ctx.Err() != nil {
			deadlines++
		}
		cancel()
	}
	return deadlines
}

// Error answers are classified from their status and code.
func TestS3ErrorClassification(t *testing.T) {
	for _, c := range []struct {
		status int
		code   string
		kind   Kind
	}{
		{503, "SlowDown", Transient},
		{500, "InternalError", Transient},
		{502, "", Transient},
		{429, "", Transient},
		{403, "AccessDenied", Permanent},
		{403, "SignatureDoesNotMatch", Permanent},
		{404, "NoSuchBucket", Permanent},
		{404, "NoSuchKey", NotFound},
	} {
		t.Run(fmt.Sprint(c.status, c.code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(c.status)
				if c.code != "" && r.Method != http.MethodHead {
					fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>m</Message></Error>`, c.code)
				}
			}))
			defer srv.Close()
			s := newFakeS3(t, srv.URL)
			ctx := testCtx(t)
			_, _, err := s.Get(ctx, "k")
			wantKind(t, "get", err, c.kind, nil)
			data := []byte("x")
			_, err = s.Put(ctx, "k", bytes.NewReader(data), 1, SumOf(data))
			if c.kind == NotFound {
				c.kind = Permanent // a put answered 404 NoSuchKey is nonsense, but not a retry
				if KindOf(err) == NotFound {
					return
				}
			}
			wantKind(t, "put", err, c.kind, nil)
			if c.kind == Transient && errors.Is(err, ErrNotFound) {
				t.Fatal("transient error matches ErrNotFound")
			}
		})
	}
}

// A server that sends the headers and part of an object, then stalls: the
// reader Get returned fails Transient when its ctx expires.
func TestS3StalledBodyBoundedByContext(t *testing.T) {
	release := make(chan struct{})
	data := randBytes(13, 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amz-Meta-Strata-Crc32c", strings.TrimPrefix(SumOf(data).String(), "crc32c:"))
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Header().Set("ETag", `"e"`)
		w.Header().Set("Last-Modified", time.Unix(0, 0).UTC().Format(http.TimeFormat))
		w.Write(data[:100])
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	s := newFakeS3(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	rc, _, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	wantKind(t, "read of a stalled body", err, Transient, nil)
	if !bytes.Equal(got, data[:100]) {
		t.Fatalf("read %d bytes before the stall, want the 100 sent", len(got))
	}
}

// An object stored before CRC-32C carries its SHA-256 in
// x-amz-meta-strata-sha256: Head reports it and a full Get verifies the
// content against it (and refuses content that does not match).
func TestS3SHA256ObjectsStillVerified(t *testing.T) {
	data := randBytes(17, 3000)
	for _, tc := range []struct {
		name string
		body []byte
		ok   bool
	}{{"intact", data, true}, {"damaged", append(append([]byte{}, data[:2999]...), data[2999]^1), false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sum := sha256.Sum256(data)
				w.Header().Set("X-Amz-Meta-Strata-Sha256", hex.EncodeToString(sum[:]))
				w.Header().Set("Content-Length", fmt.Sprint(len(tc.body)))
				w.Header().Set("ETag", `"e"`)
				w.Header().Set("Last-Modified", time.Unix(0, 0).UTC().Format(http.TimeFormat))
				if r.Method != http.MethodHead {
					w.Write(tc.body)
				}
			}))
			defer srv.Close()
			s := newFakeS3(t, srv.URL)
			info, err := s.Head(testCtx(t), "old")
			if err != nil || info.Sum.Alg != SHA256 {
				t.Fatalf("head: %+v %v", info, err)
			}
			rc, _, err := s.Get(testCtx(t), "old")
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if tc.ok && (err != nil || !bytes.Equal(got, data)) {
				t.Fatalf("read %d bytes: %v", len(got), err)
			}
			if !tc.ok && !errors.Is(err, ErrChecksumMismatch) {
				t.Fatalf("damaged object read: %v, want ErrChecksumMismatch", err)
			}
		})
	}
}
