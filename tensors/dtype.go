// Package tensors holds the host-side representation of model weights: element
// types, shapes, host tensors, quantization and dequantization. Sub-packages read
// and write the model file formats.
package tensors

import "fmt"

// DType is the element type of a tensor as stored.
type DType uint8

const (
	InvalidDType DType = iota
	F32                // IEEE-754 binary32
	F16                // IEEE-754 binary16
	BF16               // bfloat16 (upper half of a binary32)
	I8                 // signed 8-bit, quantized: needs scales
	I4                 // signed 4-bit, two per byte, element 0 in the low nibble; quantized
	I32                // signed 32-bit integers (token ids, positions)
)

var dtypeNames = [...]string{InvalidDType: "invalid", F32: "f32", F16: "f16", BF16: "bf16", I8: "int8", I4: "int4", I32: "int32"}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Valid reports whether d is one of the defined types.
func (d DType) Valid() bool { return d > InvalidDType && d <= I32 }

// Bits is the storage size of one element in bits.
func (d DType) Bits() int {
	switch d {
	case F32, I32:
		return 32
	case F16, BF16:
		return 16
	case I8:
		return 8
	case I4:
		return 4
	}
	return 0
}

// Quantized reports whether values of this type need scales to mean anything.
func (d DType) Quantized() bool { return d == I8 || d == I4 }

// ByteSize is the number of bytes n elements of this type occupy (int4 rounds up).
func (d DType) ByteSize(n int) int { return (n*d.Bits() + 7) / 8 }

// ParseDType accepts the names String returns.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if i > 0 && n == s {
			return DType(i), nil
		}
	}
	return InvalidDType, fmt.Errorf("tensors: unknown dtype %q", s)
}
