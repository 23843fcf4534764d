package fusion

import (
	"fmt"
	"math"
	"slices"
)

// NormKind is the normalization of a Norm op.
type NormKind uint8

const (
	NormRMS   NormKind = iota + 1 // x / sqrt(mean(x^2) + eps) * w
	NormLayer                     // (x - mean) / sqrt(var + eps) * w + b
)

// Act is the activation of the GLU, Activation, MatMulGLU and MoE ops.
type Act uint8

const (
	ActSiLU Act = iota + 1
	// ActGELUTanh is the tanh approximation evaluated as llama.cpp's CPU
	// backend does: fp16(gelu_tanh(fp16(x))) for -10 < x < 10, 0 for
	// x <= -10, x for x >= 10 (an exact f32 formula is within ~2e-3
	// relative; internal/backend/cpu implements the table form).
	ActGELUTanh
	ActGELU // erf form
	ActReLU
	// ActSwiGLUOAI is gpt-oss's clamped gated unit (llama.cpp's
	// swiglu_oai), of a gate g and an up projection u, with the
	// parameters of SwiGLUOAIParams (MoEOp.SwiGLUOAI):
	//
	//	x = min(g, Limit); y = clamp(u, -Limit, Limit)
	//	out = x / (1 + exp(-Alpha*x)) * (y + 1)
	//
	// It is not of the form act(g) * u, so only the MoE op takes it.
	ActSwiGLUOAI
)

// SwiGLUOAIParams are the parameters of ActSwiGLUOAI: both positive and
// finite.
type SwiGLUOAIParams struct {
	Alpha, Limit float32
}

// SwiGLUOAIDefault are gpt-oss's parameters: llama.cpp's constants
// (build_moe_ffn, LLM_FFN_SWIGLU_OAI_MOE), not read from the GGUF.
var SwiGLUOAIDefault = SwiGLUOAIParams{Alpha: 1.702, Limit: 7}

func (p SwiGLUOAIParams) valid() bool {
	ok := func(v float32) bool { return v > 0 && !math.IsInf(float64(v), 0) }
	return ok(p.Alpha) && ok(p.Limit)
}

// RopeStyle is how a Rope op pairs the dims it rotates.
type RopeStyle uint8

const (
	RopeInterleaved RopeStyle = iota + 1 // pairs (2i, 2i+1)
	RopeHalves                           // pairs (i, i + dims/2)
)

// The names of the parameters are the strings of tensors/model's config
// (model.NormRMS, model.ActSiLU, model.RopeHalves...), repeated here so
// that fusion depends on nothing; Parse* is the one place where a config's
// strings become these types.
var (
	normNames = [...]string{NormRMS: "rms", NormLayer: "layer"}
	actNames  = [...]string{ActSiLU: "silu", ActGELUTanh: "gelu_tanh", ActGELU: "gelu", ActReLU: "relu", ActSwiGLUOAI: "swiglu_oai"}
	ropeNames = [...]string{RopeInterleaved: "interleaved", RopeHalves: "halves"}
)

func name[T ~uint8](names []string, v T, what string) string {
	if int(v) > 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", what, uint8(v))
}

func parse[T ~uint8](names []string, s, what string) (T, error) {
	for i, n := range names {
		if i > 0 && n == s {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown %s %q", ErrInvalid, what, s)
}

func (k NormKind) String() string  { return name(normNames[:], k, "norm") }
func (a Act) String() string       { return name(actNames[:], a, "act") }
func (s RopeStyle) String() string { return name(ropeNames[:], s, "rope_style") }

// Valid reports whether k is one of the constants.
func (k NormKind) Valid() bool { return k == NormRMS || k == NormLayer }

// Valid reports whether a is one of the constants.
func (a Act) Valid() bool { return a >= ActSiLU && a <= ActSwiGLUOAI }

// Elementwise reports whether a is a function of one value (every
// constant but ActSwiGLUOAI): the activations of the GLU, Activation and
// MatMulGLU ops.
func (a Act) Elementwise() bool { return a >= ActSiLU && a <= ActReLU }

// Valid reports whether s is one of the constants.
func (s RopeStyle) Valid() bool { return s == RopeInterleaved || s == RopeHalves }

// ParseNormKind returns the norm kind of a model config's name ("rms",
// "layer"); an unknown name is an ErrInvalid.
func ParseNormKind(s string) (NormKind, error) { return parse[NormKind](normNames[:], s, "norm kind") }

// ParseAct returns the activation of a model config's name ("silu",
// "gelu_tanh", "gelu", "relu", "swiglu_oai"); an unknown name is an ErrInvalid.
func ParseAct(s string) (Act, error) { return parse[Act](actNames[:], s, "activation") }

// ParseRopeStyle returns the rope style of a model config's name
// ("interleaved", "halves"); an unknown name is an ErrInvalid.
func ParseRopeStyle(s string) (RopeStyle, error) {
	return parse[RopeStyle](ropeNames[:], s, "rope style")
}

// HeadShape is the head geometry of the positional and KV-cache ops:
// Heads query heads and KVHeads key/value heads, each of HeadDim values.
type HeadShape struct {
	Heads, KVHeads, HeadDim int
}

// RopeParams is the rotation of a Rope or RopeStoreKV op: the first Dims
// dims of each head (even, at most the head dim; 0 rotates nothing),
// paired per Style, pair i at position p turned by
// θ_i = p * Base^(-2i/Dims) / Factors[i] (Factors nil: all 1; else Dims/2
// positive values: Llama 3's rope_freqs, LongRoPE's factor lists, linear
// scaling), and both cos θ_i and sin θ_i multiplied by Scale (0 means 1;
// LongRoPE's attention factor, so it scales the rotated dims only).
type RopeParams struct {
	Dims    int
	Base    float32
	Style   RopeStyle
	Factors []float32
	Scale   float32
}

// Equal reports whether r and o rotate alike.
func (r RopeParams) Equal(o RopeParams) bool {
	return r.Dims == o.Dims && r.Base == o.Base && r.Style == o.Style && r.Scale == o.Scale && slices.Equal(r.Factors, o.Factors)
}

// Freq returns the angular frequency of pair i, Base^(-2i/Dims) / Factors[i],
// computed in float64.
func (r RopeParams) Freq(i int) float64 {
	f := math.Pow(float64(r.Base), -2*float64(i)/float64(r.Dims))
	if r.Factors != nil {
		f /= float64(r.Factors[i])
	}
	return f
}

func (r RopeParams) check(headDim int) error {
	if r.Dims < 0 || r.Dims > headDim || r.Dims%2 != 0 {
		return fmt.Errorf("%w: rope dims %d with head dim %d", ErrInvalid, r.Dims, headDim)
	}
	if !r.Style.Valid() {
		return fmt.Errorf("%w: rope style %s", ErrInvalid, r.Style)
	}
	if !(r.Base > 0) || math.IsInf(float64(r.Base), 0) {
		return fmt.Errorf("%w: rope base %g", ErrInvalid, r.Base)
	}
	if r.Factors != nil && len(r.Factors) != r.Dims/2 {
		return fmt.Errorf("%w: %d rope factors for %d rotated dims", ErrInvalid, len(r.Factors), r.Dims)
	}
	for _, f := range r.Factors {
		if !(f > 0) || math.IsInf(float64(f), 0) {
			return fmt.Errorf("%w: rope factor %g", ErrInvalid, f)
		}
	}
	if !(r.Scale >= 0) || math.IsInf(float64(r.Scale), 0) {
		return fmt.Errorf("%w: rope scale %g", ErrInvalid, r.Scale)
	}
	return nil
}

// Clone returns a copy that shares no factor table with r.
func (r RopeParams) Clone() RopeParams {
	r.Factors = slices.Clone(r.Factors)
	return r
}

// Projection is one product W · x + Bias of a MatMul kind: W is
// [out cols, in cols] in any stored type (f32, f16, bf16, int8, int4;
// per-channel or block scales), Bias a vector of out cols or "" for none.
type Projection struct {
	Weight string
	Bias   string
}

// Product is one output of a MultiMatMul: Out = W · In + Bias.
type Product struct {
	Out Buf
	Projection
}

// RMSPrologue is the RMS-norm prologue of a MatMul, MultiMatMul,
// MatMulGLU or MatMulRopeKV: every product reads n[t] = rmsnorm(In[t]) * Weight (a Norm of
// kind NormRMS, no bias, with Eps) in place of In[t], computed exactly as
// that Norm computes it; In itself is only read.
type RMSPrologue struct {
	Weight string
	Eps    float32
}

// check checks a prologue (nil: none) of a product reading in.
func (p *RMSPrologue) check(g *Graph, in Buf, shape WeightShape) error {
	if p == nil {
		return nil
	}
	if p.Weight == "" {
		return fmt.Errorf("%w: norm prologue without a weight", ErrInvalid)
	}
	if !(p.Eps >= 0) {
		return fmt.Errorf("%w: norm prologue eps %g", ErrInvalid, p.Eps)
	}
	return checkVector(shape, p.Weight, g.Bufs[in].Cols)
}

func (p *RMSPrologue) clone() *RMSPrologue {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}
