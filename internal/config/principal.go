package config

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ssl.principal.mapping.rules, as Kafka's SslPrincipalMapper reads them:
// a comma-separated list of DEFAULT and RULE:pattern/replacement/[LU]
// entries, tried in order; the first whose pattern matches the whole
// distinguished name gives the principal name (the replacement applied,
// then lower- or upper-cased), DEFAULT the name unchanged. No match fails
// the authentication.

// Kafka's patterns (SslPrincipalMapper.RULE_PATTERN, RULE_SPLITTER).
const principalRulePattern = `(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)`

var (
	principalRuleSplitter = regexp.MustCompile(`\s*(` + principalRulePattern + `)\s*(,\s*|$)`)
	principalRuleParser   = regexp.MustCompile(`^(?:` + principalRulePattern + `)`)
	javaGroupRef          = regexp.MustCompile(`\$(\d+)`)
)

type principalRule struct {
	isDefault   bool
	full        *regexp.Regexp // the pattern, anchored: Java's Matcher.matches
	pattern     *regexp.Regexp // unanchored: Java's String.replaceAll
	replacement string         // in Go's syntax
	lower       bool
	upper       bool
	text        string
}

type principalMapper struct{ rules []principalRule }

func parsePrincipalRules(v string) (*principalMapper, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		v = "DEFAULT"
	}
	pm := &principalMapper{}
	for _, m := range principalRuleSplitter.FindAllStringSubmatch(v, -1) {
		rule := m[1]
		loc := principalRuleParser.FindStringSubmatchIndex(rule)
		if loc == nil || loc[1] != len(rule) {
			return nil, fmt.Errorf("invalid rule %q", rule)
		}
		group := func(i int) (string, bool) {
			if loc[2*i] < 0 {
				return "", false
			}
			return rule[loc[2*i]:loc[2*i+1]], true
		}
		if _, ok := group(1); ok {
			pm.rules = append(pm.rules, principalRule{isDefault: true, text: rule})
			continue
		}
		pat, ok := group(2)
		if !ok {
			if strings.TrimSpace(rule) != "" {
				return nil, fmt.Errorf("invalid rule %q (DEFAULT or RULE:pattern/replacement/[LU])", rule)
			}
			continue // empty rules are ignored, as in Kafka
		}
		repl, _ := group(4)
		flag, _ := group(6)
		full, err := regexp.Compile(`^(?:` + pat + `)$`)
		if err != nil {
			return nil, fmt.Errorf("rule %q: %v", rule, err)
		}
		pm.rules = append(pm.rules, principalRule{
			full: full, pattern: regexp.MustCompile(pat), replacement: goReplacement(repl),
			lower: flag == "L", upper: flag == "U", text: rule,
		})
	}
	if len(pm.rules) == 0 {
		return nil, fmt.Errorf("no rule in %q", v)
	}
	return pm, nil
}

// goReplacement turns a Java replacement ($1, \$ for a dollar, \\ for a
// backslash) into Go's (${1}, $$).
func goReplacement(r string) string {
	var b strings.Builder
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == '\\' && i+1 < len(r):
			i++
			if r[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(r[i])
			}
		case c == '$':
			if m := javaGroupRef.FindStringSubmatch(r[i:]); m != nil {
				b.WriteString("${" + m[1] + "}")
				i += len(m[0]) - 1
			} else {
				b.WriteString("$$")
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

var errNoPrincipalRule = errors.New("no ssl.principal.mapping.rules rule applies")

func (pm *principalMapper) apply(dn string) (string, error) {
	for _, r := range pm.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.full.MatchString(dn) {
			continue
		}
		out := r.pattern.ReplaceAllString(dn, r.replacement)
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("%w to %q", errNoPrincipalRule, dn)
}

// distinguishedName prints a certificate's subject as Java's
// X500Principal.getName() does (RFC 2253: the most specific attribute
// first, CN=client,OU=eng,O=Example,C=US), from the subject's own
// sequence of attributes.
func distinguishedName(cert *x509.Certificate) string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil || len(rest) != 0 {
		return cert.Subject.String()
	}
	return rdns.String()
}
