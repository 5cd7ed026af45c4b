package configkeys

import (
	"fmt"
	"strings"
)

//go:generate go test -run TestREADMETables -update

// The README's generated tables sit between these markers; the section
// name follows the opening one ("<!-- configkeys serve -->").
const (
	beginMarker = "<!-- configkeys "
	endMarker   = "<!-- /configkeys -->"
)

// Sections are the README tables, in the README's order.
var Sections = []string{"serve", "security", "cluster", "transactions"}

// Markdown renders the README table of one section: a row per key, in the
// table's order.
func Markdown(section string) string {
	var b strings.Builder
	b.WriteString("| key | default | |\n| --- | --- | --- |\n")
	for i := range keys {
		k := &keys[i]
		if k.Section == section {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", k.readmeNames(), k.readmeDefault(), k.readmeDoc())
		}
	}
	return b.String()
}

func (k *Key) readmeNames() string {
	if k.Broker == "" {
		return "`" + k.Topic + "`"
	}
	s := "`" + k.Broker + "`"
	if len(k.Synonyms) > 0 {
		var syn []string
		for _, x := range k.Synonyms {
			syn = append(syn, "`"+x.Name+"`")
		}
		s += " (" + strings.Join(syn, ", ") + ")"
	}
	return s
}

func (k *Key) readmeDefault() string {
	d := k.Shown
	if d == "" {
		d = k.Default
	}
	if d == "" {
		d = "none"
	}
	if k.Strata {
		d = "Strata: " + d
	}
	return d
}

func (k *Key) readmeDoc() string {
	var parts []string
	if k.Flag != "" {
		parts = append(parts, "flag `--"+k.Flag+"`")
	}
	switch {
	case k.Topic == "":
	case k.Broker == "":
		parts = append(parts, "a topic config only")
	case k.Topic == k.Broker:
		parts = append(parts, "also a topic config")
	default:
		parts = append(parts, "topic: `"+k.Topic+"`")
	}
	switch {
	case k.ReadOnly(Broker) || k.Broker == "":
	case k.PerBroker:
		parts = append(parts, "dynamic per broker")
	default:
		parts = append(parts, "dynamic")
	}
	if k.Doc != "" {
		parts = append(parts, k.Doc)
	}
	return strings.Join(parts, "; ")
}

// UpdateREADME returns text with every generated table replaced by the
// table's current rendering. Every section must appear exactly once.
func UpdateREADME(text string) (string, error) {
	var out strings.Builder
	seen := map[string]bool{}
	rest := text
	for {
		i := strings.Index(rest, beginMarker)
		if i < 0 {
			out.WriteString(rest)
			break
		}
		j := strings.Index(rest[i:], "-->")
		if j < 0 {
			return "", fmt.Errorf("configkeys: unterminated marker at %q", rest[i:min(len(rest), i+40)])
		}
		section := strings.TrimSpace(rest[i+len(beginMarker) : i+j])
		if !contains(Sections, section) {
			return "", fmt.Errorf("configkeys: unknown README section %q", section)
		}
		if seen[section] {
			return "", fmt.Errorf("configkeys: README section %q appears twice", section)
		}
		seen[section] = true
		open := i + j + len("-->")
		end := strings.Index(rest[open:], endMarker)
		if end < 0 {
			return "", fmt.Errorf("configkeys: README section %q has no %s", section, endMarker)
		}
		out.WriteString(rest[:open])
		out.WriteString("\n")
		out.WriteString(Markdown(section))
		out.WriteString(endMarker)
		rest = rest[open+end+len(endMarker):]
	}
	for _, s := range Sections {
		if !seen[s] {
			return "", fmt.Errorf("configkeys: README has no %s%s --> table", beginMarker, s)
		}
	}
	return out.String(), nil
}
