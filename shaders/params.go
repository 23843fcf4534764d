package shaders

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"regexp"
	"strings"
)

// Params is the uniform block of one kernel family: a Go struct of 4-byte
// fields (uint32, int32, float32) whose type name and fields (wgsl tags, in
// order) are those of the WGSL struct bound as `var<uniform> p`. The
// layout test holds every family's struct to its Go twin, so the host
// fills named fields and the compiler checks them, instead of positional
// []uint32 slots.
type Params interface{ params() }

// MaxParamsBytes is the largest uniform block a kernel may declare; the
// backend gives every dispatch a slot of this size.
const MaxParamsBytes = 128

// Encode returns the little-endian bytes of a params struct.
func Encode(p Params) ([]byte, error) {
	b, err := binary.Append(nil, binary.LittleEndian, p)
	if err != nil {
		return nil, fmt.Errorf("shaders: encode %T: %w", p, err)
	}
	if len(b) > MaxParamsBytes {
		return nil, fmt.Errorf("shaders: %T is %d bytes, over %d", p, len(b), MaxParamsBytes)
	}
	return b, nil
}

// paramTypes lists the Go twin of every family's uniform struct.
var paramTypes = []Params{
	MatParams{}, EmbedParams{}, NormParams{}, RopeParams{}, KVParams{}, RopeKVParams{}, AttnParams{}, EltParams{}, ArgmaxParams{}, SampleParams{}, QParams{}, AdvanceParams{}, MoEParams{},
	ShortConvParams{}, DeltaParams{}, Mamba2Params{},
}

var (
	uniformRE = regexp.MustCompile(`var<\s*uniform\s*>\s*p\s*:\s*([A-Za-z_][A-Za-z0-9_]*)\s*;`)
	fieldRE   = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([A-Za-z0-9_]+(?:<[A-Za-z0-9_, ]+(?:<[A-Za-z0-9_]+>)?[A-Za-z0-9_, ]*>)?)\s*,?\s*(//.*)?$`)
)

// structFields returns the fields (name, type) of WGSL struct name in src.
func structFields(src, name string) ([][2]string, error) {
	re := regexp.MustCompile(`(?s)struct\s+` + regexp.QuoteMeta(name) + `\s*\{(.*?)\}`)
	m := re.FindStringSubmatch(src)
	if m == nil {
		return nil, fmt.Errorf("struct %s not found", name)
	}
	var out [][2]string
	for _, line := range strings.Split(m[1], "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "//") {
			continue
		}
		f := fieldRE.FindStringSubmatch(line)
		if f == nil {
			return nil, fmt.Errorf("struct %s: cannot read field %q", name, strings.TrimSpace(line))
		}
		out = append(out, [2]string{f[1], f[2]})
	}
	return out, nil
}

// CheckLayout checks that a family's uniform struct and its Go twin (found
// in paramTypes by type name) agree field by field: names, 4-byte types,
// order (so every offset), and a size that is a multiple of 16 bytes and
// at most MaxParamsBytes.
func CheckLayout(f *Family) error {
	m := uniformRE.FindStringSubmatch(f.WGSL)
	if m == nil {
		return fmt.Errorf("shaders: %s: no `var<uniform> p` block", f.Name)
	}
	var goType reflect.Type
	for _, p := range paramTypes {
		if t := reflect.TypeOf(p); t.Name() == m[1] {
			goType = t
		}
	}
	if goType == nil {
		return fmt.Errorf("shaders: %s: no Go struct %s in paramTypes", f.Name, m[1])
	}
	return checkStruct(f.Name, f.WGSL, m[1], goType)
}

func checkStruct(family, src, name string, t reflect.Type) error {
	fields, err := structFields(src, name)
	if err != nil {
		return fmt.Errorf("shaders: %s: %w", family, err)
	}
	if t.NumField() != len(fields) {
		return fmt.Errorf("shaders: %s: Go %s has %d fields, WGSL %d", family, name, t.NumField(), len(fields))
	}
	wgslType := map[reflect.Kind]string{reflect.Uint32: "u32", reflect.Int32: "i32", reflect.Float32: "f32"}
	for i, wf := range fields {
		gf := t.Field(i)
		tag := gf.Tag.Get("wgsl")
		if tag != wf[0] {
			return fmt.Errorf("shaders: %s: field %d: Go %s (wgsl %q), WGSL %s", family, i, gf.Name, tag, wf[0])
		}
		if wgslType[gf.Type.Kind()] != wf[1] {
			return fmt.Errorf("shaders: %s: field %s: Go %s, WGSL %s", family, wf[0], gf.Type, wf[1])
		}
		if gf.Offset != uintptr(4*i) {
			return fmt.Errorf("shaders: %s: field %s at Go offset %d, WGSL %d", family, wf[0], gf.Offset, 4*i)
		}
	}
	if size := t.Size(); size%16 != 0 || size > MaxParamsBytes {
		return fmt.Errorf("shaders: %s: %s is %d bytes: want a multiple of 16, at most %d", family, name, size, MaxParamsBytes)
	}
	return nil
}

// MatParams is the uniform block of wgsl/matmul.wgsl (every variant).
type MatParams struct {
	InCols   uint32  `wgsl:"in_cols"`
	OutCols  uint32  `wgsl:"out_cols"`
	RowBase  uint32  `wgsl:"row_base"`  // first row of W in this binding
	Rows     uint32  `wgsl:"rows"`      // rows of W in this binding
	Block    uint32  `wgsl:"block"`     // elements per scale (in_cols when unquantized)
	NBlocks  uint32  `wgsl:"nblocks"`   // scales per row (1 when unquantized)
	HasBias  uint32  `wgsl:"has_bias"`  // 1: bias bound (the gate's in GLU)
	NRows    uint32  `wgsl:"nrows"`     // rows of x and out (Tokens, or 1 after LastRow)
	Accum    uint32  `wgsl:"accum"`     // 1: out += result
	Act      uint32  `wgsl:"act"`       // GLU variants: activation code
	HasBias2 uint32  `wgsl:"has_bias2"` // GLU variants: the bias is the up projection's
	Lanes    uint32  `wgsl:"lanes"`     // matvec_lanes: invocations per row group (a power of two <= MatMulShape.LanesWG)
	OutF16   uint32  `wgsl:"out_f16"`   // 1: out is an f16 activation (fusion.BufInfo.F16): packed binary16 pairs (stores round to the nearest half)
	NormEps  float32 `wgsl:"norm_eps"`  // the *_norm kernels' RMS-norm epsilon
	XF16     uint32  `wgsl:"x_f16"`     // 1: x is an f16 activation: packed binary16 pairs
	// RowSetAt, when not 0, is the step word of row 0's adapter set
	// (gpu.Row.Adapter; row t's at RowSetAt+t): matvec_lanes then computes
	// only the rows whose set is RowSet (fusion.RowLoRAOp's products).
	RowSetAt uint32 `wgsl:"row_set_at"`
	RowSet   uint32 `wgsl:"row_set"`
	_        uint32 `wgsl:"pad0"` // the block is a multiple of 16 bytes
	_        uint32 `wgsl:"pad1"`
	_        uint32 `wgsl:"pad2"`
}

// EmbedParams is the uniform block of wgsl/embed.wgsl.
type EmbedParams struct {
	Cols    uint32  `wgsl:"cols"`
	RowBase uint32  `wgsl:"row_base"`
	Rows    uint32  `wgsl:"rows"`
	WT      uint32  `wgsl:"wt"` // a WeightType
	ST      uint32  `wgsl:"st"` // a ScaleType
	Block   uint32  `wgsl:"block"`
	NBlocks uint32  `wgsl:"nblocks"`
	Scale   float32 `wgsl:"scale"`
	OutF16  uint32  `wgsl:"out_f16"` // 1: out is an f16 activation: packed binary16 pairs (stores round to the nearest half)
	Pad0    uint32  `wgsl:"pad0"`
	Pad1    uint32  `wgsl:"pad1"`
	Pad2    uint32  `wgsl:"pad2"`
}

// NormParams is the uniform block of wgsl/norm.wgsl.
type NormParams struct {
	Cols    uint32  `wgsl:"cols"`
	Layer   uint32  `wgsl:"layer"`
	Eps     float32 `wgsl:"eps"`
	HasBias uint32  `wgsl:"has_bias"`
	NRows   uint32  `wgsl:"nrows"`
	OutF16  uint32  `wgsl:"out_f16"` // 1: out is an f16 activation: packed binary16 pairs (stores round to the nearest half)
	XF16    uint32  `wgsl:"x_f16"`   // 1: x is an f16 activation: packed binary16 pairs
	Heads   uint32  `wgsl:"heads"`   // rows per token: 1, or the heads of a per-head norm (Cols is then the head dim)
}

// RopeParams is the uniform block of wgsl/rope.wgsl.
type RopeParams struct {
	Heads    uint32    `wgsl:"heads"`
	HeadDim  uint32    `wgsl:"head_dim"`
	RopeDims uint32    `wgsl:"rope_dims"`
	Style    RopeStyle `wgsl:"style"`
	Cols     uint32    `wgsl:"cols"`
	PosAt    uint32    `wgsl:"pos_at"`  // 0: row t at position step[0]+t; else at step word PosAt+t (batched steps)
	OutF16   uint32    `wgsl:"out_f16"` // 1: x is an f16 activation: packed binary16 pairs (stores round to the nearest half)
	Scale    float32   `wgsl:"scale"`   // cos and sin multiplier (1: none)
}

// KVParams is the uniform block of wgsl/kv.wgsl.
type KVParams struct {
	KVCols  uint32 `wgsl:"kv_cols"`
	HeadDim uint32 `wgsl:"head_dim"`
	MaxLen  uint32 `wgsl:"max_len"`
	PosAt   uint32 `wgsl:"pos_at"`   // 0: row t at position step[0]+t; else at step word PosAt+t (batched steps)
	Row0    uint32 `wgsl:"row0"`     // first row of the dispatch (batched steps: one dispatch per row)
	KF16    uint32 `wgsl:"k_f16"`    // 1: k is an f16 activation: packed binary16 pairs
	VF16    uint32 `wgsl:"v_f16"`    // 1: v is an f16 activation
	Ring    uint32 `wgsl:"ring"`     // 0: slot = position; R > 0: a mirrored ring of 2R slots per head (position p at p%R and p%R+R)
	KVQuant uint32 `wgsl:"kv_quant"` // 0: float caches; else KVQuant's code of a quantized cache
	_       uint32 `wgsl:"pad0"`
	_       uint32 `wgsl:"pad1"`
	_       uint32 `wgsl:"pad2"`
}

// KVQuant is the kv_quant code of the store and attention kernels for a
// cache of keys of type k and values of type v (fusion.KVType codes: 0
// float, 1 q8_0, 2 q4_0, 3 q4_1, 4 q5_0, 5 q5_1, 6 iq4_nl) rotated by
// H_krot and H_vrot (fusion.KVSpec.KRotation, VRotation; 0: none), whose
// float side (if one of the two is not quantized) holds binary16 pairs
// when f16: 0 for a float cache. Bits 0-3 k, 4-7 v, 8-19 krot, 20 f16,
// 24-31 vrot (wgsl/lib/kv_quant.wgsl).
func KVQuant(k, v uint8, krot, vrot int, f16 bool) uint32 {
	c := uint32(k&15) | uint32(v&15)<<4 | uint32(krot&0xfff)<<8 | uint32(vrot&0xff)<<24
	if f16 && c != 0 {
		c |= 1 << 20
	}
	return c
}

// RopeKVParams is the uniform block of wgsl/ropekv.wgsl.
type RopeKVParams struct {
	Heads    uint32    `wgsl:"heads"`
	KVHeads  uint32    `wgsl:"kv_heads"`
	HeadDim  uint32    `wgsl:"head_dim"`
	RopeDims uint32    `wgsl:"rope_dims"`
	Style    RopeStyle `wgsl:"style"` // RopePairs or RopeHalves
	MaxLen   uint32    `wgsl:"max_len"`
	OutF16   uint32    `wgsl:"out_f16"`  // 1: q is an f16 activation: packed binary16 pairs (stores round to the nearest half)
	KF16     uint32    `wgsl:"k_f16"`    // 1: k is an f16 activation: packed binary16 pairs
	VF16     uint32    `wgsl:"v_f16"`    // 1: v is an f16 activation
	Scale    float32   `wgsl:"scale"`    // cos and sin multiplier (1: none)
	Ring     uint32    `wgsl:"ring"`     // 0: slot = position; else KVParams.Ring's mirrored ring
	KVQuant  uint32    `wgsl:"kv_quant"` // 0: float caches; else KVQuant's code
}

// AttnParams is the uniform block of wgsl/attention.wgsl.
type AttnParams struct {
	Heads   uint32  `wgsl:"heads"`
	KVHeads uint32  `wgsl:"kv_heads"`
	HeadDim uint32  `wgsl:"head_dim"`
	MaxLen  uint32  `wgsl:"max_len"`
	Scale   float32 `wgsl:"scale"`
	Cap     float32 `wgsl:"cap"`
	Window  uint32  `wgsl:"window"`  // 0: no sliding window
	Chunks  uint32  `wgsl:"chunks"`  // attn_split: partial slots per (token, head)
	Batches uint32  `wgsl:"batches"` // attn_split: head batches per kv head
	PosAt   uint32  `wgsl:"pos_at"`  // 0: row t at position step[0]+t; else at step word PosAt+t (batched steps)
	Row0    uint32  `wgsl:"row0"`    // first row of the dispatch (batched steps: one dispatch per row)
	Rows    uint32  `wgsl:"rows"`    // attn_tiled: query rows, Tokens * (Heads / KVHeads)
	OutF16  uint32  `wgsl:"out_f16"` // 1: out is an f16 activation: final packed binary16 pairs (stores round to the nearest half)
	QF16    uint32  `wgsl:"q_f16"`   // 1: q is an f16 activation: packed binary16 pairs
	Ring    uint32  `wgsl:"ring"`    // 0: slot = position; else KVParams.Ring's mirrored ring (a window read as consecutive slots)
	// HasSinks is 1 when the sinks binding holds a sink logit per query
	// head (fusion.AttentionOp.Sinks), joining each head's softmax.
	HasSinks uint32 `wgsl:"has_sinks"`
	// NonCausal is 1 when a row sees every position its step stores,
	// later ones too (fusion.AttentionOp.NonCausal; fusion.SelfAttnOp).
	NonCausal uint32 `wgsl:"non_causal"`
	KVQuant   uint32 `wgsl:"kv_quant"` // 0: float caches; else KVQuant's code (attention_q only)
	Pad1      uint32 `wgsl:"pad1"`
	Pad2      uint32 `wgsl:"pad2"`
}

// QParams is the uniform block of wgsl/qblocks.wgsl (llama.cpp's block
// types).
type QParams struct {
	InCols  uint32    `wgsl:"in_cols"` // elements per row of W (qembed: columns of out)
	OutCols uint32    `wgsl:"out_cols"`
	RowBase uint32    `wgsl:"row_base"`
	Rows    uint32    `wgsl:"rows"`
	QT      BlockType `wgsl:"qt"`
	HasBias uint32    `wgsl:"has_bias"`
	NRows   uint32    `wgsl:"nrows"` // rows of x and out (Tokens, or 1 after LastRow)
	Accum   uint32    `wgsl:"accum"`
	Scale   float32   `wgsl:"scale"`   // qembed
	OutF16  uint32    `wgsl:"out_f16"` // 1: out is an f16 activation: packed binary16 pairs (stores round to the nearest half)
	XF16    uint32    `wgsl:"x_f16"`   // 1: x is an f16 activation: packed binary16 pairs
	Lanes   uint32    `wgsl:"lanes"`   // qmatvec: invocations per row group, a power of two <= QMatVecWG
	Pad3    uint32    `wgsl:"pad3"`
	Pad4    uint32    `wgsl:"pad4"`
	Pad5    uint32    `wgsl:"pad5"`
	Pad6    uint32    `wgsl:"pad6"`
}

// EltParams is the uniform block of wgsl/elementwise.wgsl.
type EltParams struct {
	Cols   uint32  `wgsl:"cols"`
	Act    uint32  `wgsl:"act"`
	Cap    float32 `wgsl:"cap"`
	NRows  uint32  `wgsl:"nrows"`
	OutF16 uint32  `wgsl:"out_f16"` // 1: out is an f16 activation: packed binary16 pairs (stores round to the nearest half)
	AF16   uint32  `wgsl:"a_f16"`   // 1: a is an f16 activation: packed binary16 pairs
	BF16   uint32  `wgsl:"b_f16"`   // 1: b is an f16 activation
	// scale (fusion.ScaleOp, fusion.ColumnsOp): a's row length and first
	// column read, whether b[0] (an f32 weight) multiplies too, and
	// whether out is read in place of a. glu for fusion.SigmoidGateOp:
	// ACols 1 reads one value of a per row, InPlace reads out in place of
	// b.
	ACols   uint32 `wgsl:"a_cols"`
	AOff    uint32 `wgsl:"a_off"`
	HasB    uint32 `wgsl:"has_b"`
	InPlace uint32 `wgsl:"in_place"`
	Sigmoid uint32 `wgsl:"sigmoid"` // glu: 1 gates with sigmoid(a) (fusion.SigmoidGateOp), not act(a)
	// scale over a pooling grid (fusion.AvgPoolOp): with PoolSide > 0 the
	// first PoolSide² rows of a are a grid, row-major, and out's row t is
	// the sum of the PoolKernel² cells of pooled cell t (times the factor);
	// out's rows past the pooled grid are zero.
	PoolSide   uint32 `wgsl:"pool_side"`
	PoolKernel uint32 `wgsl:"pool_kernel"`
	Pad3       uint32 `wgsl:"pad3"`
	Pad4       uint32 `wgsl:"pad4"`
}

// MoEParams is the uniform block of wgsl/moe.wgsl (fusion.MoEOp after its
// router product).
type MoEParams struct {
	Cols     uint32  `wgsl:"cols"`      // columns of x (moe_glu) and of out (moe_down)
	Hidden   uint32  `wgsl:"hidden"`    // rows per expert of gate and up, columns of down
	Experts  uint32  `wgsl:"experts"`   // router logits per row
	Used     uint32  `wgsl:"used"`      // experts per row
	NRows    uint32  `wgsl:"nrows"`     // rows of x and out
	WT       uint32  `wgsl:"wt"`        // a WeightType: the bound expert weights'
	ST       uint32  `wgsl:"st"`        // a ScaleType
	Block    uint32  `wgsl:"block"`     // elements per scale (0: unquantized)
	NBlocks  uint32  `wgsl:"nblocks"`   // scales per row
	Act      uint32  `wgsl:"act"`       // moe_glu: an Activation
	NormTopK uint32  `wgsl:"norm_topk"` // moe_route: 1: the selected probabilities renormalized to sum 1
	XF16     uint32  `wgsl:"x_f16"`     // 1: x is an f16 activation: packed binary16 pairs
	OutF16   uint32  `wgsl:"out_f16"`   // 1: out is an f16 activation
	Grouped  uint32  `wgsl:"grouped"`   // 1: the slots grouped by expert (prefill: each expert's rows read once per step)
	QT       uint32  `wgsl:"qt"`        // a BlockType: the bound expert weights' llama.cpp block type (0: none, then WT and ST)
	Gating   uint32  `wgsl:"gating"`    // moe_route: 0: softmax over the experts (fusion.GatingSoftmax), 1: softmax of the selected logits (GatingSoftmaxWeight)
	Bias     uint32  `wgsl:"bias"`      // MoEBias bits: the expert biases bound
	GBOff    uint32  `wgsl:"gb_off"`    // moe_glu: word offset of the gate bias in s (in s2 with MoEBiasS2)
	UBOff    uint32  `wgsl:"ub_off"`    // moe_glu: word offset of the up bias in s2
	OAI      uint32  `wgsl:"oai"`       // moe_glu: 1: swiglu_oai of Alpha and Limit (fusion.ActSwiGLUOAI) in place of act(g) * u
	Alpha    float32 `wgsl:"alpha"`
	Limit    float32 `wgsl:"limit"`
	Pad3     uint32  `wgsl:"pad3"`
	Pad4     uint32  `wgsl:"pad4"`
}

// ArgmaxParams is the uniform block of wgsl/argmax.wgsl.
type ArgmaxParams struct {
	N       uint32 `wgsl:"n"`
	Advance uint32 `wgsl:"advance"` // 1: the step tensor is a DecodeStep the kernel advances after its pick (wgsl/lib/step_advance.wgsl)
	Pad1    uint32 `wgsl:"pad1"`
	Pad2    uint32 `wgsl:"pad2"`
}

// SampleParams is the uniform block of wgsl/sample.wgsl: fusion.Sample's
// rule for one logits row of N values. InvTemperature is
// internal/sampler.InvTemperature of the temperature; the seed is split
// into its low and high words (the Philox key).
type SampleParams struct {
	N              uint32  `wgsl:"n"`
	InvTemperature float32 `wgsl:"inv_temperature"`
	TopK           uint32  `wgsl:"top_k"`
	TopP           float32 `wgsl:"top_p"`
	SeedLo         uint32  `wgsl:"seed_lo"`
	SeedHi         uint32  `wgsl:"seed_hi"`
	RuleAt         uint32  `wgsl:"rule_at"` // 0: the rule above; else the step word of DecodeStep.InvTemperature (DecodeStepRuleAt)
	Advance        uint32  `wgsl:"advance"` // 1: the step tensor is a DecodeStep the kernel advances after its pick (wgsl/lib/step_advance.wgsl)
}

func (MatParams) params()    {}
func (EmbedParams) params()  {}
func (NormParams) params()   {}
func (RopeParams) params()   {}
func (KVParams) params()     {}
func (RopeKVParams) params() {}
func (AttnParams) params()   {}
func (EltParams) params()    {}
func (ArgmaxParams) params() {}
func (SampleParams) params() {}
func (QParams) params()      {}
func (MoEParams) params()    {}

// MatMulVariant selects the module of wgsl/matmul.wgsl: the weight type,
// the scale type (when Quant) and whether the kernels compute MatMulGLU
// (gate and up weights) or one MatMul.
type MatMulVariant struct {
	Weight WeightType
	Scale  ScaleType
	Quant  bool
	GLU    bool
	// Subgroups selects the module holding matvec_sg (the decode kernel
	// reducing through subgroup operations; Vulkan, and a browser's WebGPU
	// with subgroups) instead of the portable kernels.
	Subgroups bool
	// F16 (with Subgroups) selects the Vulkan module holding
	// matvec_sg_h instead: matvec_sg in f16 arithmetic, for f16
	// activations on devices with shaderFloat16 (wgsl/ext/f16.wgsl). Only
	// f16, int8 and int4 weights have it (F16Weights).
	F16 bool
	// Norm (with Subgroups, not F16) selects the module whose matvec_sg
	// takes the RMS-norm prologue, as matvec_lanes_norm does (the WGSL
	// constant SG_NORM).
	Norm bool
}

// F16Weights reports whether weights of type w have f16-arithmetic
// variants: f16 weights and int8/int4 codes convert to f16 exactly; f32
// and bf16 weights would be rounded (bf16 also out of range), and their
// kernels are bound by the weight bytes anyway.
func F16Weights(w WeightType) bool { return w == WeightF16 || w == WeightI8 || w == WeightI4 }

// MatMulVariants lists every matmul module: unquantized f32, f16 and bf16,
// quantized int8 and int4 with f32 or f16 scales, each plain and GLU, each
// of those again with Subgroups, with Subgroups and Norm, and those of
// F16Weights once more with Subgroups and F16.
func MatMulVariants() []MatMulVariant {
	var out []MatMulVariant
	for _, mode := range []struct{ sg, h, norm bool }{{false, false, false}, {true, false, false}, {true, false, true}, {true, true, false}} {
		for _, glu := range []bool{false, true} {
			for _, w := range []WeightType{WeightF32, WeightF16, WeightBF16} {
				if !mode.h || F16Weights(w) {
					out = append(out, MatMulVariant{Weight: w, GLU: glu, Subgroups: mode.sg, F16: mode.h, Norm: mode.norm})
				}
			}
			for _, w := range []WeightType{WeightI8, WeightI4} {
				for _, s := range []ScaleType{ScaleF32, ScaleF16} {
					out = append(out, MatMulVariant{Weight: w, Scale: s, Quant: true, GLU: glu, Subgroups: mode.sg, F16: mode.h, Norm: mode.norm})
				}
			}
		}
	}
	return out
}

// Variant is the module specialization of v.
func (v MatMulVariant) Variant() Variant {
	key := v.Weight.String()
	if v.Quant {
		key += "_" + v.Scale.String()
	}
	if v.GLU {
		key += "_glu"
	}
	var ext []string
	var entry string
	if v.Subgroups {
		key += "_sg"
		ext, entry = []string{"subgroups"}, "matvec_sg"
		if v.F16 {
			key += "_h"
			ext, entry = append(ext, "f16"), "matvec_sg_h"
		}
		if v.Norm {
			key += "_norm"
		}
	}
	b := func(x bool) string {
		if x {
			return "true"
		}
		return "false"
	}
	sh := v.Shape()
	r := Variant{Key: key, Ext: ext, Entry: entry, Consts: []Const{
		{"WT", "u32", fmt.Sprintf("%du", uint32(v.Weight))},
		{"ST", "u32", fmt.Sprintf("%du", uint32(v.Scale))},
		{"EPW", "u32", fmt.Sprintf("%du", v.Weight.ElemsPerWord())},
		{"QUANT", "bool", b(v.Quant)},
		{"GLU", "bool", b(v.GLU)},
		{"LV_WG", "u32", fmt.Sprintf("%du", sh.LanesWG)},
		{"LV_ROWS", "u32", fmt.Sprintf("%du", sh.LanesRows)},
		{"MM_TOKENS", "u32", fmt.Sprintf("%du", sh.TileTokens)},
		{"MM_ROWS", "u32", fmt.Sprintf("%du", sh.TileRows)},
		{"MM_K", "u32", fmt.Sprintf("%du", sh.TileK)},
	}}
	if v.Subgroups {
		r.Consts = append(r.Consts, Const{"SG_NORM", "bool", b(v.Norm)})
	}
	return r
}

// QBlockVariant is a module of wgsl/qblocks.wgsl: the kernels of one
// sub-block layout (every block type of that layout), and with Subgroups
// the module of qmatvec_sg (wgsl/ext/qsubgroups.wgsl; Vulkan, and a
// browser's WebGPU with subgroups).
type QBlockVariant struct {
	Layout    BlockLayout
	Subgroups bool
}

// QBlockVariants lists the modules of wgsl/qblocks.wgsl.
func QBlockVariants() []QBlockVariant {
	var out []QBlockVariant
	for _, sg := range []bool{false, true} {
		for _, l := range blockLayouts {
			out = append(out, QBlockVariant{Layout: l.code, Subgroups: sg})
		}
	}
	return out
}

// QMatVecRows is the rows of each lane group of qblocks.wgsl's qmatvec
// and qmatvec_sg (the WGSL constant QV_ROWS): each activation load feeds
// that many weight rows. Fixed at 4: a group's sums are one vec4.
const QMatVecRows = 4

// QMatVecWG is the invocations of a qmatvec or qmatvec_sg workgroup (the
// WGSL constant QV_WG), 32 as MatMulShape.LanesWG and for its reasons.
const QMatVecWG = 32

// Variant is the module specialization of v: the constants QL (the
// layout), QSUB (elements per sub-block), QV_ROWS (QMatVecRows) and QV_WG
// (QMatVecWG).
func (v QBlockVariant) Variant() Variant {
	r := Variant{Key: v.Layout.String(), Consts: []Const{
		{"QL", "u32", fmt.Sprintf("%du", uint32(v.Layout))},
		{"QSUB", "u32", fmt.Sprintf("%du", v.Layout.SubLen())},
		{"QV_ROWS", "u32", fmt.Sprintf("%du", QMatVecRows)},
		{"QV_WG", "u32", fmt.Sprintf("%du", QMatVecWG)},
	}}
	if v.Subgroups {
		r.Key += "_sg"
		r.Ext, r.Entry = []string{"qsubgroups"}, "qmatvec_sg"
	}
	return r
}

// RopeKV is the kernel of wgsl/qkv.wgsl (fusion.MatMulRopeKV), RopeKVSg
// its subgroup form (wgsl/ext/qkvsubgroups.wgsl; Vulkan, and a browser's
// WebGPU with subgroups).
const (
	RopeKV   = "lanes_rope_kv"
	RopeKVSg = "lanes_rope_kv_sg"
)

// RopeKVVariant is the module of wgsl/qkv.wgsl for v's weights (GLU, F16
// and Norm ignored), with v.Subgroups the one of RopeKVSg.
func (v MatMulVariant) RopeKVVariant() Variant {
	mv := v
	mv.GLU, mv.Subgroups, mv.F16, mv.Norm = false, false, false, false
	r := mv.Variant()
	r.Key += "_lanes"
	r.Entry = RopeKV
	if v.Subgroups {
		r.Key += "_sg"
		r.Ext, r.Entry = []string{"qkvsubgroups"}, RopeKVSg
	}
	return r
}

// RopeQKV is the second uniform block of wgsl/qkv.wgsl (binding rq):
// what lanes_rope_kv needs beyond MatParams, the rope and the cache store
// (TestRopeQKVLayout holds it to the WGSL struct).
type RopeQKV struct {
	Heads    uint32    `wgsl:"heads"`
	KVHeads  uint32    `wgsl:"kv_heads"`
	HeadDim  uint32    `wgsl:"head_dim"`
	RopeDims uint32    `wgsl:"rope_dims"`
	Style    RopeStyle `wgsl:"style"` // RopePairs or RopeHalves
	MaxLen   uint32    `wgsl:"max_len"`
	KVF16    uint32    `wgsl:"kv_f16"`   // 1: the cache holds binary16 pairs
	KFirst   uint32    `wgsl:"k_first"`  // first work unit of k
	VFirst   uint32    `wgsl:"v_first"`  // first work unit of v
	HasNorm  uint32    `wgsl:"has_norm"` // 1: the norm prologue
	Ring     uint32    `wgsl:"ring"`     // 0: slot = position; else KVParams.Ring's mirrored ring
	// SOffQ, SOffK and SOffV are the words of the first scale of Wq, Wk
	// and Wv in their bindings (quantized weights: the scales follow the
	// rows in one buffer).
	SOffQ uint32 `wgsl:"s_off_q"`
	SOffK uint32 `wgsl:"s_off_k"`
	SOffV uint32 `wgsl:"s_off_v"`
	_     uint32 `wgsl:"pad3"`
	_     uint32 `wgsl:"pad4"`
	// Freq holds rope_base^(-2i/rope_dims) for i < RopeDims/2, four to a
	// vec4 (a uniform array's stride is 16 bytes).
	Freq [RopeQKVFreqs / 4][4]float32 `wgsl:"freq"`
}

// RopeQKVFreqs is the most rope frequencies RopeQKV holds (rope dims up
// to twice as many).
const RopeQKVFreqs = 256

// RopeQKVBytes is the size of RopeQKV: 16 words, then 64 vec4s of rope
// frequencies.
const RopeQKVBytes = 64 + RopeQKVFreqs*4

// SetFreq stores frequency i (i < RopeQKVFreqs).
func (r *RopeQKV) SetFreq(i int, f float32) { r.Freq[i/4][i%4] = f }

// Bytes is the little-endian encoding of r.
func (r *RopeQKV) Bytes() ([]byte, error) {
	b, err := binary.Append(make([]byte, 0, RopeQKVBytes), binary.LittleEndian, r)
	if err != nil {
		return nil, fmt.Errorf("shaders: encode RopeQKV: %w", err)
	}
	return b, nil
}

// CheckRopeQKVLayout holds wgsl/qkv.wgsl's struct RopeQKV to its Go twin.
func CheckRopeQKVLayout() error {
	r := load()
	if r.err != nil {
		return r.err
	}
	f, ok := r.families["qkv"]
	if !ok {
		return fmt.Errorf("%w: family qkv", ErrUnknown)
	}
	return checkBlock("qkv", f.WGSL, "RopeQKV", reflect.TypeOf(RopeQKV{}))
}

// SubgroupVariantFits reports whether the subgroup variants run on a device
// of subgroup size n: a power of two from 4 (the smallest Vulkan allows) to
// 64, so lane groups and subgroups nest (a subgroup of 64 holds matvec_sg's
// whole workgroup of LanesWG).
func SubgroupVariantFits(n int) bool { return n >= 4 && n <= 64 && n&(n-1) == 0 }

// MatMulShape is the work split of the matmul kernels of a variant; the
// WGSL constants are generated from it, and the host sizes dispatches
// with it.
type MatMulShape struct {
	// LanesWG is the invocations of a matvec_lanes workgroup (LV_WG):
	// 32, not 64, so its reduction arrays (red, red_hi, red_ss) are half
	// as large and zero-initialized by half as many invocations, a cost
	// that grows with both in Chromium on SwiftShader (attention.wgsl's
	// SPLIT_WG); on a GPU whose subgroups hold 32 or more invocations a
	// workgroup is one subgroup.
	LanesWG    int
	LanesRows  int // matvec_lanes: rows per group of lanes
	TileTokens int // matmul: tokens per workgroup
	TileRows   int // matmul: output rows per workgroup
	TileK      int // matmul: columns per staged step
}

// Shape returns the work split of v's kernels: GLU tiles hold half the
// output rows (each has a gate and an up weight row).
func (v MatMulVariant) Shape() MatMulShape {
	rows := 64
	if v.GLU {
		rows = 32
	}
	return MatMulShape{LanesWG: 32, LanesRows: 4, TileTokens: 32, TileRows: rows, TileK: 32}
}

// ChunkElems is how many weight elements one 16-byte chunk holds: the
// chunked paths need rows and scale blocks that are multiples of it.
func (v MatMulVariant) ChunkElems() int { return 4 * v.Weight.ElemsPerWord() }
