package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeFlag is a flag of a memory size: bytes, or a number with a unit,
// KiB, MiB, GiB, TiB (K, M, G, T too) or KB, MB, GB, TB (powers of 1000).
type sizeFlag struct{ n int64 }

func (f *sizeFlag) String() string {
	if f == nil || f.n == 0 {
		return "0"
	}
	return sizeText(f.n)
}

func (f *sizeFlag) Type() string { return "SIZE" }

func (f *sizeFlag) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	f.n = n
	return nil
}

// sizeUnits are parseSize's units, the longer names first.
var sizeUnits = []struct {
	name string
	mul  float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
}

// parseSize reads a memory size (sizeFlag).
func parseSize(s string) (int64, error) {
	num, mul := strings.TrimSpace(s), 1.0
	for _, u := range sizeUnits {
		if v, ok := strings.CutSuffix(num, u.name); ok {
			num, mul = strings.TrimSpace(v), u.mul
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	b := v * mul
	if err != nil || num == "" || math.IsNaN(b) || b < 0 || b >= 1<<62 {
		return 0, fmt.Errorf("size %q: want bytes or a number with a unit (2GiB, 512MiB, 1.5G, 4GB)", s)
	}
	return int64(b), nil
}

// sizeText writes bytes in the largest binary unit that keeps a number of
// at least 1: "2.0 GiB".
func sizeText(n int64) string {
	switch {
	case n >= 1<<40:
		return fmt.Sprintf("%.1f TiB", float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
