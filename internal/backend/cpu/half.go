package cpu

import (
	"math"

	"github.com/x448/float16"
)

// halfBits is float16.Fromfloat32(x).Bits() (binary16, nearest, ties to
// even) without its general path for the values that round to a normal
// binary16 number: the exponent rebiased and the mantissa rounded by an
// integer add (the carry moving into the exponent where it must). Zeros,
// subnormal results, overflow and NaN take float16's path.
func halfBits(x float32) uint16 {
	b := math.Float32bits(x)
	a := b & 0x7fffffff
	if a < 0x38800000 || a >= 0x477ff000 { // below 2^-14, or rounding to 65520 and up
		return float16.Fromfloat32(x).Bits()
	}
	a += 0xfff + a>>13&1
	return uint16(b>>16)&0x8000 | uint16((a-0x38000000)>>13)
}
