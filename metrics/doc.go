// Package metrics is a broker's Prometheus metrics and its HTTP endpoint:
// `/metrics` (Prometheus text format), `/healthz` (alive) and `/readyz`
// (ready to serve), on a listener of its own (`metrics.listeners`), never
// the Kafka port. docs/metrics.md lists every metric with its type,
// labels and meaning.
//
// The package knows Kafka's API and error names (kmsg, kerr) and nothing of
// Strata's other packages: the parts that know a fact call a hook here
// (server: each request's three phases and its response's send, each
// produced and fetched topic, throttle times, connections accepted and
// closed, ISR changes and elections seen in the metadata), or register a
// source read at scrape time (server: partition counts, readiness, the
// journal, log sizes, the tail cache, group offsets, the controller's
// Raft; strata serve: the data directory's block device). A nil *Broker
// is valid for every hook and costs one comparison, so a broker without a
// metrics listener pays nothing else.
//
// Files: metrics.go (the Broker, request counters and total time, topics,
// partition gauges, readiness), requests.go (the request phases and
// throttle time), cluster.go (ISR and election counters, the controller),
// conns.go (connections per listener), logs.go (log sizes, tail cache,
// group lag and retention margin), journal.go (the journal), device.go
// (the data directory's block device: queue depth, busy time), endpoint.go
// (the HTTP endpoint).
//
// # Cardinality
//
// Every label is bounded by something the operator controls: API keys and
// versions, Kafka's error codes, topics that exist, configured listeners,
// groups with committed offsets. Per-partition labels exist only with
// Options.PartitionLabels (metrics.partition.labels).
//
// # Hot path
//
// The per-request hooks allocate nothing: each latency histogram's child
// for an API key is created on the key's first request and kept in an
// array indexed by key; requests per (key, version) and errors per (key,
// code) are atomic counters in fixed arrays, turned into samples only when
// scraped. A topic's counters are found once per topic of a request (one
// lock-free map read by name) and then added to with atomics; a
// listener's likewise once per connection.
//
// # Concurrency
//
// Every hook is safe for concurrent use and takes no lock but a
// histogram child's first creation. The sources (SetPartitions, SetTopics,
// SetReady, SetJournal, SetLogs, SetTailCache, SetGroups, SetController,
// SetDevice)
// are functions called on the scraping goroutine; they must be safe to
// call concurrently with the broker's work. An Endpoint owns one
// goroutine per listener (http.Server.Serve), which Close stops and waits
// for.
package metrics
