package perf

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on an arithmetic string, so a hostile or corrupt one (from a JSON
// plan someone hands back) costs bounded time and stack.
const (
	maxExprBytes = 4096
	maxExprDepth = 64
)

// ErrBadExpression is returned (wrapped) by Eval for text that is not an
// arithmetic expression in the grammar Step.Arithmetic uses.
var ErrBadExpression = errors.New("perf: bad arithmetic expression")

// Eval evaluates one Step.Arithmetic string. The grammar is small and
// printed by this package only:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("×" | "*" | "/") unary }
//	unary   = "-" unary | power
//	power   = primary [ "^" unary ]
//	primary = number | "(" expr ")" | name "(" expr { ", " expr } ")"
//	number  = digits with "," thousands separators (1,024), optional ".digits"
//	name    = ceil | floor | min | max | exp
//
// A comma followed by three digits is a thousands separator; a comma followed
// by a space separates function arguments. Evaluation follows Go's operator
// order (left to right within a precedence level), so an expression printed
// with exact operands evaluates to the bit-identical float64 the model
// computed. Eval never panics; malformed input returns ErrBadExpression.
func Eval(s string) (float64, error) {
	if len(s) > maxExprBytes {
		return 0, fmt.Errorf("%w: %d bytes (limit %d)", ErrBadExpression, len(s), maxExprBytes)
	}
	p := exprParser{s: s}
	v := p.expr(0)
	p.skipSpace()
	if p.err == nil && p.pos != len(p.s) {
		p.fail("unexpected %q", p.s[p.pos:])
	}
	if p.err != nil {
		return 0, p.err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w: %q is not finite", ErrBadExpression, s)
	}
	return v, nil
}

// exprParser is a recursive-descent evaluator with a sticky error: once err
// is set every method returns 0 without reading further.
type exprParser struct {
	s   string
	pos int
	err error
}

func (p *exprParser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: at byte %d of %q: %s", ErrBadExpression, p.pos, p.s, fmt.Sprintf(format, args...))
	}
}

func (p *exprParser) skipSpace() {
	for p.pos < len(p.s) && p.s[p.pos] == ' ' {
		p.pos++
	}
}

// accept consumes tok (after spaces) if it is next.
func (p *exprParser) accept(tok string) bool {
	p.skipSpace()
	if strings.HasPrefix(p.s[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func (p *exprParser) expr(depth int) float64 {
	if depth > maxExprDepth {
		p.fail("nested deeper than %d", maxExprDepth)
		return 0
	}
	v := p.term(depth)
	for p.err == nil {
		switch {
		case p.accept("+"):
			v += p.term(depth)
		case p.accept("-"):
			v -= p.term(depth)
		default:
			return v
		}
	}
	return 0
}

func (p *exprParser) term(depth int) float64 {
	v := p.unary(depth)
	for p.err == nil {
		switch {
		case p.accept("×"), p.accept("*"):
			v *= p.unary(depth)
		case p.accept("/"):
			d := p.unary(depth)
			if d == 0 && p.err == nil {
				p.fail("division by zero")
			}
			v /= d
		default:
			return v
		}
	}
	return 0
}

func (p *exprParser) unary(depth int) float64 {
	if depth > maxExprDepth {
		p.fail("nested deeper than %d", maxExprDepth)
		return 0
	}
	if p.accept("-") {
		return -p.unary(depth + 1)
	}
	return p.power(depth)
}

func (p *exprParser) power(depth int) float64 {
	base := p.primary(depth)
	if p.err == nil && p.accept("^") {
		return math.Pow(base, p.unary(depth+1))
	}
	return base
}

func (p *exprParser) primary(depth int) float64 {
	p.skipSpace()
	if p.pos >= len(p.s) {
		p.fail("unexpected end")
		return 0
	}
	c := p.s[p.pos]
	switch {
	case c == '(':
		p.pos++
		v := p.expr(depth + 1)
		if !p.accept(")") {
			p.fail("missing )")
		}
		return v
	case c >= '0' && c <= '9':
		return p.number()
	case c >= 'a' && c <= 'z':
		return p.call(depth)
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.pos:])
	p.fail("unexpected %q", r)
	return 0
}

func (p *exprParser) number() float64 {
	var b strings.Builder
	first := 0 // digits before the first thousands separator
	for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		b.WriteByte(p.s[p.pos])
		p.pos++
		first++
	}
	// "1,024,000": each comma is followed by exactly three digits. A comma
	// followed by a space is an argument separator and ends the number.
	for p.pos < len(p.s) && p.s[p.pos] == ',' && isDigits(p.s, p.pos+1, 3) && !isDigits(p.s, p.pos+4, 1) {
		if first > 3 {
			p.fail("misplaced thousands separator")
			return 0
		}
		b.WriteString(p.s[p.pos+1 : p.pos+4])
		p.pos += 4
	}
	if p.pos < len(p.s) && p.s[p.pos] == '.' {
		b.WriteByte('.')
		p.pos++
		start := p.pos
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			b.WriteByte(p.s[p.pos])
			p.pos++
		}
		if p.pos == start {
			p.fail("digits expected after '.'")
			return 0
		}
	}
	v, err := strconv.ParseFloat(b.String(), 64)
	if err != nil {
		p.fail("number %q: %v", b.String(), err)
		return 0
	}
	return v
}

// isDigits reports whether s[i:i+n] exists and is all ASCII digits.
func isDigits(s string, i, n int) bool {
	if i < 0 || i+n > len(s) {
		return false
	}
	for j := i; j < i+n; j++ {
		if s[j] < '0' || s[j] > '9' {
			return false
		}
	}
	return true
}

func (p *exprParser) call(depth int) float64 {
	start := p.pos
	for p.pos < len(p.s) && p.s[p.pos] >= 'a' && p.s[p.pos] <= 'z' {
		p.pos++
	}
	name := p.s[start:p.pos]
	if p.pos >= len(p.s) || p.s[p.pos] != '(' {
		p.fail("%q is not a function call", name)
		return 0
	}
	p.pos++
	var args [8]float64 // the model never prints more than 7 arguments
	n := 0
	for {
		v := p.expr(depth + 1)
		if p.err != nil {
			return 0
		}
		if n == len(args) {
			p.fail("more than %d arguments", len(args))
			return 0
		}
		args[n] = v
		n++
		if p.accept(")") {
			break
		}
		if !p.accept(", ") {
			p.fail("expected \", \" or )")
			return 0
		}
	}
	one := func() float64 {
		if n != 1 {
			p.fail("%s takes one argument, got %d", name, n)
			return 0
		}
		return args[0]
	}
	switch name {
	case "ceil":
		return math.Ceil(one())
	case "floor":
		return math.Floor(one())
	case "exp":
		return math.Exp(one())
	case "min", "max":
		v := args[0]
		for _, a := range args[1:n] {
			if name == "min" {
				v = min(v, a)
			} else {
				v = max(v, a)
			}
		}
		return v
	}
	p.fail("unknown function %q", name)
	return 0
}
