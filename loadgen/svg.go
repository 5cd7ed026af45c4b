package loadgen

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// A small SVG line-chart renderer for the HTML report: linear or log
// axes, "nice" ticks, a legend, no scripts. Charts are strings of inline
// SVG built from numbers and escaped text only.

type series struct {
	name   string
	color  string
	dashed bool
	xs, ys []float64
}

type axisSpec struct {
	label string
	log   bool
	// ticks overrides the generated ticks (values in data units, labels).
	ticks []tick
	// fmtTick formats a generated tick; nil = %g.
	fmtTick func(float64) string
	// zero forces a linear axis to include 0.
	zero bool
}

type tick struct {
	v     float64
	label string
}

type chartSpec struct {
	title  string
	x, y   axisSpec
	series []series
	// hline draws a horizontal reference line (e.g. the p99 bound).
	hline      float64
	hlineLabel string
	width      int
	height     int
}

const (
	chartMarginL = 72
	chartMarginR = 48
	chartMarginT = 36
	chartMarginB = 70
)

// svgChart renders spec. Points that are not finite, or not positive on a
// log axis, are skipped.
func svgChart(spec chartSpec) string {
	w, h := spec.width, spec.height
	if w == 0 {
		w = 1000
	}
	if h == 0 {
		h = 340
	}
	pw, ph := float64(w-chartMarginL-chartMarginR), float64(h-chartMarginT-chartMarginB)

	usable := func(v float64, log bool) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && (!log || v > 0) }
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	points := 0
	for _, s := range spec.series {
		for i := range s.xs {
			x, y := s.xs[i], s.ys[i]
			if !usable(x, spec.x.log) || !usable(y, spec.y.log) {
				continue
			}
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
			points++
		}
	}
	if spec.hline > 0 {
		ymin, ymax = math.Min(ymin, spec.hline), math.Max(ymax, spec.hline)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`, w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`, w, h)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold">%s</text>`, chartMarginL, html.EscapeString(spec.title))
	if points == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#888">no data</text></svg>`, w/2-30, h/2)
		return b.String()
	}
	xs := newScale(xmin, xmax, spec.x, 0, pw)
	ys := newScale(ymin, ymax, spec.y, ph, 0)
	ox, oy := float64(chartMarginL), float64(chartMarginT)

	// Grid and ticks.
	fmt.Fprintf(&b, `<g stroke="#e5e5e5" stroke-width="1">`)
	for _, t := range ys.ticks {
		y := oy + ys.pos(t.v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, ox, y, ox+pw, y)
	}
	for _, t := range xs.ticks {
		x := ox + xs.pos(t.v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x, oy, x, oy+ph)
	}
	b.WriteString(`</g>`)
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>`, ox, oy, pw, ph)
	for _, t := range ys.ticks {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`, ox-6, oy+ys.pos(t.v), html.EscapeString(t.label))
	}
	for _, t := range xs.ticks {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, ox+xs.pos(t.v), oy+ph+16, html.EscapeString(t.label))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, ox+pw/2, oy+ph+36, html.EscapeString(spec.x.label))
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>`, oy+ph/2, html.EscapeString(spec.y.label))

	if spec.hline > 0 {
		y := oy + ys.pos(spec.hline)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c00" stroke-dasharray="6 4"/>`, ox, y, ox+pw, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#c00">%s</text>`, ox+pw-4, y-4, html.EscapeString(spec.hlineLabel))
	}

	// Series.
	for _, s := range spec.series {
		var pts strings.Builder
		n := 0
		for i := range s.xs {
			x, y := s.xs[i], s.ys[i]
			if !usable(x, spec.x.log) || !usable(y, spec.y.log) {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", ox+xs.pos(x), oy+ys.pos(y))
			n++
		}
		if n == 0 {
			continue
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="5 3"`
		}
		fmt.Fprintf(&b, `<polyline class="series" data-name="%s" data-points="%d" fill="none" stroke="%s" stroke-width="1.8"%s points="%s"/>`,
			html.EscapeString(s.name), n, s.color, dash, strings.TrimSpace(pts.String()))
		if n == 1 || n <= 30 {
			for i := range s.xs {
				x, y := s.xs[i], s.ys[i]
				if usable(x, spec.x.log) && usable(y, spec.y.log) {
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, ox+xs.pos(x), oy+ys.pos(y), s.color)
				}
			}
		}
	}

	// Legend under the x label.
	lx := ox
	ly := oy + ph + 56
	for _, s := range spec.series {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`, lx, ly-4, lx+22, ly-4, s.color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`, lx+28, ly, html.EscapeString(s.name))
		lx += 40 + 7*float64(len(s.name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// scale maps data values to pixel offsets along one axis.
type scale struct {
	log      bool
	lo, hi   float64 // data range (log10 for log axes)
	from, to float64 // pixel range
	ticks    []tick
}

func newScale(min, max float64, a axisSpec, from, to float64) *scale {
	s := &scale{log: a.log, from: from, to: to}
	if a.log {
		lo, hi := math.Floor(math.Log10(min)), math.Ceil(math.Log10(max))
		if hi <= lo {
			hi = lo + 1
		}
		s.lo, s.hi = lo, hi
		if a.ticks == nil {
			for e := lo; e <= hi; e++ {
				v := math.Pow(10, e)
				s.ticks = append(s.ticks, tick{v, fmtNum(v)})
				if hi-lo <= 2 && e < hi {
					s.ticks = append(s.ticks, tick{2 * v, fmtNum(2 * v)}, tick{5 * v, fmtNum(5 * v)})
				}
			}
		}
	} else {
		if a.zero {
			min = math.Min(min, 0)
		}
		if max <= min {
			max = min + 1
		}
		step := niceStep((max - min) / 6)
		s.lo, s.hi = math.Floor(min/step)*step, math.Ceil(max/step)*step
		if a.ticks == nil {
			for v := s.lo; v <= s.hi+step/2; v += step {
				label := fmtNum(v)
				if a.fmtTick != nil {
					label = a.fmtTick(v)
				}
				s.ticks = append(s.ticks, tick{v, label})
			}
		}
	}
	if a.ticks != nil {
		s.ticks = a.ticks
		for _, t := range a.ticks {
			v := t.v
			if a.log {
				v = math.Log10(v)
			}
			s.lo, s.hi = math.Min(s.lo, v), math.Max(s.hi, v)
		}
	}
	return s
}

func (s *scale) pos(v float64) float64 {
	if s.log {
		v = math.Log10(v)
	}
	f := (v - s.lo) / (s.hi - s.lo)
	return s.from + f*(s.to-s.from)
}

// niceStep rounds a raw step up to 1, 2 or 5 × 10^k.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// fmtNum prints axis numbers compactly: 0.01, 2.5, 150, 20k, 1.5M.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	case a >= 1:
		return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
