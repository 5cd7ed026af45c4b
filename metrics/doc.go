// Package metrics is a broker's Prometheus metrics and its HTTP endpoint:
// `/metrics` (Prometheus text format), `/healthz` (alive) and `/readyz`
// (ready to serve), on a listener of its own (`metrics.listeners`), never
// the Kafka port. docs/metrics.md lists every metric with its type,
// labels and meaning.
//
// The package knows Kafka's API and error names (kmsg, kerr) and nothing of
// Strata's other packages: the parts that know a fact call a hook here
// (server: each request, each produced and fetched topic), or register a
// source read at scrape time (server: partition counts, readiness). A nil
// *Broker is valid for every hook and costs one comparison, so a broker
// without a metrics listener pays nothing else.
//
// # Hot path
//
// The per-request hooks allocate nothing: the request-latency histogram of
// each API key is created on the key's first request and kept in an array
// indexed by key; requests per (key, version) and errors per (key, code)
// are atomic counters in fixed arrays, turned into samples only when
// scraped. A topic's counters are found once per topic of a request (one
// lock-free map read by name) and then added to with atomics.
//
// # Concurrency
//
// Every hook is safe for concurrent use and takes no lock but the
// histogram's first creation. The sources (SetPartitions, SetTopics,
// SetReady) are functions called on the scraping goroutine; they must be
// safe to call concurrently with the broker's work. An Endpoint owns one
// goroutine per listener (http.Server.Serve), which Close stops and waits
// for.
package metrics
