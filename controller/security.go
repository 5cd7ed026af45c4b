package controller

// Security metadata (issue 20): ACLs, SCRAM credentials and client quotas
// live in the replicated State, as Kafka keeps AccessControlEntryRecord,
// UserScramCredentialRecord and ClientQuotaRecord in its metadata log, so
// every broker applies the same ones. The FSM knows Kafka's wire codes and
// bounds, not the authorizer's rules: the proposing broker validates a
// request as Kafka does (package auth, internal/sasl) and the FSM re-checks
// only what keeps the State well-formed.
//
//	CreateACLs(14):        [ACL]                      (an ACL already present is kept once)
//	DeleteACLs(15):        [ACL]                      (exact bindings; absent ones ignored)
//	AlterScram(16):        [upsert credential], [delete user, mechanism]  (all or none)
//	AlterClientQuotas(17): [entity, key, value, remove]                   (all or none)
//	SeedSecurity(18):      kinds u8, [ACL], [credential], [quota op]
//
//	ACL        = resourceType int, resourceName, patternType int, principal,
//	             host, operation int, permission int
//	credential = user, mechanism, salt, storedKey, serverKey, iterations
//	entity     = user name, client-id name; name = set bool, default bool, name
//	value      = float64 bits, 8 bytes big-endian
//
// SeedSecurity carries a broker's locally kept state (its acls.json,
// quotas.json and SCRAM file from before the cluster replicated them, or
// strata.scram.credentials on a new cluster): each kind is taken from the
// first seed that carries it and never again, and any other command on a
// kind marks it seeded too, so a seed never brings back what an operator
// deleted. The State encodes it all after nextProducerID (version 3).

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Security command types.
const (
	TypeCreateACLs        CommandType = 14
	TypeDeleteACLs        CommandType = 15
	TypeAlterScram        CommandType = 16
	TypeAlterClientQuotas CommandType = 17
	TypeSeedSecurity      CommandType = 18
)

// Security kinds, bits of SeedSecurity.Kinds and State.SecuritySeeded.
const (
	SecurityACLs   uint8 = 1
	SecurityScram  uint8 = 2
	SecurityQuotas uint8 = 4
	securityAll          = SecurityACLs | SecurityScram | SecurityQuotas
)

// Bounds on the security state.
const (
	MaxACLs            = 1 << 20
	MaxScramUsers      = 1 << 20
	MaxQuotaEntities   = 1 << 20
	maxSecurityNameLen = 1 << 15
	// ScramMinIterations and ScramMaxIterations are Kafka's bounds.
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// ACL is one ACL binding in Kafka's wire codes (AclResourceType,
// AclPatternType, AclOperation, AclPermissionType).
type ACL struct {
	ResourceType int8
	ResourceName string
	PatternType  int8
	Principal    string
	Host         string
	Operation    int8
	Permission   int8
}

// CreateACLs adds ACLs (Kafka's CreateAcls). Result.Code INVALID_REQUEST
// refuses the whole command.
type CreateACLs struct{ ACLs []ACL }

// DeleteACLs removes the ACLs listed (the proposing broker resolves
// DeleteAcls filters against the State); ones not present are ignored.
type DeleteACLs struct{ ACLs []ACL }

// ScramCredential is one user's credential for one mechanism: salted and
// iterated (RFC 5802's StoredKey and ServerKey), never the password.
type ScramCredential struct {
	User       string
	Mechanism  string // SCRAM-SHA-256 or SCRAM-SHA-512
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// ScramKey names a user's credential for a mechanism.
type ScramKey struct{ User, Mechanism string }

// AlterScram upserts and deletes SCRAM credentials, all or none (Kafka's
// AlterUserScramCredentials for one user): deleting a credential that
// does not exist is RESOURCE_NOT_FOUND, an unknown mechanism
// UNSUPPORTED_SASL_MECHANISM, a malformed credential
// UNACCEPTABLE_CREDENTIAL.
type AlterScram struct {
	Upserts []ScramCredential
	Deletes []ScramKey
}

// QuotaName is one part of a client-quota entity.
type QuotaName struct {
	Set     bool // the entity has this part
	Default bool // <default>
	Name    string
}

// QuotaEntity is a client quota's target: a user and/or a client id.
type QuotaEntity struct{ User, ClientID QuotaName }

// QuotaOp sets (or with Remove removes) one quota key of an entity.
type QuotaOp struct {
	Entity QuotaEntity
	Key    string
	Value  float64
	Remove bool
}

// AlterClientQuotas applies quota operations, all or none (Kafka's
// AlterClientQuotas for one entity); INVALID_REQUEST refuses.
type AlterClientQuotas struct{ Ops []QuotaOp }

// ClientQuota is one entity's quotas.
type ClientQuota struct {
	Entity QuotaEntity
	Values map[string]float64
}

// SeedSecurity adds a broker's local security state for each kind of
// Kinds not seeded yet (ACLs added, credentials and quota keys set where
// the State has none), then marks those kinds seeded. Kinds already seeded
// are left alone.
type SeedSecurity struct {
	Kinds  uint8
	ACLs   []ACL
	Scram  []ScramCredential
	Quotas []QuotaOp
}

func (CreateACLs) Type() CommandType        { return TypeCreateACLs }
func (DeleteACLs) Type() CommandType        { return TypeDeleteACLs }
func (AlterScram) Type() CommandType        { return TypeAlterScram }
func (AlterClientQuotas) Type() CommandType { return TypeAlterClientQuotas }
func (SeedSecurity) Type() CommandType      { return TypeSeedSecurity }

// securityState is the State's security part.
type securityState struct {
	seeded uint8
	offset int64 // metadata offset of the last change (0: none)
	acls   map[ACL]struct{}
	scram  map[ScramKey]ScramCredential
	quotas map[QuotaEntity]map[string]float64
}

func newSecurityState() securityState {
	return securityState{acls: map[ACL]struct{}{}, scram: map[ScramKey]ScramCredential{}, quotas: map[QuotaEntity]map[string]float64{}}
}

func (s securityState) clone() securityState {
	c := newSecurityState()
	c.seeded, c.offset = s.seeded, s.offset
	for a := range s.acls {
		c.acls[a] = struct{}{}
	}
	for k, v := range s.scram {
		c.scram[k] = v // the byte slices are never modified in place
	}
	for e, vs := range s.quotas {
		m := make(map[string]float64, len(vs))
		for k, v := range vs {
			m[k] = v
		}
		c.quotas[e] = m
	}
	return c
}

// ---- reading ----

// SecurityOffset is the metadata offset of the last change to the ACLs,
// SCRAM credentials, client quotas or seeded kinds (0: none yet).
func (s *State) SecurityOffset() int64 { return s.sec.offset }

// SecuritySeeded returns the kinds (SecurityACLs, ...) seeded or changed.
func (s *State) SecuritySeeded() uint8 { return s.sec.seeded }

// ACLs returns every ACL, sorted (resource type, pattern type, name,
// principal, host, operation, permission).
func (s *State) ACLs() []ACL {
	out := make([]ACL, 0, len(s.sec.acls))
	for a := range s.sec.acls {
		out = append(out, a)
	}
	slices.SortFunc(out, compareACL)
	return out
}

// ScramCredentials returns every credential, sorted by user and mechanism.
func (s *State) ScramCredentials() []ScramCredential {
	out := make([]ScramCredential, 0, len(s.sec.scram))
	for _, c := range s.sec.scram {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ScramCredential) int {
		return cmp.Or(strings.Compare(a.User, b.User), strings.Compare(a.Mechanism, b.Mechanism))
	})
	return out
}

// ClientQuotas returns every entity's quotas (copies), sorted by entity.
func (s *State) ClientQuotas() []ClientQuota {
	out := make([]ClientQuota, 0, len(s.sec.quotas))
	for e, vs := range s.sec.quotas {
		m := make(map[string]float64, len(vs))
		for k, v := range vs {
			m[k] = v
		}
		out = append(out, ClientQuota{Entity: e, Values: m})
	}
	slices.SortFunc(out, func(a, b ClientQuota) int { return compareEntity(a.Entity, b.Entity) })
	return out
}

func compareACL(x, y ACL) int {
	return cmp.Or(
		cmp.Compare(x.ResourceType, y.ResourceType),
		cmp.Compare(x.PatternType, y.PatternType),
		strings.Compare(x.ResourceName, y.ResourceName),
		strings.Compare(x.Principal, y.Principal),
		strings.Compare(x.Host, y.Host),
		cmp.Compare(x.Operation, y.Operation),
		cmp.Compare(x.Permission, y.Permission),
	)
}

func compareName(x, y QuotaName) int {
	b := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	return cmp.Or(cmp.Compare(b(x.Set), b(y.Set)), cmp.Compare(b(x.Default), b(y.Default)), strings.Compare(x.Name, y.Name))
}

func compareEntity(x, y QuotaEntity) int {
	return cmp.Or(compareName(x.User, y.User), compareName(x.ClientID, y.ClientID))
}

// ---- validation ----

func validACL(a ACL) bool {
	return a.ResourceType >= 2 && a.ResourceType <= 7 &&
		(a.PatternType == 3 || a.PatternType == 4) &&
		a.Operation >= 2 && a.Operation <= 14 &&
		(a.Permission == 2 || a.Permission == 3) &&
		a.ResourceName != "" && a.Principal != "" && a.Host != "" &&
		len(a.ResourceName) <= maxSecurityNameLen && len(a.Principal) <= maxSecurityNameLen && len(a.Host) <= maxSecurityNameLen
}

// ScramKeyLen is the length of the StoredKey and ServerKey of mech, 0 for
// an unknown mechanism.
func ScramKeyLen(mech string) int {
	switch mech {
	case "SCRAM-SHA-256":
		return 32
	case "SCRAM-SHA-512":
		return 64
	}
	return 0
}

func checkScram(c ScramCredential) (*kerr.Error, string) {
	n := ScramKeyLen(c.Mechanism)
	switch {
	case c.User == "" || len(c.User) > maxSecurityNameLen:
		return kerr.UnacceptableCredential, "user name empty or too long"
	case n == 0:
		return kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism " + c.Mechanism
	case c.Iterations < ScramMinIterations || c.Iterations > ScramMaxIterations:
		return kerr.UnacceptableCredential, "iterations outside 4096..16384"
	case len(c.Salt) == 0 || len(c.Salt) > 1024 || len(c.StoredKey) != n || len(c.ServerKey) != n:
		return kerr.UnacceptableCredential, "malformed salt or keys"
	}
	return nil, ""
}

func validEntity(e QuotaEntity) bool {
	ok := func(n QuotaName) bool {
		return !n.Set && !n.Default && n.Name == "" || n.Set && len(n.Name) <= maxSecurityNameLen && (!n.Default || n.Name == "")
	}
	return (e.User.Set || e.ClientID.Set) && ok(e.User) && ok(e.ClientID)
}

func validQuotaOp(op QuotaOp) bool {
	if !validEntity(op.Entity) || op.Key == "" || len(op.Key) > 255 {
		return false
	}
	return op.Remove || op.Value > 0 && !math.IsInf(op.Value, 0) && !math.IsNaN(op.Value)
}

// ---- applying ----

func (s *State) changedSecurity(kind uint8) {
	s.sec.seeded |= kind
	s.sec.offset = s.offset
}

func (s *State) createACLs(c CreateACLs) Result {
	for _, a := range c.ACLs {
		if !validACL(a) {
			return failed(kerr.InvalidRequest, "invalid ACL %+v", a)
		}
	}
	added := 0
	for _, a := range c.ACLs {
		if _, ok := s.sec.acls[a]; !ok {
			added++
		}
	}
	if len(s.sec.acls)+added > MaxACLs {
		return failed(kerr.InvalidRequest, "more than %d ACLs", MaxACLs)
	}
	for _, a := range c.ACLs {
		s.sec.acls[a] = struct{}{}
	}
	s.changedSecurity(SecurityACLs)
	return Result{Message: "created " + strconv.Itoa(added) + " ACLs"}
}

func (s *State) deleteACLs(c DeleteACLs) Result {
	n := 0
	for _, a := range c.ACLs {
		if _, ok := s.sec.acls[a]; ok {
			delete(s.sec.acls, a)
			n++
		}
	}
	s.changedSecurity(SecurityACLs)
	return Result{Message: "deleted " + strconv.Itoa(n) + " ACLs"}
}

func (s *State) alterScram(c AlterScram) Result {
	seen := map[ScramKey]bool{}
	for _, u := range c.Upserts {
		if e, msg := checkScram(u); e != nil {
			return failed(e, "%s: %s", u.User, msg)
		}
		k := ScramKey{u.User, u.Mechanism}
		if seen[k] {
			return failed(kerr.DuplicateResource, "%s %s named twice", u.User, u.Mechanism)
		}
		seen[k] = true
	}
	for _, d := range c.Deletes {
		if ScramKeyLen(d.Mechanism) == 0 {
			return failed(kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism %s", d.Mechanism)
		}
		if seen[d] {
			return failed(kerr.DuplicateResource, "%s %s named twice", d.User, d.Mechanism)
		}
		seen[d] = true
		if _, ok := s.sec.scram[d]; !ok {
			return failed(kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist: %s %s", d.User, d.Mechanism)
		}
	}
	if len(s.sec.scram)+len(c.Upserts) > MaxScramUsers {
		return failed(kerr.InvalidRequest, "more than %d SCRAM credentials", MaxScramUsers)
	}
	for _, d := range c.Deletes {
		delete(s.sec.scram, d)
	}
	for _, u := range c.Upserts {
		s.sec.scram[ScramKey{u.User, u.Mechanism}] = u
	}
	s.changedSecurity(SecurityScram)
	return Result{}
}

func (s *State) alterClientQuotas(c AlterClientQuotas) Result {
	for _, op := range c.Ops {
		if !validQuotaOp(op) {
			return failed(kerr.InvalidRequest, "invalid quota operation %+v", op)
		}
	}
	if len(s.sec.quotas)+len(c.Ops) > MaxQuotaEntities {
		return failed(kerr.InvalidRequest, "more than %d quota entities", MaxQuotaEntities)
	}
	for _, op := range c.Ops {
		s.applyQuotaOp(op, false)
	}
	s.changedSecurity(SecurityQuotas)
	return Result{}
}

// applyQuotaOp applies op; ifAbsent leaves a key the entity already sets.
func (s *State) applyQuotaOp(op QuotaOp, ifAbsent bool) {
	vs := s.sec.quotas[op.Entity]
	if op.Remove {
		delete(vs, op.Key)
		if len(vs) == 0 {
			delete(s.sec.quotas, op.Entity)
		}
		return
	}
	if vs == nil {
		vs = map[string]float64{}
		s.sec.quotas[op.Entity] = vs
	}
	if _, has := vs[op.Key]; has && ifAbsent {
		return
	}
	vs[op.Key] = op.Value
}

func (s *State) seedSecurity(c SeedSecurity) Result {
	if c.Kinds&^securityAll != 0 {
		return failed(kerr.InvalidRequest, "unknown security kinds %#x", c.Kinds)
	}
	for _, a := range c.ACLs {
		if !validACL(a) {
			return failed(kerr.InvalidRequest, "invalid ACL %+v", a)
		}
	}
	for _, u := range c.Scram {
		if e, msg := checkScram(u); e != nil {
			return failed(e, "%s: %s", u.User, msg)
		}
	}
	for _, op := range c.Quotas {
		if !validQuotaOp(op) || op.Remove {
			return failed(kerr.InvalidRequest, "invalid quota %+v", op)
		}
	}
	if len(s.sec.acls)+len(c.ACLs) > MaxACLs || len(s.sec.scram)+len(c.Scram) > MaxScramUsers ||
		len(s.sec.quotas)+len(c.Quotas) > MaxQuotaEntities {
		return failed(kerr.InvalidRequest, "seed too large")
	}
	todo := c.Kinds &^ s.sec.seeded
	if todo == 0 {
		return Result{Message: "already seeded"}
	}
	if todo&SecurityACLs != 0 {
		for _, a := range c.ACLs {
			s.sec.acls[a] = struct{}{}
		}
	}
	if todo&SecurityScram != 0 {
		for _, u := range c.Scram {
			k := ScramKey{u.User, u.Mechanism}
			if _, has := s.sec.scram[k]; !has {
				s.sec.scram[k] = u
			}
		}
	}
	if todo&SecurityQuotas != 0 {
		for _, op := range c.Quotas {
			s.applyQuotaOp(op, true)
		}
	}
	s.changedSecurity(todo)
	return Result{Message: "seeded"}
}

// checkSecurity verifies the security part's invariants (Check).
func (s *State) checkSecurity() string {
	if s.sec.seeded&^securityAll != 0 || s.sec.offset < 0 || s.sec.offset > s.offset {
		return "security seeded/offset out of range"
	}
	for a := range s.sec.acls {
		if !validACL(a) {
			return "invalid ACL"
		}
	}
	for k, c := range s.sec.scram {
		if k.User != c.User || k.Mechanism != c.Mechanism {
			return "SCRAM key mismatch"
		}
		if e, _ := checkScram(c); e != nil {
			return "invalid SCRAM credential"
		}
	}
	for e, vs := range s.sec.quotas {
		if len(vs) == 0 {
			return "quota entity without values"
		}
		for k, v := range vs {
			if !validQuotaOp(QuotaOp{Entity: e, Key: k, Value: v}) {
				return "invalid quota"
			}
		}
	}
	return ""
}

// ---- encoding ----

func appendACL(b []byte, a ACL) []byte {
	b = appendInt(b, int64(a.ResourceType))
	b = appendString(b, a.ResourceName)
	b = appendInt(b, int64(a.PatternType))
	b = appendString(b, a.Principal)
	b = appendString(b, a.Host)
	b = appendInt(b, int64(a.Operation))
	return appendInt(b, int64(a.Permission))
}

func (r *reader) int8() int8 {
	v := r.int64()
	if v < math.MinInt8 || v > math.MaxInt8 {
		r.fail("int8 out of range")
		return 0
	}
	return int8(v)
}

func readACL(r *reader) ACL {
	return ACL{ResourceType: r.int8(), ResourceName: r.string(), PatternType: r.int8(), Principal: r.string(),
		Host: r.string(), Operation: r.int8(), Permission: r.int8()}
}

func appendACLs(b []byte, as []ACL) []byte {
	b = appendCount(b, len(as))
	for _, a := range as {
		b = appendACL(b, a)
	}
	return b
}

func readACLs(r *reader) []ACL {
	n := r.count(7)
	if r.err != nil || n == 0 {
		return nil
	}
	out := make([]ACL, n)
	for i := range out {
		out[i] = readACL(r)
	}
	return out
}

func appendScram(b []byte, c ScramCredential) []byte {
	b = appendString(b, c.User)
	b = appendString(b, c.Mechanism)
	b = appendString(b, string(c.Salt))
	b = appendString(b, string(c.StoredKey))
	b = appendString(b, string(c.ServerKey))
	return appendInt(b, int64(c.Iterations))
}

func readScram(r *reader) ScramCredential {
	return ScramCredential{User: r.string(), Mechanism: r.string(), Salt: []byte(r.string()),
		StoredKey: []byte(r.string()), ServerKey: []byte(r.string()), Iterations: r.int32()}
}

func appendScrams(b []byte, cs []ScramCredential) []byte {
	b = appendCount(b, len(cs))
	for _, c := range cs {
		b = appendScram(b, c)
	}
	return b
}

func readScrams(r *reader) []ScramCredential {
	n := r.count(6)
	if r.err != nil || n == 0 {
		return nil
	}
	out := make([]ScramCredential, n)
	for i := range out {
		out[i] = readScram(r)
	}
	return out
}

func appendQuotaName(b []byte, n QuotaName) []byte {
	b = appendBool(b, n.Set)
	b = appendBool(b, n.Default)
	return appendString(b, n.Name)
}

func readQuotaName(r *reader) QuotaName {
	return QuotaName{Set: r.bool(), Default: r.bool(), Name: r.string()}
}

func appendEntity(b []byte, e QuotaEntity) []byte {
	return appendQuotaName(appendQuotaName(b, e.User), e.ClientID)
}

func readEntity(r *reader) QuotaEntity {
	return QuotaEntity{User: readQuotaName(r), ClientID: readQuotaName(r)}
}

func appendFloat(b []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(b, math.Float64bits(v))
}

// float reads appendFloat's encoding; a NaN is refused (no quota is one,
// and it would not equal itself after a round trip).
func (r *reader) float() float64 {
	v := r.bytes(8)
	if len(v) != 8 {
		return 0
	}
	f := math.Float64frombits(binary.BigEndian.Uint64(v))
	if math.IsNaN(f) {
		r.fail("NaN")
		return 0
	}
	return f
}

func appendQuotaOps(b []byte, ops []QuotaOp) []byte {
	b = appendCount(b, len(ops))
	for _, op := range ops {
		b = appendEntity(b, op.Entity)
		b = appendString(b, op.Key)
		b = appendFloat(b, op.Value)
		b = appendBool(b, op.Remove)
	}
	return b
}

func readQuotaOps(r *reader) []QuotaOp {
	n := r.count(16)
	if r.err != nil || n == 0 {
		return nil
	}
	out := make([]QuotaOp, n)
	for i := range out {
		out[i] = QuotaOp{Entity: readEntity(r), Key: r.string(), Value: r.float(), Remove: r.bool()}
	}
	return out
}

func (c CreateACLs) appendBody(b []byte) []byte { return appendACLs(b, c.ACLs) }
func (c DeleteACLs) appendBody(b []byte) []byte { return appendACLs(b, c.ACLs) }

func (c AlterScram) appendBody(b []byte) []byte {
	b = appendScrams(b, c.Upserts)
	b = appendCount(b, len(c.Deletes))
	for _, d := range c.Deletes {
		b = appendString(b, d.User)
		b = appendString(b, d.Mechanism)
	}
	return b
}

func readAlterScram(r *reader) AlterScram {
	c := AlterScram{Upserts: readScrams(r)}
	n := r.count(2)
	if r.err != nil || n == 0 {
		return c
	}
	c.Deletes = make([]ScramKey, n)
	for i := range c.Deletes {
		c.Deletes[i] = ScramKey{User: r.string(), Mechanism: r.string()}
	}
	return c
}

func (c AlterClientQuotas) appendBody(b []byte) []byte { return appendQuotaOps(b, c.Ops) }

func (c SeedSecurity) appendBody(b []byte) []byte {
	b = append(b, c.Kinds)
	b = appendACLs(b, c.ACLs)
	b = appendScrams(b, c.Scram)
	return appendQuotaOps(b, c.Quotas)
}

func readSeedSecurity(r *reader) SeedSecurity {
	return SeedSecurity{Kinds: r.u8(), ACLs: readACLs(r), Scram: readScrams(r), Quotas: readQuotaOps(r)}
}

// decodeSecurityCommand decodes the body of a security command type.
func decodeSecurityCommand(t CommandType, r *reader) (Command, bool) {
	switch t {
	case TypeCreateACLs:
		return CreateACLs{ACLs: readACLs(r)}, true
	case TypeDeleteACLs:
		return DeleteACLs{ACLs: readACLs(r)}, true
	case TypeAlterScram:
		return readAlterScram(r), true
	case TypeAlterClientQuotas:
		return AlterClientQuotas{Ops: readQuotaOps(r)}, true
	case TypeSeedSecurity:
		return readSeedSecurity(r), true
	}
	return nil, false
}

// appendSecurity appends the State's security part (version 3): seeded,
// offset, ACLs sorted, credentials sorted, quotas sorted by entity then key.
func (s *State) appendSecurity(dst []byte) []byte {
	dst = append(dst, s.sec.seeded)
	dst = appendInt(dst, s.sec.offset)
	dst = appendACLs(dst, s.ACLs())
	dst = appendScrams(dst, s.ScramCredentials())
	qs := s.ClientQuotas()
	dst = appendCount(dst, len(qs))
	for _, q := range qs {
		dst = appendEntity(dst, q.Entity)
		keys := make([]string, 0, len(q.Values))
		for k := range q.Values {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = appendCount(dst, len(keys))
		for _, k := range keys {
			dst = appendString(dst, k)
			dst = appendFloat(dst, q.Values[k])
		}
	}
	return dst
}

// readSecurity reads appendSecurity's encoding into s, checking the
// canonical order (which also rules out duplicates).
func (s *State) readSecurity(r *reader) {
	s.sec.seeded = r.u8()
	s.sec.offset = r.int64()
	as := readACLs(r)
	for i, a := range as {
		if i > 0 && compareACL(as[i-1], a) >= 0 {
			r.fail("ACLs not ascending")
			return
		}
		s.sec.acls[a] = struct{}{}
	}
	cs := readScrams(r)
	for i, c := range cs {
		if i > 0 && cmp.Or(strings.Compare(cs[i-1].User, c.User), strings.Compare(cs[i-1].Mechanism, c.Mechanism)) >= 0 {
			r.fail("credentials not ascending")
			return
		}
		s.sec.scram[ScramKey{c.User, c.Mechanism}] = c
	}
	n := r.count(7)
	var prev QuotaEntity
	for i := 0; i < n && r.err == nil; i++ {
		e := readEntity(r)
		if i > 0 && compareEntity(prev, e) >= 0 {
			r.fail("quota entities not ascending")
			return
		}
		prev = e
		m := r.count(9)
		vs := make(map[string]float64, m)
		last := ""
		for j := 0; j < m && r.err == nil; j++ {
			k, v := r.string(), r.float()
			if j > 0 && k <= last {
				r.fail("quota keys not ascending")
				return
			}
			last = k
			vs[k] = v
		}
		s.sec.quotas[e] = vs
	}
}
