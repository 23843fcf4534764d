package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Flags whose values are checked as they are parsed, so a bad value is an
// error naming the flag and the valid range, before anything is loaded.

// intFlag is an integer flag in [min, max]; rangeText describes the range
// (and any special values) in error messages.
type intFlag struct {
	p         *int
	min, max  int
	rangeText string
}

func (f *intFlag) String() string { return strconv.Itoa(*f.p) }
func (f *intFlag) Type() string   { return "int" }
func (f *intFlag) Set(s string) error {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < f.min || v > f.max {
		return fmt.Errorf("want %s", f.rangeText)
	}
	*f.p = v
	return nil
}

// floatFlag is a finite float32 flag in a range checked by ok.
type floatFlag struct {
	p         *float32
	ok        func(float64) bool
	rangeText string
}

func (f *floatFlag) String() string { return strconv.FormatFloat(float64(*f.p), 'g', -1, 32) }
func (f *floatFlag) Type() string   { return "float" }
func (f *floatFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 32)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || !f.ok(v) {
		return fmt.Errorf("want %s", f.rangeText)
	}
	*f.p = float32(v)
	return nil
}

// choiceFlag is a string flag with a fixed set of values.
type choiceFlag struct {
	p       *string
	choices []string
}

func (f *choiceFlag) String() string { return *f.p }
func (f *choiceFlag) Type() string   { return "string" }
func (f *choiceFlag) Set(s string) error {
	if !slices.Contains(f.choices, s) {
		return fmt.Errorf("want one of %s", strings.Join(f.choices, ", "))
	}
	*f.p = s
	return nil
}

// seedFlag is a uint64 seed; -1 (as llama.cpp) or 0 mean a random one.
type seedFlag struct{ p *uint64 }

func (f *seedFlag) String() string { return strconv.FormatUint(*f.p, 10) }
func (f *seedFlag) Type() string   { return "uint64" }
func (f *seedFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	if s == "-1" {
		*f.p = 0
		return nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer in 0..%d, or -1 or 0 for a random seed", uint64(math.MaxUint64))
	}
	*f.p = v
	return nil
}

// flagError rewrites pflag's parse errors ("invalid argument "x" for
// "--top-k" flag: ...") as "--top-k x: want ...".
func flagError(_ *cobra.Command, err error) error {
	var inv *pflag.InvalidValueError
	if errors.As(err, &inv) {
		return fmt.Errorf("--%s %s: %w", inv.GetFlag().Name, inv.GetValue(), inv.Unwrap())
	}
	return err
}
