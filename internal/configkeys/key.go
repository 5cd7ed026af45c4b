// Package configkeys is the one table of Strata's configuration keys: for
// each key its Kafka names (topic and broker, with the broker synonyms),
// type, range, default, documentation and the scopes at which it may be
// changed at runtime. Everything that names a key reads it from here:
// the properties file and flags of `strata serve` (internal/config), a
// partition log's settings (engine.LogConfig), DescribeConfigs,
// AlterConfigs and IncrementalAlterConfigs (server), and the README's
// tables (generated: see readme.go).
//
// The package is a leaf: it imports nothing of Strata, so the broker's
// configuration (cmd, internal/config) and the layers it configures
// (engine, server) meet here without importing each other.
//
// # Names, scopes and synonyms
//
// A topic key that the broker defaults has two names, as in Kafka: the
// topic name (segment.bytes) and the broker name whose value every topic
// without an override takes (log.segment.bytes). A broker name may have
// synonyms of lower precedence, possibly in another unit
// (log.retention.minutes, log.retention.hours for log.retention.ms;
// broker.id for node.id): the first name present wins, as Kafka's
// brokerConfigSynonyms order them.
//
// # Values
//
// Values are parsed as Kafka's ConfigDef parses them: surrounding spaces
// trimmed, booleans true or false in any case, integers in decimal within
// the type's range and the key's, doubles not NaN, lists split at commas.
// A value's canonical text (Value.Text) is what DescribeConfigs reports.
//
// # Errors
//
// A refused key or value wraps one of ErrUnknown, ErrInvalid or
// ErrReadOnly; ErrorCode gives the Kafka error code each is answered with.
package configkeys

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Type is a key's type; the values are Kafka's ConfigType codes as
// DescribeConfigs v3+ sends them.
type Type int8

// Kafka's config types.
const (
	Boolean  Type = 1
	String   Type = 2
	Int      Type = 3 // int32
	Short    Type = 4 // int16
	Long     Type = 5 // int64
	Double   Type = 6
	List     Type = 7 // comma-separated
	Password Type = 9
)

func (t Type) String() string {
	switch t {
	case Boolean:
		return "boolean"
	case String:
		return "string"
	case Int:
		return "int"
	case Short:
		return "short"
	case Long:
		return "long"
	case Double:
		return "double"
	case List:
		return "list"
	case Password:
		return "password"
	}
	return fmt.Sprintf("Type(%d)", int8(t))
}

// integer reports whether values of t are whole numbers, and their range.
func (t Type) integer() (lo, hi int64, ok bool) {
	switch t {
	case Int:
		return math.MinInt32, math.MaxInt32, true
	case Short:
		return math.MinInt16, math.MaxInt16, true
	case Long:
		return math.MinInt64, math.MaxInt64, true
	}
	return 0, 0, false
}

// Scope is where a key is set: on the broker (properties file, flags,
// BROKER resources) or on a topic (CreateTopics, TOPIC resources); a set
// of both for a topic key the broker defaults.
type Scope uint8

// Scopes.
const (
	Broker Scope = 1 << iota
	Topic
)

func (s Scope) String() string {
	switch s {
	case 0:
		return "none"
	case Broker:
		return "broker"
	case Topic:
		return "topic"
	case Broker | Topic:
		return "broker, topic"
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// Synonym is another broker name of a key, of lower precedence than the
// key's Broker name. Its values are whole numbers of Scale of the key's
// unit (log.retention.hours: 3,600,000 ms); Scale 0 means the same unit.
type Synonym struct {
	Name  string
	Scale int64
}

// Key is one configuration key.
type Key struct {
	// Topic is the topic-level name ("" for a broker-only key) and Broker
	// the broker-level one ("" for a topic-only key). A topic key with a
	// Broker name takes that broker key's value as its default.
	Topic, Broker string
	// Synonyms are further broker names, in precedence order after Broker.
	Synonyms []Synonym
	// Dynamic holds the scopes at which AlterConfigs and
	// IncrementalAlterConfigs may change the key while the broker runs;
	// at any other scope it is read-only (set in the properties file).
	Dynamic Scope
	// PerBroker marks a key dynamic at the broker only for one broker (a
	// BROKER resource named by its id), not as the cluster-wide default,
	// as Kafka's per-broker configs (the SSL stores).
	PerBroker bool
	Type      Type
	// Min and Max bound an integer key (both zero: the type's range);
	// MinFloat and MaxFloat a Double key (both zero: any number but NaN).
	Min, Max           int64
	MinFloat, MaxFloat float64
	// Values lists the allowed values of a String key, or the allowed
	// items of a List key (each at most once, at least one).
	Values []string
	// Check is a further validation of the trimmed value (listeners: an
	// address), nil if none.
	Check func(v string) error
	// Default is the value used when the key is not set, as DescribeConfigs
	// reports it; "" means none (the value is then derived or absent, see
	// Shown).
	Default string
	// Shown is the README's rendering of the default when the plain value
	// would not read well ("7 days"; "the listen address" for none).
	Shown string
	// Strata marks a key Kafka does not have, or a default that differs
	// from Kafka's (the README says "Strata:").
	Strata bool
	// Log marks a partition log's setting: a field of engine.LogConfig,
	// applied by the engine to every partition of the topic.
	Log bool
	// Flag is the `strata serve` flag that sets the key ("" if none).
	Flag string
	// Section is the README table that lists the key: "serve", "security", "cluster"
	// or "transactions".
	Section string
	// Doc says what the key does (README, DescribeConfigs documentation).
	Doc string
}

// Scope returns the scopes at which the key can be set.
func (k *Key) Scope() Scope {
	var s Scope
	if k.Broker != "" {
		s |= Broker
	}
	if k.Topic != "" {
		s |= Topic
	}
	return s
}

// Name is the key's name at scope s (Topic or Broker), "" if it has none.
func (k *Key) Name(s Scope) string {
	if s == Topic {
		return k.Topic
	}
	return k.Broker
}

// BrokerNames are the key's broker names in precedence order: Broker,
// then the synonyms.
func (k *Key) BrokerNames() []string {
	if k.Broker == "" {
		return nil
	}
	out := []string{k.Broker}
	for _, s := range k.Synonyms {
		out = append(out, s.Name)
	}
	return out
}

// ReadOnly reports whether the key cannot be changed at runtime at scope s.
func (k *Key) ReadOnly(s Scope) bool { return k.Dynamic&s == 0 }

// Errors of a refused key or value. ErrorCode gives each one's Kafka code.
var (
	ErrUnknown  = errors.New("unknown config")
	ErrInvalid  = errors.New("invalid config value")
	ErrReadOnly = errors.New("config cannot be updated dynamically")
)

// Kafka's error codes for refused configs.
const (
	CodeInvalidConfig  int16 = 40 // INVALID_CONFIG
	CodeInvalidRequest int16 = 42 // INVALID_REQUEST
)

// ErrorCode is the Kafka error code a refused config is answered with: an
// unknown key or a bad value is INVALID_CONFIG (Kafka's
// InvalidConfigurationException from LogConfig.validate); a change to a
// read-only key is INVALID_REQUEST (Kafka's answer to a non-dynamic broker
// key, KAFKA-13609). 0 for nil and for errors of other kinds.
func ErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrReadOnly):
		return CodeInvalidRequest
	case errors.Is(err, ErrUnknown), errors.Is(err, ErrInvalid):
		return CodeInvalidConfig
	}
	return 0
}

// keyError is a refused key or value: kind is one of the Err sentinels.
type keyError struct {
	kind   error
	name   string
	value  string
	reason string
}

func (e *keyError) Error() string {
	if e.kind == ErrInvalid {
		return fmt.Sprintf("%s=%q: %s", e.name, e.value, e.reason)
	}
	return fmt.Sprintf("%s: %s: %s", e.kind, e.name, e.reason)
}

func (e *keyError) Unwrap() error { return e.kind }

func invalid(name, value, format string, args ...any) error {
	return &keyError{kind: ErrInvalid, name: name, value: value, reason: fmt.Sprintf(format, args...)}
}

// Value is a parsed value.
type Value struct {
	Text  string  // canonical text: what DescribeConfigs reports
	Int   int64   // Int, Short and Long keys
	Float float64 // Double keys
	Bool  bool    // Boolean keys
}

// Items splits a List value's text.
func (v Value) Items() []string {
	if v.Text == "" {
		return nil
	}
	return strings.Split(v.Text, ",")
}

// Parse checks v against the key's type, range, allowed values and Check,
// and returns it parsed. Errors wrap ErrInvalid and name the key by its
// topic name if it has one.
func (k *Key) Parse(v string) (Value, error) {
	name := k.Topic
	if name == "" {
		name = k.Broker
	}
	return k.parse(name, v, 1)
}

// parse parses v as name's value, a whole number of scale units of the
// key (scale 1: the key's own name).
func (k *Key) parse(name, v string, scale int64) (Value, error) {
	t := strings.TrimSpace(v)
	if lo, hi, ok := k.Type.integer(); ok {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return Value{}, invalid(name, v, "not an integer")
		}
		if n < lo || n > hi {
			return Value{}, invalid(name, v, "out of the %s range [%d, %d]", k.Type, lo, hi)
		}
		if scale != 1 {
			if n > math.MaxInt64/scale || n < math.MinInt64/scale {
				return Value{}, invalid(name, v, "%d × %d overflows", n, scale)
			}
			n *= scale
		}
		if (k.Min != 0 || k.Max != 0) && (n < k.Min || n > k.Max) {
			if scale != 1 {
				return Value{}, invalid(name, v, "%d is %d in %s, out of range [%d, %d]", n/scale, n, k.Broker, k.Min, k.Max)
			}
			return Value{}, invalid(name, v, "out of range [%d, %d]", k.Min, k.Max)
		}
		if err := k.check(name, v, t); err != nil {
			return Value{}, err
		}
		return Value{Text: strconv.FormatInt(n, 10), Int: n}, nil
	}
	var out Value
	switch k.Type {
	case Boolean:
		switch strings.ToLower(t) {
		case "true":
			out = Value{Text: "true", Bool: true}
		case "false":
			out = Value{Text: "false"}
		default:
			return Value{}, invalid(name, v, "not true or false")
		}
	case Double:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(f) {
			return Value{}, invalid(name, v, "not a number")
		}
		if (k.MinFloat != 0 || k.MaxFloat != 0) && (f < k.MinFloat || f > k.MaxFloat) {
			return Value{}, invalid(name, v, "out of range [%v, %v]", k.MinFloat, k.MaxFloat)
		}
		out = Value{Text: strconv.FormatFloat(f, 'g', -1, 64), Float: f}
	case List:
		items, err := k.parseList(name, v, t)
		if err != nil {
			return Value{}, err
		}
		out = Value{Text: strings.Join(items, ",")}
	default: // String, Password
		if k.Values != nil && !contains(k.Values, t) {
			return Value{}, invalid(name, v, "not one of %s", strings.Join(k.Values, ", "))
		}
		out = Value{Text: t}
	}
	if err := k.check(name, v, t); err != nil {
		return Value{}, err
	}
	return out, nil
}

func (k *Key) parseList(name, v, t string) ([]string, error) {
	var items []string
	for _, p := range strings.Split(t, ",") {
		p = strings.TrimSpace(p)
		if k.Values == nil {
			if p != "" {
				items = append(items, p)
			}
			continue
		}
		if !contains(k.Values, p) {
			return nil, invalid(name, v, "items are %s", strings.Join(k.Values, ", "))
		}
		if contains(items, p) {
			return nil, invalid(name, v, "lists %s twice", p)
		}
		items = append(items, p)
	}
	return items, nil
}

func (k *Key) check(name, v, t string) error {
	if k.Check == nil {
		return nil
	}
	if err := k.Check(t); err != nil {
		return invalid(name, v, "%v", err)
	}
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// index maps every name to its key: topic names, broker names and
// synonyms (each with its scale).
type index struct {
	topic  map[string]*Key
	broker map[string]brokerName
}

type brokerName struct {
	key   *Key
	scale int64
}

var byName = func() index {
	ix := index{topic: map[string]*Key{}, broker: map[string]brokerName{}}
	for i := range keys {
		k := &keys[i]
		if k.Topic != "" {
			ix.topic[k.Topic] = k
		}
		if k.Broker != "" {
			ix.broker[k.Broker] = brokerName{k, 1}
		}
		for _, s := range k.Synonyms {
			scale := s.Scale
			if scale == 0 {
				scale = 1
			}
			ix.broker[s.Name] = brokerName{k, scale}
		}
	}
	return ix
}()

// All returns every key, in the table's order (the README's).
func All() []*Key {
	out := make([]*Key, len(keys))
	for i := range keys {
		out[i] = &keys[i]
	}
	return out
}

// TopicKey returns the key of a topic-level name.
func TopicKey(name string) (*Key, bool) {
	k, ok := byName.topic[name]
	return k, ok
}

// BrokerKey returns the key of a broker-level name or synonym.
func BrokerKey(name string) (*Key, bool) {
	b, ok := byName.broker[name]
	return b.key, ok
}

// Lookup returns the key named name at scope s (Topic or Broker).
func Lookup(s Scope, name string) (*Key, bool) {
	if s == Topic {
		return TopicKey(name)
	}
	return BrokerKey(name)
}

// ParseBroker parses the value of a broker name or synonym. It returns the
// key, the value's canonical text in name's own unit (what DescribeConfigs
// reports for that name) and the value in the key's unit (for
// log.retention.hours=1: "1" and 3600000). An unknown name wraps
// ErrUnknown, a bad value ErrInvalid.
func ParseBroker(name, v string) (*Key, string, Value, error) {
	b, ok := byName.broker[name]
	if !ok {
		return nil, "", Value{}, &keyError{kind: ErrUnknown, name: name, reason: "not a broker config"}
	}
	val, err := b.key.parse(name, v, b.scale)
	if err != nil {
		return nil, "", Value{}, err
	}
	own := val.Text
	if b.scale != 1 {
		own = strconv.FormatInt(val.Int/b.scale, 10)
	}
	return b.key, own, val, nil
}

// CheckAlter checks one change AlterConfigs or IncrementalAlterConfigs
// asks for at scope s: the name must be a key of that scope (else
// ErrUnknown) that is dynamic there (else ErrReadOnly) and the value, if
// not nil (a deletion), valid (else ErrInvalid).
func CheckAlter(s Scope, name string, value *string) error {
	k, ok := Lookup(s, name)
	if !ok {
		return &keyError{kind: ErrUnknown, name: name, reason: "not a " + s.String() + " config"}
	}
	if k.ReadOnly(s) {
		return &keyError{kind: ErrReadOnly, name: name, reason: "read-only: set it in the broker's properties file"}
	}
	if value == nil {
		return nil
	}
	_, err := k.parse(name, *value, 1)
	return err
}

// TopicDefaults returns the default of every Log key by topic name
// (engine.DefaultLogConfig is built from it).
func TopicDefaults() map[string]string {
	out := map[string]string{}
	for i := range keys {
		if k := &keys[i]; k.Log {
			out[k.Topic] = k.Default
		}
	}
	return out
}

// listenerPrefix opens a per-listener broker name
// (listener.name.<listener>.<key>).
const listenerPrefix = "listener.name."

// SplitListener splits a per-listener name
// (listener.name.external.max.connections) into its listener, lower case
// as Kafka keeps listener names in these keys, and key; ok false for any
// other name.
func SplitListener(name string) (listener, key string, ok bool) {
	rest, found := strings.CutPrefix(name, listenerPrefix)
	if !found {
		return "", "", false
	}
	i := strings.IndexByte(rest, '.')
	if i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// listenerDynamic are the keys that may also be changed at runtime for one
// listener (listener.name.<listener>.<key>), as in Kafka.
var listenerDynamic = map[string]bool{
	"max.connections":              true,
	"max.connection.creation.rate": true,
	"ssl.keystore.location":        true,
	"ssl.truststore.location":      true,
}

// CheckBrokerAlter checks one change of a BROKER resource's dynamic
// configuration (AlterConfigs, IncrementalAlterConfigs): name is a broker
// name or synonym, or a per-listener name of a key that may be set per
// listener; perBroker is true for a broker id and false for the
// cluster-wide default (an empty resource name). An unknown name wraps
// ErrUnknown; a key that is not dynamic at the broker, or that is
// PerBroker and set as the default, ErrReadOnly; a bad value (nil: a
// deletion, not checked) ErrInvalid. It returns the key.
func CheckBrokerAlter(name string, value *string, perBroker bool) (*Key, error) {
	base := name
	if _, key, ok := SplitListener(name); ok {
		if !listenerDynamic[key] {
			return nil, &keyError{kind: ErrReadOnly, name: name, reason: "only " + strings.Join(sortedKeys(listenerDynamic), ", ") + " can be changed at runtime for one listener"}
		}
		base = key
	}
	b, ok := byName.broker[base]
	if !ok {
		return nil, &keyError{kind: ErrUnknown, name: name, reason: "not a broker config"}
	}
	k := b.key
	if k.ReadOnly(Broker) {
		return nil, &keyError{kind: ErrReadOnly, name: name, reason: "read-only: set it in the broker's properties file"}
	}
	if k.PerBroker && !perBroker {
		return nil, &keyError{kind: ErrReadOnly, name: name, reason: "can only be changed for one broker (a BROKER resource named by its id), not as the cluster-wide default"}
	}
	if value == nil {
		return k, nil
	}
	if _, err := k.parse(name, *value, b.scale); err != nil {
		return nil, err
	}
	return k, nil
}

// DynamicBrokerKeys returns the broker names of the keys that can be
// changed at runtime at the broker, in the table's order.
func DynamicBrokerKeys() []string {
	var out []string
	for i := range keys {
		if k := &keys[i]; k.Broker != "" && !k.ReadOnly(Broker) {
			out = append(out, k.Broker)
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
