// Package badsampling is the one table of invalid sampling values that the
// Go API's option resolution (gpurun.GenerateOptions.Resolve), the command
// line (gpurun run, chat, bench, serve) and the HTTP API (pipeline/serve)
// are each tested against, so the three reject the same values.
package badsampling

import (
	"math"
	"strconv"
)

// Param is the parameter a case sets.
type Param int

const (
	Temperature Param = iota // a number >= 0 (0: greedy)
	TopP                     // a number in (0, 1]
	TopK                     // an integer >= 0 (0: no limit)
	// Count is a number of things that must be at least 1: max_tokens and
	// n over HTTP, the tokens, prompt length and repetitions of
	// `gpurun bench`, the slots of `gpurun serve --parallel`, MaxTokens in
	// the Go API (-1 there is NoLimit, so the case is -2 as well as 0).
	Count
)

// Case is one invalid value of one parameter.
type Case struct {
	Name  string
	Param Param
	Value float64
	// GoUnset: the Go API reads this value as its zero value, "not set"
	// (the default applies), so Resolve accepts it; every other surface
	// rejects it.
	GoUnset bool
}

// Cases returns the table.
func Cases() []Case {
	nan := math.NaN()
	return []Case{
		{"temperature -1", Temperature, -1, false},
		{"temperature NaN", Temperature, nan, false},
		{"top-p 0", TopP, 0, true},
		{"top-p -0.1", TopP, -0.1, false},
		{"top-p 1.5", TopP, 1.5, false},
		{"top-p NaN", TopP, nan, false},
		{"top-k -1", TopK, -1, false},
		{"count 0", Count, 0, true},
		{"count -2", Count, -2, false},
	}
}

// Text spells the value for a flag: "NaN", integers without a point.
func (c Case) Text() string {
	if math.IsNaN(c.Value) {
		return "NaN"
	}
	return strconv.FormatFloat(c.Value, 'g', -1, 64)
}

// JSON spells the value as a JSON literal; NaN, which JSON cannot hold, is
// the bare token NaN, which a request decoder must reject.
func (c Case) JSON() string { return c.Text() }
