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

// BlockType is the code of one of llama.cpp's block types (Q4_1 ... Q3_K, Q8_0, MXFP4, IQ4_NL, IQ4_XS, NVFP4, TQ1_0, TQ2_0),
// which keep their blocks bit for bit on the device and have a kernel
// family of their own (wgsl/qblocks.wgsl). 0 is none.
type BlockType uint32

// Block types.
const (
	BlockNone BlockType = iota
	BlockQ4_1
	BlockQ5_0
	BlockQ5_1
	BlockQ8_0 // before the K-quants: the WGSL takes codes >= QT_Q4K as 256-element blocks
	BlockMXFP4
	BlockIQ4NL // the last 32-element type
	BlockQ4K
	BlockQ5K
	BlockQ6K
	BlockQ2K
	BlockQ3K
	BlockIQ4XS
	BlockNVFP4 // 64-element blocks (qblock_len's one exception)
	BlockTQ1_0
	BlockTQ2_0
	// The grid I-quants: their values come from the lookup tables bound
	// beside the weights (IQGridTables).
	BlockIQ2XXS
	BlockIQ2XS
	BlockIQ2S
	BlockIQ3XXS
	BlockIQ3S
	BlockIQ1S
	BlockIQ1M
)

// IQGridTables are the lookup tables the grid I-quants read from the
// qblocks kernels' grid binding, in order, with their sizes in u32 words
// (tensors.IQGrids gives their words in this order): the WGSL constants
// IQG_<NAME> are each one's first word.
var IQGridTables = []struct {
	Name  string
	Words int
}{{"ksigns_iq2xs", 32}, {"iq2xxs_grid", 512}, {"iq2xs_grid", 1024}, {"iq2s_grid", 2048},
	{"iq3xxs_grid", 256}, {"iq3s_grid", 512}, {"iq1s_grid", 4096}}

// IQ4NLValues are llama.cpp's 16 non-linear IQ4_NL (and IQ4_XS) values
// (kvalues_iq4nl): the WGSL constants IQ4NL_W0..3 hold them as bytes,
// value 4i+j in byte j of word i. (This package is below tensors, whose
// tables come from llama.cpp's header; the GPU backend's tests check this
// copy against them.)
var IQ4NLValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// BlockLayout is a family of block types that share how a block splits
// into sub-blocks (the elements one scale, or scale and min, covers):
// qblocks.wgsl is compiled once per layout (QBlockVariant), so each module
// decodes one layout's sub-blocks. The WGSL constants QL_* are generated
// from this table.
type BlockLayout uint32

// Block layouts.
const (
	LayoutB32  BlockLayout = iota // Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, IQ4_NL: one 32-element block, one scale (and min)
	LayoutK45                     // Q4_K, Q5_K: 8 sub-blocks of 32, 6-bit scales and mins
	LayoutK6                      // Q6_K: 16 sub-blocks of 16, int8 scales
	LayoutK23                     // Q2_K, Q3_K: 16 sub-blocks of 16, 4-bit (Q2_K: and min) or 6-bit scales; NVFP4: 4 of 16, UE4M3 scales
	LayoutS32                     // IQ4_XS, TQ1_0, TQ2_0: 8 sub-blocks of 32, one scale each (IQ4_XS) or one per block
	LayoutGrid                    // the grid I-quants (IQ2_*, IQ3_*, IQ1_*): 8 sub-blocks of 32 decoded through llama.cpp's grids
)

var blockLayouts = []struct {
	code BlockLayout
	name string
	sub  uint32 // elements per sub-block
}{{LayoutB32, "B32", 32}, {LayoutK45, "K45", 32}, {LayoutK6, "K6", 16}, {LayoutK23, "K23", 16},
	{LayoutS32, "S32", 32}, {LayoutGrid, "GRID", 32}}

func (l BlockLayout) String() string {
	for _, t := range blockLayouts {
		if t.code == l {
			return t.name
		}
	}
	return fmt.Sprintf("BlockLayout(%d)", uint32(l))
}

// SubLen is the elements per sub-block of the layout (0 for an unknown code).
func (l BlockLayout) SubLen() int {
	for _, t := range blockLayouts {
		if t.code == l {
			return int(t.sub)
		}
	}
	return 0
}

// blockTypes is the table of block types: the WGSL constant suffix, the
// elements per block and the bytes per block (llama.cpp's layouts, see
// tensors/blocks.go), and the sub-block layout.
var blockTypes = []struct {
	code         BlockType
	name         string
	elems, bytes uint32
	layout       BlockLayout
}{
	{BlockQ4_1, "Q4_1", 32, 20, LayoutB32},
	{BlockQ5_0, "Q5_0", 32, 22, LayoutB32},
	{BlockQ5_1, "Q5_1", 32, 24, LayoutB32},
	{BlockQ8_0, "Q8_0", 32, 34, LayoutB32},
	{BlockMXFP4, "MXFP4", 32, 17, LayoutB32},
	{BlockIQ4NL, "IQ4NL", 32, 18, LayoutB32},
	{BlockQ4K, "Q4K", 256, 144, LayoutK45},
	{BlockQ5K, "Q5K", 256, 176, LayoutK45},
	{BlockQ6K, "Q6K", 256, 210, LayoutK6},
	{BlockQ2K, "Q2K", 256, 84, LayoutK23},
	{BlockQ3K, "Q3K", 256, 110, LayoutK23},
	{BlockIQ4XS, "IQ4XS", 256, 136, LayoutS32},
	{BlockNVFP4, "NVFP4", 64, 36, LayoutK23},
	{BlockTQ1_0, "TQ1_0", 256, 54, LayoutS32},
	{BlockTQ2_0, "TQ2_0", 256, 66, LayoutS32},
	{BlockIQ2XXS, "IQ2XXS", 256, 66, LayoutGrid},
	{BlockIQ2XS, "IQ2XS", 256, 74, LayoutGrid},
	{BlockIQ2S, "IQ2S", 256, 82, LayoutGrid},
	{BlockIQ3XXS, "IQ3XXS", 256, 98, LayoutGrid},
	{BlockIQ3S, "IQ3S", 256, 110, LayoutGrid},
	{BlockIQ1S, "IQ1S", 256, 50, LayoutGrid},
	{BlockIQ1M, "IQ1M", 256, 56, LayoutGrid},
}

// Layout is the sub-block layout of the type (LayoutB32 for an unknown
// code).
func (q BlockType) Layout() BlockLayout {
	for _, t := range blockTypes {
		if t.code == q {
			return t.layout
		}
	}
	return LayoutB32
}

func (q BlockType) String() string {
	for _, t := range blockTypes {
		if t.code == q {
			return t.name
		}
	}
	return fmt.Sprintf("BlockType(%d)", uint32(q))
}

// BlockLayout returns the elements and bytes of one block of the type (0, 0
// for an unknown code).
func (q BlockType) BlockLayout() (elems, bytes int) {
	for _, t := range blockTypes {
		if t.code == q {
			return int(t.elems), int(t.bytes)
		}
	}
	return 0, 0
}

// codesWGSL is the WGSL declaration of every type and activation code and
// of the step words (step.go), prepended to every
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
	for _, t := range blockTypes {
		fmt.Fprintf(&b, "const QT_%s: u32 = %du;\n", t.name, uint32(t.code))
		fmt.Fprintf(&b, "const QT_%s_ELEMS: u32 = %du;\n", t.name, t.elems)
		fmt.Fprintf(&b, "const QT_%s_BYTES: u32 = %du;\n", t.name, t.bytes)
	}
	for _, l := range blockLayouts {
		fmt.Fprintf(&b, "const QL_%s: u32 = %du;\n", l.name, uint32(l.code))
	}
	for i := range 4 {
		var w uint32
		for j := range 4 {
			w |= uint32(uint8(IQ4NLValues[4*i+j])) << (8 * j)
		}
		fmt.Fprintf(&b, "const IQ4NL_W%d: u32 = 0x%08xu;\n", i, w)
	}
	off := 0
	for _, g := range IQGridTables {
		fmt.Fprintf(&b, "const IQG_%s: u32 = %du;\n", strings.ToUpper(strings.TrimSuffix(g.Name, "_grid")), off)
		off += g.Words
	}
	for _, a := range activations {
		fmt.Fprintf(&b, "const ACT_%s: u32 = %du;\n", strings.ToUpper(a.name), uint32(a.code))
	}
	for _, r := range ropeStyles {
		fmt.Fprintf(&b, "const ROPE_%s: u32 = %du;\n", r.name, uint32(r.code))
	}
	for _, w := range stepWords {
		fmt.Fprintf(&b, "const %s: u32 = %du;\n", w.name, w.word)
	}
	for _, m := range moeBiasBits {
		fmt.Fprintf(&b, "const MOE_BIAS_%s: u32 = %du;\n", m.name, m.bit)
	}
	return b.String()
}

// The bits of MoEParams.Bias: which expert biases moe.wgsl's kernels add,
// and where moe_glu reads them.
const (
	MoEBiasGate uint32 = 1 << iota // moe_glu: the gate bias (at s, or at s2 with MoEBiasS2)
	MoEBiasUp                      // moe_glu: the up bias (at s2)
	MoEBiasDown                    // moe_down: the down bias (at w2)
	MoEBiasS2                      // moe_glu: the gate bias in s2 (scaled experts), not s
)

var moeBiasBits = [...]struct {
	name string
	bit  uint32
}{{"GATE", MoEBiasGate}, {"UP", MoEBiasUp}, {"DOWN", MoEBiasDown}, {"S2", MoEBiasS2}}

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

// RopeStyle is the code of a rope's pairing of dimensions (the style
// field of RopeParams, RopeKVParams and RopeQKV; ROPE_* in the WGSL).
type RopeStyle uint32

// Rope styles.
const (
	RopePairs  RopeStyle = iota // pairs (2i, 2i+1): fusion.RopeInterleaved
	RopeHalves                  // pairs (i, i + rope_dims/2): fusion.RopeHalves
)

var ropeStyles = []struct {
	code RopeStyle
	name string
}{{RopePairs, "PAIRS"}, {RopeHalves, "HALVES"}}

// ActivationByName returns the code of a fusion activation name.
func ActivationByName(name string) (Activation, bool) {
	for _, a := range activations {
		if a.name == name {
			return a.code, true
		}
	}
	return 0, false
}
