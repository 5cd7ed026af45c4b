package auth

import (
	"encoding/json"
	"fmt"
)

// The enums are written to acls.json by name (TOPIC, PREFIXED, READ,
// ALLOW), Kafka's spelling, so the file reads as kafka-acls prints; a
// number is read too.

func marshalName(s string) ([]byte, error) { return json.Marshal(s) }

func unmarshalName[T ~int8](b []byte, names map[T]string, what string) (T, error) {
	var n int8
	if err := json.Unmarshal(b, &n); err == nil {
		return T(n), nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf("auth: %s: want a name or a number, got %s", what, b)
	}
	for k, v := range names {
		if v == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("auth: unknown %s %q", what, s)
}

// MarshalJSON writes the type's name.
func (t ResourceType) MarshalJSON() ([]byte, error) { return marshalName(t.String()) }

// UnmarshalJSON reads a name or a code.
func (t *ResourceType) UnmarshalJSON(b []byte) (err error) {
	*t, err = unmarshalName(b, resourceNames, "resource type")
	return err
}

// MarshalJSON writes the pattern type's name.
func (t PatternType) MarshalJSON() ([]byte, error) { return marshalName(t.String()) }

// UnmarshalJSON reads a name or a code.
func (t *PatternType) UnmarshalJSON(b []byte) (err error) {
	*t, err = unmarshalName(b, patternNames, "pattern type")
	return err
}

// MarshalJSON writes the operation's name.
func (o Operation) MarshalJSON() ([]byte, error) { return marshalName(o.String()) }

// UnmarshalJSON reads a name or a code.
func (o *Operation) UnmarshalJSON(b []byte) (err error) {
	*o, err = unmarshalName(b, opNames, "operation")
	return err
}

// MarshalJSON writes the permission's name.
func (p Permission) MarshalJSON() ([]byte, error) { return marshalName(p.String()) }

// UnmarshalJSON reads a name or a code.
func (p *Permission) UnmarshalJSON(b []byte) (err error) {
	*p, err = unmarshalName(b, permNames, "permission")
	return err
}
