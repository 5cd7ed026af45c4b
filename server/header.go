package server

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request header errors. Every one of them closes the connection: a client
// that frames a request this badly cannot be answered in a way it would
// understand (Kafka does the same).
var (
	errShortHeader     = errors.New("server: request header truncated")
	errBadClientID     = errors.New("server: invalid client id length")
	errBadTags         = errors.New("server: malformed tagged fields")
	errUnknownAPI      = errors.New("server: unknown or unsupported api key")
	errUnsupportedVers = errors.New("server: unsupported api version")
	errBadBody         = errors.New("server: malformed request body")
	// errDecodeTooLarge: the decoded request would take more than
	// maxDecodeRatio times its bytes (plus decodeSlackBytes) of heap, or
	// more than the request budget can hold.
	errDecodeTooLarge = errors.New("server: decoded request too large")
)

// The decode bound (decode_bound.go): a request body whose decoded form
// would take more heap than maxDecodeRatio × its bytes + decodeSlackBytes is
// refused before it is decoded. Real requests stay far below it (record
// batches are not copied; the densest real shapes, long lists of short
// names, reach about 3x); a frame of zeros claiming millions of empty
// elements is above it.
//
// The request budget is charged decodeReserveFactor × the bound: the
// decoded request, and the response its handler builds from it (a response
// has an entry per topic and partition of the request).
const (
	maxDecodeRatio      = 8
	decodeSlackBytes    = 1 << 20
	decodeReserveFactor = 2
)

// requestHeaderFixedBytes is key(2) + version(2) + correlation id(4) +
// client id length(2): the smallest valid request header.
const requestHeaderFixedBytes = 10

// maxTaggedFields bounds the tagged-field count of a request header. Each
// field costs at least two bytes (tag, length), so the frame length bounds the
// loop anyway; this only rejects absurd counts early.
const maxTaggedFields = 1 << 16

// requestHeader is the decoded Kafka request header (v0..v2):
//
//	int16  request_api_key
//	int16  request_api_version
//	int32  correlation_id
//	int16  client_id length, -1 = null, then that many bytes   (header v1+)
//	tagged fields: uvarint count, then per field
//	       uvarint tag, uvarint length, length bytes            (header v2, flexible requests)
//
// Every request Strata serves uses header v1 or v2 (v0 was only ever used by
// ControlledShutdown v0, which is not served), so the client id is always read.
type requestHeader struct {
	key      int16
	version  int16
	corrID   int32
	clientID string
}

// parseRequestHeader reads the fixed part of a request header and the client
// id from frame (a request without its size prefix). It returns the number of
// bytes consumed, which is never more than len(frame). Tagged fields (header
// v2) are not read here: whether they are present depends on the request
// version, see skipTaggedFields. It never panics and never allocates more than
// the client id string.
func parseRequestHeader(frame []byte) (h requestHeader, n int, err error) {
	if len(frame) < 8 {
		return h, 0, errShortHeader
	}
	h.key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.corrID = int32(binary.BigEndian.Uint32(frame[4:]))
	if len(frame) < requestHeaderFixedBytes {
		return h, 8, errShortHeader
	}
	idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
	n = requestHeaderFixedBytes
	switch {
	case idLen == -1: // null client id
	case idLen < 0:
		return h, n, fmt.Errorf("%w: %d", errBadClientID, idLen)
	case idLen > len(frame)-n:
		return h, n, fmt.Errorf("%w: %d bytes claimed, %d left", errShortHeader, idLen, len(frame)-n)
	default:
		h.clientID = string(frame[n : n+idLen])
		n += idLen
	}
	return h, n, nil
}

// skipTaggedFields skips a tagged-field section (uvarint count, then for each
// field uvarint tag, uvarint length and the bytes) at the start of b and
// returns its length in bytes, never more than len(b). No request header tag
// is defined that a broker must act on, so all are ignored.
func skipTaggedFields(b []byte) (int, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, errBadTags
	}
	if count > maxTaggedFields || count > uint64(len(b)-n)/2 {
		return 0, fmt.Errorf("%w: %d fields in %d bytes", errBadTags, count, len(b)-n)
	}
	off := n
	for i := uint64(0); i < count; i++ {
		_, m := binary.Uvarint(b[off:])
		if m <= 0 {
			return 0, errBadTags
		}
		off += m
		size, m := binary.Uvarint(b[off:])
		if m <= 0 {
			return 0, errBadTags
		}
		off += m
		if size > uint64(len(b)-off) {
			return 0, fmt.Errorf("%w: field of %d bytes, %d left", errBadTags, size, len(b)-off)
		}
		off += int(size)
	}
	return off, nil
}

// decodeRequest turns one frame into its header and decoded body. It is a
// pure function of frame and the registered API table, shared by the
// connection handler and the fuzz tests.
//
// A nil request with a nil error means "ApiVersions at a version above ours":
// the body cannot be read, and the answer is a v0 ApiVersions body with
// UNSUPPORTED_VERSION (KIP-511), so the client can retry at a version we know.
// Any other error means the connection must be closed; h holds whatever of the
// header could be read (for the log line).
//
// Strings in the decoded request are copies (kmsg's safe ReadFrom), so a
// handler may keep them after the frame is reused; byte slices (record
// batches) alias frame and live only until the request is completed.
//
// Before kmsg allocates anything the body is walked (walkBody): a body
// whose counts or lengths claim more than its bytes is refused
// (errBodyOverrun), and so is one whose decoded form would pass the decode
// bound (errDecodeTooLarge). decodeReserveFactor × the walk's heap bound is
// then passed to reserve (nil: nothing to reserve), which takes it from the
// request budget;
// if reserve refuses, so does decodeRequest (errDecodeTooLarge).
func decodeRequest(frame []byte, reserve func(n int64) bool) (h requestHeader, req kmsg.Request, err error) {
	h, n, err := parseRequestHeader(frame)
	if err != nil {
		return h, nil, err
	}
	api, ok := lookupAPI(h.key)
	if !ok {
		return h, nil, fmt.Errorf("%w: %d", errUnknownAPI, h.key)
	}
	if h.version < api.minVersion || h.version > api.maxVersion {
		if h.key == apiVersionsKey && h.version > api.maxVersion {
			return h, nil, nil
		}
		return h, nil, fmt.Errorf("%w: %s v%d (we serve v%d..v%d)",
			errUnsupportedVers, kmsg.NameForKey(h.key), h.version, api.minVersion, api.maxVersion)
	}
	req = kmsg.RequestForKey(h.key)
	if req == nil { // register guarantees kmsg knows every registered key
		return h, nil, fmt.Errorf("%w: %d", errUnknownAPI, h.key)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		m, err := skipTaggedFields(frame[n:])
		if err != nil {
			return h, nil, err
		}
		n += m
	}
	body := frame[n:]
	heap, known, err := walkBody(h.key, h.version, req.IsFlexible(), body)
	if !known { // register keeps decodeOps complete (TestDecodeOpsAreCurrent)
		return h, nil, fmt.Errorf("%w: %d has no decode layout", errUnknownAPI, h.key)
	}
	if err != nil {
		return h, nil, fmt.Errorf("%w: %s v%d: %v", errBadBody, kmsg.NameForKey(h.key), h.version, err)
	}
	if limit := int64(len(body))*maxDecodeRatio + decodeSlackBytes; heap > limit {
		return h, nil, fmt.Errorf("%w: %s v%d: %d bytes decode to up to %d bytes of heap (limit %d)",
			errDecodeTooLarge, kmsg.NameForKey(h.key), h.version, len(body), heap, limit)
	}
	if reserve != nil && !reserve(decodeReserveFactor*heap) {
		return h, nil, fmt.Errorf("%w: %s v%d: %d bytes of heap do not fit the request budget",
			errDecodeTooLarge, kmsg.NameForKey(h.key), h.version, heap)
	}
	if err := req.ReadFrom(body); err != nil {
		return h, nil, fmt.Errorf("%w: %s v%d: %v", errBadBody, kmsg.NameForKey(h.key), h.version, err)
	}
	return h, req, nil
}
