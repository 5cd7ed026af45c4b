package perf

import "fmt"

// recorder collects steps. Each step's value is computed by the caller in
// Go; the recorder renders the arithmetic template with the operands at 5
// significant digits and checks, with Eval, that the printed arithmetic
// gives the value. If rounding the operands moved the result (a ceil near an
// integer, a long product) it prints them at 8 digits, then exactly. A
// template that disagrees with the Go formula even with exact operands is a
// bug in this package; it becomes the plan's error, never a wrong printout.
type recorder struct {
	section string
	steps   []Step
	err     error
}

// add records a step and returns value.
func (r *recorder) add(symbol, name, unit, formula, arith string, args []float64, value float64) float64 {
	if r.err != nil {
		return value
	}
	st := Step{Section: r.section, Symbol: symbol, Name: name, Formula: formula, Value: value, Unit: unit}
	var last error
	for _, sig := range [...]int{5, 8, 0} {
		st.Arithmetic = render(arith, args, sig)
		if last = st.Verify(); last == nil {
			r.steps = append(r.steps, st)
			return value
		}
	}
	r.err = fmt.Errorf("perf: internal error: %w", last)
	return value
}

// render substitutes the operands, each formatted at sig digits, for the
// template's %s verbs.
func render(tmpl string, args []float64, sig int) string {
	strs := make([]any, len(args))
	for i, v := range args {
		strs[i] = FormatNumber(v, sig)
	}
	return fmt.Sprintf(tmpl, strs...)
}
