package auth

import (
	"cmp"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/internal/vfs"
)

// Config is the authorizer's broker keys.
type Config struct {
	// SuperUsers are super.users: principals allowed everything.
	SuperUsers []string
	// AllowIfNoACL is allow.everyone.if.no.acl.found: a resource with no
	// ACL at all is open to everyone (Kafka's default: false).
	AllowIfNoACL bool
}

// ParseSuperUsers splits a super.users value: principals separated by
// semicolons (spaces around each trimmed, empty entries dropped).
func ParseSuperUsers(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Authorizer holds the ACLs and answers Authorize. A non-empty path keeps
// them in that file (JSON, rewritten atomically on every change). Safe
// for concurrent use: Authorize reads an immutable snapshot.
type Authorizer struct {
	cfg   Config
	super map[string]bool
	path  string

	mu   sync.Mutex // serialises changes (and their file writes)
	snap atomic.Pointer[index]
}

// index is an immutable set of bindings, indexed by resource type and
// pattern: literal names, and prefixes.
type index struct {
	all      []Binding
	literal  map[resKey][]Binding
	prefixed map[resKey][]Binding
	// longest prefix per resource type, to bound the prefix walk
	maxPrefix map[ResourceType]int
}

type resKey struct {
	t    ResourceType
	name string
}

func newIndex(all []Binding) *index {
	ix := &index{all: all, literal: map[resKey][]Binding{}, prefixed: map[resKey][]Binding{}, maxPrefix: map[ResourceType]int{}}
	for _, b := range all {
		k := resKey{b.ResourceType, b.ResourceName}
		if b.PatternType == PatternPrefixed {
			ix.prefixed[k] = append(ix.prefixed[k], b)
			ix.maxPrefix[b.ResourceType] = max(ix.maxPrefix[b.ResourceType], len(b.ResourceName))
		} else {
			ix.literal[k] = append(ix.literal[k], b)
		}
	}
	return ix
}

// New returns an Authorizer with cfg and no ACLs, kept in memory only.
func New(cfg Config) *Authorizer {
	a := &Authorizer{cfg: cfg, super: map[string]bool{}}
	for _, u := range cfg.SuperUsers {
		a.super[u] = true
	}
	a.snap.Store(newIndex(nil))
	return a
}

// Open returns an Authorizer with cfg and the ACLs kept in path (a
// missing file holds none); changes are written there.
func Open(cfg Config, path string) (*Authorizer, error) {
	a := New(cfg)
	a.path = path
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return a, nil
	}
	if err != nil {
		return nil, err
	}
	var f aclFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, errors.New("auth: " + path + ": " + err.Error())
	}
	for _, acl := range f.ACLs {
		if err := acl.Validate(); err != nil {
			return nil, errors.New("auth: " + path + ": " + acl.String() + ": " + err.Error())
		}
	}
	a.snap.Store(newIndex(dedup(f.ACLs)))
	return a, nil
}

// aclFile is the file's layout.
type aclFile struct {
	ACLs []Binding `json:"acls"`
}

// Config returns the authorizer's settings.
func (a *Authorizer) Config() Config { return a.cfg }

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.super[principal] }

// Authorize reports whether principal connecting from host may perform
// op on the resource (rules in the package doc).
func (a *Authorizer) Authorize(principal, host string, op Operation, rt ResourceType, name string) bool {
	if a.super[principal] {
		return true
	}
	ix := a.snap.Load()
	var found, allow bool
	check := func(bs []Binding) bool { // true: a DENY applies
		for _, b := range bs {
			found = true
			applies, allows := b.decide(principal, host, op)
			if !applies {
				continue
			}
			if !allows {
				return true
			}
			allow = true
		}
		return false
	}
	if check(ix.literal[resKey{rt, name}]) {
		return false
	}
	if name != WildcardResource && check(ix.literal[resKey{rt, WildcardResource}]) {
		return false
	}
	if len(ix.prefixed) > 0 {
		for i := min(len(name), ix.maxPrefix[rt]); i >= 1; i-- {
			if check(ix.prefixed[resKey{rt, name[:i]}]) {
				return false
			}
		}
	}
	if allow {
		return true
	}
	if !found {
		return a.cfg.AllowIfNoACL
	}
	return false
}

// Describe returns the bindings f selects, in a stable order.
func (a *Authorizer) Describe(f Filter) []Binding {
	var out []Binding
	for _, b := range a.snap.Load().all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// All returns every binding.
func (a *Authorizer) All() []Binding { return slices.Clone(a.snap.Load().all) }

// Create adds bindings (each must Validate; one already present is not
// added twice) and writes the file; nothing changes on an error.
func (a *Authorizer) Create(bs []Binding) error {
	for _, b := range bs {
		if err := b.Validate(); err != nil {
			return err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	next := dedup(append(slices.Clone(a.snap.Load().all), bs...))
	return a.commitLocked(next)
}

// Delete removes the bindings each filter selects and returns them per
// filter (a binding selected by several filters is returned for each, as
// Kafka does); the file is written first: nothing changes on an error.
func (a *Authorizer) Delete(fs []Filter) ([][]Binding, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.snap.Load().all
	out := make([][]Binding, len(fs))
	gone := make([]bool, len(cur))
	for i, f := range fs {
		for j, b := range cur {
			if f.Matches(b) {
				out[i] = append(out[i], b)
				gone[j] = true
			}
		}
	}
	var next []Binding
	for j, b := range cur {
		if !gone[j] {
			next = append(next, b)
		}
	}
	if len(next) == len(cur) {
		return out, nil
	}
	if err := a.commitLocked(next); err != nil {
		return nil, err
	}
	return out, nil
}

// Replace makes bs (each must Validate) the whole set of ACLs and writes
// the file: in a cluster the replicated metadata's ACLs, applied by every
// broker (the file is then this broker's copy of them, read at start-up
// until it catches up). Nothing changes on an error.
func (a *Authorizer) Replace(bs []Binding) error {
	for _, b := range bs {
		if err := b.Validate(); err != nil {
			return err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	next := dedup(slices.Clone(bs))
	if slices.Equal(next, a.snap.Load().all) {
		return nil
	}
	return a.commitLocked(next)
}

func (a *Authorizer) commitLocked(next []Binding) error {
	if a.path != "" {
		f := aclFile{ACLs: next}
		if f.ACLs == nil {
			f.ACLs = []Binding{}
		}
		b, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			return err
		}
		if err := vfs.WriteFileAtomic(a.path, append(b, '\n')); err != nil {
			return err
		}
	}
	a.snap.Store(newIndex(next))
	return nil
}

// dedup sorts bs and drops duplicates.
func dedup(bs []Binding) []Binding {
	slices.SortFunc(bs, compareBindings)
	return slices.Compact(bs)
}

func compareBindings(x, y Binding) int {
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

// AuthorizeByResourceType reports whether principal may perform op on at
// least one resource of type rt, as Kafka's
// Authorizer.authorizeByResourceType (InitProducerId without a
// transactional id asks it for Write on topics): a super user, or the
// rules allow op on a made-up literal name (allow.everyone.if.no.acl.found
// with no ACLs for it), or an ALLOW of op (or All; no implication) that
// applies — literal "*", or a literal or prefixed name not dominated by a
// DENY (the same literal name, or a prefixed DENY that is a prefix of
// it); a literal "*" DENY denies.
func (a *Authorizer) AuthorizeByResourceType(principal, host string, op Operation, rt ResourceType) bool {
	if a.Authorize(principal, host, op, rt, "hardcode") {
		return true
	}
	denyLit, denyPre := map[string]bool{}, map[string]bool{}
	var allowLit, allowPre []string
	wildAllow := false
	for _, b := range a.snap.Load().all {
		if b.ResourceType != rt || (b.Host != host && b.Host != WildcardHost) ||
			(b.Principal != principal && b.Principal != WildcardPrincipal) || (b.Operation != op && b.Operation != OpAll) {
			continue
		}
		switch {
		case b.Permission == PermissionDeny && b.PatternType == PatternLiteral:
			if b.ResourceName == WildcardResource {
				return false
			}
			denyLit[b.ResourceName] = true
		case b.Permission == PermissionDeny:
			denyPre[b.ResourceName] = true
		case b.PatternType == PatternLiteral && b.ResourceName == WildcardResource:
			wildAllow = true
		case b.PatternType == PatternLiteral:
			allowLit = append(allowLit, b.ResourceName)
		default:
			allowPre = append(allowPre, b.ResourceName)
		}
	}
	if wildAllow {
		return true
	}
	dominated := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if denyPre[name[:i]] {
				return true
			}
		}
		return false
	}
	for _, n := range allowLit {
		if !denyLit[n] && !dominated(n) {
			return true
		}
	}
	for _, n := range allowPre {
		if !dominated(n) {
			return true
		}
	}
	return false
}
