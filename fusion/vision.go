package fusion

import "fmt"

// The ops of a vision encoder (a ViT over an image's patches: llama.cpp's
// clip graphs), which no text model's op covers: attention among the rows
// of one step, without a cache and without a causal mask, and average
// pooling over a grid of rows.

// SelfAttnOp: attention among the rows of the step, every row seeing
// every row (non-causal, no KV cache, no positions): for each head h of
// Heads (kv head h / (Heads/KVHeads)) and row t < T,
//
//	Out[t] = sum_{s<T} softmax_s(Scale * Q[t]·K[s]) V[s]
//
// with the softmax in f32 after subtracting the row's largest score.
// Q and Out have Heads*HeadDim columns, K and V KVHeads*HeadDim; all are
// per-token buffers. Out aliases none of Q, K, V. Scale must be > 0.
type SelfAttnOp struct {
	Out, Q, K, V Buf
	HeadShape
	Scale float32
}

// InputOp: Out[t] = row t of the rows the host gave the program
// (gpu.Program.SetInput) for its runs, as they are: a step over
// embeddings rather than token ids (an image's, from its encoder). The
// tokens of such a step only count its rows. Out is a per-token buffer;
// a graph has at most one InputOp. Not valid in a batched graph.
type InputOp struct {
	Out Buf
}

func (*InputOp) Kind() Kind       { return Input }
func (*InputOp) Inputs() []Buf    { return nil }
func (o *InputOp) Outputs() []Buf { return []Buf{o.Out} }
func (o *InputOp) bufs() []*Buf   { return []*Buf{&o.Out} }
func (o *InputOp) clone() Op      { c := *o; return &c }

func (o *InputOp) validate(g *Graph, _ WeightShape) error {
	if g.Batch {
		return fmt.Errorf("%w: input in a batched step", ErrInvalid)
	}
	n := 0
	for _, op := range g.Ops {
		if _, ok := op.(*InputOp); ok {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("%w: %d input ops (at most one)", ErrInvalid, n)
	}
	return g.perToken(g.Bufs[o.Out])
}

// InputCols is the width of the rows of g's InputOp (what
// gpu.Program.SetInput takes per row); 0: g has none.
func (g *Graph) InputCols() int {
	for _, op := range g.Ops {
		if in, ok := op.(*InputOp); ok && g.valid(in.Out) {
			return g.Bufs[in.Out].Cols
		}
	}
	return 0
}

// AvgPoolOp: In's first Side*Side rows are a Side x Side grid, row-major
// (row r*Side+c is cell (r, c)); Out's row t < m*m, m = Side/Kernel, is the
// mean of the Kernel x Kernel cells (t/m*Kernel + i, t%m*Kernel + j),
// i, j < Kernel, summed in that order (i outer) in f32 and divided by
// Kernel*Kernel; Out's rows m*m .. T-1 are zero. The step must have
// exactly Side*Side rows (T), else the run fails. Out does not alias In;
// both are per-token buffers of the same width. Gemma 3's projector
// pools the ViT's patches so.
type AvgPoolOp struct {
	Out, In      Buf
	Side, Kernel int
}

func (*SelfAttnOp) Kind() Kind       { return SelfAttn }
func (o *SelfAttnOp) Inputs() []Buf  { return []Buf{o.Q, o.K, o.V} }
func (o *SelfAttnOp) Outputs() []Buf { return []Buf{o.Out} }
func (o *SelfAttnOp) bufs() []*Buf   { return []*Buf{&o.Out, &o.Q, &o.K, &o.V} }
func (o *SelfAttnOp) clone() Op      { c := *o; return &c }

func (o *SelfAttnOp) validate(g *Graph, _ WeightShape) error {
	out, q, k, v := g.Bufs[o.Out], g.Bufs[o.Q], g.Bufs[o.K], g.Bufs[o.V]
	if o.Out == o.Q || o.Out == o.K || o.Out == o.V {
		return fmt.Errorf("%w: self_attention output %q aliases an input", ErrInvalid, out.Name)
	}
	if !(o.Scale > 0) {
		return fmt.Errorf("%w: self_attention scale %v", ErrInvalid, o.Scale)
	}
	if o.KVHeads <= 0 || o.Heads%o.KVHeads != 0 {
		return fmt.Errorf("%w: self_attention of %d heads over %d kv heads", ErrInvalid, o.Heads, o.KVHeads)
	}
	if g.Batch {
		return fmt.Errorf("%w: self_attention in a batched step", ErrInvalid)
	}
	return firstErr(g.perToken(out, q, k, v), checkHeads(o.Heads, o.HeadDim, out), checkHeads(o.Heads, o.HeadDim, q),
		checkHeads(o.KVHeads, o.HeadDim, k), checkHeads(o.KVHeads, o.HeadDim, v))
}

func (*AvgPoolOp) Kind() Kind       { return AvgPool }
func (o *AvgPoolOp) Inputs() []Buf  { return []Buf{o.In} }
func (o *AvgPoolOp) Outputs() []Buf { return []Buf{o.Out} }
func (o *AvgPoolOp) bufs() []*Buf   { return []*Buf{&o.Out, &o.In} }
func (o *AvgPoolOp) clone() Op      { c := *o; return &c }

func (o *AvgPoolOp) validate(g *Graph, _ WeightShape) error {
	out, in := g.Bufs[o.Out], g.Bufs[o.In]
	if o.Out == o.In {
		return fmt.Errorf("%w: avg_pool output aliases its input %q", ErrInvalid, in.Name)
	}
	if o.Side <= 0 || o.Kernel <= 0 || o.Side%o.Kernel != 0 || o.Side > 1<<10 || o.Side*o.Side > g.Tokens {
		return fmt.Errorf("%w: avg_pool of a %d-cell side by %d over %d rows", ErrInvalid, o.Side, o.Kernel, g.Tokens)
	}
	if g.Batch {
		return fmt.Errorf("%w: avg_pool in a batched step", ErrInvalid)
	}
	if out.Cols != in.Cols {
		return fmt.Errorf("%w: avg_pool from %q (%d columns) into %q (%d)", ErrInvalid, in.Name, in.Cols, out.Name, out.Cols)
	}
	return g.perToken(out, in)
}
