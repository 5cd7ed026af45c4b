package server

import (
	"encoding/binary"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// wantAPIs is what the broker must advertise: every API the README lists.
// The ranges of the APIs this file's neighbours serve are checked here; the
// data-path APIs (Produce, Fetch, ListOffsets, DeleteRecords,
// OffsetForLeaderEpoch) only for presence.
var wantAPIs = map[int16]*[2]int16{
	0:  nil,
	1:  nil,
	2:  nil,
	3:  {0, 12},
	18: {0, 4},
	19: {0, 7},
	20: {0, 6},
	21: nil,
	23: nil,
	32: {0, 4},
	37: {0, 3},
	55: {0, 2},
	60: {0, 1},
}

// checkAPIKeys asserts keys equals the registered table and contains every
// API the broker promises, with the ranges this file's handlers serve.
func checkAPIKeys(t *testing.T, keys []kmsg.ApiVersionsResponseApiKey) {
	t.Helper()
	table := apiKeys()
	if len(keys) != len(table) {
		t.Fatalf("%d api keys advertised, table has %d", len(keys), len(table))
	}
	got := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for i, k := range keys {
		if k.ApiKey != table[i].ApiKey || k.MinVersion != table[i].MinVersion || k.MaxVersion != table[i].MaxVersion {
			t.Fatalf("advertised %+v, table says %+v", k, table[i])
		}
		got[k.ApiKey] = k
	}
	for key, r := range wantAPIs {
		k, ok := got[key]
		if !ok {
			t.Fatalf("%s (%d) is not advertised", kmsg.NameForKey(key), key)
		}
		if r != nil && (k.MinVersion != r[0] || k.MaxVersion != r[1]) {
			t.Fatalf("%s advertised v%d..v%d, want v%d..v%d", kmsg.NameForKey(key), k.MinVersion, k.MaxVersion, r[0], r[1])
		}
	}
}

// TestApiVersionsTooNewGetsV0BodyThenRetry sends ApiVersions v99, as a
// client newer than the broker would: the answer is a v0 body (no tags, no
// throttle) with UNSUPPORTED_VERSION and only ApiVersions' range (KIP-511);
// the same connection then works at v3 and v4.
func TestApiVersionsTooNewGetsV0BodyThenRetry(t *testing.T) {
	addr, _, _ := startBroker(t)
	c := dialRaw(t, addr)

	// Header v2 (flexible), a body we cannot know; neither is read.
	frame := append(header(apiVersionsKey, 99, 42, 4, "newc"), 0, 0xca, 0xfe)
	c.writeFrame(frame)
	b, err := c.readFrame()
	if err != nil {
		t.Fatalf("no answer to ApiVersions v99: %v", err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != 42 {
		t.Fatalf("correlation id %d", got)
	}
	// v0 body: int16 error, int32 count, count * (key, min, max); nothing else.
	body := b[4:]
	if len(body) < 6 {
		t.Fatalf("body of %d bytes", len(body))
	}
	if code := int16(binary.BigEndian.Uint16(body)); code != kerr.UnsupportedVersion.Code {
		t.Fatalf("error code %d, want UNSUPPORTED_VERSION", code)
	}
	n := int(binary.BigEndian.Uint32(body[2:]))
	if len(body) != 6+6*n {
		t.Fatalf("v0 body of %d bytes for %d keys: extra or missing fields", len(body), n)
	}
	v0 := kmsg.NewPtrApiVersionsResponse()
	v0.SetVersion(0)
	if err := v0.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if len(v0.ApiKeys) != 1 || v0.ApiKeys[0].ApiKey != apiVersionsKey || v0.ApiKeys[0].MinVersion != 0 || v0.ApiKeys[0].MaxVersion != 4 {
		t.Fatalf("v0 body keys %+v, want only ApiVersions v0..v4", v0.ApiKeys)
	}

	for i, v := range []int16{3, 4, 0, 1, 2} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-test", "1.0.0"
		resp := kmsg.NewPtrApiVersionsResponse()
		c.roundTrip(req, int32(100+i), resp) // also checks: no tag byte in the response header
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		checkAPIKeys(t, resp.ApiKeys)
	}
}

func TestApiVersionsRejectsBadSoftwareName(t *testing.T) {
	addr, _, _ := startBroker(t)
	c := dialRaw(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "bad name!", "1"
	resp := kmsg.NewPtrApiVersionsResponse()
	c.roundTrip(req, 1, resp)
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("error %d, want INVALID_REQUEST", resp.ErrorCode)
	}
}

// TestApiVersionsNegotiatedByFranzGo: kgo negotiates with the broker and
// kadm reports the same table.
func TestApiVersionsNegotiatedByFranzGo(t *testing.T) {
	addr, _, _ := startBroker(t)
	cl := newClient(t, addr)
	resp := issue[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest())
	if resp.ErrorCode != 0 {
		t.Fatalf("error %d", resp.ErrorCode)
	}
	if resp.GetVersion() != 4 {
		t.Fatalf("kgo spoke ApiVersions v%d, want 4 (our max)", resp.GetVersion())
	}
	checkAPIKeys(t, resp.ApiKeys)

	adm := newAdmin(t, addr)
	vs, err := adm.ApiVersions(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	bv, ok := vs[0]
	if !ok || bv.Err != nil {
		t.Fatalf("kadm ApiVersions: %+v", vs)
	}
	if min, max, ok := bv.KeyVersions(3); !ok || min != 0 || max != 12 {
		t.Fatalf("kadm sees Metadata v%d..v%d (%v)", min, max, ok)
	}
	if _, _, ok := bv.KeyVersions(4); ok {
		t.Fatal("kadm sees LeaderAndIsr, which is not served")
	}
}

// TestApiVersionsFeatures: v3+ answers carry the supported and finalized
// features (transaction.version at the configured level; level 0 is not
// finalized), v0-v2 answers cannot.
func TestApiVersionsFeatures(t *testing.T) {
	for _, level := range []int16{0, 1, 2} {
		addr, _, _ := startBroker(t, func(c *Config, _ *engine.Options) { c.Txn.TransactionVersion = level })
		c := dialRaw(t, addr)
		for i, v := range []int16{2, 3, 4} {
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(v)
			req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-test", "1.0.0"
			resp := kmsg.NewPtrApiVersionsResponse()
			c.roundTrip(req, int32(i+1), resp)
			if resp.ErrorCode != 0 {
				t.Fatalf("level %d v%d: error %d", level, v, resp.ErrorCode)
			}
			if v < 3 {
				if len(resp.SupportedFeatures) != 0 || len(resp.FinalizedFeatures) != 0 || resp.FinalizedFeaturesEpoch != -1 {
					t.Fatalf("v%d answer carries features: %+v", v, resp)
				}
				continue
			}
			if len(resp.SupportedFeatures) != 1 || resp.SupportedFeatures[0].Name != "transaction.version" ||
				resp.SupportedFeatures[0].MinVersion != 0 || resp.SupportedFeatures[0].MaxVersion != 2 {
				t.Fatalf("level %d v%d: supported features %+v", level, v, resp.SupportedFeatures)
			}
			if resp.FinalizedFeaturesEpoch < 0 {
				t.Fatalf("level %d v%d: finalized features epoch %d", level, v, resp.FinalizedFeaturesEpoch)
			}
			switch {
			case level == 0 && len(resp.FinalizedFeatures) != 0:
				t.Fatalf("v%d: level 0 finalized as %+v", v, resp.FinalizedFeatures)
			case level > 0 && (len(resp.FinalizedFeatures) != 1 || resp.FinalizedFeatures[0].Name != "transaction.version" ||
				resp.FinalizedFeatures[0].MinVersionLevel != level || resp.FinalizedFeatures[0].MaxVersionLevel != level):
				t.Fatalf("level %d v%d: finalized features %+v", level, v, resp.FinalizedFeatures)
			}
		}
		// What franz-go makes of an answer it negotiated (kversion is how
		// kgo reads features). That a fresh client runs TV2 transactions
		// from its first connection is checked by txn_kgo_test.go.
		cl := newClient(t, addr)
		vs := kversion.FromApiVersionsResponse(issue[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest()))
		got := int16(0)
		vs.EachFinalizedFeature(func(name string, l int16) {
			if name == "transaction.version" {
				got = l
			}
		})
		if got != level {
			t.Fatalf("franz-go sees transaction.version %d, want %d", got, level)
		}
	}
}
