package server

import (
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handler serves one decoded request. It must complete rc exactly once
// (respond, sendParts, skip or close), inline or later from any goroutine.
type handler func(s *Server, rc *reqCtx)

// apiEntry is one row of the API table: the version range we serve and the
// handler. The table is written only by init functions (register) and read
// without locks afterwards.
type apiEntry struct {
	minVersion int16
	maxVersion int16
	fn         handler
}

const apiVersionsKey = 18 // kmsg.ApiVersions

var apis [kmsg.MaxKey + 1]apiEntry

// register adds the handler for key with the version range it serves. It is
// called from init() in each NN_name.go file; ApiVersions advertises exactly
// the registered keys and ranges. A bad registration is a programming error
// and panics at start-up: a duplicate key, an inverted range, or a version
// kmsg cannot decode.
func register(key int16, minVersion, maxVersion int16, fn handler) {
	if key < 0 || int(key) >= len(apis) {
		panic(fmt.Sprintf("server: register: api key %d out of range", key))
	}
	if apis[key].fn != nil {
		panic(fmt.Sprintf("server: register: api key %d (%s) registered twice", key, kmsg.NameForKey(key)))
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		panic(fmt.Sprintf("server: register: kmsg does not know api key %d", key))
	}
	if fn == nil || minVersion < 0 || minVersion > maxVersion || maxVersion > req.MaxVersion() {
		panic(fmt.Sprintf("server: register: %s v%d..v%d invalid (kmsg knows up to v%d)",
			kmsg.NameForKey(key), minVersion, maxVersion, req.MaxVersion()))
	}
	apis[key] = apiEntry{minVersion: minVersion, maxVersion: maxVersion, fn: fn}
}

// lookupAPI returns the table row of key; ok is false for unknown or
// unregistered keys (including negative ones).
func lookupAPI(key int16) (apiEntry, bool) {
	if key < 0 || int(key) >= len(apis) || apis[key].fn == nil {
		return apiEntry{}, false
	}
	return apis[key], true
}

// apiKeys is the ApiVersions answer: every registered key, sorted by key,
// with its range. It is built once, after every init has run, and shared
// read-only by all responses.
var apiKeys = sync.OnceValue(func() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for k := range apis {
		if apis[k].fn == nil {
			continue
		}
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{
			ApiKey:     int16(k),
			MinVersion: apis[k].minVersion,
			MaxVersion: apis[k].maxVersion,
		})
	}
	return keys
})
