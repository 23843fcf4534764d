package shaders

import (
	"fmt"
	"strings"
)

// WeightType is the code of a stored weight element type. The codes are
// defined here once: the WGSL constants WT_* that every kernel family sees
// are generated from this table (see Prelude), and the GPU backend passes
// these values, never literals.
type WeightType uint32

// Weight element types.
const (
	WeightF32 WeightType = iota
	WeightF16
	WeightBF16
	WeightI8
	WeightI4
)

// ScaleType is the code of a quantization scale type.
type ScaleType uint32

// Scale types.
const (
	ScaleF32 ScaleType = iota
	ScaleF16
)

// weightTypes is the table of weight types: the WGSL constant name and how
// many elements one u32 word holds. A new type (and its decoding in
// wgsl/common.wgsl's decode and wgsl/matmul.wgsl's dq) slots in here.
var weightTypes = []struct {
	code WeightType
	name string
	epw  uint32
}{
	{WeightF32, "F32", 1},
	{WeightF16, "F16", 2},
	{WeightBF16, "BF16", 2},
	{WeightI8, "I8", 4},
	{WeightI4, "I4", 8},
}

var scaleTypes = []struct {
	code ScaleType
	name string
}{{ScaleF32, "F32"}, {ScaleF16, "F16"}}

// String is the type's WGSL constant suffix.
func (w WeightType) String() string {
	for _, t := range weightTypes {
		if t.code == w {
			return t.name
		}
	}
	return fmt.Sprintf("WeightType(%d)", uint32(w))
}

// ElemsPerWord is how many elements of the type one u32 word holds (0 for an
// unknown code).
func (w WeightType) ElemsPerWord() int {
	for _, t := range weightTypes {
		if t.code == w {
			return int(t.epw)
		}
	}
	return 0
}

func (s ScaleType) String() string {
	for _, t := range scaleTypes {
		if t.code == s {
			return t.name
		}
	}
	return fmt.Sprintf("ScaleType(%d)", uint32(s))
}

// codesWGSL is the WGSL declaration of every type and activation code, prepended to every
// family before common.wgsl.
func codesWGSL() string {
	var b strings.Builder
	b.WriteString("// Generated from shaders/codes.go: weight and scale type codes.\n")
	for _, t := range weightTypes {
		fmt.Fprintf(&b, "const WT_%s: u32 = %du;\n", t.name, uint32(t.code))
	}
	for _, t := range scaleTypes {
		fmt.Fprintf(&b, "const ST_%s: u32 = %du;\n", t.name, uint32(t.code))
	}
	for _, a := range activations {
		fmt.Fprintf(&b, "const ACT_%s: u32 = %du;\n", strings.ToUpper(a.name), uint32(a.code))
	}
	return b.String()
}

// Activation is the code of an activation function (the act parameter of
// the elementwise and GLU kernels).
type Activation uint32

// Activations.
const (
	ActSiLU Activation = iota
	ActGELUTanh
	ActGELU
	ActReLU
)

var activations = []struct {
	code Activation
	name string // fusion's name and, upper-cased, the WGSL constant's
}{{ActSiLU, "silu"}, {ActGELUTanh, "gelu_tanh"}, {ActGELU, "gelu"}, {ActReLU, "relu"}}

// ActivationByName returns the code of a fusion activation name.
func ActivationByName(name string) (Activation, bool) {
	for _, a := range activations {
		if a.name == name {
			return a.code, true
		}
	}
	return 0, false
}
