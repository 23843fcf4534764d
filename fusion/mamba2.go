package fusion

import "fmt"

// Mamba2Op: the Mamba-2 mixer of a Granite 4.0 H layer (llama.cpp's
// src/models/mamba-base.cpp), from its input projection's output to the
// gated norm before its output projection, with its state. With I =
// Inner, H = Heads, P = I/H (head dim), G = Groups, N = State (d_state)
// and K = Width, each row of In holds [z (I) | x (I) | B (G*N) | C (G*N) |
// dt (H)] and Out gets I values. For row t at position p = Pos+t (Pos[t]
// in a batched graph, with the state of sequence Seq[t]):
//
//  1. The causal depthwise convolution of u = [x | B | C] (the conv's
//     CC = I+2GN channels), with bias, then SiLU, per channel c:
//     xBC_p[c] = SiLU(ConvBias[c] + Σ_{j<K} Conv[c][j] · u_{p-K+1+j}[c])
//     (tap K-1 multiplies the current token; u before position 0 is 0).
//  2. The step size per head h: Δ_h = softplus(dt[h] + DtBias[h]), with
//     softplus(v) = ln(1+e^v) (v for v > 20).
//  3. The selective scan, per head h of group g = h / (H/G), with the
//     state S_h a P x N matrix (zero before position 0):
//     S_h ← exp(Δ_h · A[h]) · S_h + (Δ_h · x_h) B_gᵀ
//     y_h = S_h C_g + D[h] · x_h
//  4. The gated norm, per group of I/G channels: y ⊙ SiLU(z), then
//     RMS-normed (Eps) over the group and multiplied by Norm (I values).
//
// Conv = Conv is [CC, K] (GGUF's ssm_conv1d [K, CC]); ConvBias is [CC];
// DtBias, A (= -exp(A_log), the converters' ssm_a) and D are [H]; Norm is
// [I]. The state of Layer (KVSpec.State[Layer]) holds the last K-1 values
// of u (ConvChannels = CC, ConvWindow = K-1) followed by the H matrices
// (MatrixHeads = H, MatrixRows = P, MatrixCols = N), which the op leaves
// describing position p+1 of its last row. Out must not alias In.
type Mamba2Op struct {
	Out, In                            Buf
	Conv, ConvBias, DtBias, A, D, Norm string
	Layer                              int
	Inner, Heads, Groups, State, Width int
	Eps                                float32
}

func (*Mamba2Op) Kind() Kind       { return Mamba2 }
func (o *Mamba2Op) Inputs() []Buf  { return []Buf{o.In} }
func (o *Mamba2Op) Outputs() []Buf { return []Buf{o.Out} }
func (o *Mamba2Op) bufs() []*Buf   { return []*Buf{&o.Out, &o.In} }
func (o *Mamba2Op) clone() Op      { c := *o; return &c }

// ConvChannels is the convolution's channels: x, B and C.
func (o *Mamba2Op) ConvChannels() int { return o.Inner + 2*o.Groups*o.State }

// InCols is the width of In: z, x, B, C and dt.
func (o *Mamba2Op) InCols() int { return 2*o.Inner + 2*o.Groups*o.State + o.Heads }

// LayerState is the state the op's layer must keep.
func (o *Mamba2Op) LayerState() LayerState {
	return LayerState{ConvChannels: o.ConvChannels(), ConvWindow: o.Width - 1,
		MatrixHeads: o.Heads, MatrixRows: o.Inner / max(o.Heads, 1), MatrixCols: o.State}
}

func (o *Mamba2Op) validate(g *Graph, shape WeightShape) error {
	out, in := g.Bufs[o.Out], g.Bufs[o.In]
	if o.Out == o.In {
		return fmt.Errorf("%w: mamba2 output aliases its input %q", ErrInvalid, out.Name)
	}
	const limit = 1 << 16
	if o.Inner <= 0 || o.Inner > 1<<20 || o.Heads <= 0 || o.Heads > limit || o.Groups <= 0 || o.Groups > limit ||
		o.State <= 0 || o.State > limit || o.Width < 2 || o.Width > 1<<10 || o.Inner%o.Heads != 0 || o.Heads%o.Groups != 0 ||
		o.Groups*o.State > 1<<20 || !(o.Eps > 0) {
		return fmt.Errorf("%w: mamba2 of inner %d, %d heads, %d groups, state %d, width %d, eps %g",
			ErrInvalid, o.Inner, o.Heads, o.Groups, o.State, o.Width, o.Eps)
	}
	if in.Cols != o.InCols() || out.Cols != o.Inner {
		return fmt.Errorf("%w: mamba2 of inner %d from %q (%d columns, want %d) into %q (%d)",
			ErrInvalid, o.Inner, in.Name, in.Cols, o.InCols(), out.Name, out.Cols)
	}
	if st := g.KV.LayerState(o.Layer); o.Layer < 0 || o.Layer >= g.KV.Layers || st != o.LayerState() {
		return fmt.Errorf("%w: mamba2 of layer %d needs state %+v, cache state %+v", ErrInvalid, o.Layer, o.LayerState(), st)
	}
	for _, w := range []string{o.ConvBias, o.DtBias, o.A, o.D, o.Norm} {
		if w == "" {
			return fmt.Errorf("%w: mamba2 of layer %d without one of its vectors (conv bias, dt bias, A, D, norm)", ErrInvalid, o.Layer)
		}
	}
	cc := o.ConvChannels()
	return firstErr(g.perToken(out, in), checkWeight(shape, o.Conv, cc, o.Width),
		checkVector(shape, o.ConvBias, cc), checkVector(shape, o.DtBias, o.Heads),
		checkVector(shape, o.A, o.Heads), checkVector(shape, o.D, o.Heads), checkVector(shape, o.Norm, o.Inner))
}
