package fusion

import "fmt"

// ScaleOp: Out = In * Scale (Scale 0 means 1), times Weight's one value
// when Weight is set (a tensor of one value: Gemma 4's layer_output_scale).
// Gemma 4's per-layer inputs scale by constants (1/sqrt(dim), 1/sqrt(2))
// and every layer's output by its own learned scalar.
type ScaleOp struct {
	Out, In Buf
	Scale   float32
	Weight  string
}

// ColumnsOp: Out[t] = In[t][Offset : Offset+Out.Cols], a run of columns of
// each row (Gemma 4: layer l's per-layer input, one slice of the inputs of
// every layer computed once per step).
type ColumnsOp struct {
	Out, In Buf
	Offset  int
}

func (*ScaleOp) Kind() Kind         { return Scale }
func (*ColumnsOp) Kind() Kind       { return Columns }
func (o *ScaleOp) Inputs() []Buf    { return []Buf{o.In} }
func (o *ColumnsOp) Inputs() []Buf  { return []Buf{o.In} }
func (o *ScaleOp) Outputs() []Buf   { return []Buf{o.Out} }
func (o *ColumnsOp) Outputs() []Buf { return []Buf{o.Out} }
func (o *ScaleOp) bufs() []*Buf     { return []*Buf{&o.Out, &o.In} }
func (o *ColumnsOp) bufs() []*Buf   { return []*Buf{&o.Out, &o.In} }
func (o *ScaleOp) clone() Op        { c := *o; return &c }
func (o *ColumnsOp) clone() Op      { c := *o; return &c }

func (o *ScaleOp) validate(g *Graph, shape WeightShape) error {
	if f := float64(o.Scale); f != f || f > 3.4e38 || f < -3.4e38 {
		return fmt.Errorf("%w: scale %g", ErrInvalid, o.Scale)
	}
	return firstErr(g.sameRows(o.Out, o.In), g.sameCols(o.Out, o.In), checkVector(shape, o.Weight, 1))
}

func (o *ColumnsOp) validate(g *Graph, _ WeightShape) error {
	out, in := g.Bufs[o.Out], g.Bufs[o.In]
	if o.Out == o.In {
		return fmt.Errorf("%w: columns output aliases its input %q", ErrInvalid, out.Name)
	}
	if o.Offset < 0 || o.Offset > in.Cols-out.Cols {
		return fmt.Errorf("%w: columns %d..%d of %q (%d columns)", ErrInvalid, o.Offset, o.Offset+out.Cols, in.Name, in.Cols)
	}
	return g.sameRows(o.Out, o.In)
}
