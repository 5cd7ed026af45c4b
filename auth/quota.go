package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/internal/vfs"
)

// Client quotas (issue 20), Kafka's model (KIP-13, KIP-55, KIP-124,
// KIP-546): a quota belongs to an entity — a user, a client id, or a user
// and a client id, each either a name or the default — and limits one
// quota type. For a request of (user, client id) each quota type takes the
// first entity, in Kafka's precedence, that sets it:
//
//	user=U, client-id=C           user=<default>, client-id=C
//	user=U, client-id=<default>   user=<default>, client-id=<default>
//	user=U                        user=<default>
//	                              client-id=C
//	                              client-id=<default>
//
// (the left column first, top to bottom, then the right). The rate is
// measured per matched entity, with a default's name replaced by the
// request's own user or client id (so a default quota limits each user on
// its own) — Kafka's quota metric tags. A rate is the sum of the samples
// of the last QuotaSamples windows of QuotaWindowMs each, over at least
// QuotaSamples-1 windows (Kafka's Rate); a request that takes it past the
// quota is throttled (observed - quota) / quota x window (QuotaUtils),
// capped at the whole window — for request_percentage at one sample
// window (quota.window.size.seconds), as Kafka's request quota caps it.
// request_percentage is recorded in percent-seconds of handler time
// (Kafka's nanosToPercentage: 10 ms of handler time is 1), so its rate
// is the percentage of one request-handler thread a client keeps busy.
// The clock is the caller's (nowMs).

// Quota types.
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
)

// QuotaTypes are the types Strata accepts and enforces
// (controller_mutation_rate: server/mutation_quota.go).
var QuotaTypes = []string{QuotaProducerByteRate, QuotaConsumerByteRate, QuotaRequestPercentage, QuotaControllerMutationRate}

// Entity types.
const (
	EntityUser     = "user"
	EntityClientID = "client-id"
)

// EntityName is one part of a quota entity.
type EntityName struct {
	Set     bool   // the entity has this part
	Default bool   // <default>
	Name    string // the name when not Default
}

// QuotaEntity is a quota's target.
type QuotaEntity struct {
	User, ClientID EntityName
}

func (n EntityName) String() string {
	if n.Default {
		return "<default>"
	}
	return n.Name
}

func (e QuotaEntity) String() string {
	var parts []string
	if e.User.Set {
		parts = append(parts, "user="+e.User.String())
	}
	if e.ClientID.Set {
		parts = append(parts, "client-id="+e.ClientID.String())
	}
	return strings.Join(parts, ",")
}

// Validate checks an entity: a user and/or a client id.
func (e QuotaEntity) Validate() error {
	if !e.User.Set && !e.ClientID.Set {
		return errors.New("a quota entity names a user and/or a client id")
	}
	return nil
}

// ValidQuota checks a quota type and value as Kafka does.
func ValidQuota(typ string, v float64) error {
	if !slices.Contains(QuotaTypes, typ) {
		return fmt.Errorf("unknown quota type %q", typ)
	}
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%s must be positive, not %v", typ, v)
	}
	if (typ == QuotaProducerByteRate || typ == QuotaConsumerByteRate) && v != math.Trunc(v) {
		return fmt.Errorf("%s must be a whole number of bytes per second", typ)
	}
	return nil
}

// QuotaConfig sets the measuring window (quota.window.num,
// quota.window.size.seconds).
type QuotaConfig struct {
	Samples  int   // default 11
	WindowMs int64 // default 1000
}

// Quotas holds the quotas and measures the rates. Safe for concurrent use.
type Quotas struct {
	cfg  QuotaConfig
	path string

	active atomic.Bool   // any quota set (Active, without the lock)
	types  atomic.Uint32 // bit i: some entity sets QuotaTypes[i] (Sets)

	mu      sync.Mutex
	limits  map[QuotaEntity]map[string]float64
	sensors map[sensorKey]*sensor
	swept   int64 // nowMs of the last idle-sensor sweep
}

type sensorKey struct {
	typ          string
	user, client string
	hasU, hasC   bool
}

// sensor is a sampled sum (Kafka's SampledStat behind Rate).
type sensor struct {
	starts []int64 // each sample's window start, -1 unused
	sums   []float64
	cur    int
	last   int64 // nowMs of the last record
}

// NewQuotas returns an empty set of quotas.
func NewQuotas(cfg QuotaConfig) *Quotas {
	if cfg.Samples < 2 {
		cfg.Samples = 11
	}
	if cfg.WindowMs <= 0 {
		cfg.WindowMs = 1000
	}
	return &Quotas{cfg: cfg, limits: map[QuotaEntity]map[string]float64{}, sensors: map[sensorKey]*sensor{}}
}

// OpenQuotas returns the quotas kept in path (a missing file holds none);
// changes are written there.
func OpenQuotas(cfg QuotaConfig, path string) (*Quotas, error) {
	q := NewQuotas(cfg)
	q.path = path
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return q, nil
	}
	if err != nil {
		return nil, err
	}
	var f quotaFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, errors.New("auth: " + path + ": " + err.Error())
	}
	for _, e := range f.Quotas {
		ent := e.entity()
		if err := ent.Validate(); err != nil {
			return nil, fmt.Errorf("auth: %s: %v", path, err)
		}
		for typ, v := range e.Values {
			if err := ValidQuota(typ, v); err != nil {
				return nil, fmt.Errorf("auth: %s: %s: %v", path, ent, err)
			}
		}
		q.limits[ent] = e.Values
	}
	q.publish(q.limits)
	return q, nil
}

// quotaFile is quotas.json's layout.
type quotaFile struct {
	Quotas []quotaEntry `json:"quotas"`
}

type quotaEntry struct {
	User     *string            `json:"user,omitempty"` // "<default>" for the default
	ClientID *string            `json:"client_id,omitempty"`
	Values   map[string]float64 `json:"values"`
}

func fileName(n EntityName) *string {
	if !n.Set {
		return nil
	}
	s := n.Name
	if n.Default {
		s = "<default>"
	}
	return &s
}

func (e quotaEntry) entity() QuotaEntity {
	name := func(p *string) EntityName {
		if p == nil {
			return EntityName{}
		}
		if *p == "<default>" {
			return EntityName{Set: true, Default: true}
		}
		return EntityName{Set: true, Name: *p}
	}
	return QuotaEntity{User: name(e.User), ClientID: name(e.ClientID)}
}

// QuotaChange sets (Remove false) or removes one quota type of an entity.
type QuotaChange struct {
	Entity QuotaEntity
	Type   string
	Value  float64
	Remove bool
}

// Alter applies changes at once (all or none) and writes the file.
func (q *Quotas) Alter(changes []QuotaChange) error {
	for _, c := range changes {
		if err := c.Entity.Validate(); err != nil {
			return err
		}
		if c.Remove {
			if !slices.Contains(QuotaTypes, c.Type) {
				return fmt.Errorf("unknown quota type %q", c.Type)
			}
			continue
		}
		if err := ValidQuota(c.Type, c.Value); err != nil {
			return err
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	next := make(map[QuotaEntity]map[string]float64, len(q.limits))
	for e, vs := range q.limits {
		next[e] = maps.Clone(vs)
	}
	for _, c := range changes {
		vs := next[c.Entity]
		if c.Remove {
			delete(vs, c.Type)
			if len(vs) == 0 {
				delete(next, c.Entity)
			}
			continue
		}
		if vs == nil {
			vs = map[string]float64{}
			next[c.Entity] = vs
		}
		vs[c.Type] = c.Value
	}
	if q.path != "" {
		if err := writeQuotas(q.path, next); err != nil {
			return err
		}
	}
	q.limits = next
	q.publish(next)
	return nil
}

// Replace makes limits the whole set of quotas (each entity and value
// checked as Alter checks them) and writes the file: in a cluster the
// replicated metadata's quotas, applied by every broker. The rates
// measured so far are kept. Nothing changes on an error.
func (q *Quotas) Replace(limits map[QuotaEntity]map[string]float64) error {
	next := make(map[QuotaEntity]map[string]float64, len(limits))
	for e, vs := range limits {
		if err := e.Validate(); err != nil {
			return err
		}
		if len(vs) == 0 {
			continue
		}
		for typ, v := range vs {
			if err := ValidQuota(typ, v); err != nil {
				return fmt.Errorf("%s: %v", e, err)
			}
		}
		next[e] = maps.Clone(vs)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if maps.EqualFunc(q.limits, next, func(a, b map[string]float64) bool { return maps.Equal(a, b) }) {
		return nil
	}
	if q.path != "" {
		if err := writeQuotas(q.path, next); err != nil {
			return err
		}
	}
	q.limits = next
	q.publish(next)
	return nil
}

// All returns every entity's quotas (copies).
func (q *Quotas) All() map[QuotaEntity]map[string]float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[QuotaEntity]map[string]float64, len(q.limits))
	for e, vs := range q.limits {
		out[e] = maps.Clone(vs)
	}
	return out
}

// publish sets what Active and Sets report for limits.
func (q *Quotas) publish(limits map[QuotaEntity]map[string]float64) {
	var bits uint32
	for _, vs := range limits {
		for i, typ := range QuotaTypes {
			if _, ok := vs[typ]; ok {
				bits |= 1 << i
			}
		}
	}
	q.types.Store(bits)
	q.active.Store(len(limits) > 0)
}

// Sets reports whether any entity sets quota type typ (one atomic load:
// a caller may skip measuring what no quota limits).
func (q *Quotas) Sets(typ string) bool {
	i := slices.Index(QuotaTypes, typ)
	return i >= 0 && q.types.Load()&(1<<i) != 0
}

func writeQuotas(path string, limits map[QuotaEntity]map[string]float64) error {
	f := quotaFile{Quotas: []quotaEntry{}}
	for e, vs := range limits {
		f.Quotas = append(f.Quotas, quotaEntry{User: fileName(e.User), ClientID: fileName(e.ClientID), Values: vs})
	}
	sort.Slice(f.Quotas, func(i, j int) bool {
		return f.Quotas[i].entity().String() < f.Quotas[j].entity().String()
	})
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(path, append(b, '\n'))
}

// QuotaMatch says how DescribeClientQuotas matches one entity part:
// MatchExact a name, MatchDefault the default, MatchAny anything but
// absence.
type QuotaMatch int8

// Kafka's match types (DescribeClientQuotas).
const (
	MatchExact   QuotaMatch = 0
	MatchDefault QuotaMatch = 1
	MatchAny     QuotaMatch = 2
)

// QuotaFilterPart filters one entity type.
type QuotaFilterPart struct {
	EntityType string
	Match      QuotaMatch
	Name       string
}

// QuotaDescribed is one entity's quotas.
type QuotaDescribed struct {
	Entity QuotaEntity
	Values map[string]float64
}

// Describe returns the entities the filter selects (every part must
// match; strict: the entity has no other part), sorted.
func (q *Quotas) Describe(parts []QuotaFilterPart, strict bool) ([]QuotaDescribed, error) {
	for _, p := range parts {
		if p.EntityType != EntityUser && p.EntityType != EntityClientID {
			return nil, fmt.Errorf("unknown entity type %q", p.EntityType)
		}
		if p.Match < MatchExact || p.Match > MatchAny {
			return nil, fmt.Errorf("unknown match type %d", p.Match)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []QuotaDescribed
	for e, vs := range q.limits {
		if matchEntity(e, parts, strict) {
			out = append(out, QuotaDescribed{Entity: e, Values: maps.Clone(vs)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Entity.String() < out[j].Entity.String() })
	return out, nil
}

func matchEntity(e QuotaEntity, parts []QuotaFilterPart, strict bool) bool {
	seenU, seenC := false, false
	for _, p := range parts {
		n := e.User
		if p.EntityType == EntityClientID {
			n, seenC = e.ClientID, true
		} else {
			seenU = true
		}
		switch {
		case !n.Set:
			return false
		case p.Match == MatchExact && (n.Default || n.Name != p.Name):
			return false
		case p.Match == MatchDefault && !n.Default:
			return false
		}
	}
	if strict && ((e.User.Set && !seenU) || (e.ClientID.Set && !seenC)) {
		return false
	}
	return true
}

// limitLocked returns the quota of type typ for a request of user and
// clientID and the key its rate is measured under; ok false when no quota
// applies. Caller holds q.mu.
func (q *Quotas) limitLocked(typ, user, clientID string) (float64, sensorKey, bool) {
	named := func(n string) EntityName { return EntityName{Set: true, Name: n} }
	def := EntityName{Set: true, Default: true}
	none := EntityName{}
	for _, c := range [...]struct {
		e          QuotaEntity
		hasU, hasC bool
	}{
		{QuotaEntity{named(user), named(clientID)}, true, true},
		{QuotaEntity{named(user), def}, true, true},
		{QuotaEntity{named(user), none}, true, false},
		{QuotaEntity{def, named(clientID)}, true, true},
		{QuotaEntity{def, def}, true, true},
		{QuotaEntity{def, none}, true, false},
		{QuotaEntity{none, named(clientID)}, false, true},
		{QuotaEntity{none, def}, false, true},
	} {
		if v, ok := q.limits[c.e][typ]; ok {
			k := sensorKey{typ: typ, hasU: c.hasU, hasC: c.hasC}
			if c.hasU {
				k.user = user
			}
			if c.hasC {
				k.client = clientID
			}
			return v, k, true
		}
	}
	return 0, sensorKey{}, false
}

// Limit is the quota of type typ that applies to (user, clientID).
func (q *Quotas) Limit(typ, user, clientID string) (float64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	v, _, ok := q.limitLocked(typ, user, clientID)
	return v, ok
}

// Active reports whether any quota is set (a caller may skip Record).
func (q *Quotas) Active() bool { return q.active.Load() }

// sensorIdleMs drops a sensor not recorded for an hour (Kafka's inactive
// sensor expiration), so rates of clients gone do not pile up.
const sensorIdleMs = 3600_000

// Record adds v (bytes; for request_percentage, percent-seconds of
// handler time: seconds x 100) to the rate of (user, clientID) for quota type typ at nowMs
// and returns how long to throttle the client (0 when within quota or no
// quota applies).
func (q *Quotas) Record(typ, user, clientID string, v float64, nowMs int64) (throttleMs int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	limit, key, ok := q.limitLocked(typ, user, clientID)
	if !ok {
		return 0
	}
	if nowMs-q.swept > sensorIdleMs {
		for k, s := range q.sensors {
			if nowMs-s.last > sensorIdleMs {
				delete(q.sensors, k)
			}
		}
		q.swept = nowMs
	}
	s := q.sensors[key]
	if s == nil {
		s = &sensor{starts: make([]int64, q.cfg.Samples), sums: make([]float64, q.cfg.Samples)}
		for i := range s.starts {
			s.starts[i] = -1
		}
		s.starts[0] = nowMs
		q.sensors[key] = s
	}
	s.record(v, nowMs, q.cfg.WindowMs)
	rate, windowMs := s.rate(nowMs, q.cfg.WindowMs)
	if rate <= limit {
		return 0
	}
	t := int64((rate - limit) / limit * float64(windowMs))
	bound := int64(q.cfg.Samples) * q.cfg.WindowMs
	if typ == QuotaRequestPercentage {
		bound = q.cfg.WindowMs // Kafka bounds the request quota's throttle by one window
	}
	return min(max(t, 0), bound)
}

// record adds v to the current sample, moving to a new one (the oldest's
// place) once the current window has passed.
func (s *sensor) record(v float64, nowMs, windowMs int64) {
	if nowMs-s.starts[s.cur] >= windowMs {
		s.cur = (s.cur + 1) % len(s.starts)
		s.starts[s.cur], s.sums[s.cur] = nowMs, 0
	}
	s.sums[s.cur] += v
	s.last = nowMs
}

// rate is the samples' sum over their elapsed time, counted as at least
// len-1 full windows (Kafka's Rate.windowSize); also returns that window.
func (s *sensor) rate(nowMs, windowMs int64) (float64, int64) {
	n := int64(len(s.starts))
	oldest, total := nowMs, 0.0
	for i, st := range s.starts {
		if st < 0 || nowMs-st >= n*windowMs {
			continue // unused, or expired
		}
		total += s.sums[i]
		oldest = min(oldest, st)
	}
	elapsed := nowMs - oldest
	if full := elapsed / windowMs; full < n-1 {
		elapsed += (n - 1 - full) * windowMs
	}
	return total / (float64(elapsed) / 1000), elapsed
}
