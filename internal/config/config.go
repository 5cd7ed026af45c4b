// Package config turns a Kafka-style broker properties file plus command-line
// flags into the settings of a Strata broker.
//
// The file uses Apache Kafka's own key names (server.properties), so an
// operator's existing knowledge carries over:
//
//	node.id=0
//	listeners=PLAINTEXT://127.0.0.1:9092
//	log.dirs=/var/lib/strata
//	num.partitions=3
//	log.segment.bytes=1073741824
//
// Broker-level log keys (log.segment.bytes, log.retention.ms, message.max.bytes,
// ...) become the default topic configuration; a topic's own overrides
// (segment.bytes, retention.ms, max.message.bytes, ...) are applied on top of
// them by the engine. Keys Strata does not know are reported, not fatal, as
// Kafka does. Flags win over the file.
package config

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/stratalog/strata/internal/vfs"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
)

// Broker is everything `strata serve` needs.
type Broker struct {
	NodeID           int32
	Listen           string // host:port the broker listens on
	AdvertisedHost   string
	AdvertisedPort   int32
	DataDir          string
	NumPartitions    int32
	DefaultRepl      int16
	AutoCreateTopics bool
	MaxRequestBytes  int32
	FetchMaxBytes    int32
	MaxIdleMs        int64            // connections.max.idle.ms
	QueuedMaxBytes   int64            // queued.max.request.bytes, per connection (-1 = unbounded)
	Blackhole        bool             // strata serve --blackhole: ack produce without storing (no properties key)
	IOBackend        string           // log.io.backend (Strata): auto | uring | pwrite (engine.Options.IOBackend)
	NoSharedFlush    bool             // log.io.flush.shared=false (Strata; engine.Options.DisableSharedFlush)
	NoZeroFill       bool             // log.io.zero.fill=false (Strata; engine.Options.NoZeroFill)
	TailCacheBytes   int64            // log.tail.cache.bytes (Strata; engine.Options.TailCacheBytes): 0 default, -1 off
	Log              engine.LogConfig // broker-wide topic defaults
	Unknown          []string         // keys present in the file that Strata ignores

	// Cluster (issue 5).
	ControllerQuorum    string // controller.quorum.voters: "0@host:port,1@host:port,..." ("" = single broker)
	ControllerListen    string // Raft listen address of a node outside the voter set (observer)
	Rack                string // broker.rack
	SessionTimeoutMs    int64  // broker.session.timeout.ms
	HeartbeatIntervalMs int64  // broker.heartbeat.interval.ms
	MinInsyncReplicas   int    // min.insync.replicas (broker default of the topic key)
	ReplicaLagTimeMaxMs int64  // replica.lag.time.max.ms

	// Retention and compaction (issue 7): engine.Options.RetentionCheckInterval
	// and engine.Options.Cleaner.
	RetentionCheckIntervalMs int64                 // log.retention.check.interval.ms
	Cleaner                  engine.CleanerOptions // log.cleaner.enable, log.cleaner.io.max.bytes.per.second, log.cleaner.backoff.ms

	// Idempotence and transactions (issue 8).
	ProducerIDExpirationMs      int64 // producer.id.expiration.ms (engine.Options.ProducerIDExpirationMs)
	TransactionalIDExpirationMs int64 // transactional.id.expiration.ms
	// server.TxnConfig (cmd/strata/serve_txn.go).
	TransactionMaxTimeoutMs          int32 // transaction.max.timeout.ms
	TransactionAbortIntervalMs       int64 // transaction.abort.timed.out.transaction.cleanup.interval.ms
	TransactionVersion               int16 // transaction.version: the finalized feature level, 0..2 (Kafka sets it with kafka-features)
	TransactionPartitionVerification bool  // transaction.partition.verification.enable

	// Consumer groups (issue 6): server.GroupsConfig.Coordinator. Zero
	// fields take Kafka's defaults.
	Groups group.Config // group.min/max.session.timeout.ms, group.initial.rebalance.delay.ms, group.max.size, offsets.topic.num.partitions, offset.metadata.max.bytes, offsets.retention.minutes
}

// Defaults are the settings of `strata serve` with no flags: node 0 on
// 127.0.0.1:9092 with data in ./strata-data.
func Defaults() Broker {
	return Broker{
		NodeID:           0,
		Listen:           "127.0.0.1:9092",
		DataDir:          "./strata-data",
		NumPartitions:    1,
		DefaultRepl:      1,
		AutoCreateTopics: true,
		MaxRequestBytes:  104857600,
		FetchMaxBytes:    57671680,
		MaxIdleMs:        600000,
		QueuedMaxBytes:   100 << 20,
		Log:              engine.DefaultLogConfig(),

		SessionTimeoutMs:    9000,
		HeartbeatIntervalMs: 2000,
		MinInsyncReplicas:   1,
		ReplicaLagTimeMaxMs: 30000,

		RetentionCheckIntervalMs: 300_000,

		ProducerIDExpirationMs:      engine.DefaultProducerIDExpirationMs,
		TransactionalIDExpirationMs: 7 * 24 * 3600 * 1000,

		TransactionMaxTimeoutMs:          900_000,
		TransactionAbortIntervalMs:       10_000,
		TransactionVersion:               2,
		TransactionPartitionVerification: true,
	}
}

// brokerToTopic maps broker-level log keys to the topic-level key they default.
var brokerToTopic = map[string]string{
	"log.segment.bytes":           "segment.bytes",
	"log.roll.ms":                 "segment.ms",
	"log.index.size.max.bytes":    "segment.index.bytes",
	"log.index.interval.bytes":    "index.interval.bytes",
	"log.retention.ms":            "retention.ms",
	"log.retention.bytes":         "retention.bytes",
	"message.max.bytes":           "max.message.bytes",
	"log.message.timestamp.type":  "message.timestamp.type",
	"log.cleanup.policy":          "cleanup.policy",
	"log.flush.interval.messages": "flush.messages",
	"log.flush.interval.ms":       "flush.ms",
	"log.preallocate":             "preallocate",
	"log.segment.delete.delay.ms": "file.delete.delay.ms",
	"log.write.caching":           "write.caching",

	"log.cleaner.delete.retention.ms":   "delete.retention.ms",
	"log.cleaner.min.cleanable.ratio":   "min.cleanable.dirty.ratio",
	"log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
	"log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
}

// scaled keys: Kafka accepts hours/minutes variants; the most precise one wins.
var scaled = []struct {
	key, topicKey string
	factor        int64
	rank          int // lower rank = more precise
}{
	{"log.roll.hours", "segment.ms", 3600_000, 2},
	{"log.retention.hours", "retention.ms", 3600_000, 2},
	{"log.retention.minutes", "retention.ms", 60_000, 1},
}

// ParseProperties reads a Java-style properties file: key=value or key:value
// lines, '#' and '!' comments, surrounding whitespace trimmed. Backslash line
// continuations are honoured; other escapes are kept literally.
func ParseProperties(r io.Reader) (map[string]string, error) {
	out := make(map[string]string)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var pending string
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if pending != "" {
			line = pending + line
			pending = ""
		}
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("config: line %d: expected key=value, got %q", lineNo, line)
		}
		out[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return out, nil
}

// Apply sets b's fields from Kafka broker keys. It returns an error for a
// known key with a bad value; unknown keys are collected in b.Unknown.
func (b *Broker) Apply(props map[string]string) error {
	topic := make(map[string]string)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bestRank := map[string]int{}
	for _, k := range keys {
		v := props[k]
		var err error
		switch k {
		case "node.id", "broker.id":
			err = parseInt32(v, &b.NodeID)
		case "log.dirs", "log.dir":
			dir := strings.TrimSpace(strings.Split(v, ",")[0])
			if dir == "" {
				err = errors.New("empty directory")
			}
			b.DataDir = dir
		case "listeners":
			var hp string
			hp, err = listenerHostPort(v)
			if err == nil {
				b.Listen = hp
			}
		case "advertised.listeners":
			var hp string
			hp, err = listenerHostPort(v)
			if err == nil {
				err = b.setAdvertised(hp)
			}
		case "num.partitions":
			err = parseInt32(v, &b.NumPartitions)
			if err == nil && b.NumPartitions < 1 {
				err = errors.New("must be >= 1")
			}
		case "default.replication.factor":
			var n int32
			err = parseInt32(v, &n)
			b.DefaultRepl = int16(n)
		case "auto.create.topics.enable":
			b.AutoCreateTopics, err = strconv.ParseBool(v)
		case "socket.request.max.bytes":
			err = parseInt32(v, &b.MaxRequestBytes)
			if err == nil && b.MaxRequestBytes < 1024 {
				err = errors.New("must be >= 1024")
			}
		case "fetch.max.bytes":
			err = parseInt32(v, &b.FetchMaxBytes)
		case "queued.max.request.bytes":
			b.QueuedMaxBytes, err = strconv.ParseInt(v, 10, 64)
			if err == nil && b.QueuedMaxBytes == 0 {
				err = errors.New("must be -1 (unbounded) or > 0")
			}
			if b.QueuedMaxBytes < 0 {
				b.QueuedMaxBytes = -1
			}
		case "log.io.backend":
			b.IOBackend, err = engine.ParseIOBackend(strings.TrimSpace(v))
		case "log.io.flush.shared":
			var on bool
			on, err = strconv.ParseBool(strings.TrimSpace(v))
			b.NoSharedFlush = !on
		case "log.io.zero.fill":
			var on bool
			on, err = strconv.ParseBool(strings.TrimSpace(v))
			b.NoZeroFill = !on
		case "log.tail.cache.bytes":
			b.TailCacheBytes, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil && b.TailCacheBytes <= 0 {
				b.TailCacheBytes = -1 // off (the engine's 0 means its default)
			}
		case "controller.quorum.voters":
			b.ControllerQuorum = strings.TrimSpace(v)
		case "broker.rack":
			b.Rack = strings.TrimSpace(v)
		case "broker.session.timeout.ms", "broker.heartbeat.interval.ms", "replica.lag.time.max.ms":
			var n int64
			n, err = strconv.ParseInt(v, 10, 64)
			if err == nil && n <= 0 {
				err = errors.New("must be > 0")
			}
			switch k {
			case "broker.session.timeout.ms":
				b.SessionTimeoutMs = n
			case "broker.heartbeat.interval.ms":
				b.HeartbeatIntervalMs = n
			default:
				b.ReplicaLagTimeMaxMs = n
			}
		case "min.insync.replicas":
			b.MinInsyncReplicas, err = strconv.Atoi(v)
			if err == nil && b.MinInsyncReplicas < 1 {
				err = errors.New("must be >= 1")
			}
		case "producer.id.expiration.ms", "transactional.id.expiration.ms":
			var n int64
			n, err = strconv.ParseInt(v, 10, 64)
			if err == nil && (n < 1 || n > math.MaxInt32) {
				err = fmt.Errorf("must be in [1, %d]", math.MaxInt32) // Kafka's range
			}
			if k == "producer.id.expiration.ms" {
				b.ProducerIDExpirationMs = n
			} else {
				b.TransactionalIDExpirationMs = n
			}
		case "transaction.max.timeout.ms":
			err = parseInt32(v, &b.TransactionMaxTimeoutMs)
			if err == nil && b.TransactionMaxTimeoutMs < 1 {
				err = errors.New("must be >= 1")
			}
		case "transaction.abort.timed.out.transaction.cleanup.interval.ms":
			var n int32 // Kafka's type: int, >= 1
			err = parseInt32(v, &n)
			if err == nil && n < 1 {
				err = errors.New("must be >= 1")
			}
			b.TransactionAbortIntervalMs = int64(n)
		case "transaction.version":
			var n int64
			n, err = strconv.ParseInt(v, 10, 16)
			if err == nil && (n < 0 || n > 2) {
				err = errors.New("must be 0, 1 or 2")
			}
			b.TransactionVersion = int16(n)
		case "transaction.partition.verification.enable":
			b.TransactionPartitionVerification, err = strconv.ParseBool(v)
		case "offsets.retention.minutes":
			var n int64
			n, err = strconv.ParseInt(v, 10, 64)
			if err == nil && (n < 1 || n > math.MaxInt64/60_000) {
				err = errors.New("must be >= 1")
			}
			b.Groups.OffsetsRetentionMs = n * 60_000
		case "group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.initial.rebalance.delay.ms",
			"group.max.size", "offsets.topic.num.partitions", "offset.metadata.max.bytes":
			var n int32
			err = parseInt32(v, &n)
			lowest := int32(1)
			if k == "group.initial.rebalance.delay.ms" {
				lowest = 0
			}
			if err == nil && n < lowest {
				err = fmt.Errorf("must be >= %d", lowest)
			}
			switch k {
			case "group.min.session.timeout.ms":
				b.Groups.MinSessionTimeoutMs = n
			case "group.max.session.timeout.ms":
				b.Groups.MaxSessionTimeoutMs = n
			case "group.initial.rebalance.delay.ms":
				b.Groups.InitialRebalanceDelayMs = n
				if n == 0 {
					b.Groups.InitialRebalanceDelayMs = -1 // group.Config: negative means none
				}
			case "group.max.size":
				b.Groups.MaxSize = n
			case "offsets.topic.num.partitions":
				b.Groups.OffsetsPartitions = n
			default:
				b.Groups.OffsetMetadataMaxBytes = n
			}
		case "log.retention.check.interval.ms", "log.cleaner.backoff.ms":
			var n int64
			n, err = strconv.ParseInt(v, 10, 64)
			if err == nil && n < 1 {
				err = errors.New("must be >= 1")
			}
			if k == "log.cleaner.backoff.ms" {
				b.Cleaner.Backoff = time.Duration(n) * time.Millisecond
			} else {
				b.RetentionCheckIntervalMs = n
			}
		case "log.cleaner.enable":
			var on bool
			on, err = strconv.ParseBool(v)
			b.Cleaner.Disabled = !on
		case "log.cleaner.io.max.bytes.per.second":
			var f float64
			f, err = strconv.ParseFloat(v, 64)
			switch {
			case err != nil:
			case f <= 0 || f != f:
				err = errors.New("must be > 0")
			case f >= math.MaxInt64:
				b.Cleaner.IOMaxBytesPerSecond = -1 // Kafka's default, Double.MAX_VALUE: unthrottled
			default:
				b.Cleaner.IOMaxBytesPerSecond = int64(f)
			}
		case "connections.max.idle.ms":
			b.MaxIdleMs, err = strconv.ParseInt(v, 10, 64)
			if err == nil && b.MaxIdleMs < 0 {
				err = errors.New("must be >= 0")
			}
		default:
			if tk, ok := brokerToTopic[k]; ok {
				topic[tk] = v
				bestRank[tk] = 0
				continue
			}
			found := false
			for _, s := range scaled {
				if s.key != k {
					continue
				}
				found = true
				n, perr := strconv.ParseInt(v, 10, 64)
				if perr != nil {
					err = perr
					break
				}
				if r, ok := bestRank[s.topicKey]; !ok || s.rank < r {
					topic[s.topicKey] = strconv.FormatInt(n*s.factor, 10)
					bestRank[s.topicKey] = s.rank
				}
			}
			if !found {
				b.Unknown = append(b.Unknown, k)
			}
		}
		if err != nil {
			return fmt.Errorf("config: %s=%q: %w", k, v, err)
		}
	}
	if len(topic) > 0 {
		lc, err := b.Log.Apply(topic)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		b.Log = lc
	}
	return nil
}

func (b *Broker) setAdvertised(hostPort string) error {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("bad port %q", port)
	}
	b.AdvertisedHost, b.AdvertisedPort = host, int32(p)
	return nil
}

// Finish validates the combination and fills derived fields (the advertised
// address defaults to the listen address).
func (b *Broker) Finish() error {
	host, port, err := net.SplitHostPort(b.Listen)
	if err != nil {
		return fmt.Errorf("config: listen address %q: %w", b.Listen, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("config: listen port %q", port)
	}
	if b.AdvertisedHost == "" {
		b.AdvertisedHost = host
		if host == "" || host == "0.0.0.0" || host == "::" {
			b.AdvertisedHost = "127.0.0.1"
		}
		b.AdvertisedPort = int32(p)
	}
	if b.NodeID < 0 {
		return fmt.Errorf("config: node id %d must be >= 0", b.NodeID)
	}
	if b.DataDir == "" {
		return errors.New("config: empty data directory")
	}
	return nil
}

// listenerHostPort takes the first listener of a Kafka listeners value
// ("PLAINTEXT://host:port,SSL://...") and returns host:port.
func listenerHostPort(v string) (string, error) {
	first := strings.TrimSpace(strings.Split(v, ",")[0])
	if i := strings.Index(first, "://"); i >= 0 {
		first = first[i+3:]
	}
	if _, _, err := net.SplitHostPort(first); err != nil {
		return "", err
	}
	return first, nil
}

func parseInt32(v string, dst *int32) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return err
	}
	*dst = int32(n)
	return nil
}

// MetaProperties is the identity Kafka keeps in <log dir>/meta.properties.
type MetaProperties struct {
	NodeID    int32
	ClusterID string
}

// LoadOrCreateMeta reads dir/meta.properties, creating it with a new random
// cluster id on first start. A node id that differs from the one on disk is
// refused: the directory belongs to another broker.
func LoadOrCreateMeta(dir string, nodeID int32) (MetaProperties, error) {
	path := filepath.Join(dir, "meta.properties")
	f, err := os.Open(path)
	if err == nil {
		defer f.Close()
		props, err := ParseProperties(f)
		if err != nil {
			return MetaProperties{}, err
		}
		var m MetaProperties
		if err := parseInt32(props["node.id"], &m.NodeID); err != nil {
			return MetaProperties{}, fmt.Errorf("config: %s: node.id: %w", path, err)
		}
		m.ClusterID = props["cluster.id"]
		if m.ClusterID == "" {
			return MetaProperties{}, fmt.Errorf("config: %s: missing cluster.id", path)
		}
		if m.NodeID != nodeID {
			return MetaProperties{}, fmt.Errorf("config: %s belongs to node %d, not node %d", path, m.NodeID, nodeID)
		}
		return m, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return MetaProperties{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return MetaProperties{}, err
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return MetaProperties{}, err
	}
	m := MetaProperties{NodeID: nodeID, ClusterID: base64.RawURLEncoding.EncodeToString(id[:])}
	body := fmt.Sprintf("#Written by strata\nversion=1\nnode.id=%d\ncluster.id=%s\n", m.NodeID, m.ClusterID)
	return m, vfs.WriteFileAtomic(path, []byte(body))
}
