package fusion

import "fmt"

// MoEOp: the feed-forward block of a mixture of experts (Qwen 3 MoE). For
// each row t, with x = In[t]:
//
//	r = Router · x                         (Experts logits)
//	p = softmax(r)
//	S = the Used experts of largest p, in decreasing p (the lower index
//	    first on ties)
//	w_e = p_e, or p_e / sum_{j in S} p_j with NormTopK
//	Out[t] = sum_{e in S, in that order} w_e * (Down_e · (act(Gate_e · x) * (Up_e · x)))
//
// Router is [Experts, In.Cols]; Gate and Up are [Experts, Hidden, In.Cols]
// and Down [Experts, Out.Cols, Hidden] (expert-major: expert e's matrix is
// its e-th slab), each product computed as MatMulOp computes it. Only the
// selected experts' rows are read. Out and In have the same width; Out
// must not alias In.
type MoEOp struct {
	Out, In        Buf
	Router         string
	Gate, Up, Down string
	Experts, Used  int
	Hidden         int
	Act            Act
	NormTopK       bool
}

func (*MoEOp) Kind() Kind       { return MoE }
func (o *MoEOp) Inputs() []Buf  { return []Buf{o.In} }
func (o *MoEOp) Outputs() []Buf { return []Buf{o.Out} }
func (o *MoEOp) bufs() []*Buf   { return []*Buf{&o.Out, &o.In} }
func (o *MoEOp) clone() Op      { c := *o; return &c }

func (o *MoEOp) validate(g *Graph, shape WeightShape) error {
	out, in := g.Bufs[o.Out], g.Bufs[o.In]
	if o.Out == o.In {
		return fmt.Errorf("%w: moe output aliases its input %q", ErrInvalid, out.Name)
	}
	if !o.Act.Valid() {
		return fmt.Errorf("%w: activation %s", ErrInvalid, o.Act)
	}
	if o.Experts <= 0 || o.Experts > 1<<16 || o.Used <= 0 || o.Used > o.Experts || o.Hidden <= 0 || o.Hidden > 1<<26 {
		return fmt.Errorf("%w: moe of %d experts, %d used, %d hidden", ErrInvalid, o.Experts, o.Used, o.Hidden)
	}
	if in.F16 || out.F16 {
		return fmt.Errorf("%w: moe reads or writes an f16 buffer", ErrInvalid)
	}
	return firstErr(g.sameRows(o.Out, o.In), g.sameCols(o.Out, o.In),
		checkWeight(shape, o.Router, o.Experts, in.Cols),
		checkExperts(shape, o.Gate, o.Experts, o.Hidden, in.Cols),
		checkExperts(shape, o.Up, o.Experts, o.Hidden, in.Cols),
		checkExperts(shape, o.Down, o.Experts, out.Cols, o.Hidden))
}

// checkExperts checks a stack of expert matrices: [experts, rows, cols].
func checkExperts(shape WeightShape, name string, experts, rows, cols int) error {
	if name == "" {
		return fmt.Errorf("%w: no expert weight", ErrInvalid)
	}
	if shape == nil {
		return nil
	}
	s, ok := shape(name)
	if !ok {
		return fmt.Errorf("%w: missing weight %q", ErrInvalid, name)
	}
	if len(s) != 3 || s[0] != experts || s[1] != rows || s[2] != cols {
		return fmt.Errorf("%w: expert weight %q has shape %v, want [%d %d %d]", ErrInvalid, name, s, experts, rows, cols)
	}
	return nil
}
