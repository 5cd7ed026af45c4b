package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions v0..v4. kmsg knows v5; v4 is what we advertise and test.
func init() { register(apiVersionsKey, 0, 4, handleApiVersions) }

// handleApiVersions answers with every registered API key and its version
// range (the table registry.go builds).
//
// A request above our max version cannot be decoded (its body may have
// fields we do not know), so, as Kafka does since KIP-511, the answer is a v0
// body with UNSUPPORTED_VERSION whose key table holds only ApiVersions and
// its range; the client then retries at min(its max, our max) and learns
// the rest (and the features, which a v0 body cannot carry) from that
// answer. franz-go takes a full table in the v0 body as final and would
// never see the features of its first connection. The response header of
// ApiVersions never carries tagged fields, whatever the version.
//
// v3+ requests name the client software; a name or version that is not
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? gets INVALID_REQUEST, as in Kafka.
//
// v3+ responses carry the feature flags in tagged fields, as Kafka 4.x
// does: SupportedFeatures (what this broker can run: transaction.version
// 0..2), FinalizedFeatures (what the cluster runs: transaction.version at
// TxnConfig.TransactionVersion, min level = max level = that level) and
// FinalizedFeaturesEpoch. Clients read the finalized level:
// transaction.version >= 2 makes franz-go and the Java client use KIP-890
// part 2 (Produce v12+ without AddPartitionsToTxn, EndTxn v5,
// TxnOffsetCommit v5 without AddOffsetsToTxn). Features Strata does not
// run (metadata.version, kraft.version, group.version) are not listed. The
// epoch is a constant (featuresEpoch): the finalized set changes only with
// a broker's configuration, at restart; franz-go and the Java client only
// use it to know the features were finalized (-1: no finalized features).
func handleApiVersions(s *Server, rc *reqCtx) {
	resp := kmsg.NewPtrApiVersionsResponse()
	req, _ := rc.req.(*kmsg.ApiVersionsRequest)
	if req == nil { // version above ours: see decodeRequest
		resp.SetVersion(0)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		for _, k := range apiKeys() {
			if k.ApiKey == apiVersionsKey {
				resp.ApiKeys = append(resp.ApiKeys, k)
			}
		}
		rc.respondEncoded(resp)
		return
	}
	if req.Version >= 3 && (!validSoftwareToken(req.ClientSoftwareName) || !validSoftwareToken(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		rc.respond(resp)
		return
	}
	resp.ApiKeys = apiKeys()
	if rc.ctl {
		resp.ApiKeys = controllerAPIKeys() // controller_listener.go
	}
	if req.Version >= 3 {
		resp.SupportedFeatures = supportedFeatures[:]
		resp.FinalizedFeaturesEpoch = featuresEpoch
		resp.FinalizedFeatures = s.txn.finalized
	}
	rc.respond(resp)
}

const (
	transactionVersionFeature = "transaction.version"
	// featuresEpoch is the FinalizedFeaturesEpoch advertised (see above).
	featuresEpoch = 1
)

// supportedFeatures is the SupportedFeatures of ApiVersions v3+.
var supportedFeatures = [...]kmsg.ApiVersionsResponseSupportedFeature{
	{Name: transactionVersionFeature, MinVersion: 0, MaxVersion: MaxTransactionVersion},
}

// finalizedFeatures is the FinalizedFeatures of ApiVersions v3+ for a
// transaction.version level (a level-0 feature is not finalized, as in
// Kafka, and is left out).
func finalizedFeatures(txnVersion int16) []kmsg.ApiVersionsResponseFinalizedFeature {
	if txnVersion <= 0 {
		return nil
	}
	return []kmsg.ApiVersionsResponseFinalizedFeature{
		{Name: transactionVersionFeature, MinVersionLevel: txnVersion, MaxVersionLevel: txnVersion},
	}
}

// validSoftwareToken reports whether s matches Kafka's client software
// name/version pattern [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?.
func validSoftwareToken(s string) bool {
	if s == "" {
		return false
	}
	alnum := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
