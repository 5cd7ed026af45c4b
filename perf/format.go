package perf

import (
	"math"
	"strconv"
	"strings"
)

// FormatNumber prints x the way plans print numbers: thousands separators,
// integers in full, other values to sig significant digits (sig <= 0: the
// shortest decimal that reads back as exactly x), never in e-notation. Eval
// reads every string it returns.
func FormatNumber(x float64, sig int) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "+Inf"
	case math.IsInf(x, -1):
		return "-Inf"
	}
	neg := x < 0
	if neg {
		x = -x
	}
	var s string
	switch {
	case x == math.Trunc(x) && x < 1e21:
		s = strconv.FormatFloat(x, 'f', 0, 64)
	case sig <= 0:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		// Decimals so that sig significant digits show: 614.4 → 1 decimal
		// at sig 4; 0.0123 → 5 decimals at sig 4.
		dec := sig - 1 - int(math.Floor(math.Log10(x)))
		if dec < 0 {
			dec = 0
		}
		s = strconv.FormatFloat(x, 'f', dec, 64)
		if strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
	}
	intPart, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	if neg && s != "0" {
		b.WriteByte('-')
	}
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if hasFrac {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}

// fmtNum is FormatNumber at the 5 significant digits plans print by default.
func fmtNum(x float64) string { return FormatNumber(x, 5) }

// fmtShort rounds for prose and tables: 614.4, 31, 0.6, 1,843.2.
func fmtShort(x float64) string { return FormatNumber(x, 4) }

// fmtPct prints a fraction as a percentage with one decimal: 0.307 → "30.7 %".
func fmtPct(f float64) string {
	return strconv.FormatFloat(f*100, 'f', 1, 64) + " %"
}
