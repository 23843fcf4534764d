package fusion

import (
	"fmt"
	"math"
)

// DeltaNetOp (kind DeltaNet, "gated_delta_net"): the recurrent core of a
// Gated DeltaNet layer (Qwen3.5; llama.cpp's delta-net-base.cpp and
// ggml_gated_delta_net), with its state. K = KeyHeads, V = ValueHeads (a multiple of K), D = HeadDim (the
// key and the value head dim), C = (2K+V)·D channels. QKV has C columns,
// each row [q (K·D) | k (K·D) | v (V·D)] before the convolution; Beta and
// Alpha have V columns; Out has V·D. For row t at position p = Pos+t
// (Pos[t] in a batched graph, with the state of sequence Seq[t]):
//
//	x_p     = QKV[t]
//	c       = SiLU(Σ_{j<Width} Conv[ch][j] · x_{p-Width+1+j}[ch])   per channel ch
//	q_i,k_i = head i of c's q and k, each divided by max(‖·‖₂, Eps)
//	v_h     = head h of c's v
//	β_h     = sigmoid(Beta[t][h])
//	g_h     = softplus(Alpha[t][h] + DtBias[h]) · A[h]    (softplus(x) = x for x > 20)
//
// and for every value head h, with key head i = h mod K (heads tiled, as
// llama.cpp's converter orders them), its D×D state S_h (indexed [key
// dim][value dim]; zero before position 0) goes, decay before the read:
//
//	S_h       ← exp(g_h) · S_h
//	S_h       ← S_h + k_i · (β_h · (v_h − S_hᵀ k_i))ᵀ
//	Out[t][h] = S_hᵀ q_i / √D
//
// Conv is [C, Width] (GGUF's ssm_conv1d [Width, C]: tap Width-1 multiplies
// the current row), DtBias and A are [V] (A = −exp(A_log) < 0, so g ≤ 0
// and the state decays). x of positions before Pos comes from the state
// of Layer (KVSpec.State[Layer]: ConvChannels = C, ConvWindow = Width-1,
// MatrixHeads = V, MatrixRows = MatrixCols = D), which the op leaves
// holding the last Width-1 rows of x and the matrices after row T-1. The
// output norm, its SiLU(z) gate and the output projection are ordinary
// ops after it. Out aliases none of the inputs.
type DeltaNetOp struct {
	Out, QKV, Beta, Alpha Buf
	Conv, DtBias, A       string
	Layer                 int
	KeyHeads, ValueHeads  int
	HeadDim, Width        int
	Eps                   float32
}

// SigmoidGateOp: Out = In ⊙ sigmoid(Gate), elementwise (Qwen3.5's gated
// attention: each attention output value times the sigmoid of its gate
// row, a second projection of the layer's input); a Gate of one column
// scales each row by the sigmoid of its one value (Qwen3.5 MoE's shared
// expert). Out may alias In.
type SigmoidGateOp struct {
	Out, In, Gate Buf
}

func (*DeltaNetOp) Kind() Kind          { return DeltaNet }
func (*SigmoidGateOp) Kind() Kind       { return SigmoidGate }
func (o *DeltaNetOp) Inputs() []Buf     { return []Buf{o.QKV, o.Beta, o.Alpha} }
func (o *SigmoidGateOp) Inputs() []Buf  { return []Buf{o.In, o.Gate} }
func (o *DeltaNetOp) Outputs() []Buf    { return []Buf{o.Out} }
func (o *SigmoidGateOp) Outputs() []Buf { return []Buf{o.Out} }
func (o *DeltaNetOp) bufs() []*Buf      { return []*Buf{&o.Out, &o.QKV, &o.Beta, &o.Alpha} }
func (o *SigmoidGateOp) bufs() []*Buf   { return []*Buf{&o.Out, &o.In, &o.Gate} }
func (o *DeltaNetOp) clone() Op         { c := *o; return &c }
func (o *SigmoidGateOp) clone() Op      { c := *o; return &c }

// Channels is the width of the op's convolution, (2K+V)·D.
func (o *DeltaNetOp) Channels() int { return (2*o.KeyHeads + o.ValueHeads) * o.HeadDim }

// State is the layer state the op needs.
func (o *DeltaNetOp) State() LayerState {
	return LayerState{ConvChannels: o.Channels(), ConvWindow: o.Width - 1, MatrixHeads: o.ValueHeads, MatrixRows: o.HeadDim, MatrixCols: o.HeadDim}
}

func (o *DeltaNetOp) validate(g *Graph, shape WeightShape) error {
	const limit = 1 << 16
	k, v, d := o.KeyHeads, o.ValueHeads, o.HeadDim
	if k <= 0 || v <= 0 || d <= 0 || k > limit || v > limit || d > limit || v%k != 0 || o.Width < 2 || o.Width > 1<<10 ||
		!(o.Eps >= 0) || math.IsInf(float64(o.Eps), 0) {
		return fmt.Errorf("%w: gated_delta_net of %d key heads, %d value heads of %d, width %d, eps %g", ErrInvalid, k, v, d, o.Width, o.Eps)
	}
	out, qkv, beta, alpha := g.Bufs[o.Out], g.Bufs[o.QKV], g.Bufs[o.Beta], g.Bufs[o.Alpha]
	for _, in := range o.Inputs() {
		if in == o.Out {
			return fmt.Errorf("%w: gated_delta_net output aliases its input %q", ErrInvalid, out.Name)
		}
	}
	if qkv.Cols != o.Channels() || beta.Cols != v || alpha.Cols != v || out.Cols != v*d {
		return fmt.Errorf("%w: gated_delta_net of %d channels, %d value heads of %d: %q has %d columns, %q %d, %q %d, %q %d",
			ErrInvalid, o.Channels(), v, d, qkv.Name, qkv.Cols, beta.Name, beta.Cols, alpha.Name, alpha.Cols, out.Name, out.Cols)
	}
	if st := g.KV.LayerState(o.Layer); o.Layer < 0 || o.Layer >= g.KV.Layers || st != o.State() {
		return fmt.Errorf("%w: gated_delta_net of layer %d needs state %+v: cache state %+v", ErrInvalid, o.Layer, o.State(), st)
	}
	return firstErr(g.perToken(out, qkv, beta, alpha), checkWeight(shape, o.Conv, o.Channels(), o.Width),
		checkVectorSet(shape, o.DtBias, v), checkVectorSet(shape, o.A, v))
}

func (o *SigmoidGateOp) validate(g *Graph, _ WeightShape) error {
	if o.Gate == o.Out {
		return fmt.Errorf("%w: sigmoid_gate output aliases its gate %q", ErrInvalid, g.Bufs[o.Out].Name)
	}
	if g.Bufs[o.Gate].Cols == 1 {
		return firstErr(g.sameRows(o.Out, o.In, o.Gate), g.sameCols(o.Out, o.In))
	}
	return firstErr(g.sameRows(o.Out, o.In, o.Gate), g.sameCols(o.Out, o.In, o.Gate))
}

// checkVectorSet checks a required vector weight of n values.
func checkVectorSet(shape WeightShape, name string, n int) error {
	if name == "" {
		return fmt.Errorf("%w: no weight", ErrInvalid)
	}
	return checkVector(shape, name, n)
}
