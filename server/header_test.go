package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stratalog/strata/netpoll"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// header builds a request header v1 by hand; idLen -1 means a null client id.
func header(key, version int16, corrID int32, idLen int16, id string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corrID))
	b = binary.BigEndian.AppendUint16(b, uint16(idLen))
	return append(b, id...)
}

func TestParseRequestHeader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		frame   []byte
		want    requestHeader
		n       int
		wantErr error
	}{
		{"client id", header(3, 12, 77, 3, "abc"), requestHeader{3, 12, 77, "abc"}, 13, nil},
		{"client id then body", append(header(0, 9, -5, 2, "id"), 1, 2, 3), requestHeader{0, 9, -5, "id"}, 12, nil},
		{"null client id", header(18, 3, 1, -1, ""), requestHeader{18, 3, 1, ""}, 10, nil},
		{"empty client id", header(18, 3, 1, 0, ""), requestHeader{18, 3, 1, ""}, 10, nil},
		{"negative client id length", header(18, 3, 1, -2, ""), requestHeader{18, 3, 1, ""}, 10, errBadClientID},
		{"most negative client id length", header(18, 3, 1, -32768, ""), requestHeader{18, 3, 1, ""}, 10, errBadClientID},
		{"client id longer than frame", header(18, 3, 1, 10, "abc"), requestHeader{18, 3, 1, ""}, 10, errShortHeader},
		{"no client id length", header(18, 3, 1, 0, "")[:9], requestHeader{18, 3, 1, ""}, 8, errShortHeader},
		{"half a correlation id", []byte{0, 18, 0, 3, 0, 0}, requestHeader{}, 0, errShortHeader},
		{"empty", nil, requestHeader{}, 0, errShortHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, n, err := parseRequestHeader(tc.frame)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if h != tc.want || n != tc.n {
				t.Fatalf("got %+v (%d bytes), want %+v (%d bytes)", h, n, tc.want, tc.n)
			}
		})
	}
}

func TestSkipTaggedFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		n    int
		ok   bool
	}{
		{"none", []byte{0, 9, 9}, 1, true},
		{"two fields", []byte{2, 0, 1, 0xaa, 5, 2, 0xbb, 0xcc, 9}, 8, true},
		{"multi-byte tag and length", append([]byte{1, 0x80, 0x01, 0x81, 0x01}, make([]byte, 129)...), 134, true},
		{"empty input", nil, 0, false},
		{"unterminated count", []byte{0x80}, 0, false},
		{"count larger than the bytes", []byte{100, 0, 0}, 0, false},
		{"huge count", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, 0, false},
		{"field longer than the bytes", []byte{1, 0, 5, 1, 2}, 0, false},
		{"field length overflows", []byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 0, false},
		{"missing length", []byte{1, 0}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := skipTaggedFields(tc.b)
			if (err == nil) != tc.ok || n != tc.n {
				t.Fatalf("skipTaggedFields = %d, %v; want %d, ok=%v", n, err, tc.n, tc.ok)
			}
		})
	}
}

// TestDecodeRequestEveryRegisteredVersion encodes a default request of every
// registered key at every served version as a client would, and checks that
// decodeRequest returns the same header and a body that re-encodes to the
// same bytes.
func TestDecodeRequestEveryRegisteredVersion(t *testing.T) {
	served := 0
	for _, k := range apiKeys() {
		for v := k.MinVersion; v <= k.MaxVersion; v++ {
			req := kmsg.RequestForKey(k.ApiKey)
			req.SetVersion(v)
			frame := encodeRequest(req, int32(v)*1000+int32(k.ApiKey), "client-1")
			h, got, err := decodeRequest(frame, nil)
			if err != nil {
				t.Fatalf("%s v%d: %v", kmsg.NameForKey(k.ApiKey), v, err)
			}
			if h.key != k.ApiKey || h.version != v || h.corrID != int32(v)*1000+int32(k.ApiKey) || h.clientID != "client-1" {
				t.Fatalf("%s v%d: header %+v", kmsg.NameForKey(k.ApiKey), v, h)
			}
			if got.Key() != k.ApiKey || got.GetVersion() != v {
				t.Fatalf("%s v%d: decoded %T v%d", kmsg.NameForKey(k.ApiKey), v, got, got.GetVersion())
			}
			if !bytes.Equal(got.AppendTo(nil), req.AppendTo(nil)) {
				t.Fatalf("%s v%d: body does not round-trip", kmsg.NameForKey(k.ApiKey), v)
			}
			served++
		}
	}
	if served < 10 {
		t.Fatalf("only %d key/version pairs registered", served)
	}
}

func TestDecodeRequestRejects(t *testing.T) {
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12) // flexible: header has a tag section
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("a-topic")}}
	good := encodeRequest(meta, 9, "c")
	if _, _, err := decodeRequest(good, nil); err != nil {
		t.Fatalf("valid Metadata v12: %v", err)
	}
	setVersion := func(frame []byte, v int16) []byte {
		frame = bytes.Clone(frame)
		binary.BigEndian.PutUint16(frame[2:], uint16(v))
		return frame
	}
	setKey := func(frame []byte, k int16) []byte {
		frame = bytes.Clone(frame)
		binary.BigEndian.PutUint16(frame[0:], uint16(k))
		return frame
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"unknown api key", setKey(good, 9999), errUnknownAPI},
		{"negative api key", setKey(good, -1), errUnknownAPI},
		{"api key kmsg knows but we do not serve", setKey(good, 4 /* LeaderAndIsr */), errUnknownAPI},
		{"version above range", setVersion(good, 13), errUnsupportedVers},
		{"negative version", setVersion(good, -1), errUnsupportedVers},
		{"truncated body", good[:len(good)-4], errBadBody},
		{"truncated tag section", append(header(3, 12, 1, 1, "c"), 1, 0, 5, 0), errBadTags},
		{"truncated header", good[:5], errShortHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, req, err := decodeRequest(tc.frame, nil); !errors.Is(err, tc.want) || req != nil {
				t.Fatalf("decodeRequest = %v, %v; want %v", req, err, tc.want)
			}
		})
	}

	// ApiVersions above our range is not an error: the handler answers with
	// a v0 body, so it decodes to a header and no request.
	av := header(apiVersionsKey, 99, 5, -1, "")
	if h, req, err := decodeRequest(append(av, 0xde, 0xad), nil); err != nil || req != nil || h.version != 99 || h.corrID != 5 {
		t.Fatalf("ApiVersions v99: %+v, %v, %v", h, req, err)
	}
}

func TestRegisterRejectsBadRanges(t *testing.T) {
	mustPanic := func(name string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: register did not panic", name)
			}
		}()
		fn()
	}
	noop := func(*Server, *reqCtx) {}
	mustPanic("duplicate", func() { register(apiVersionsKey, 0, 1, noop) })
	mustPanic("beyond kmsg", func() { register(4, 0, 100, noop) })
	mustPanic("inverted", func() { register(4, 3, 2, noop) })
	mustPanic("negative key", func() { register(-1, 0, 0, noop) })
	mustPanic("nil handler", func() { register(4, 0, 0, nil) })
	if _, ok := lookupAPI(4); ok {
		t.Fatal("a rejected registration left an entry behind")
	}
}

func TestValidSoftwareToken(t *testing.T) {
	for s, want := range map[string]bool{
		"kgo": true, "librdkafka": true, "2.3.0": true, "v1.22.3": true, "a": true, "a-b.c": true,
		"": false, "-a": false, "a-": false, "a b": false, "a_b": false, ".": false, "é": false,
	} {
		if got := validSoftwareToken(s); got != want {
			t.Errorf("validSoftwareToken(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzRequestHeader: the parser never panics, never claims more bytes than
// it was given, and what it accepts re-encodes to exactly the bytes it
// consumed.
func FuzzRequestHeader(f *testing.F) {
	f.Add(header(3, 12, 77, 3, "abc"))
	f.Add(header(18, 4, 1, -1, ""))
	f.Add(header(18, 4, 1, -2, ""))
	f.Add(header(0, 9, 1, 100, "short"))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, n, err := parseRequestHeader(frame)
		if n < 0 || n > len(frame) {
			t.Fatalf("consumed %d of %d bytes", n, len(frame))
		}
		if err != nil {
			return
		}
		idLen := int16(len(h.clientID))
		if n == requestHeaderFixedBytes && frame[8] == 0xff && frame[9] == 0xff {
			idLen = -1
		}
		if re := header(h.key, h.version, h.corrID, idLen, h.clientID); !bytes.Equal(re, frame[:n]) {
			t.Fatalf("re-encoded header %x != consumed bytes %x", re, frame[:n])
		}
		if m, err := skipTaggedFields(frame[n:]); err == nil && (m < 1 || m > len(frame)-n) {
			t.Fatalf("tag section of %d bytes in %d", m, len(frame)-n)
		}
	})
}

// FuzzDecodeRequest: arbitrary frames never panic the decoder; what decodes
// has a registered key and a served version, and its body is stable under
// re-encoding (encode(decode(encode(decode(x)))) == encode(decode(x))).
func FuzzDecodeRequest(f *testing.F) {
	for _, k := range apiKeys() {
		req := kmsg.RequestForKey(k.ApiKey)
		req.SetVersion(k.MaxVersion)
		f.Add(encodeRequest(req, 1, "seed"))
		req.SetVersion(k.MinVersion)
		f.Add(encodeRequest(req, 2, ""))
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}, {TopicID: [16]byte{1}}}
	f.Add(encodeRequest(meta, 3, "c"))
	f.Add(header(apiVersionsKey, 99, 5, -1, ""))
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, err := decodeRequest(frame, nil)
		if err != nil {
			if req != nil {
				t.Fatal("request returned with an error")
			}
			return
		}
		api, ok := lookupAPI(h.key)
		if !ok {
			t.Fatalf("decoded unregistered key %d", h.key)
		}
		if req == nil {
			if h.key != apiVersionsKey || h.version <= api.maxVersion {
				t.Fatalf("nil request for %d v%d", h.key, h.version)
			}
			return
		}
		if req.Key() != h.key || req.GetVersion() != h.version || h.version < api.minVersion || h.version > api.maxVersion {
			t.Fatalf("decoded %T v%d for header %+v", req, req.GetVersion(), h)
		}
		once := req.AppendTo(nil)
		again := kmsg.RequestForKey(h.key)
		again.SetVersion(h.version)
		if err := again.ReadFrom(once); err != nil {
			t.Fatalf("re-decoding our own encoding: %v", err)
		}
		if twice := again.AppendTo(nil); !bytes.Equal(once, twice) {
			t.Fatalf("encoding not stable:\n%x\n%x", once, twice)
		}
	})
}

// BenchmarkDecodeRequest decodes a Produce v9 frame carrying 16 KiB of
// record bytes: the per-request cost before any handler runs.
func BenchmarkDecodeRequest(b *testing.B) {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = 30000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "bench", Partitions: []kmsg.ProduceRequestTopicPartition{
		{Partition: 0, Records: make([]byte, 16<<10)},
	}}}
	frame := encodeRequest(req, 1, "bench-client")
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, r, err := decodeRequest(frame, nil); err != nil || r == nil {
			b.Fatal(err)
		}
	}
}

// discardReply completes like netpoll after a successful write, without I/O.
type discardReply struct{ n int }

func (r *discardReply) Send(resp []byte) { r.n += len(resp) }
func (r *discardReply) SendParts(parts []netpoll.Part, done func()) {
	for _, p := range parts {
		r.n += len(p.Buf)
	}
	if done != nil {
		done()
	}
}
func (r *discardReply) Skip()  {}
func (r *discardReply) Close() {}

// BenchmarkRespond encodes a response into a pooled buffer: the only
// allocations should be the caller's response value and reqCtx.
func BenchmarkRespond(b *testing.B) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = apiKeys()
	r := &discardReply{}
	b.ReportAllocs()
	for b.Loop() {
		rc := reqCtx{reply: r, key: apiVersionsKey, version: 3}
		rc.respond(resp)
	}
	b.SetBytes(int64(r.n) / int64(b.N))
}
