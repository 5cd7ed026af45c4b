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
// body with UNSUPPORTED_VERSION and the full key table; the client then
// retries at min(its max, our max). The response header of ApiVersions never
// carries tagged fields, whatever the version.
//
// v3+ requests name the client software; a name or version that is not
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? gets INVALID_REQUEST, as in Kafka.
func handleApiVersions(s *Server, rc *reqCtx) {
	resp := kmsg.NewPtrApiVersionsResponse()
	req, _ := rc.req.(*kmsg.ApiVersionsRequest)
	if req == nil { // version above ours: see decodeRequest
		resp.SetVersion(0)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = apiKeys()
		rc.respondEncoded(resp)
		return
	}
	if req.Version >= 3 && (!validSoftwareToken(req.ClientSoftwareName) || !validSoftwareToken(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		rc.respond(resp)
		return
	}
	resp.ApiKeys = apiKeys()
	rc.respond(resp)
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
