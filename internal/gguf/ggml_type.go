package gguf

import (
	"fmt"

	"github.com/gpurun/gpurun/tensors"
)

// GGMLType is a tensor element type of llama.cpp's ggml.
type GGMLType uint32

// The ggml types this package imports. Others (Q8_1, Q1_0, ...)
// parse as tensor infos but importing them is ErrUnsupported, naming them.
const (
	GGMLF32  GGMLType = 0
	GGMLF16  GGMLType = 1
	GGMLQ4_0 GGMLType = 2
	GGMLQ4_1 GGMLType = 3
	GGMLQ5_0 GGMLType = 6
	GGMLQ5_1 GGMLType = 7
	GGMLQ8_0 GGMLType = 8
	GGMLQ2_K GGMLType = 10
	GGMLQ3_K GGMLType = 11
	GGMLQ4_K GGMLType = 12
	GGMLQ5_K GGMLType = 13
	GGMLQ6_K GGMLType = 14
	GGMLBF16 GGMLType = 30
	// GGMLMXFP4 is OCP's MXFP4 (gpt-oss's expert weights): an E8M0
	// exponent byte and 16 bytes of E2M1 codes per 32 values.
	GGMLMXFP4 GGMLType = 39
	// The I-quants, NVFP4 and the ternary types: their blocks are kept
	// bit for bit (tensors.IQ4_NL ... TQ2_0).
	GGMLIQ2_XXS GGMLType = 16
	GGMLIQ2_XS  GGMLType = 17
	GGMLIQ3_XXS GGMLType = 18
	GGMLIQ1_S   GGMLType = 19
	GGMLIQ4_NL  GGMLType = 20
	GGMLIQ3_S   GGMLType = 21
	GGMLIQ2_S   GGMLType = 22
	GGMLIQ4_XS  GGMLType = 23
	GGMLIQ1_M   GGMLType = 29
	GGMLTQ1_0   GGMLType = 34
	GGMLTQ2_0   GGMLType = 35
	GGMLNVFP4   GGMLType = 40
)

// QK is the block length of Q4_0 and Q8_0: 32 elements share one f16 scale.
const QK = 32

// typeInfo is the block geometry of a type: blockLen elements take
// blockBytes bytes. dtype is the tensors type the blocks are kept as bit
// for bit (0 for the types split into values and scales: Q8_0, Q4_0, and
// for the plain float types).
type typeInfo struct {
	name       string
	blockLen   int
	blockBytes int
	dtype      tensors.DType
}

var ggmlTypes = map[GGMLType]typeInfo{
	GGMLF32:   {"F32", 1, 4, 0},
	GGMLF16:   {"F16", 1, 2, 0},
	GGMLBF16:  {"BF16", 1, 2, 0},
	GGMLQ4_0:  {"Q4_0", QK, 2 + QK/2, 0},
	GGMLQ8_0:  {"Q8_0", QK, 2 + QK, 0},
	GGMLQ4_1:  {"Q4_1", 32, 20, tensors.Q4_1},
	GGMLQ5_0:  {"Q5_0", 32, 22, tensors.Q5_0},
	GGMLQ5_1:  {"Q5_1", 32, 24, tensors.Q5_1},
	GGMLQ4_K:  {"Q4_K", 256, 144, tensors.Q4K},
	GGMLQ5_K:  {"Q5_K", 256, 176, tensors.Q5K},
	GGMLQ6_K:  {"Q6_K", 256, 210, tensors.Q6K},
	GGMLQ2_K:  {"Q2_K", 256, 84, tensors.Q2K},
	GGMLQ3_K:  {"Q3_K", 256, 110, tensors.Q3K},
	GGMLMXFP4: {"MXFP4", 32, 17, tensors.MXFP4},

	GGMLIQ2_XXS: {"IQ2_XXS", 256, 66, tensors.IQ2_XXS},
	GGMLIQ2_XS:  {"IQ2_XS", 256, 74, tensors.IQ2_XS},
	GGMLIQ3_XXS: {"IQ3_XXS", 256, 98, tensors.IQ3_XXS},
	GGMLIQ1_S:   {"IQ1_S", 256, 50, tensors.IQ1_S},
	GGMLIQ4_NL:  {"IQ4_NL", 32, 18, tensors.IQ4_NL},
	GGMLIQ3_S:   {"IQ3_S", 256, 110, tensors.IQ3_S},
	GGMLIQ2_S:   {"IQ2_S", 256, 82, tensors.IQ2_S},
	GGMLIQ4_XS:  {"IQ4_XS", 256, 136, tensors.IQ4_XS},
	GGMLIQ1_M:   {"IQ1_M", 256, 56, tensors.IQ1_M},
	GGMLTQ1_0:   {"TQ1_0", 256, 54, tensors.TQ1_0},
	GGMLTQ2_0:   {"TQ2_0", 256, 66, tensors.TQ2_0},
	GGMLNVFP4:   {"NVFP4", 64, 36, tensors.NVFP4},
}

// otherTypeNames names the ggml types the package cannot import, so that
// errors say which one a file uses.
var otherTypeNames = map[GGMLType]string{
	9: "Q8_1", 15: "Q8_K", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 41: "Q1_0", 42: "Q2_0",
}

func (t GGMLType) String() string {
	if ti, ok := ggmlTypes[t]; ok {
		return ti.name
	}
	if n, ok := otherTypeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// Known reports whether the package can size and import tensors of type t.
func (t GGMLType) Known() bool {
	_, ok := ggmlTypes[t]
	return ok
}

// BlockLen is the number of elements of one block of t (1 for the plain
// float types), or 0 for a type the package does not know.
func (t GGMLType) BlockLen() int { return ggmlTypes[t].blockLen }
