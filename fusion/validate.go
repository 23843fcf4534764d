package fusion

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalid reports a graph that breaks the contract of graph.go: a buffer
// out of range, mismatched widths, a weight of the wrong shape, a missing
// weight or an unknown parameter.
var ErrInvalid = errors.New("fusion: invalid graph")

// ErrBatch reports a batched graph (Graph.Batch) given to Validate, which
// checks the graphs of one sequence: a backend that runs batched steps
// checks them with ValidateBatch.
var ErrBatch = errors.New("fusion: a batched graph needs a backend that runs batched steps")

// WeightShape reports the shape of the named weight, ok false when the
// weights hold no tensor of that name.
type WeightShape func(name string) (shape []int, ok bool)

// Names of the parameter strings Validate accepts. They equal the constants
// of tensors/model, repeated here so that fusion depends on nothing.
var (
	normKinds  = map[string]bool{"rms": true, "layer": true}
	ropeStyles = map[string]bool{"interleaved": true, "halves": true}
	acts       = map[string]bool{"silu": true, "gelu_tanh": true, "gelu": true, "relu": true}
)

// Validate checks the graph against the contract of each op kind: buffer
// handles, row counts (Graph.Tokens for per-token buffers, 1 after LastRow),
// widths, head geometry against KV, and, when shape is not nil, that every
// weight and bias exists with the shape its op needs. Every backend calls it
// in Compile so that a bad graph fails there with a clear error rather than
// while running.
func (g *Graph) Validate(shape WeightShape) error {
	if g.Batch {
		return ErrBatch
	}
	return g.validate(shape)
}

// ValidateBatch checks a batched graph as Validate checks a plain one,
// plus the contract of Graph.Batch: every buffer has Tokens rows, and no op
// is a LastRow or an Argmax. Backends implementing batched steps call it.
func (g *Graph) ValidateBatch(shape WeightShape) error {
	if !g.Batch {
		return fmt.Errorf("%w: ValidateBatch of a graph without Batch", ErrInvalid)
	}
	for i, b := range g.Bufs {
		if b.Rows != g.Tokens {
			return fmt.Errorf("%w: buffer %d %q of a batched graph has %d rows, want %d", ErrInvalid, i, b.Name, b.Rows, g.Tokens)
		}
	}
	for i, op := range g.Ops {
		if op.Kind == LastRow || op.Kind == Argmax || op.Kind == Sample {
			return fmt.Errorf("op %d: %w: %s in a batched graph", i, ErrInvalid, op.Kind)
		}
	}
	return g.validate(shape)
}

func (g *Graph) validate(shape WeightShape) error {
	if g.Tokens <= 0 || g.Tokens > 1<<20 {
		return fmt.Errorf("%w: tokens %d", ErrInvalid, g.Tokens)
	}
	for i, b := range g.Bufs {
		if b.Rows != g.Tokens && b.Rows != 1 {
			return fmt.Errorf("%w: buffer %d %q has %d rows, want %d or 1", ErrInvalid, i, b.Name, b.Rows, g.Tokens)
		}
		if b.Cols <= 0 || b.Cols > 1<<26 || b.Rows*b.Cols > 1<<31 {
			return fmt.Errorf("%w: buffer %d %q has %d x %d values", ErrInvalid, i, b.Name, b.Rows, b.Cols)
		}
	}
	if !g.valid(g.Logits) {
		return fmt.Errorf("%w: logits buffer %d out of range", ErrInvalid, g.Logits)
	}
	if g.Bufs[g.Logits].F16 {
		return fmt.Errorf("%w: the logits %q are f16 (logits stay f32)", ErrInvalid, g.Bufs[g.Logits].Name)
	}
	kv := g.KV
	if kv.Layers < 0 || kv.KVHeads < 0 || kv.HeadDim < 0 || kv.MaxLen < 0 {
		return fmt.Errorf("%w: kv spec %+v", ErrInvalid, kv)
	}
	for i := range g.Ops {
		if err := g.validateOp(&g.Ops[i], shape); err != nil {
			return fmt.Errorf("op %d (%s): %w", i, g.Ops[i].Kind, err)
		}
	}
	return nil
}

func (g *Graph) valid(b Buf) bool { return b >= 0 && int(b) < len(g.Bufs) }

// validateOp checks one op. Error messages name the offending field.
func (g *Graph) validateOp(op *Op, shape WeightShape) error {
	want := map[Kind]int{Embed: 0, Norm: 1, MatMul: 1, Rope: 1, StoreKV: 2, Attention: 1, GLU: 2,
		Activation: 1, Add: 2, SoftCap: 1, LastRow: 1, MultiMatMul: 1, MatMulGLU: 1, Argmax: 1, Sample: 1, RopeStoreKV: 3}
	n, known := want[op.Kind]
	if !known {
		return fmt.Errorf("%w: unknown kind %d", ErrInvalid, op.Kind)
	}
	if len(op.In) != n {
		return fmt.Errorf("%w: %d inputs, want %d", ErrInvalid, len(op.In), n)
	}
	if op.Accumulate && op.Kind != MatMul {
		return fmt.Errorf("%w: accumulate on a %s op", ErrInvalid, op.Kind)
	}
	for _, b := range op.In {
		if !g.valid(b) {
			return fmt.Errorf("%w: input buffer %d out of range", ErrInvalid, b)
		}
	}
	if op.NormWeight != "" {
		if op.Kind != MatMul && op.Kind != MultiMatMul && op.Kind != MatMulGLU {
			return fmt.Errorf("%w: norm prologue on a %s op", ErrInvalid, op.Kind)
		}
		if !(op.Eps >= 0) {
			return fmt.Errorf("%w: norm prologue eps %g", ErrInvalid, op.Eps)
		}
		if err := checkVector(shape, op.NormWeight, g.Bufs[op.In[0]].Cols); err != nil {
			return err
		}
	}
	if op.Kind != StoreKV && !g.valid(op.Out) {
		return fmt.Errorf("%w: output buffer %d out of range", ErrInvalid, op.Out)
	}
	var out, in0 BufInfo
	if op.Kind != StoreKV {
		out = g.Bufs[op.Out]
	}
	if n > 0 {
		in0 = g.Bufs[op.In[0]]
	}
	sameRows := func() error {
		for _, b := range op.In {
			if g.Bufs[b].Rows != out.Rows {
				return fmt.Errorf("%w: input %q has %d rows, output %q has %d", ErrInvalid, g.Bufs[b].Name, g.Bufs[b].Rows, out.Name, out.Rows)
			}
		}
		return nil
	}
	sameCols := func() error {
		for _, b := range op.In {
			if g.Bufs[b].Cols != out.Cols {
				return fmt.Errorf("%w: input %q has %d columns, output %q has %d", ErrInvalid, g.Bufs[b].Name, g.Bufs[b].Cols, out.Name, out.Cols)
			}
		}
		return nil
	}
	// Ops that use the position of a row need per-token buffers.
	perToken := func(bs ...BufInfo) error {
		for _, b := range bs {
			if b.Rows != g.Tokens {
				return fmt.Errorf("%w: buffer %q has %d rows, positional ops need %d", ErrInvalid, b.Name, b.Rows, g.Tokens)
			}
		}
		return nil
	}
	switch op.Kind {
	case Embed:
		if err := perToken(out); err != nil {
			return err
		}
		if op.Scale < 0 {
			return fmt.Errorf("%w: negative embedding scale %g", ErrInvalid, op.Scale)
		}
		return checkWeight(shape, op.Weight, -1, out.Cols)
	case Norm:
		if !normKinds[op.NormKind] {
			return fmt.Errorf("%w: norm kind %q", ErrInvalid, op.NormKind)
		}
		if !(op.Eps >= 0) {
			return fmt.Errorf("%w: eps %g", ErrInvalid, op.Eps)
		}
		if op.Weight == "" {
			return fmt.Errorf("%w: norm without a weight", ErrInvalid)
		}
		if op.NormKind == "rms" && op.Bias != "" {
			return fmt.Errorf("%w: rms norm with bias %q", ErrInvalid, op.Bias)
		}
		if err := firstErr(sameRows(), sameCols(), checkVector(shape, op.Weight, out.Cols)); err != nil {
			return err
		}
		return checkVector(shape, op.Bias, out.Cols)
	case MatMul:
		if op.Out == op.In[0] {
			return fmt.Errorf("%w: matmul output aliases its input %q", ErrInvalid, out.Name)
		}
		if err := firstErr(sameRows(), checkWeight(shape, op.Weight, out.Cols, in0.Cols)); err != nil {
			return err
		}
		return checkVector(shape, op.Bias, out.Cols)
	case MultiMatMul:
		return g.validateMulti(op, shape)
	case MatMulGLU:
		if op.Out == op.In[0] {
			return fmt.Errorf("%w: matmul_glu output aliases its input %q", ErrInvalid, out.Name)
		}
		if !acts[op.Act] {
			return fmt.Errorf("%w: activation %q", ErrInvalid, op.Act)
		}
		return firstErr(sameRows(), checkWeight(shape, op.Weight, out.Cols, in0.Cols),
			checkWeight(shape, op.Up, out.Cols, in0.Cols), checkVector(shape, op.Bias, out.Cols),
			checkVector(shape, op.UpBias, out.Cols))
	case Rope:
		if err := firstErr(perToken(out, in0), sameCols(), checkHeads(op, in0, op.Heads)); err != nil {
			return err
		}
		if out.F16 != in0.F16 {
			// The dims past RopeDims are copied as they are stored.
			return fmt.Errorf("%w: rope output %q and input %q differ in f16", ErrInvalid, out.Name, in0.Name)
		}
		return checkRope(op)
	case RopeStoreKV:
		k, v := g.Bufs[op.In[1]], g.Bufs[op.In[2]]
		if g.Batch {
			return fmt.Errorf("%w: rope_store_kv in a batched step", ErrInvalid)
		}
		if op.Out != op.In[0] || op.In[1] == op.In[0] || op.In[2] == op.In[0] {
			return fmt.Errorf("%w: rope_store_kv wants out = q and k, v distinct from q", ErrInvalid)
		}
		if err := firstErr(perToken(in0, k, v), g.checkKV(op), checkHeads(op, in0, op.Heads),
			checkHeads(op, k, op.KVHeads), checkHeads(op, v, op.KVHeads)); err != nil {
			return err
		}
		return checkRope(op)
	case StoreKV:
		in1 := g.Bufs[op.In[1]]
		return firstErr(perToken(in0, in1), g.checkKV(op), checkHeads(op, in0, op.KVHeads), checkHeads(op, in1, op.KVHeads))
	case Attention:
		if op.Out == op.In[0] {
			return fmt.Errorf("%w: attention output aliases its input %q", ErrInvalid, out.Name)
		}
		if err := firstErr(perToken(out, in0), sameCols(), g.checkKV(op), checkHeads(op, in0, op.Heads)); err != nil {
			return err
		}
		if op.KVHeads <= 0 || op.Heads%op.KVHeads != 0 {
			return fmt.Errorf("%w: %d heads not a multiple of %d kv heads", ErrInvalid, op.Heads, op.KVHeads)
		}
		if !(op.Scale > 0) || !(op.Cap >= 0) || op.Window < 0 {
			return fmt.Errorf("%w: scale %g, cap %g, window %d", ErrInvalid, op.Scale, op.Cap, op.Window)
		}
		return nil
	case GLU, Activation:
		if !acts[op.Act] {
			return fmt.Errorf("%w: activation %q", ErrInvalid, op.Act)
		}
		return firstErr(sameRows(), sameCols())
	case Add:
		return firstErr(sameRows(), sameCols())
	case SoftCap:
		if !(op.Cap > 0) {
			return fmt.Errorf("%w: soft cap %g", ErrInvalid, op.Cap)
		}
		return firstErr(sameRows(), sameCols())
	case LastRow:
		if out.Rows != 1 {
			return fmt.Errorf("%w: last_row output %q has %d rows, want 1", ErrInvalid, out.Name, out.Rows)
		}
		if op.Out == op.In[0] && g.Tokens > 1 {
			return fmt.Errorf("%w: last_row output aliases its input %q", ErrInvalid, out.Name)
		}
		return sameCols()
	case Argmax, Sample:
		if op.Kind == Sample {
			s := op.Sampling
			t := float64(s.Temperature)
			if !(t > 0) || math.IsInf(t, 0) || s.TopK < 0 || s.TopK > math.MaxInt32 || !(s.TopP >= 0 && s.TopP <= 1) {
				return fmt.Errorf("%w: sample rule %+v (want temperature > 0 and finite, top-k in 0..2^31-1, top-p in [0, 1])", ErrInvalid, s)
			}
		}
		if in0.Rows != 1 {
			return fmt.Errorf("%w: %s input %q has %d rows, want 1", ErrInvalid, op.Kind, in0.Name, in0.Rows)
		}
		if in0.Cols > 1<<24 {
			return fmt.Errorf("%w: %s input %q has %d columns, ids past 2^24 are not exact in f32", ErrInvalid, op.Kind, in0.Name, in0.Cols)
		}
		if out.Rows != 1 || out.Cols != 1 {
			return fmt.Errorf("%w: %s output %q is %d x %d, want 1 x 1", ErrInvalid, op.Kind, out.Name, out.Rows, out.Cols)
		}
		if in0.F16 || out.F16 {
			return fmt.Errorf("%w: %s reads or writes an f16 buffer (logits and ids stay f32)", ErrInvalid, op.Kind)
		}
		if op.Out == op.In[0] {
			return fmt.Errorf("%w: %s output aliases its input %q", ErrInvalid, op.Kind, out.Name)
		}
		return nil
	}
	return nil
}

// validateMulti checks a MultiMatMul: each output is a MatMul of In[0].
func (g *Graph) validateMulti(op *Op, shape WeightShape) error {
	n := len(op.Outs)
	if n < 2 || n > 4 || len(op.Weights) != n || (len(op.Biases) != 0 && len(op.Biases) != n) {
		return fmt.Errorf("%w: %d outputs, %d weights, %d biases", ErrInvalid, n, len(op.Weights), len(op.Biases))
	}
	if op.Out != op.Outs[0] {
		return fmt.Errorf("%w: out %d is not outs[0] %d", ErrInvalid, op.Out, op.Outs[0])
	}
	in := g.Bufs[op.In[0]]
	for i, o := range op.Outs {
		if !g.valid(o) {
			return fmt.Errorf("%w: output buffer %d out of range", ErrInvalid, o)
		}
		out := g.Bufs[o]
		if o == op.In[0] {
			return fmt.Errorf("%w: multi_matmul output %q aliases its input", ErrInvalid, out.Name)
		}
		for _, p := range op.Outs[:i] {
			if p == o {
				return fmt.Errorf("%w: multi_matmul writes %q twice", ErrInvalid, out.Name)
			}
		}
		if out.Rows != in.Rows {
			return fmt.Errorf("%w: input %q has %d rows, output %q has %d", ErrInvalid, in.Name, in.Rows, out.Name, out.Rows)
		}
		if err := checkWeight(shape, op.Weights[i], out.Cols, in.Cols); err != nil {
			return err
		}
		if len(op.Biases) > 0 {
			if err := checkVector(shape, op.Biases[i], out.Cols); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRope checks the rope fields of a Rope or RopeStoreKV op.
func checkRope(op *Op) error {
	if op.RopeDims < 0 || op.RopeDims > op.HeadDim || op.RopeDims%2 != 0 {
		return fmt.Errorf("%w: rope dims %d with head dim %d", ErrInvalid, op.RopeDims, op.HeadDim)
	}
	if !ropeStyles[op.RopeStyle] {
		return fmt.Errorf("%w: rope style %q", ErrInvalid, op.RopeStyle)
	}
	if !(op.RopeBase > 0) {
		return fmt.Errorf("%w: rope base %g", ErrInvalid, op.RopeBase)
	}
	return nil
}

// checkKV checks a KV op's layer and head geometry against the graph's cache.
func (g *Graph) checkKV(op *Op) error {
	kv := g.KV
	if op.Layer < 0 || op.Layer >= kv.Layers {
		return fmt.Errorf("%w: layer %d outside the %d cached layers", ErrInvalid, op.Layer, kv.Layers)
	}
	if op.KVHeads != kv.KVHeads || op.HeadDim != kv.HeadDim {
		return fmt.Errorf("%w: %d kv heads of %d, cache holds %d of %d", ErrInvalid, op.KVHeads, op.HeadDim, kv.KVHeads, kv.HeadDim)
	}
	return nil
}

// checkHeads checks that b holds exactly heads heads of HeadDim values.
func checkHeads(op *Op, b BufInfo, heads int) error {
	if heads <= 0 || op.HeadDim <= 0 || heads*op.HeadDim != b.Cols {
		return fmt.Errorf("%w: %d heads of %d do not fill %q (%d columns)", ErrInvalid, heads, op.HeadDim, b.Name, b.Cols)
	}
	return nil
}

// checkWeight checks a matrix weight: rows (-1: any) by cols.
func checkWeight(shape WeightShape, name string, rows, cols int) error {
	if name == "" {
		return fmt.Errorf("%w: no weight", ErrInvalid)
	}
	if shape == nil {
		return nil
	}
	s, ok := shape(name)
	if !ok {
		return fmt.Errorf("%w: missing weight %q", ErrInvalid, name)
	}
	if len(s) != 2 || s[1] != cols || (rows >= 0 && s[0] != rows) || s[0] <= 0 {
		want := fmt.Sprintf("[%d %d]", rows, cols)
		if rows < 0 {
			want = fmt.Sprintf("[vocab %d]", cols)
		}
		return fmt.Errorf("%w: weight %q has shape %v, want %s", ErrInvalid, name, s, want)
	}
	return nil
}

// checkVector checks an optional vector (norm scale or bias) of n values.
func checkVector(shape WeightShape, name string, n int) error {
	if name == "" || shape == nil {
		return nil
	}
	s, ok := shape(name)
	if !ok {
		return fmt.Errorf("%w: missing weight %q", ErrInvalid, name)
	}
	count := 1
	for _, d := range s {
		count *= d
	}
	if count != n || len(s) == 0 || s[len(s)-1] != n {
		return fmt.Errorf("%w: vector %q has shape %v, want [%d]", ErrInvalid, name, s, n)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
