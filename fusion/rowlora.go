package fusion

import "fmt"

// LoRAWeights names one unmerged low-rank update: A [Rank, in] and B [out,
// Rank] (already multiplied by the adapter's scale).
type LoRAWeights struct {
	A, B string
	Rank int
}

// RowLoRAOp: the unmerged LoRA updates of a batched step (Graph.Batch)
// whose rows pick their adapters. For each row t whose adapter index j
// (gpu.Row.Adapter) is in range of Sets,
//
//	Out[t] += sum over p in Sets[j], in order, of B_p · (A_p · In[t])
//
// each product computed as MatMulOp computes it (A·x into a row of Rank
// values, then B times that row added to Out[t]); a row whose index is past
// Sets, or whose set is empty, is left as it is. So rows of different
// adapters, and rows of none, share one step over one copy of the base
// weights. Out must not alias In; both stay f32.
type RowLoRAOp struct {
	Out, In Buf
	Sets    [][]LoRAWeights
}

func (*RowLoRAOp) Kind() Kind       { return RowLoRA }
func (o *RowLoRAOp) Inputs() []Buf  { return []Buf{o.In, o.Out} }
func (o *RowLoRAOp) Outputs() []Buf { return []Buf{o.Out} }
func (o *RowLoRAOp) bufs() []*Buf   { return []*Buf{&o.Out, &o.In} }
func (o *RowLoRAOp) clone() Op {
	c := *o
	c.Sets = make([][]LoRAWeights, len(o.Sets))
	for i, s := range o.Sets {
		c.Sets[i] = append([]LoRAWeights(nil), s...)
	}
	return &c
}

// MaxRowLoRASets bounds RowLoRAOp.Sets.
const MaxRowLoRASets = 1 << 10

func (o *RowLoRAOp) validate(g *Graph, shape WeightShape) error {
	out, in := g.Bufs[o.Out], g.Bufs[o.In]
	if !g.Batch {
		return fmt.Errorf("%w: row_lora outside a batched graph", ErrInvalid)
	}
	if o.Out == o.In {
		return fmt.Errorf("%w: row_lora output aliases its input %q", ErrInvalid, out.Name)
	}
	if in.F16 || out.F16 {
		return fmt.Errorf("%w: row_lora reads or writes an f16 buffer", ErrInvalid)
	}
	if len(o.Sets) > MaxRowLoRASets {
		return fmt.Errorf("%w: row_lora of %d adapter sets (at most %d)", ErrInvalid, len(o.Sets), MaxRowLoRASets)
	}
	if err := g.sameRows(o.Out, o.In); err != nil {
		return err
	}
	for j, set := range o.Sets {
		for _, p := range set {
			if p.Rank <= 0 || p.Rank > 1<<16 {
				return fmt.Errorf("%w: row_lora set %d: rank %d", ErrInvalid, j, p.Rank)
			}
			if err := firstErr(checkWeight(shape, p.A, p.Rank, in.Cols), checkWeight(shape, p.B, out.Cols, p.Rank)); err != nil {
				return fmt.Errorf("row_lora set %d: %w", j, err)
			}
		}
	}
	return nil
}
