package fusion

import (
	"errors"
	"fmt"
	"reflect"
)

// ErrInvalid reports a graph that breaks the contract of its ops: a buffer
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
		switch op.(type) {
		case *LastRowOp, *ArgmaxOp, *SampleOp:
			return fmt.Errorf("op %d: %w: %s in a batched graph", i, ErrInvalid, op.Kind())
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
	for _, op := range g.Ops {
		// Its split form (the Q product into Out, then the rope in place)
		// would round q twice where the op's contract rounds it once.
		if o, ok := op.(*MatMulRopeKVOp); ok && g.valid(o.Out) && g.Bufs[o.Out].F16 {
			return fmt.Errorf("%w: matmul_rope_kv writes q into f16 %q (its q stays f32)", ErrInvalid, g.Bufs[o.Out].Name)
		}
	}
	kv := g.KV
	if kv.Layers < 0 || kv.KVHeads < 0 || kv.HeadDim < 0 || kv.MaxLen < 0 {
		return fmt.Errorf("%w: kv spec %+v", ErrInvalid, kv)
	}
	if kv.Ring != nil && len(kv.Ring) != kv.Layers {
		return fmt.Errorf("%w: kv ring lengths for %d of %d layers", ErrInvalid, len(kv.Ring), kv.Layers)
	}
	for l, r := range kv.Ring {
		if r < 0 || r > kv.MaxLen {
			return fmt.Errorf("%w: kv ring of layer %d holds %d of %d positions", ErrInvalid, l, r, kv.MaxLen)
		}
	}
	if err := kv.checkState(); err != nil {
		return err
	}
	for i, op := range g.Ops {
		if op == nil || reflect.ValueOf(op).IsNil() {
			return fmt.Errorf("op %d: %w: nil op", i, ErrInvalid)
		}
		if err := g.validateOp(op, shape); err != nil {
			return fmt.Errorf("op %d (%s): %w", i, op.Kind(), err)
		}
	}
	return nil
}

func (g *Graph) valid(b Buf) bool { return b >= 0 && int(b) < len(g.Bufs) }

// validateOp checks that the buffers of op are in range, then its own
// contract (its validate method). Error messages name the offending field.
func (g *Graph) validateOp(op Op, shape WeightShape) error {
	for _, b := range op.Inputs() {
		if !g.valid(b) {
			return fmt.Errorf("%w: input buffer %d out of range", ErrInvalid, b)
		}
	}
	for _, b := range op.Outputs() {
		if !g.valid(b) {
			return fmt.Errorf("%w: output buffer %d out of range", ErrInvalid, b)
		}
	}
	return op.validate(g, shape)
}

// sameRows checks that the inputs ins have the rows of out.
func (g *Graph) sameRows(out Buf, ins ...Buf) error {
	o := g.Bufs[out]
	for _, b := range ins {
		if g.Bufs[b].Rows != o.Rows {
			return fmt.Errorf("%w: input %q has %d rows, output %q has %d", ErrInvalid, g.Bufs[b].Name, g.Bufs[b].Rows, o.Name, o.Rows)
		}
	}
	return nil
}

// sameCols checks that the inputs ins have the columns of out.
func (g *Graph) sameCols(out Buf, ins ...Buf) error {
	o := g.Bufs[out]
	for _, b := range ins {
		if g.Bufs[b].Cols != o.Cols {
			return fmt.Errorf("%w: input %q has %d columns, output %q has %d", ErrInvalid, g.Bufs[b].Name, g.Bufs[b].Cols, o.Name, o.Cols)
		}
	}
	return nil
}

// perToken checks that buffers bs are per-token: ops that use the
// position of a row need them.
func (g *Graph) perToken(bs ...BufInfo) error {
	for _, b := range bs {
		if b.Rows != g.Tokens {
			return fmt.Errorf("%w: buffer %q has %d rows, positional ops need %d", ErrInvalid, b.Name, b.Rows, g.Tokens)
		}
	}
	return nil
}

// checkKV checks a KV op's layer and head geometry against the graph's cache.
func (g *Graph) checkKV(layer, kvHeads, headDim int) error {
	kv := g.KV
	if layer < 0 || layer >= kv.Layers {
		return fmt.Errorf("%w: layer %d outside the %d cached layers", ErrInvalid, layer, kv.Layers)
	}
	if kv.LayerState(layer).Recurrent() {
		return fmt.Errorf("%w: layer %d keeps a recurrent state, not keys and values", ErrInvalid, layer)
	}
	if hd := kv.LayerHeadDim(layer); kvHeads != kv.KVHeads || headDim != hd {
		return fmt.Errorf("%w: %d kv heads of %d, layer %d's cache holds %d of %d", ErrInvalid, kvHeads, headDim, layer, kv.KVHeads, hd)
	}
	return nil
}

// checkHeads checks that b holds exactly heads heads of headDim values.
func checkHeads(heads, headDim int, b BufInfo) error {
	if heads <= 0 || headDim <= 0 || heads*headDim != b.Cols {
		return fmt.Errorf("%w: %d heads of %d do not fill %q (%d columns)", ErrInvalid, heads, headDim, b.Name, b.Cols)
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

// checkSinks checks an attention sink weight: exactly [heads] (one logit
// per query head; "" for none).
func checkSinks(shape WeightShape, name string, heads int) error {
	if name == "" || shape == nil {
		return nil
	}
	s, ok := shape(name)
	if !ok {
		return fmt.Errorf("%w: missing weight %q", ErrInvalid, name)
	}
	if len(s) != 1 || s[0] != heads {
		return fmt.Errorf("%w: attention sinks %q have shape %v, want [%d]", ErrInvalid, name, s, heads)
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
