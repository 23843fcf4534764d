package cpu

import (
	"math"
	"testing"

	"github.com/x448/float16"
)

// TestHalfBits: halfBits is float16's rounding for f32 values spread over
// every exponent (a stride through the bit patterns) and for every
// binary16 value's neighbourhood: the value, the midpoints to its
// neighbours and one f32 ulp either side of them (where ties to even and
// the carry into the exponent decide).
func TestHalfBits(t *testing.T) {
	check := func(b uint32) {
		x := math.Float32frombits(b)
		if got, want := halfBits(x), float16.Fromfloat32(x).Bits(); got != want {
			t.Fatalf("%#08x (%g): %#04x, float16 %#04x", b, x, got, want)
		}
	}
	for b := uint64(0); b < 1<<32; b += 4099 {
		check(uint32(b))
	}
	for h := range 1 << 15 {
		f := math.Float32bits(float16.Frombits(uint16(h)).Float32())
		next := math.Float32bits(float16.Frombits(uint16(h + 1)).Float32())
		mid := f + (next-f)/2
		if h == 0x7bff { // the largest finite: its midpoint to 65536
			mid = 0x477ff000
		}
		for _, b := range []uint32{f, f + 1, f - 1, mid, mid + 1, mid - 1} {
			check(b)
			check(b | 0x80000000)
		}
	}
}
