package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// suite configures runConformance for one store kind.
type suite struct {
	// newStore returns an empty store for one subtest.
	newStore func(t *testing.T) ObjectStore
	// bigSize is the size of the multipart-sized object (bigger than the
	// store's part size).
	bigSize int64
}

func randBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, s ObjectStore, key string, data []byte) Info {
	t.Helper()
	info, err := s.Put(testCtx(t), key, bytes.NewReader(data), int64(len(data)), SumOf(data))
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	if info.Key != key || info.Size != int64(len(data)) || info.Sum != SumOf(data) || info.ETag == "" {
		t.Fatalf("put %s: info %+v", key, info)
	}
	return info
}

func getAll(t *testing.T, s ObjectStore, key string) ([]byte, Info) {
	t.Helper()
	rc, info, err := s.Get(testCtx(t), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("get %s: read: %v", key, err)
	}
	return b, info
}

func getRange(s ObjectStore, ctx context.Context, key string, off, n int64) ([]byte, error) {
	rc, err := s.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func wantKind(t *testing.T, what string, err error, kind Kind, target error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", what, kind)
	}
	if KindOf(err) != kind {
		t.Fatalf("%s: kind %v, want %v (%v)", what, KindOf(err), kind, err)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("%s: %v is not %v", what, err, target)
	}
}

func runConformance(t *testing.T, su suite) {
	t.Run("PutGetHead", func(t *testing.T) {
		s := su.newStore(t)
		data := randBytes(1, 100_003)
		key := "topic-0/00000000000000000042.log"
		pi := put(t, s, key, data)
		got, gi := getAll(t, s, key)
		if !bytes.Equal(got, data) {
			t.Fatalf("get returned %d bytes, not what was put", len(got))
		}
		hi, err := s.Head(testCtx(t), key)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []Info{gi, hi} {
			if i.Key != key || i.Size != int64(len(data)) || i.Sum != SumOf(data) || i.ETag != pi.ETag {
				t.Fatalf("info %+v, put said %+v", i, pi)
			}
		}
	})

	t.Run("EmptyAndOverwrite", func(t *testing.T) {
		s := su.newStore(t)
		put(t, s, "e/empty", nil)
		if got, info := getAll(t, s, "e/empty"); len(got) != 0 || info.Size != 0 {
			t.Fatalf("empty object: %d bytes, info %+v", len(got), info)
		}
		put(t, s, "e/k", []byte("first version"))
		put(t, s, "e/k", []byte("second"))
		if got, _ := getAll(t, s, "e/k"); string(got) != "second" {
			t.Fatalf("after overwrite: %q", got)
		}
	})

	t.Run("Ranges", func(t *testing.T) {
		s := su.newStore(t)
		data := randBytes(2, 10_000)
		put(t, s, "r/obj", data)
		ctx := testCtx(t)
		for _, c := range []struct {
			off, n   int64
			from, to int
		}{
			{0, 1, 0, 1},
			{10, 100, 10, 110},
			{9_999, 1, 9_999, 10_000},
			{5_000, -1, 5_000, 10_000},
			{0, -1, 0, 10_000},
			{9_000, 5_000, 9_000, 10_000}, // cut at the end
			{10_000, 10, 10_000, 10_000},  // at the end: nothing
			{10_000, 0, 10_000, 10_000},
			{3, 0, 3, 3},
		} {
			got, err := getRange(s, ctx, "r/obj", c.off, c.n)
			if err != nil {
				t.Fatalf("range %d+%d: %v", c.off, c.n, err)
			}
			if !bytes.Equal(got, data[c.from:c.to]) {
				t.Fatalf("range %d+%d: %d bytes, want data[%d:%d]", c.off, c.n, len(got), c.from, c.to)
			}
		}
		_, err := getRange(s, ctx, "r/obj", 10_001, 5)
		wantKind(t, "range past the end", err, Permanent, ErrInvalidRange)
		_, err = getRange(s, ctx, "r/obj", -1, 5)
		wantKind(t, "negative offset", err, Permanent, ErrInvalidRange)
	})

	t.Run("NotFound", func(t *testing.T) {
		s := su.newStore(t)
		ctx := testCtx(t)
		_, _, err := s.Get(ctx, "missing/key")
		wantKind(t, "get", err, NotFound, ErrNotFound)
		if !IsPermanent(err) || IsTransient(err) {
			t.Fatalf("NotFound classified transient: %v", err)
		}
		_, err = s.Head(ctx, "missing/key")
		wantKind(t, "head", err, NotFound, ErrNotFound)
		_, err = getRange(s, ctx, "missing/key", 0, 10)
		wantKind(t, "range", err, NotFound, ErrNotFound)
	})

	t.Run("DeleteIsIdempotent", func(t *testing.T) {
		s := su.newStore(t)
		ctx := testCtx(t)
		put(t, s, "d/x", []byte("x"))
		for i := 0; i < 2; i++ {
			if err := s.Delete(ctx, "d/x"); err != nil {
				t.Fatalf("delete #%d: %v", i, err)
			}
		}
		if err := s.Delete(ctx, "d/never"); err != nil {
			t.Fatalf("delete of a key never put: %v", err)
		}
		_, err := s.Head(ctx, "d/x")
		wantKind(t, "head after delete", err, NotFound, ErrNotFound)
		if pg, err := s.List(ctx, "d/", "", 0); err != nil || len(pg.Objects) != 0 {
			t.Fatalf("list after delete: %+v %v", pg, err)
		}
	})

	t.Run("ListPaginates", func(t *testing.T) {
		s := su.newStore(t)
		ctx := testCtx(t)
		// Keys whose byte order differs from a directory walk's order
		// ('-' and '.' sort before '/').
		keys := []string{"l/a/b", "l/a-b", "l/a.c", "l/ab", "l/a/c/d", "l/b", "l/0", "other/a", "l2/x"}
		for i, k := range keys {
			put(t, s, k, []byte(fmt.Sprint(i, k)))
		}
		want := []string{}
		for _, k := range keys {
			if strings.HasPrefix(k, "l/") {
				want = append(want, k)
			}
		}
		sort.Strings(want)
		var got []string
		after := ""
		pages := 0
		for {
			pg, err := s.List(ctx, "l/", after, 2)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(pg.Objects) > 2 {
				t.Fatalf("page of %d objects, max 2", len(pg.Objects))
			}
			for _, o := range pg.Objects {
				got = append(got, o.Key)
				if o.Size != int64(len(fmt.Sprint(indexOf(keys, o.Key), o.Key))) {
					t.Fatalf("listed %s with size %d", o.Key, o.Size)
				}
			}
			if pg.Next == "" {
				break
			}
			after = pg.Next
			if pages > 10 {
				t.Fatal("list does not end")
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("listed %v, want %v", got, want)
		}
		if pages != (len(want)+1)/2 {
			t.Fatalf("%d pages for %d keys by 2", pages, len(want))
		}
		pg, err := s.List(ctx, "l/a", "", 0) // a partial component
		if err != nil {
			t.Fatal(err)
		}
		if n := len(pg.Objects); n != 5 || pg.Next != "" {
			t.Fatalf("prefix l/a: %+v", pg)
		}
		pg, err = s.List(ctx, "nothing/", "", 0)
		if err != nil || len(pg.Objects) != 0 || pg.Next != "" {
			t.Fatalf("empty prefix: %+v %v", pg, err)
		}
		_, err = s.List(ctx, "../", "", 0)
		wantKind(t, "list of a bad prefix", err, Permanent, ErrInvalidKey)
	})

	t.Run("CorruptUploadRefused", func(t *testing.T) {
		s := su.newStore(t)
		ctx := testCtx(t)
		data := randBytes(3, 50_000)
		good := SumOf(data)
		put(t, s, "c/old", data)
		bad := append([]byte(nil), data...)
		bad[len(bad)-1] ^= 1
		cases := []struct {
			name string
			body []byte
			size int64
		}{
			{"flipped byte", bad, int64(len(bad))},
			{"short body", data[:len(data)-1], int64(len(data))},
			{"long body", append(append([]byte(nil), data...), 'x'), int64(len(data))},
		}
		for _, c := range cases {
			for _, key := range []string{"c/new", "c/old"} {
				_, err := s.Put(ctx, key, bytes.NewReader(c.body), c.size, good)
				wantKind(t, c.name+" put of "+key, err, Permanent, ErrChecksumMismatch)
			}
			_, err := s.Head(ctx, "c/new")
			wantKind(t, c.name+": the refused object", err, NotFound, ErrNotFound)
			if got, _ := getAll(t, s, "c/old"); !bytes.Equal(got, data) {
				t.Fatalf("%s: the old object changed", c.name)
			}
		}
		if pg, err := s.List(ctx, "c/", "", 0); err != nil || len(pg.Objects) != 1 {
			t.Fatalf("after refused puts: %+v %v", pg, err)
		}
	})

	t.Run("InvalidKeys", func(t *testing.T) {
		s := su.newStore(t)
		ctx := testCtx(t)
		for _, k := range []string{"", "/a", "a//b", "a/", "../x", "a/../b", ".hidden", "a/.put-x.tmp", "sp ace", "a\\b"} {
			_, err := s.Put(ctx, k, strings.NewReader("x"), 1, SumOf([]byte("x")))
			wantKind(t, fmt.Sprintf("put %q", k), err, Permanent, ErrInvalidKey)
			_, _, err = s.Get(ctx, k)
			wantKind(t, fmt.Sprintf("get %q", k), err, Permanent, ErrInvalidKey)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		s := su.newStore(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		data := []byte("never stored")
		_, err := s.Put(ctx, "x/cancelled", bytes.NewReader(data), int64(len(data)), SumOf(data))
		wantKind(t, "put with a cancelled ctx", err, Transient, nil)
		_, err = s.Head(testCtx(t), "x/cancelled")
		wantKind(t, "head of the cancelled put", err, NotFound, ErrNotFound)
		_, err = s.Head(ctx, "x/cancelled")
		wantKind(t, "head with a cancelled ctx", err, Transient, nil)
	})

	t.Run("ReaderBoundedByContext", func(t *testing.T) {
		s := su.newStore(t)
		data := randBytes(5, 1<<20)
		put(t, s, "rc/obj", data)
		for _, ranged := range []bool{false, true} {
			ctx, cancel := context.WithCancel(context.Background())
			var rc io.ReadCloser
			var err error
			if ranged {
				rc, err = s.GetRange(ctx, "rc/obj", 1, -1)
			} else {
				rc, _, err = s.Get(ctx, "rc/obj")
			}
			if err != nil {
				t.Fatal(err)
			}
			first := make([]byte, 10)
			if _, err := io.ReadFull(rc, first); err != nil {
				t.Fatal(err)
			}
			cancel()
			_, err = io.ReadAll(rc)
			rc.Close()
			wantKind(t, fmt.Sprintf("read after cancel (ranged %v)", ranged), err, Transient, nil)
		}
	})

	t.Run("ConcurrentPutsOfOneKey", func(t *testing.T) {
		s := su.newStore(t)
		ctx := testCtx(t)
		const n = 6
		versions := make([][]byte, n)
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range versions {
			versions[i] = randBytes(int64(100+i), 20_000+i)
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, errs[i] = s.Put(ctx, "cc/k", bytes.NewReader(versions[i]), int64(len(versions[i])), SumOf(versions[i]))
			}(i)
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("put %d: %v", i, err)
			}
		}
		got, info := getAll(t, s, "cc/k")
		found := false
		for _, v := range versions {
			found = found || bytes.Equal(v, got)
		}
		if !found || info.Sum != SumOf(got) {
			t.Fatalf("after concurrent puts the object (%d bytes) is none of them", len(got))
		}
	})

	if su.bigSize > 0 {
		t.Run("Multipart", func(t *testing.T) {
			s := su.newStore(t)
			data := randBytes(4, int(su.bigSize))
			put(t, s, "big/segment.log", data)
			got, info := getAll(t, s, "big/segment.log")
			if !bytes.Equal(got, data) || info.Size != su.bigSize {
				t.Fatalf("big object: %d bytes back of %d", len(got), len(data))
			}
			mid := su.bigSize / 2
			part, err := getRange(s, testCtx(t), "big/segment.log", mid, 1<<20)
			if err != nil || !bytes.Equal(part, data[mid:mid+1<<20]) {
				t.Fatalf("range in the middle: %v", err)
			}
			// A corrupt big upload leaves nothing (the multipart upload is
			// aborted before completion).
			bad := append([]byte(nil), data...)
			bad[len(bad)-10] ^= 0xff
			_, err = s.Put(testCtx(t), "big/corrupt.log", bytes.NewReader(bad), int64(len(bad)), SumOf(data))
			wantKind(t, "corrupt multipart put", err, Permanent, ErrChecksumMismatch)
			_, err = s.Head(testCtx(t), "big/corrupt.log")
			wantKind(t, "head of the corrupt multipart put", err, NotFound, ErrNotFound)
		})
	}
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}
