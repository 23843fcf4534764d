package tensors

import (
	"math"

	"github.com/x448/float16"
)

// F16Bits rounds f to the nearest IEEE binary16 (ties to even) and returns
// its bit pattern. Values beyond the f16 range become infinities.
func F16Bits(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// F16Float widens an IEEE binary16 bit pattern to float32 exactly.
func F16Float(h uint16) float32 { return float16.Frombits(h).Float32() }

// BF16Bits rounds f to the nearest bfloat16 (ties to even) and returns its
// bit pattern. NaNs stay NaNs (quiet) instead of rounding into infinity.
func BF16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	if f != f {
		return uint16(u>>16) | 0x0040
	}
	// Add 0x7fff plus the lowest kept bit: rounds to nearest, ties to even.
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// BF16Float widens a bfloat16 bit pattern to float32 exactly.
func BF16Float(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }
