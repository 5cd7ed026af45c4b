package sasl

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// Kafka's login modules.
const (
	PlainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// JAAS is one parsed sasl.jaas.config value:
//
//	<login module class> <required|requisite|sufficient|optional> key="value" ... ;
type JAAS struct {
	Module  string
	Flag    string
	Options map[string]string
}

// ParseJAAS parses a sasl.jaas.config value as Kafka's JaasConfig does:
// one login module, its control flag, options (values double-quoted, with
// backslash escapes, or bare) and a closing semicolon. Errors never quote
// an option's value (it may be a password).
func ParseJAAS(v string) (JAAS, error) {
	p := &jaasLexer{s: v}
	var j JAAS
	j.Module = p.word()
	if j.Module == "" {
		return j, errors.New("expected a login module class")
	}
	j.Flag = strings.ToLower(p.word())
	switch j.Flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return j, errors.New("login module " + j.Module + ": expected a control flag (required, requisite, sufficient, optional)")
	}
	j.Options = map[string]string{}
	for {
		p.space()
		if p.eof() {
			return j, errors.New("login module " + j.Module + ": missing the closing ';'")
		}
		if p.s[p.i] == ';' {
			p.i++
			p.space()
			if !p.eof() {
				return j, errors.New("only one login module is supported per sasl.jaas.config")
			}
			return j, nil
		}
		key := p.until("=; \t\r\n")
		p.space()
		if key == "" || p.eof() || p.s[p.i] != '=' {
			return j, errors.New("login module " + j.Module + ": expected key=value after " + strconv.Quote(key))
		}
		p.i++
		p.space()
		val, err := p.value()
		if err != nil {
			return j, errors.New("login module " + j.Module + ": option " + key + ": " + err.Error())
		}
		j.Options[key] = val
	}
}

type jaasLexer struct {
	s string
	i int
}

func (p *jaasLexer) eof() bool { return p.i >= len(p.s) }
func (p *jaasLexer) space() {
	for !p.eof() && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}
func (p *jaasLexer) word() string { p.space(); return p.until(" \t\r\n;") }
func (p *jaasLexer) until(stop string) string {
	start := p.i
	for !p.eof() && strings.IndexByte(stop, p.s[p.i]) < 0 {
		p.i++
	}
	return p.s[start:p.i]
}
func (p *jaasLexer) value() (string, error) {
	if p.eof() {
		return "", errors.New("no value")
	}
	if p.s[p.i] != '"' {
		v := p.until(" \t\r\n;")
		if v == "" {
			return "", errors.New("no value")
		}
		return v, nil
	}
	p.i++
	var b strings.Builder
	for !p.eof() {
		c := p.s[p.i]
		p.i++
		switch c {
		case '\\':
			if p.eof() {
				return "", errors.New("unterminated quoted value")
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case '"':
			return b.String(), nil
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("unterminated quoted value")
}

// PlainUsers returns the static users of a PlainLoginModule's options
// (user_<name>="<password>").
func (j JAAS) PlainUsers() map[string]string {
	out := map[string]string{}
	for k, v := range j.Options {
		if name, ok := strings.CutPrefix(k, "user_"); ok && name != "" {
			out[name] = v
		}
	}
	return out
}

// ParseScramCredentials parses Kafka's `kafka-storage format --add-scram`
// syntax, one or more entries separated by ';' or whitespace:
//
//	SCRAM-SHA-256=[name=alice,password=alice-secret]
//	SCRAM-SHA-512=[name=alice,iterations=8192,salt="c2FsdA==",saltedpassword="..."]
//
// A password entry is salted here with a random salt (iterations
// default 4096); the salted form keeps the password out of the file.
func ParseScramCredentials(v string, add func(user, mech string, c ScramCredential)) error {
	rest := strings.TrimSpace(v)
	for rest != "" {
		mech, after, ok := strings.Cut(rest, "=[")
		mech = strings.TrimSpace(mech)
		if !ok {
			return errors.New("expected MECHANISM=[name=...,password=...]")
		}
		if !IsScram(mech) {
			return errors.New(strconv.Quote(mech) + " is not SCRAM-SHA-256 or SCRAM-SHA-512")
		}
		body, tail, ok := strings.Cut(after, "]")
		if !ok {
			return errors.New(mech + ": missing ']'")
		}
		rest = strings.TrimLeft(tail, " \t\r\n;,")
		opts := map[string]string{}
		for _, kv := range strings.Split(body, ",") {
			k, val, ok := strings.Cut(kv, "=")
			k = strings.ToLower(strings.TrimSpace(k))
			if !ok || k == "" {
				return errors.New(mech + ": expected key=value")
			}
			val = strings.TrimSpace(val)
			if uq, err := strconv.Unquote(val); err == nil && strings.HasPrefix(val, `"`) {
				val = uq
			}
			opts[k] = val
		}
		name := opts["name"]
		if name == "" {
			return errors.New(mech + ": no name")
		}
		iter := MinIterations
		if s, ok := opts["iterations"]; ok {
			n, err := strconv.Atoi(s)
			if err != nil || n < MinIterations || n > MaxIterations {
				return errors.New(mech + " user " + name + ": iterations must be between 4096 and 16384")
			}
			iter = n
		}
		var cred ScramCredential
		var err error
		switch pw, hasPW := opts["password"]; {
		case hasPW && opts["saltedpassword"] == "":
			cred, err = NewCredential(mech, pw, iter)
		case !hasPW:
			salt, err1 := base64.StdEncoding.DecodeString(opts["salt"])
			salted, err2 := base64.StdEncoding.DecodeString(opts["saltedpassword"])
			if err1 != nil || err2 != nil {
				return errors.New(mech + " user " + name + ": salt and saltedpassword must be base64")
			}
			cred, err = CredentialFromSalted(mech, salted, salt, iter)
		default:
			return errors.New(mech + " user " + name + ": give password or salt and saltedpassword, not both")
		}
		if err != nil {
			return errors.New(mech + " user " + name + ": " + err.Error())
		}
		add(name, mech, cred)
	}
	return nil
}
