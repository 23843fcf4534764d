// Package tensors holds the host-side representation of model weights: element
// types, shapes, host tensors, quantization and dequantization. The model
// file formats' readers and writers are the module's own (gpurun.Open reads
// every format; `gpurun convert` writes model files).
//
// Import it to hand weights to a gpu.Backend or fusion graph: element
// types, host tensors, quantization and dequantization.
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

	// Block types: llama.cpp's (ggml's) quantization blocks kept bit for
	// bit, scales and values interleaved in each block exactly as GGUF
	// stores them (see blocks.go for the layouts). A row is a whole number
	// of blocks; such tensors carry no separate Scales.
	Q4_1 // 32 elements: f16 d, f16 m, 16 bytes of nibbles; d*q + m
	Q5_0 // 32 elements: f16 d, 32 high bits, 16 bytes of nibbles; d*(q-16)
	Q5_1 // 32 elements: f16 d, f16 m, 32 high bits, nibbles; d*q + m
	Q4K  // 256 elements in 8 sub-blocks of 32 with 6-bit scales and mins
	Q5K  // Q4K with a fifth bit per value
	Q6K  // 256 elements in 16 sub-blocks of 16 with int8 scales, 6-bit values
	Q2K  // 256 elements in 16 sub-blocks of 16 with 4-bit scales and mins, 2-bit values
	Q3K  // 256 elements in 16 sub-blocks of 16 with 6-bit scales, 3-bit values
	// Q8_0 is 32 elements: f16 d, 32 int8; d*q. A GGUF's Q8_0 matrices
	// become I8 with separate scales (the fast paths of every backend);
	// only stacked experts keep these blocks, so they can stay mapped.
	Q8_0
	// MXFP4 is 32 elements: an E8M0 exponent byte e, then 16 bytes of
	// 4-bit E2M1 codes (gpt-oss's expert weights); value fp4(q)*2^(e-127).
	MXFP4
	// The I-quants, NVFP4 and the ternary types (iquant.go has their
	// layouts): llama.cpp's blocks kept bit for bit.
	IQ4_NL  // 32 elements: f16 d, 16 bytes of 4-bit indices into a 16-value non-linear table
	IQ4_XS  // 256 elements: IQ4_NL's values with 6-bit scales per 32
	IQ3_S   // 256 elements: 9-bit indices into a 512-entry grid of 4 values, sign bits, 4-bit scales
	IQ3_XXS // 256 elements: 8-bit indices into a 256-entry grid of 4 values, 7-bit sign codes
	IQ2_XXS // 256 elements: 8-bit indices into a 256-entry grid of 8 values, 7-bit sign codes
	IQ2_XS  // 256 elements: 9-bit indices into a 512-entry grid of 8 values, 7-bit sign codes
	IQ2_S   // 256 elements: 10-bit indices into a 1024-entry grid of 8 values, sign bits
	IQ1_S   // 256 elements: 11-bit indices into a 2048-entry ternary grid, 3-bit scales, a shift
	IQ1_M   // 256 elements: IQ1_S's grid with 3-bit scales per 16 and the f16 scale spread over them
	NVFP4   // 64 elements: four UE4M3 scales, one per 16, and 4-bit E2M1 codes
	TQ1_0   // 256 elements: ternary, five values per byte in base 3, f16 d
	TQ2_0   // 256 elements: ternary, 2 bits per value, f16 d
)

var dtypeNames = [...]string{InvalidDType: "invalid", F32: "f32", F16: "f16", BF16: "bf16", I8: "int8", I4: "int4", I32: "int32",
	Q4_1: "q4_1", Q5_0: "q5_0", Q5_1: "q5_1", Q4K: "q4_k", Q5K: "q5_k", Q6K: "q6_k", Q2K: "q2_k", Q3K: "q3_k", Q8_0: "q8_0", MXFP4: "mxfp4",
	IQ4_NL: "iq4_nl", IQ4_XS: "iq4_xs", IQ3_S: "iq3_s", IQ3_XXS: "iq3_xxs", IQ2_XXS: "iq2_xxs", IQ2_XS: "iq2_xs", IQ2_S: "iq2_s",
	IQ1_S: "iq1_s", IQ1_M: "iq1_m", NVFP4: "nvfp4", TQ1_0: "tq1_0", TQ2_0: "tq2_0"}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Valid reports whether d is one of the defined types.
func (d DType) Valid() bool { return d > InvalidDType && d <= TQ2_0 }

// Bits is the storage size of one element in bits (0 for block types, whose
// elements have no whole-bit size: see BlockLen and BlockBytes).
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

// ByteSize is the number of bytes n elements of this type occupy (int4 and
// partial blocks round up).
func (d DType) ByteSize(n int) int {
	if g, ok := blockGeometry[d]; ok {
		return (n + g.len - 1) / g.len * g.bytes
	}
	return (n*d.Bits() + 7) / 8
}

// Block reports whether d is a block type (Q4_1 ... Q3K, Q8_0, MXFP4, the
// I-quants, NVFP4, TQ1_0, TQ2_0).
func (d DType) Block() bool {
	_, ok := blockGeometry[d]
	return ok
}

// BlockLen is the number of elements of one block of a block type (0 for
// other types).
func (d DType) BlockLen() int { return blockGeometry[d].len }

// BlockBytes is the size of one block of a block type (0 for other types).
func (d DType) BlockBytes() int { return blockGeometry[d].bytes }

// ParseDType accepts the names String returns.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if i > 0 && n == s {
			return DType(i), nil
		}
	}
	return InvalidDType, fmt.Errorf("tensors: unknown dtype %q", s)
}
