// Package server is Strata's Kafka API: it decodes each request frame that
// netpoll delivers, calls the engine, and encodes the response. One handler
// file per API key, named by number (00_produce.go, 18_api_versions.go, ...),
// registers its version range from init(); ApiVersions answers from that
// table, so only what is registered is advertised.
//
// # Wire format
//
// netpoll strips the 4-byte big-endian size prefix; a frame is
//
//	request header  int16 api key | int16 api version | int32 correlation id |
//	                int16 client id length (-1 = null) | client id bytes |
//	                [tagged fields: uvarint count, (uvarint tag, uvarint len, bytes)*]   flexible versions only
//	request body    kmsg encoding of the request at that version
//
// and a response (netpoll adds the size prefix) is
//
//	response header int32 correlation id | [0x00: empty tagged fields]   flexible versions, never ApiVersions
//	response body   kmsg encoding of the response at the request's version
//
// Request and response bodies are kmsg types throughout; only the Fetch
// response is framed by hand so record bytes go from segment files to the
// socket with sendfile.
//
// # Bad input
//
// A frame whose header is truncated, whose client id length is negative
// (other than -1), whose api key is unknown or not served, whose version is
// outside the served range (except ApiVersions, see 18_api_versions.go), or
// whose body kmsg cannot decode is logged once (remote address, key,
// version, error) and the connection is closed, as Kafka does. netpoll
// refuses frames larger than Config.MaxRequestBytes before allocating. No
// input panics the broker: the dispatcher recovers as a last resort, logs the
// panic with its stack and closes the connection.
//
// # Concurrency
//
// netpoll calls the dispatcher on each connection's read goroutine, one frame
// at a time and in arrival order. A handler completes its reqCtx exactly once,
// either inline or later from any goroutine (a Produce waiting for
// durability, a Fetch long poll); netpoll writes responses in request order
// whatever order they complete in. The API table is written only during
// package initialisation and read without locks afterwards. Server holds no
// lock across engine calls; the engine is safe for concurrent use.
// Response buffers come from a sync.Pool and go back when netpoll reports the
// write finished.
//
// # The broker runtime
//
// What runs beside the requests is moving to packages under broker/ (issue
// 19); server builds them from its parts and calls them through narrow
// interfaces. broker/coordhost hosts a coordinator on the partitions of its
// internal topic that this broker leads (the adapters to the cluster view,
// clock and controller are in coordhost.go); broker/txnhost is the
// transaction coordinator's host — the coordinators per __transaction_state
// partition, the tick, the marker writer and its Kafka client, KIP-890
// verification, producer-id blocks from the controller — which the
// transaction handlers call through txnCoordinator (txn_coord.go);
// broker/grouphost is the group coordinator's host — the group.Log over
// __consumer_offsets and the leader loop — built in groups.go;
// broker/cluster holds the broker's membership (registration, heartbeats,
// controlled shutdown), the replica manager's interface, the metadata view
// and its reconcile with the engine and the replica roles; cluster.go
// wires them to the Server and keeps the request hooks on the view.
package server

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"github.com/stratalog/strata/internal/clocks"
	"github.com/stratalog/strata/internal/crcsum"
	"github.com/stratalog/strata/internal/ratelog"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/netpoll"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config is the broker's settings (Kafka broker key names in comments).
// New fills zero fields with Kafka's defaults, except AutoCreateTopics: a bool
// has no "unset", so the caller decides (Kafka's default is true).
type Config struct {
	NodeID             int32  // node.id
	AdvertisedHost     string // host part of advertised.listeners (default: listen host)
	AdvertisedPort     int32  // port part of advertised.listeners (default: listen port)
	ClusterID          string // persisted in <data dir>/meta.properties (default: random per Server)
	NumPartitions      int32  // num.partitions (1)
	DefaultReplication int16  // default.replication.factor (1)
	AutoCreateTopics   bool   // auto.create.topics.enable (Kafka: true; zero value: false)
	MaxRequestBytes    int32  // socket.request.max.bytes (104857600)
	FetchMaxBytes      int32  // fetch.max.bytes (57671680)
	Logger             *slog.Logger

	// ConnectionsMaxIdle closes connections idle this long
	// (connections.max.idle.ms, Kafka default 10 minutes; 0 = never).
	ConnectionsMaxIdle time.Duration

	// LogDefaults are the broker-wide topic defaults; leave it zero to take
	// the engine's (Engine.LogDefaults, what engine.Options.Log opened it
	// with), which is what a broker runs with. DescribeConfigs reports them
	// under their broker names (log.segment.bytes, message.max.bytes, ...).
	LogDefaults engine.LogConfig

	// BrokerConfigs are the broker keys set in the properties file or by
	// flags (internal/configkeys names and canonical values, synonyms
	// under their own names: config.Broker.Static). DescribeConfigs reports
	// exactly these as STATIC_BROKER_CONFIG and reads from them the broker
	// keys the Server has no field for. nil: a key counts as set when its
	// value differs from its default.
	BrokerConfigs map[string]string

	// QueuedMaxRequestBytes bounds the request bytes read but not yet
	// answered on one connection: its share of MaxQueuedBytes (0 =
	// netpoll.DefaultQueuedMaxRequestBytes, negative = unbounded).
	QueuedMaxRequestBytes int64

	// MaxQueuedBytes is queued.max.request.bytes (KIP-72): the broker-wide
	// budget of request bytes read and not yet answered, frames and their
	// decoded requests (netpoll.Config.MaxQueuedBytes; 0 =
	// netpoll.DefaultMaxQueuedBytes, 512 MiB; negative = unbounded, Kafka's
	// -1).
	MaxQueuedBytes int64

	// Blackhole acks produce requests without storing them (a benchmark
	// baseline: what the network and protocol alone cost).
	Blackhole bool

	// Metrics receives the request and topic metrics and reads the
	// partition counts and readiness from the Server (metrics.go); nil:
	// no metrics.
	Metrics *metrics.Broker

	// Scram holds the SCRAM credentials that SASL listeners check and
	// Describe/AlterUserScramCredentials manage (nil: none).
	Scram *sasl.Store

	// Authorizer checks every request against the ACLs and manages them
	// (Describe/Create/DeleteAcls; authz.go); nil: no authorizer, every
	// request is allowed.
	Authorizer *auth.Authorizer
	// Quotas are the client quotas (quotas.json; nil: none, and
	// Describe/AlterClientQuotas answer that nothing is set).
	Quotas *auth.Quotas

	// ConnLimits are the connection limits (max.connections,
	// max.connections.per.ip and overrides, max.connection.creation.rate,
	// per listener; netpoll.ConnLimits); nil: none.
	ConnLimits *netpoll.ConnLimits

	// Reconfigure checks (apply false) or applies (true) the dynamic
	// broker configs other than the topic defaults (dynconfig.go):
	// dynamic is every dynamic config in force, this broker's over the
	// cluster-wide default, by the names they were set under. It returns
	// the connection limits they make (nil: unchanged), which the Server
	// applies. nil: only the topic defaults can be changed at runtime.
	Reconfigure func(dynamic map[string]string, apply bool) (*netpoll.ConnLimits, error)

	// ControllerOnly makes the Server a controller-only node's
	// (process.roles=controller) Kafka listener: no engine, every
	// listener a controller listener (controller_listener.go), and
	// Cluster.Controller the node's voter, used only to describe the
	// quorum.
	ControllerOnly bool

	Groups  GroupsConfig  // consumer groups (groups.go)
	Txn     TxnConfig     // producer ids, idempotence, transactions (producers.go)
	Cluster ClusterConfig // replication and the controller (cluster.go)

	// Now is the server's clock (nil: clocks.Wall): a test drives the time
	// the handlers see, such as a request's time in its handler (quota.go).
	Now clocks.Clock
	// AfterFunc runs f once d has passed (nil: time.AfterFunc, the timer
	// of the clock Now reads): a failed SASL authentication's delayed
	// answer (36_sasl_authenticate.go). Tests take the call over.
	AfterFunc func(d time.Duration, f func())
}

// Default values of Config fields, Kafka's.
const (
	DefaultNumPartitions   = 1
	DefaultReplication     = 1
	DefaultMaxRequestBytes = 104857600
	DefaultFetchMaxBytes   = 57671680
)

// Server serves the Kafka protocol over an engine.Engine.
//
// Server's own Serve method takes a listener, so the netpoll.Handler that
// netpoll calls per frame is a small adapter (connHandler), not Server itself.
type Server struct {
	cfg Config
	eng *engine.Engine
	log *slog.Logger
	np  *netpoll.Server

	// advertised is the host and port Metadata and DescribeCluster return;
	// Serve fills what Config left empty from the listener's address.
	advertised atomic.Pointer[endpoint]

	// panics counts handler and decoder panics recovered by dispatch
	// (each one a bug).
	panics atomic.Int64

	// now is the clock of the shells here (Config.Now); badFrames limits
	// the "closing connection: bad request" lines (connError).
	now       func() time.Time
	badFrames *ratelog.Shared

	groups  groupsState  // groups.go
	txn     txnState     // producers.go
	cluster clusterState // cluster.go

	polls     fetchPolls      // 01_fetch.go: pending fetch long polls
	sessions  fetchSessions   // fetch_session.go: open fetch sessions
	blackhole blackholeState  // 00_produce.go: --blackhole offsets
	mutations mutationBuckets // mutation_quota.go: controller_mutation_rate buckets
	dyn       dynState        // dynconfig.go: dynamic broker configs

	// ctlListeners are the names of the controller listeners served
	// (controller_listener.go); nil: none.
	ctlListeners atomic.Pointer[map[string]bool]
}

type endpoint struct {
	host string
	port int32
}

// New returns a Server for eng with cfg's zero fields defaulted.
func New(cfg Config, eng *engine.Engine) *Server {
	if cfg.NumPartitions <= 0 {
		cfg.NumPartitions = DefaultNumPartitions
	}
	if cfg.DefaultReplication <= 0 {
		cfg.DefaultReplication = DefaultReplication
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = randomClusterID()
	}
	if cfg.LogDefaults.SegmentBytes == 0 {
		cfg.LogDefaults = engine.DefaultLogConfig()
		if eng != nil {
			cfg.LogDefaults = eng.LogDefaults()
		}
	}
	if cfg.AfterFunc == nil {
		cfg.AfterFunc = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	cfg.Now = clocks.Or(cfg.Now)
	s := &Server{cfg: cfg, eng: eng, log: cfg.Logger, now: cfg.Now,
		badFrames: ratelog.NewShared(badFrameLogWindow, badFrameLogBurst)}
	s.advertised.Store(&endpoint{host: cfg.AdvertisedHost, port: cfg.AdvertisedPort})
	s.np = netpoll.NewServer(netpoll.Config{
		MaxFrameBytes: cfg.MaxRequestBytes,
		IdleTimeout:   cfg.ConnectionsMaxIdle,
		Logger:        cfg.Logger,

		QueuedMaxRequestBytes: cfg.QueuedMaxRequestBytes,
		MaxQueuedBytes:        cfg.MaxQueuedBytes,
		Limits:                cfg.ConnLimits,
		SumFramesFrom:         sumFramesFrom,
	}, connHandler{s})
	if cfg.ControllerOnly {
		return s // controller_listener.go: nothing runs beside the requests
	}
	s.initCluster()
	s.initDynamic() // dynconfig.go
	s.initTxn()
	s.initGroups()
	s.initMetrics()
	return s
}

// randomClusterID returns a Kafka-style cluster id: 16 random bytes,
// base64url without padding (22 characters).
func randomClusterID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Config returns the effective configuration (defaults filled in).
func (s *Server) Config() Config { return s.cfg }

// QueuedBytes returns the bytes of the request budget in use: frames read
// and not yet answered and the heap reserved for decoding them.
func (s *Server) QueuedBytes() int64 { return s.np.QueuedBytes() }

// Serve accepts connections on ln until Close and returns nil after Close.
// An advertised host or port left empty in Config is taken from ln's address
// (a wildcard host becomes the machine's hostname).
func (s *Server) Serve(ln net.Listener) error {
	ep := *s.advertised.Load()
	if ep.host == "" || ep.port == 0 {
		host, port := listenerEndpoint(ln.Addr())
		if ep.host == "" {
			ep.host = host
		}
		if ep.port == 0 {
			ep.port = port
		}
		s.advertised.Store(&ep)
	}
	if !s.cfg.ControllerOnly {
		s.noteListener(ln) // txn_coord.go: the coordinator's own address
	}
	// metrics.go: counts the connections accepted.
	return s.np.Serve(s.meterListener(ln, ""))
}

// Close stops accepting, closes every connection and waits for their
// goroutines. It does not close the engine.
func (s *Server) Close() error {
	err := s.np.Close()
	if s.cfg.ControllerOnly {
		return err
	}
	s.closeGroups()
	s.closeTxn()
	s.closeCluster()
	return err
}

// Advertised returns the host and port clients are told to connect to.
func (s *Server) Advertised() (host string, port int32) {
	ep := s.advertised.Load()
	return ep.host, ep.port
}

func listenerEndpoint(a net.Addr) (string, int32) {
	host, portStr, err := net.SplitHostPort(a.String())
	if err != nil {
		return "localhost", 0
	}
	port, _ := strconv.ParseInt(portStr, 10, 32)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "localhost"
		}
	}
	return host, int32(port)
}

// connHandler is the netpoll.Handler: decode, dispatch, recover.
type connHandler struct{ s *Server }

// Serve implements netpoll.Handler.
func (h connHandler) Serve(c *netpoll.Conn, frame []byte, r *netpoll.Reply) {
	h.s.dispatch(c, frame, r)
}

// peer is what a handler may use of its connection (*netpoll.Conn).
type peer interface {
	ID() uint64
	RemoteAddr() net.Addr
	Close()
	Done() <-chan struct{} // closed when the connection closes: long polls give up
}

// replySink is the response slot of one request (*netpoll.Reply); see
// netpoll.Reply for the semantics. Tests and fuzzers substitute their own.
type replySink interface {
	Send(resp []byte)
	SendParts(parts []netpoll.Part, done func())
	Skip()
	Close()
}

// dispatch decodes frame and runs its handler. A frame that does not decode
// closes the connection (logged here, rate-limited). A panic while decoding
// or in a handler is a bug; it is recovered as a last resort so one bad
// request costs its connection, never the broker.
func (s *Server) dispatch(c peer, frame []byte, r replySink) {
	if !s.awaitReady() { // cluster.go: not before the metadata caught up
		r.Close()
		return
	}
	// metrics.go: the frame was read just now.
	read := s.meterRead()
	if s.saslGate(c, frame, r) { // 17_sasl_handshake.go: SASL listeners authenticate first
		return
	}
	hdr, req, err := s.safeDecode(frame, r)
	if err != nil {
		s.connError(c, hdr, err)
		r.Close()
		return
	}
	api, _ := lookupAPI(hdr.key) // decodeRequest succeeded, so the key is registered
	ctl := s.onControllerListener(c)
	if ctl && !controllerAPIs[hdr.key] { // controller_listener.go
		s.connError(c, hdr, errNotControllerAPI)
		r.Close()
		return
	}
	rc := &reqCtx{
		ctl:     ctl,
		conn:    c,
		reply:   r,
		key:     hdr.key,
		version: hdr.version,
		corrID:  hdr.corrID,
		client:  hdr.clientID,
		req:     req,
		log:     s.log,
	}
	if f, ok := r.(summedFrame); ok {
		rc.frame = f
	}
	s.meterStart(rc, read) // metrics.go
	defer func() {
		if p := recover(); p != nil {
			s.panics.Add(1)
			s.log.Error("panic serving request; closing connection",
				"remote", remoteAddr(c), "api", kmsg.NameForKey(hdr.key), "version", hdr.version,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if rc.state.CompareAndSwap(reqPending, reqDone) {
				r.Close()
			} else {
				c.Close()
			}
		}
	}()
	began := s.meterRead()
	s.serveTimed(rc, api.fn) // quota.go: api.fn(s, rc), timed for request_percentage
	s.meterReader(hdr.key, began)
}

// Bad-request log lines: at most badFrameLogBurst per badFrameLogWindow,
// the rest counted in the next line.
const (
	badFrameLogWindow = 10 * time.Second
	badFrameLogBurst  = 20
)

// reserver is the part of a *netpoll.Reply that takes bytes of the
// broker-wide request budget for the decoded request.
type reserver interface{ Reserve(n int64) bool }

// safeDecode is decodeRequest with a decoder panic turned into an error
// (and counted with the handlers' panics). The decoded request's heap bound
// is reserved on r when r can (a *netpoll.Reply).
func (s *Server) safeDecode(frame []byte, r replySink) (hdr requestHeader, req kmsg.Request, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.panics.Add(1)
			err = fmt.Errorf("panic decoding the request: %v", p)
		}
	}()
	var reserve func(int64) bool
	if rs, ok := r.(reserver); ok {
		reserve = rs.Reserve
	}
	return decodeFrame(frame, reserve)
}

// decodeFrame is the request decoder (a variable so that tests can make
// it panic).
var decodeFrame = decodeRequest

// connError logs a request that closes its connection, rate-limited.
func (s *Server) connError(c peer, h requestHeader, err error) {
	ok, held := s.badFrames.Allow(s.now())
	if !ok {
		return
	}
	s.log.Warn("closing connection: bad request",
		"remote", remoteAddr(c), "key", h.key, "api", kmsg.NameForKey(h.key),
		"version", h.version, "client_id", h.clientID, "err", err, "similar_lines_suppressed", held)
}

func remoteAddr(c peer) string {
	if c == nil {
		return ""
	}
	if a := c.RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}

// reqCtx states: a reqCtx is completed exactly once.
const (
	reqPending uint32 = iota
	reqDone
)

// reqCtx is one decoded request. Handlers complete it exactly once: respond
// (or sendParts), skip (acks=0) or close.
type reqCtx struct {
	conn    peer
	reply   replySink
	key     int16
	version int16
	corrID  int32
	client  string       // client id ("" if null)
	req     kmsg.Request // decoded body, version set; nil only for ApiVersions above our max
	log     *slog.Logger
	state   atomic.Uint32
	ctl     bool // on a controller listener (controller_listener.go)

	// metered is the Server timing rc for its metrics and start when its
	// frame was read (metrics.go); nil when metrics are off.
	metered *Server
	start   time.Time
	handler time.Time // when the handler started (metrics.go)

	quota requestTimer // quota.go: the handler's time for request_percentage

	// frame is the reply when it knows its request frame's block
	// checksums (netpoll.Reply.Sums, FrameOffset; nil otherwise): Produce
	// checks its batches' CRCs with them (sumsFor).
	frame summedFrame
}

// summedFrame is what a reply may tell of its request frame's bytes
// (*netpoll.Reply): the block sums taken as it was read and where a
// slice of it lies.
type summedFrame interface {
	Sums() *crcsum.Sums
	FrameOffset(p []byte) (int, bool)
}

// sumsFor returns the frame's block sums and p's offset in the frame, or
// nil when there are none or p is not in it.
func (rc *reqCtx) sumsFor(p []byte) (*crcsum.Sums, int) {
	if rc.frame == nil {
		return nil, 0
	}
	if off, ok := rc.frame.FrameOffset(p); ok {
		return rc.frame.Sums(), off
	}
	return nil, 0
}

// flexible reports whether the request (and so its response) uses the
// flexible encoding of KIP-482.
func (rc *reqCtx) flexible() bool { return rc.req != nil && rc.req.IsFlexible() }

// complete marks rc completed; it returns false (and logs) if it already was,
// which is a handler bug that must not reach netpoll twice.
func (rc *reqCtx) complete() bool {
	if rc.state.CompareAndSwap(reqPending, reqDone) {
		return true
	}
	rc.log.Error("server: request completed twice (handler bug)",
		"key", kmsg.NameForKey(rc.key), "version", rc.version, "correlation_id", rc.corrID)
	return false
}

// appendResponseHeader appends the response header for rc: the correlation
// id, then an empty tagged-field section if the version is flexible, except
// for ApiVersions, whose response header is always v0 (KIP-511).
func (rc *reqCtx) appendResponseHeader(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(rc.corrID))
	if rc.key != apiVersionsKey && rc.flexible() {
		dst = append(dst, 0)
	}
	return dst
}

// respond encodes resp at the request's version behind the response header
// and sends it.
func (rc *reqCtx) respond(resp kmsg.Response) {
	resp.SetVersion(rc.version)
	rc.respondEncoded(resp)
}

// respondEncoded sends resp at whatever version it already has (ApiVersions
// answers a too-new request with a v0 body).
func (rc *reqCtx) respondEncoded(resp kmsg.Response) {
	if !rc.complete() {
		return
	}
	ob := getOutBuf()
	b := binary.BigEndian.AppendUint32(ob.b[:0], uint32(rc.corrID))
	if rc.key != apiVersionsKey && resp.IsFlexible() {
		b = append(b, 0)
	}
	rc.throttleResponse(resp) // quota.go: request_percentage
	b = resp.AppendTo(b)
	ob.b = b
	ob.parts[0] = netpoll.Part{Buf: b}
	rc.meter(resp, false) // metrics.go
	ob.sent = rc.sendMeter()
	rc.reply.SendParts(ob.parts[:], ob.release)
}

// sendParts sends a response assembled by the handler, parts in wire
// order: the first begins with the response header (see
// appendResponseHeader). done (may be nil) runs after the write finished or
// failed. Used by Fetch.
func (rc *reqCtx) sendParts(parts []netpoll.Part, done func()) {
	if !rc.complete() {
		return
	}
	rc.meter(nil, false)
	rc.reply.SendParts(parts, rc.meterSent(done))
}

// skip completes rc without a response (Produce with acks=0).
func (rc *reqCtx) skip() {
	if rc.complete() {
		rc.meter(nil, true)
		rc.reply.Skip()
	}
}

// drop completes rc whose connection closed before it was answered (a
// Fetch's long poll): nothing is sent, and its response is counted as
// sent at once, as one dropped with its connection is (sendMeter), so
// every metered response has its send observed.
func (rc *reqCtx) drop() {
	if rc.complete() {
		rc.meter(nil, false)
		rc.sendMeter().done()
		rc.reply.Skip()
	}
}

// close completes rc without a response and closes the connection after the
// earlier responses are written, logging why.
func (rc *reqCtx) close(err error) {
	if !rc.complete() {
		return
	}
	rc.log.Warn("closing connection",
		"remote", remoteAddr(rc.conn), "api", kmsg.NameForKey(rc.key), "version", rc.version,
		"client_id", rc.client, "err", err)
	rc.meter(nil, false)
	rc.reply.Close()
}

// outBuf is a pooled response buffer with its one-element Part slice and its
// release callback bound once, so a response costs no allocation beyond the
// encoding itself.
type outBuf struct {
	b       []byte
	parts   [1]netpoll.Part
	release func()
	sent    sendMeter // metrics.go: times the write of a metered response
}

// maxPooledBytes bounds the buffers kept in the pool, so one huge response
// (a Metadata of thousands of topics) is not pinned forever.
const maxPooledBytes = 1 << 20

var outBufs sync.Pool

func getOutBuf() *outBuf {
	if ob, ok := outBufs.Get().(*outBuf); ok {
		return ob
	}
	ob := &outBuf{b: make([]byte, 0, 512)}
	ob.release = ob.put
	return ob
}

func (ob *outBuf) put() {
	ob.sent.done()
	ob.sent = sendMeter{}
	ob.parts[0] = netpoll.Part{}
	if cap(ob.b) > maxPooledBytes {
		ob.b = make([]byte, 0, 512)
	}
	ob.b = ob.b[:0]
	outBufs.Put(ob)
}
