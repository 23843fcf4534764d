package fusion

import (
	"fmt"
	"slices"
)

// LayerState is the recurrent state a layer of a sequence keeps in place of
// keys and values (KVSpec.State): what its mixer carries from one position
// to the next: a convolution window (LFM2's gated short convolutions:
// ShortConvOp; the convolutions before Gated DeltaNet and Mamba-2 layers)
// and a state matrix per head (Gated DeltaNet's and Mamba-2's recurrences),
// so that one cache object, allocated, copied and reset by its backend,
// holds every kind of per-sequence state.
//
// A state is bound to a position: after a step over positions
// [Pos, Pos+T) it describes the sequence's first Pos+T tokens, and unlike
// keys and values it cannot be cut back to an earlier position. A step at
// Pos 0 starts from the empty state (the history before position 0 is
// zero), which is how a sequence resets it; a step at any other Pos must
// continue exactly where the last step on the cache ended, and backends
// fail it with gpu.ErrStep otherwise (a caller that rolls a sequence back
// must restart it from 0). States are kept in f32 whatever KVSpec.F16.
type LayerState struct {
	// ConvChannels and ConvWindow: the last ConvWindow inputs of each of
	// ConvChannels channels of a causal convolution (its width minus one).
	ConvChannels, ConvWindow int
	// MatrixHeads, MatrixRows and MatrixCols: a MatrixRows x MatrixCols
	// f32 matrix per head of a linear recurrence (Gated DeltaNet: value
	// heads x key dim x value dim; Mamba-2: heads x head dim x state size),
	// stored after the convolution window, head-major then row-major.
	MatrixHeads, MatrixRows, MatrixCols int
}

// Recurrent reports whether the layer keeps a state (rather than keys and
// values).
func (s LayerState) Recurrent() bool { return s.ConvChannels > 0 || s.MatrixHeads > 0 }

// ConvValues is the size of the convolution window in f32 values.
func (s LayerState) ConvValues() int { return s.ConvChannels * s.ConvWindow }

// MatrixValues is the size of the state matrices in f32 values.
func (s LayerState) MatrixValues() int { return s.MatrixHeads * s.MatrixRows * s.MatrixCols }

// Values is the state's size in f32 values: the window, then the matrices.
func (s LayerState) Values() int { return s.ConvValues() + s.MatrixValues() }

// LayerState returns layer l's state (the zero value for a KV layer).
func (s KVSpec) LayerState(l int) LayerState {
	if l < 0 || l >= len(s.State) {
		return LayerState{}
	}
	return s.State[l]
}

// Recurrent reports whether any layer keeps a recurrent state: a hybrid
// model's cache, whose state can only go forward (see LayerState).
func (s KVSpec) Recurrent() bool {
	return slices.ContainsFunc(s.State, LayerState.Recurrent)
}

// ShortConvOp: the gated causal short convolution of an LFM2 layer, with
// its state. In has 3*Channels columns, each row [B | C | X]; Out has
// Channels. For row t at position p = Pos+t (Pos[t] in a batched graph,
// with the state of sequence Seq[t]), per channel c:
//
//	u_p = B[t] ⊙ X[t]
//	Out[t] = C[t] ⊙ Σ_{j<Width} W[c][j] · u_{p-Width+1+j}
//
// W = Weight is [Channels, Width] (GGUF's shortconv.conv [Width,
// channels]: tap Width-1 multiplies the current token), u before position
// 0 is zero, and u of positions before Pos comes from the state of Layer
// (KVSpec.State[Layer]: ConvChannels = Channels, ConvWindow = Width-1),
// which the op leaves holding the last Width-1 values of u. No bias, no
// activation. Out must not alias In.
type ShortConvOp struct {
	Out, In         Buf
	Weight          string
	Layer           int
	Channels, Width int
}

func (*ShortConvOp) Kind() Kind       { return ShortConv }
func (o *ShortConvOp) Inputs() []Buf  { return []Buf{o.In} }
func (o *ShortConvOp) Outputs() []Buf { return []Buf{o.Out} }
func (o *ShortConvOp) bufs() []*Buf   { return []*Buf{&o.Out, &o.In} }
func (o *ShortConvOp) clone() Op      { c := *o; return &c }

func (o *ShortConvOp) validate(g *Graph, shape WeightShape) error {
	out, in := g.Bufs[o.Out], g.Bufs[o.In]
	if o.Out == o.In {
		return fmt.Errorf("%w: short_conv output aliases its input %q", ErrInvalid, out.Name)
	}
	if o.Channels <= 0 || o.Width < 2 || o.Width > 1<<10 || out.Cols != o.Channels || in.Cols != 3*o.Channels {
		return fmt.Errorf("%w: short_conv of %d channels, width %d, from %q (%d columns) into %q (%d)",
			ErrInvalid, o.Channels, o.Width, in.Name, in.Cols, out.Name, out.Cols)
	}
	if st := g.KV.LayerState(o.Layer); o.Layer < 0 || o.Layer >= g.KV.Layers || st.ConvChannels != o.Channels || st.ConvWindow != o.Width-1 {
		return fmt.Errorf("%w: short_conv of layer %d (%d channels, width %d): cache state %+v", ErrInvalid, o.Layer, o.Channels, o.Width, st)
	}
	return firstErr(g.perToken(out, in), checkWeight(shape, o.Weight, o.Channels, o.Width))
}

// checkState checks a KV spec's states: one per layer when set, none
// negative, and sizes whose products cannot overflow.
func (s KVSpec) checkState() error {
	if s.State == nil {
		return nil
	}
	if len(s.State) != s.Layers {
		return fmt.Errorf("%w: kv states for %d of %d layers", ErrInvalid, len(s.State), s.Layers)
	}
	for l, st := range s.State {
		m := []int{st.MatrixHeads, st.MatrixRows, st.MatrixCols}
		if st.ConvChannels < 0 || st.ConvWindow < 0 || st.ConvChannels > 1<<24 || st.ConvWindow > 1<<10 || (st.ConvChannels > 0) != (st.ConvWindow > 0) ||
			slices.Min(m) < 0 || slices.Max(m) > 1<<16 || (m[0] > 0) != (m[1] > 0) || (m[0] > 0) != (m[2] > 0) || st.Values() > 1<<28 {
			return fmt.Errorf("%w: kv state %+v of layer %d", ErrInvalid, st, l)
		}
	}
	return nil
}
