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
// The keys, their types, ranges, defaults and synonyms are the table in
// internal/configkeys; this package binds each broker key to a field of
// Broker. Broker-level log keys (log.segment.bytes, log.retention.ms,
// message.max.bytes, ...) become the default topic configuration
// (Broker.TopicDefaults); a topic's own overrides (segment.bytes,
// retention.ms, max.message.bytes, ...) are applied on top of them by the
// engine. Keys Strata does not know are reported, not fatal, as Kafka does.
// Flags win over the file (cmd/strata applies them after it, as keys).
//
// Broker holds plain values: the engine's, the groups' and the
// controller's settings are filled from it by cmd/strata, so this package
// imports none of them.
package config

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stratalog/strata/internal/configkeys"
	"github.com/stratalog/strata/internal/vfs"
)

// Broker is everything `strata serve` needs, in plain values: cmd/strata
// fills the engine's, the server's, the groups' and the controller's
// settings from it.
type Broker struct {
	NodeID            int32
	Listen            string // host:port the broker listens on
	AdvertisedHost    string
	AdvertisedPort    int32
	DataDir           string
	NumPartitions     int32
	DefaultRepl       int16
	AutoCreateTopics  bool
	MaxRequestBytes   int32
	FetchMaxBytes     int32
	MaxIdleMs         int64  // connections.max.idle.ms
	MaxReauthMs       int64  // connections.max.reauth.ms (SASL sessions, KIP-368; 0: no end)
	FailedAuthDelayMs int64  // connection.failed.authentication.delay.ms (KIP-306)
	QueuedMaxBytes    int64  // queued.max.request.bytes, the broker-wide request budget (-1 = unbounded; server.Config.MaxQueuedBytes)
	Blackhole         bool   // strata serve --blackhole: ack produce without storing (no properties key)
	IOBackend         string // log.io.backend (Strata): auto | uring | pwrite (engine.Options.IOBackend)
	NoSharedFlush     bool   // log.io.flush.shared=false (Strata; engine.Options.DisableSharedFlush)
	NoZeroFill        bool   // log.io.zero.fill=false (Strata; engine.Options.NoZeroFill)
	JournalBytes      int64  // log.io.journal.bytes (Strata; engine.Options.JournalBytes)
	JournalEnds       bool   // log.io.journal.ends (Strata; engine.Options.JournalEnds)
	RollAheadBytes    int64  // log.roll.ahead.bytes (Strata; engine.Options.RollAhead)
	VerifyRecovery    bool   // log.recovery.verify (Strata; engine.Options.VerifyRecovery)
	ScrubBytesPerSec  int64  // log.scrub.bytes.per.second (Strata; engine.Options.ScrubBytesPerSecond): 0 off
	TailCacheBytes    int64  // log.tail.cache.bytes (Strata; engine.Options.TailCacheBytes): -1 off

	// Tiered storage's remote log manager (remote/rlm.Options).
	RemoteTaskIntervalMs      int64 // remote.log.manager.task.interval.ms (Strata default)
	RemoteCopyMaxBytesPerSec  int64 // remote.log.manager.copy.max.bytes.per.second
	RemoteCopySpreadMs        int64 // remote.log.manager.copy.spread.ms
	RemoteFetchMaxBytesPerSec int64 // remote.log.manager.fetch.max.bytes.per.second
	RemoteReaderCacheBytes    int64 // remote.log.reader.cache.bytes (Strata)
	RemoteCopyCacheBytes      int64 // remote.log.copy.cache.bytes (Strata; engine.Options.CopyCacheBytes): -1 off
	RemoteReadAheadBytes      int64 // remote.log.reader.read.ahead.bytes (Strata): 0 off

	// The free-space floor (engine.Options.MinFreeBytes, MinFreePercent):
	// -1 off.
	MinFreeBytes   int64   // log.dir.min.free.bytes (Strata)
	MinFreePercent float64 // log.dir.min.free.percent (Strata)

	// MetricsListeners is metrics.listeners (Strata): host:port of each
	// HTTP listener of /metrics, /healthz and /readyz; none: off.
	MetricsListeners []string
	// MetricsPartitionLabels is metrics.partition.labels (Strata): log
	// sizes and group lag per partition (metrics.Options.PartitionLabels).
	MetricsPartitionLabels bool
	// LogFormat is log.format (Strata): "text" or "json", the handler of
	// strata serve's log lines.
	LogFormat string

	// TopicDefaults are the topic keys set at the broker, by topic name in
	// the key's unit (log.retention.hours=1 is retention.ms=3600000): the
	// engine applies them over its defaults (engine.DefaultLogConfig().Apply).
	TopicDefaults map[string]string

	Unknown []string // keys present in the file that Strata ignores

	// Static holds every broker name set in the file or by a flag, with
	// its canonical value in its own unit (synonyms under their own names):
	// what DescribeConfigs reports as STATIC_BROKER_CONFIG
	// (server.Config.BrokerConfigs).
	Static map[string]string

	// Cluster (issue 5).
	ControllerQuorum    string   // controller.quorum.voters: "0@host:port,1@host:port,..." ("" = single broker)
	ProcessRoles        []string // process.roles: "broker", "controller" or both (nil: not set, derived from the quorum)
	ControllerListen    string   // Raft listen address of a node outside the voter set (observer)
	Rack                string   // broker.rack
	SessionTimeoutMs    int64    // broker.session.timeout.ms
	HeartbeatIntervalMs int64    // broker.heartbeat.interval.ms
	MinInsyncReplicas   int      // min.insync.replicas (broker default of the topic key)
	ReplicaLagTimeMaxMs int64    // replica.lag.time.max.ms
	ReplicaFetch        ReplicaFetch

	// The controller's automatic preferred-leader rebalance.
	AutoLeaderRebalance             bool  // auto.leader.rebalance.enable
	LeaderImbalanceCheckIntervalSec int64 // leader.imbalance.check.interval.seconds
	LeaderImbalancePerBrokerPct     int   // leader.imbalance.per.broker.percentage

	// Retention and compaction (issue 7): engine.Options.RetentionCheckInterval
	// and engine.Options.Cleaner.
	RetentionCheckIntervalMs int64   // log.retention.check.interval.ms
	Cleaner                  Cleaner // log.cleaner.enable, log.cleaner.io.max.bytes.per.second, log.cleaner.backoff.ms

	// Idempotence and transactions (issue 8).
	ProducerIDExpirationMs      int64 // producer.id.expiration.ms (engine.Options.ProducerIDExpirationMs)
	TransactionalIDExpirationMs int64 // transactional.id.expiration.ms
	// server.TxnConfig (cmd/strata/serve_txn.go).
	TransactionMaxTimeoutMs          int32 // transaction.max.timeout.ms
	TransactionAbortIntervalMs       int64 // transaction.abort.timed.out.transaction.cleanup.interval.ms
	TransactionVersion               int16 // transaction.version: the finalized feature level, 0..2 (Kafka sets it with kafka-features)
	TransactionPartitionVerification bool  // transaction.partition.verification.enable

	// Consumer groups (issue 6): server.GroupsConfig.Coordinator.
	Groups Groups

	// Listeners (issue 20, security.go), filled by Finish: every entry of
	// listeners with its protocol, advertised address and ssl.* settings.
	// Listen, AdvertisedHost and AdvertisedPort are then the inter-broker
	// listener's.
	Listeners           []Listener
	InterBrokerListener string // inter.broker.listener.name (or security.inter.broker.protocol)
	// ScramBootstrap are the credentials of strata.scram.credentials
	// (sasl.go), created at start-up when the store lacks them.
	ScramBootstrap []ScramBootstrap
	// Authorization (issue 20): authorizer.class.name (""; or
	// configkeys.StandardAuthorizer: ACLs on), super.users as given
	// (semicolon-separated principals, auth.ParseSuperUsers) and
	// allow.everyone.if.no.acl.found.
	Authorizer           string
	SuperUsers           string
	AllowEveryoneIfNoACL bool
	// Connection limits (issue 20; KIP-402, KIP-612): max.connections,
	// max.connections.per.ip, max.connections.per.ip.overrides (host →
	// count, hosts as given) and max.connection.creation.rate, Kafka's
	// values (2147483647: unlimited). Per listener: Listener.MaxConnections
	// and Listener.MaxConnectionCreationRate.
	MaxConnections            int
	MaxConnectionsPerIP       int
	MaxConnectionsPerIPOvr    map[string]int
	MaxConnectionCreationRate int
	sec                       securityProps
	// keepSASL are the SASL settings of the listeners a configuration was
	// finished with (WithDynamic): Finish reuses them instead of resolving
	// them again (an OAUTHBEARER key set would be fetched again).
	keepSASL map[string]*SASL
}

// Cleaner is the compaction cleaner's settings, as engine.CleanerOptions
// takes them.
type Cleaner struct {
	Disabled            bool          // log.cleaner.enable=false
	IOMaxBytesPerSecond int64         // log.cleaner.io.max.bytes.per.second; -1 = unthrottled
	Backoff             time.Duration // log.cleaner.backoff.ms
}

// Groups are the consumer group keys, in group.Config's fields and units.
type Groups struct {
	MinSessionTimeoutMs     int32 // group.min.session.timeout.ms
	MaxSessionTimeoutMs     int32 // group.max.session.timeout.ms
	InitialRebalanceDelayMs int32 // group.initial.rebalance.delay.ms; -1 for 0 (group.Config: negative = none)
	MaxSize                 int32 // group.max.size
	OffsetMetadataMaxBytes  int32 // offset.metadata.max.bytes
	OffsetsPartitions       int32 // offsets.topic.num.partitions
	OffsetsRetentionMs      int64 // offsets.retention.minutes, in ms

	// Share groups (KIP-932), in server.ShareConfig's units.
	ShareLockDurationMs      int64 // group.share.record.lock.duration.ms
	ShareDeliveryCountLimit  int16 // group.share.delivery.count.limit
	ShareMaxRecordLocks      int32 // group.share.partition.max.record.locks
	ShareSessionTimeoutMs    int32 // group.share.session.timeout.ms
	ShareHeartbeatIntervalMs int32 // group.share.heartbeat.interval.ms
	ShareMaxSize             int32 // group.share.max.size
	ShareStatePartitions     int32 // share.coordinator.state.topic.num.partitions

	// Dead-letter topics of share groups (KIP-1191).
	DeadLetterTopicPrefix string // errors.deadletterqueue.topic.name.prefix
	DeadLetterAutoCreate  bool   // errors.deadletterqueue.auto.create.topics.enable
}

type setter = func(b *Broker, v configkeys.Value)

// fields binds every broker key of internal/configkeys that is not a
// topic key's broker name (those go to TopicDefaults) to the Broker field
// it fills. The table has checked the value's type and range.
var fields = map[string]setter{
	"node.id": func(b *Broker, v configkeys.Value) { b.NodeID = int32(v.Int) },
	"listeners": func(b *Broker, v configkeys.Value) {
		b.Listen, _ = configkeys.FirstListener(v.Text)
		b.sec.listeners = v.Text
	},
	"advertised.listeners": func(b *Broker, v configkeys.Value) {
		b.sec.advertised = v.Text
		hp, _ := configkeys.FirstListener(v.Text)
		host, port, _ := net.SplitHostPort(hp)
		p, _ := strconv.ParseUint(port, 10, 16)
		b.AdvertisedHost, b.AdvertisedPort = host, int32(p)
	},
	"log.dirs":                                  func(b *Broker, v configkeys.Value) { b.DataDir = configkeys.FirstLogDir(v.Text) },
	"num.partitions":                            func(b *Broker, v configkeys.Value) { b.NumPartitions = int32(v.Int) },
	"default.replication.factor":                func(b *Broker, v configkeys.Value) { b.DefaultRepl = int16(v.Int) },
	"auto.create.topics.enable":                 func(b *Broker, v configkeys.Value) { b.AutoCreateTopics = v.Bool },
	"socket.request.max.bytes":                  func(b *Broker, v configkeys.Value) { b.MaxRequestBytes = int32(v.Int) },
	"fetch.max.bytes":                           func(b *Broker, v configkeys.Value) { b.FetchMaxBytes = int32(v.Int) },
	"connections.max.idle.ms":                   func(b *Broker, v configkeys.Value) { b.MaxIdleMs = v.Int },
	"connections.max.reauth.ms":                 func(b *Broker, v configkeys.Value) { b.MaxReauthMs = v.Int },
	"connection.failed.authentication.delay.ms": func(b *Broker, v configkeys.Value) { b.FailedAuthDelayMs = v.Int },
	"queued.max.request.bytes":                  func(b *Broker, v configkeys.Value) { b.QueuedMaxBytes = max(v.Int, -1) },
	"metrics.listeners":                         func(b *Broker, v configkeys.Value) { b.MetricsListeners, _ = configkeys.HTTPListeners(v.Text) },
	"metrics.partition.labels":                  func(b *Broker, v configkeys.Value) { b.MetricsPartitionLabels = v.Bool },
	"log.format":                                func(b *Broker, v configkeys.Value) { b.LogFormat = v.Text },

	"authorizer.class.name":          func(b *Broker, v configkeys.Value) { b.Authorizer = v.Text },
	"super.users":                    func(b *Broker, v configkeys.Value) { b.SuperUsers = v.Text },
	"allow.everyone.if.no.acl.found": func(b *Broker, v configkeys.Value) { b.AllowEveryoneIfNoACL = v.Bool },
	"max.connections":                func(b *Broker, v configkeys.Value) { b.MaxConnections = int(v.Int) },
	"max.connections.per.ip":         func(b *Broker, v configkeys.Value) { b.MaxConnectionsPerIP = int(v.Int) },
	"max.connections.per.ip.overrides": func(b *Broker, v configkeys.Value) {
		b.MaxConnectionsPerIPOvr, _ = configkeys.IPOverrides(v.Text)
	},
	"max.connection.creation.rate": func(b *Broker, v configkeys.Value) { b.MaxConnectionCreationRate = int(v.Int) },

	"log.retention.check.interval.ms": func(b *Broker, v configkeys.Value) { b.RetentionCheckIntervalMs = v.Int },
	"log.cleaner.enable":              func(b *Broker, v configkeys.Value) { b.Cleaner.Disabled = !v.Bool },
	"log.cleaner.io.max.bytes.per.second": func(b *Broker, v configkeys.Value) {
		b.Cleaner.IOMaxBytesPerSecond = int64(v.Float)
		if v.Float >= math.MaxInt64 {
			b.Cleaner.IOMaxBytesPerSecond = -1 // Kafka's default, Double.MAX_VALUE: unthrottled
		}
	},
	"log.cleaner.backoff.ms":     func(b *Broker, v configkeys.Value) { b.Cleaner.Backoff = time.Duration(v.Int) * time.Millisecond },
	"log.io.backend":             func(b *Broker, v configkeys.Value) { b.IOBackend = v.Text },
	"log.io.flush.shared":        func(b *Broker, v configkeys.Value) { b.NoSharedFlush = !v.Bool },
	"log.io.zero.fill":           func(b *Broker, v configkeys.Value) { b.NoZeroFill = !v.Bool },
	"log.io.journal.bytes":       func(b *Broker, v configkeys.Value) { b.JournalBytes = v.Int },
	"log.io.journal.ends":        func(b *Broker, v configkeys.Value) { b.JournalEnds = v.Bool },
	"log.roll.ahead.bytes":       func(b *Broker, v configkeys.Value) { b.RollAheadBytes = v.Int },
	"log.recovery.verify":        func(b *Broker, v configkeys.Value) { b.VerifyRecovery = v.Bool },
	"log.scrub.bytes.per.second": func(b *Broker, v configkeys.Value) { b.ScrubBytesPerSec = v.Int },
	// Tiered storage (cmd/strata/serve_remote.go).
	"remote.log.manager.task.interval.ms":           func(b *Broker, v configkeys.Value) { b.RemoteTaskIntervalMs = v.Int },
	"remote.log.manager.copy.max.bytes.per.second":  func(b *Broker, v configkeys.Value) { b.RemoteCopyMaxBytesPerSec = v.Int },
	"remote.log.manager.copy.spread.ms":             func(b *Broker, v configkeys.Value) { b.RemoteCopySpreadMs = v.Int },
	"remote.log.manager.fetch.max.bytes.per.second": func(b *Broker, v configkeys.Value) { b.RemoteFetchMaxBytesPerSec = v.Int },
	"remote.log.reader.cache.bytes":                 func(b *Broker, v configkeys.Value) { b.RemoteReaderCacheBytes = v.Int },
	"remote.log.reader.read.ahead.bytes":            func(b *Broker, v configkeys.Value) { b.RemoteReadAheadBytes = v.Int },
	"remote.log.copy.cache.bytes": func(b *Broker, v configkeys.Value) {
		b.RemoteCopyCacheBytes = v.Int
		if v.Int <= 0 {
			b.RemoteCopyCacheBytes = -1 // off (the engine's 0 means its default)
		}
	},
	"log.tail.cache.bytes": func(b *Broker, v configkeys.Value) {
		b.TailCacheBytes = v.Int
		if v.Int <= 0 {
			b.TailCacheBytes = -1 // off (the engine's 0 means its default)
		}
	},
	"log.dir.min.free.bytes": func(b *Broker, v configkeys.Value) {
		b.MinFreeBytes = v.Int
		if v.Int == 0 {
			b.MinFreeBytes = -1 // off (the engine's 0 means its default)
		}
	},
	"log.dir.min.free.percent": func(b *Broker, v configkeys.Value) {
		b.MinFreePercent = v.Float
		if v.Float == 0 {
			b.MinFreePercent = -1 // off (the engine's 0 means its default)
		}
	},
	"producer.id.expiration.ms": func(b *Broker, v configkeys.Value) { b.ProducerIDExpirationMs = v.Int },

	"group.min.session.timeout.ms": func(b *Broker, v configkeys.Value) { b.Groups.MinSessionTimeoutMs = int32(v.Int) },
	"group.max.session.timeout.ms": func(b *Broker, v configkeys.Value) { b.Groups.MaxSessionTimeoutMs = int32(v.Int) },
	"group.initial.rebalance.delay.ms": func(b *Broker, v configkeys.Value) {
		b.Groups.InitialRebalanceDelayMs = int32(v.Int)
		if v.Int == 0 {
			b.Groups.InitialRebalanceDelayMs = -1 // group.Config: negative means none
		}
	},
	"group.max.size":               func(b *Broker, v configkeys.Value) { b.Groups.MaxSize = int32(v.Int) },
	"offsets.topic.num.partitions": func(b *Broker, v configkeys.Value) { b.Groups.OffsetsPartitions = int32(v.Int) },
	"offset.metadata.max.bytes":    func(b *Broker, v configkeys.Value) { b.Groups.OffsetMetadataMaxBytes = int32(v.Int) },
	"offsets.retention.minutes":    func(b *Broker, v configkeys.Value) { b.Groups.OffsetsRetentionMs = v.Int * 60_000 },

	"group.share.record.lock.duration.ms":          func(b *Broker, v configkeys.Value) { b.Groups.ShareLockDurationMs = v.Int },
	"group.share.delivery.count.limit":             func(b *Broker, v configkeys.Value) { b.Groups.ShareDeliveryCountLimit = int16(v.Int) },
	"group.share.partition.max.record.locks":       func(b *Broker, v configkeys.Value) { b.Groups.ShareMaxRecordLocks = int32(v.Int) },
	"group.share.session.timeout.ms":               func(b *Broker, v configkeys.Value) { b.Groups.ShareSessionTimeoutMs = int32(v.Int) },
	"group.share.heartbeat.interval.ms":            func(b *Broker, v configkeys.Value) { b.Groups.ShareHeartbeatIntervalMs = int32(v.Int) },
	"group.share.max.size":                         func(b *Broker, v configkeys.Value) { b.Groups.ShareMaxSize = int32(v.Int) },
	"share.coordinator.state.topic.num.partitions": func(b *Broker, v configkeys.Value) { b.Groups.ShareStatePartitions = int32(v.Int) },

	"errors.deadletterqueue.topic.name.prefix":         func(b *Broker, v configkeys.Value) { b.Groups.DeadLetterTopicPrefix = v.Text },
	"errors.deadletterqueue.auto.create.topics.enable": func(b *Broker, v configkeys.Value) { b.Groups.DeadLetterAutoCreate = v.Bool },

	"controller.quorum.voters":     func(b *Broker, v configkeys.Value) { b.ControllerQuorum = v.Text },
	"process.roles":                func(b *Broker, v configkeys.Value) { b.ProcessRoles = v.Items() },
	"broker.rack":                  func(b *Broker, v configkeys.Value) { b.Rack = v.Text },
	"broker.session.timeout.ms":    func(b *Broker, v configkeys.Value) { b.SessionTimeoutMs = v.Int },
	"broker.heartbeat.interval.ms": func(b *Broker, v configkeys.Value) { b.HeartbeatIntervalMs = v.Int },
	"replica.lag.time.max.ms":      func(b *Broker, v configkeys.Value) { b.ReplicaLagTimeMaxMs = v.Int },
	"replica.fetch.wait.max.ms":    func(b *Broker, v configkeys.Value) { b.ReplicaFetch.WaitMaxMs = int32(v.Int) },
	"replica.fetch.min.bytes":      func(b *Broker, v configkeys.Value) { b.ReplicaFetch.MinBytes = int32(v.Int) },
	"replica.fetch.max.bytes":      func(b *Broker, v configkeys.Value) { b.ReplicaFetch.MaxBytes = int32(v.Int) },
	"replica.fetch.response.max.bytes": func(b *Broker, v configkeys.Value) {
		b.ReplicaFetch.ResponseMaxBytes = int32(v.Int)
	},
	"replica.fetch.backoff.ms":     func(b *Broker, v configkeys.Value) { b.ReplicaFetch.BackoffMs = v.Int },
	"replica.socket.timeout.ms":    func(b *Broker, v configkeys.Value) { b.ReplicaFetch.SocketTimeoutMs = v.Int },
	"min.insync.replicas":          func(b *Broker, v configkeys.Value) { b.MinInsyncReplicas = int(v.Int) },
	"auto.leader.rebalance.enable": func(b *Broker, v configkeys.Value) { b.AutoLeaderRebalance = v.Bool },
	"leader.imbalance.check.interval.seconds": func(b *Broker, v configkeys.Value) {
		b.LeaderImbalanceCheckIntervalSec = v.Int
	},
	"leader.imbalance.per.broker.percentage": func(b *Broker, v configkeys.Value) { b.LeaderImbalancePerBrokerPct = int(v.Int) },

	"transaction.max.timeout.ms":     func(b *Broker, v configkeys.Value) { b.TransactionMaxTimeoutMs = int32(v.Int) },
	"transactional.id.expiration.ms": func(b *Broker, v configkeys.Value) { b.TransactionalIDExpirationMs = v.Int },
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": func(b *Broker, v configkeys.Value) {
		b.TransactionAbortIntervalMs = v.Int
	},
	"transaction.version": func(b *Broker, v configkeys.Value) { b.TransactionVersion = int16(v.Int) },
	"transaction.partition.verification.enable": func(b *Broker, v configkeys.Value) {
		b.TransactionPartitionVerification = v.Bool
	},
}

// Defaults are the settings of `strata serve` with no file and no flags:
// every key at its internal/configkeys default (node 0 on 127.0.0.1:9092
// with data in ./strata-data).
func Defaults() Broker {
	b := Broker{TopicDefaults: map[string]string{}, Static: map[string]string{}}
	for _, k := range configkeys.All() {
		if k.Broker == "" || k.Log || k.Default == "" {
			continue
		}
		v, err := k.Parse(k.Default)
		if err != nil {
			panic("config: " + err.Error()) // TestTableIsWellFormed parses every default
		}
		fields[k.Broker](&b, v)
	}
	return b
}

// Apply sets b's fields from Kafka broker keys, checked and parsed by
// internal/configkeys. It returns an error for a known key with a bad
// value, and then changes nothing; unknown keys are collected in
// b.Unknown. Of a key's names present together (log.retention.ms,
// log.retention.minutes, log.retention.hours) the first in the table's
// precedence wins; every name given is recorded in b.Static.
func (b *Broker) Apply(props map[string]string) error {
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	sec := b.sec
	sec.perListener = maps.Clone(sec.perListener)
	sec.sasl = maps.Clone(sec.sasl)
	claimed := map[string]bool{}
	for _, name := range names {
		handled, err := b.securityKey(name, props[name])
		if err != nil {
			b.sec = sec // a refused file changes nothing
			return err
		}
		claimed[name] = handled
	}
	newPer, newSASL := b.sec.perListener, b.sec.sasl
	b.sec = sec
	type pick struct {
		rank int
		val  configkeys.Value
	}
	picks := map[*configkeys.Key]pick{}
	static := map[string]string{}
	var unknown []string
	for _, name := range names {
		if strings.HasPrefix(name, "listener.name.") || claimed[name] {
			continue // securityKey checked it; recorded below
		}
		k, own, val, err := configkeys.ParseBroker(name, props[name])
		if errors.Is(err, configkeys.ErrUnknown) {
			unknown = append(unknown, name)
			continue
		}
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		rank := slices.Index(k.BrokerNames(), name)
		if p, ok := picks[k]; !ok || rank < p.rank {
			picks[k] = pick{rank, val}
		}
		if k.Type != configkeys.Password { // never reported by DescribeConfigs
			static[name] = own
		}
	}
	if b.TopicDefaults == nil {
		b.TopicDefaults = map[string]string{}
	}
	if b.Static == nil {
		b.Static = map[string]string{}
	}
	for k, p := range picks {
		if k.Log {
			b.TopicDefaults[k.Topic] = p.val.Text
		} else {
			fields[k.Broker](b, p.val)
		}
	}
	maps.Copy(b.Static, static)
	b.Unknown = append(b.Unknown, unknown...)
	b.sec.perListener, b.sec.sasl = newPer, newSASL
	return nil
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

func init() {
	for _, k := range configkeys.All() {
		if k.Broker != "" && !k.Log && fields[k.Broker] == nil {
			panic("config: broker key " + k.Broker + " has no Broker field")
		}
	}
	for name := range fields {
		if k, ok := configkeys.BrokerKey(name); !ok || k.Broker != name || k.Log {
			panic("config: field for " + name + ", which is not a broker key of configkeys")
		}
	}
}

// Finish validates the combination and fills derived fields: the
// listeners with their protocols and TLS settings (security.go; the
// advertised address defaults to the listen address). Listen set directly
// (embedders, tests), unlike the listeners key, stands for one PLAINTEXT
// listener.
func (b *Broker) Finish() error {
	if first, _ := configkeys.FirstListener(b.sec.listeners); first != b.Listen {
		b.sec.listeners = b.Listen
	}
	if err := b.finishListeners(); err != nil {
		return err
	}
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
	if b.MaxConnectionsPerIP == 0 && len(b.MaxConnectionsPerIPOvr) == 0 {
		return errors.New("config: max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides is set (as in Kafka)")
	}
	if b.DataDir == "" {
		return errors.New("config: empty data directory")
	}
	// Kafka's KafkaConfig checks of the follower's fetch wait.
	if w := int64(b.ReplicaFetch.WaitMaxMs); w > b.ReplicaLagTimeMaxMs {
		return fmt.Errorf("config: replica.fetch.wait.max.ms (%d) should be at most replica.lag.time.max.ms (%d) to prevent frequent changes in ISR", w, b.ReplicaLagTimeMaxMs)
	} else if w > b.ReplicaFetch.SocketTimeoutMs {
		return fmt.Errorf("config: replica.socket.timeout.ms (%d) should always be at least replica.fetch.wait.max.ms (%d) to prevent unnecessary socket timeouts", b.ReplicaFetch.SocketTimeoutMs, w)
	}
	return nil
}

// ReplicaFetch is how a follower fetches from its leaders (the
// replica.fetch.* and replica.socket.timeout.ms keys).
type ReplicaFetch struct {
	WaitMaxMs        int32 // replica.fetch.wait.max.ms
	MinBytes         int32 // replica.fetch.min.bytes
	MaxBytes         int32 // replica.fetch.max.bytes
	ResponseMaxBytes int32 // replica.fetch.response.max.bytes
	BackoffMs        int64 // replica.fetch.backoff.ms
	SocketTimeoutMs  int64 // replica.socket.timeout.ms
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
