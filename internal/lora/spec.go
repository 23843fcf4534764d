package lora

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Spec is an adapter as the command line names it: FILE[:SCALE].
type Spec struct {
	Path  string
	Scale float32
}

// ParseSpec parses FILE[:SCALE]; the scale defaults to 1. Only a suffix that
// parses as a number is a scale, so a path may itself contain colons.
func ParseSpec(s string) (Spec, error) {
	spec := Spec{Path: s, Scale: 1}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if x, err := strconv.ParseFloat(s[i+1:], 32); err == nil {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return Spec{}, fmt.Errorf("%w: %q: scale is not finite", ErrFormat, s)
			}
			spec = Spec{Path: s[:i], Scale: float32(x)}
		}
	}
	if spec.Path == "" {
		return Spec{}, fmt.Errorf("%w: empty adapter path", ErrFormat)
	}
	return spec, nil
}

// String is the FILE:SCALE form.
func (s Spec) String() string {
	return s.Path + ":" + strconv.FormatFloat(float64(s.Scale), 'g', -1, 32)
}
