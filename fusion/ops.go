package fusion

import (
	"fmt"
	"slices"
)

// Op is one node of a Graph: a pointer to one of the op types below, one
// type per Kind, each with exactly the fields its kind uses. The comment of
// each type is its kind's contract; the CPU backend (internal/backend/cpu) is the
// reference implementation. The interface is sealed (its unexported
// methods), so only this package defines kinds and every kind has its own
// validation, which Graph.Validate runs. Backends type-switch on the
// concrete types and report a kind they do not run as an error when
// compiling.
type Op interface {
	Kind() Kind
	// Inputs returns the buffers the op reads (an accumulating MatMul
	// also reads its Out), in the order of its fields.
	Inputs() []Buf
	// Outputs returns the buffers the op writes (none for StoreKV).
	Outputs() []Buf

	// validate checks the op against its contract in g, once Validate has
	// checked that every buffer of Inputs and Outputs is in range.
	validate(g *Graph, shape WeightShape) error
	// bufs returns the addresses of every buffer handle of the op.
	bufs() []*Buf
	// clone returns a deep copy.
	clone() Op
}

// EmbedOp: Out[t] = Scale * W[tokens[t]] (Scale 0 means 1). W = Weight is
// [vocab, Out.Cols]. With Positions, the rows are the positions instead,
// Out[t] = Scale * W[Pos+t] (BERT's learned positions): W then has a
// row for every cache position (KVSpec.MaxLen).
type EmbedOp struct {
	Out       Buf
	Weight    string
	Scale     float32
	Positions bool
}

// NormOp: Out[t] = norm(In[t]) * Weight + Bias, normalized per Norm with
// Eps. Bias is empty for RMSNorm. With HeadDim > 0 (RMSNorm only) every
// run of HeadDim values of a row (one attention head) is normalized on its
// own, each by the same Weight of HeadDim values: Qwen 3's and Gemma 3's
// q/k norms. Unit (RMSNorm only) has no Weight: the normalized values as
// they are (Gemma 4's v norm).
type NormOp struct {
	Out, In Buf
	Norm    NormKind
	Weight  string
	Bias    string
	Eps     float32
	HeadDim int
	Unit    bool
}

// MatMulOp: Out[t] = W · In[t] + Bias (the Projection). With Accumulate,
// Out[t] = Out[t] + (W · In[t] + Bias): the residual add fused into the
// projection, evaluated in exactly that order so it matches a MatMul into
// a temporary followed by an Add. Out must not alias In. With a Prologue
// the product reads the RMS norm of In (see RMSPrologue).
type MatMulOp struct {
	Out, In Buf
	Projection
	Accumulate bool
	Prologue   *RMSPrologue
}

// RopeOp: Out = In with each of Heads heads of HeadDim rotated at position
// Pos+t per RopeParams. Out may equal In.
type RopeOp struct {
	Out, In        Buf
	Heads, HeadDim int
	RopeParams
}

// StoreKVOp: writes K[t] and V[t] (KVHeads*HeadDim each) into the cache of
// Layer at position Pos+t, rounded to binary16 when the cache is
// KVSpec.F16.
type StoreKVOp struct {
	K, V             Buf
	Layer            int
	KVHeads, HeadDim int
}

// AttentionOp: for each head h of Heads (kv head h / (Heads/KVHeads)),
// Out[t] = sum_p softmax_p(s_p) V[p], s_p = cap(Scale * Q[t]·K[p]) over
// cache positions p of Layer with p <= Pos+t and, when Window > 0,
// Pos+t-p < Window; cap(s) = Cap*tanh(s/Cap) when Cap > 0. Scale must be
// > 0. Out must not alias Q.
//
// Sinks, when set, names an F32 [Heads] weight of per-head sink logits
// (gpt-oss): head h's softmax gains one more logit Sinks[h], taken as it
// is (neither scaled nor capped), which takes its share of the
// probability mass and adds no value:
//
//	m = max(max_p s_p, Sinks[h])
//	Out[t] = sum_p exp(s_p - m) V[p] / (sum_p exp(s_p - m) + exp(Sinks[h] - m))
//
// NonCausal drops the causal mask: every row of the step sees every
// position the step stores, later ones included, p <= Pos+n-1 for the
// step's n rows. A Window then drops only keys too far back, Pos+t-p <
// Window (a later key is never outside it): the image positions of a
// Gemma 3 prompt attend to each other so (llama.cpp's
// llama_set_causal_attn(false) while it decodes an image). With
// SymmetricWindow the window is symmetric instead, |Pos+t-p| <= Window/2
// (rounded down), as llama.cpp masks an embedding model's sliding layers
// (gemma-embedding); such a step needs a full cache (no ring) and the whole
// input in one step. Non-causal attention is not valid in a batched graph.
type AttentionOp struct {
	Out, Q Buf
	Layer  int
	HeadShape
	Scale           float32
	Cap             float32 // 0: none
	Window          int     // 0: none
	Sinks           string  // "": none
	NonCausal       bool    // see above; false: causal
	SymmetricWindow bool    // with NonCausal: the window reaches Window/2 both ways
}

// GLUOp: Out = act(Gate) * Up, act per Act.
type GLUOp struct {
	Out, Gate, Up Buf
	Act           Act
}

// ActivationOp: Out = act(In), act per Act.
type ActivationOp struct {
	Out, In Buf
	Act     Act
}

// AddOp: Out = A + B (elementwise; Out may alias either).
type AddOp struct {
	Out, A, B Buf
}

// SoftCapOp: Out = Cap * tanh(In / Cap), Cap > 0.
type SoftCapOp struct {
	Out, In Buf
	Cap     float32
}

// LastRowOp: Out[0] = In[T-1]. Out has one row.
type LastRowOp struct {
	Out, In Buf
}

// MultiMatMulOp: Outs[i].Out[t] = Outs[i].W · In[t] + Outs[i].Bias for
// every i (2 to 4 projections of one input, e.g. Q, K and V), each as
// MatMulOp computes it, with the optional Prologue shared. The outputs are
// distinct and none aliases In.
type MultiMatMulOp struct {
	In       Buf
	Outs     []Product
	Prologue *RMSPrologue
}

// MatMulGLUOp: Out[t] = act(Gate · In[t]) * (Up · In[t]), act per Act: a
// gate and an up projection and their GLU in one op, each value computed
// as MatMulOp and GLUOp compute it. Both weights are [Out.Cols, In.Cols].
// Out must not alias In. The optional Prologue is MatMulOp's.
type MatMulGLUOp struct {
	Out, In  Buf
	Gate, Up Projection
	Act      Act
	Prologue *RMSPrologue
}

// ArgmaxOp: Out[0][0] = float32(i), i the index of the largest value of
// In's single row: the lowest index wins ties, NaN never wins, and a row
// of NaNs gives 0 (internal/sampler.Greedy's answer). In has one row, Out
// is 1x1 and does not alias In. Greedy sampling on the device, so that
// decoding reads back one value per step rather than a vocabulary of
// logits; ids are exact in f32 below 2^24.
type ArgmaxOp struct {
	Out, In Buf
}

// SampleOp: Out[0][0] = float32(i), i the token drawn from In's single
// row by Sampling (temperature, top-k, top-p) with the draw of the step
// Pos+T, the position the token takes: the algorithm of internal/sampler,
// whose SampleAt gives the same id for the same row and step on every
// backend. In has one row, Out is 1x1 and does not alias In.
type SampleOp struct {
	Out, In  Buf
	Sampling Sampling
}

// RopeStoreKVOp: the two Ropes and the StoreKV of an attention block in
// one op. With Q, K, V distinct buffers: Q's Heads heads are rotated in
// place as RopeOp rotates them; then rope(K[t]) (KVHeads heads, the same
// rotation) and V[t] are stored into the cache of Layer at position Pos+t
// as StoreKVOp stores them. K itself is left unchanged (only read). Not
// valid in a batched graph.
type RopeStoreKVOp struct {
	Q, K, V Buf
	Layer   int
	HeadShape
	RopeParams
}

// MatMulRopeKVOp: the Q, K and V projections of an attention block and
// its RopeStoreKV in one op: q[t] = Q · In[t] + Q.Bias, k[t] and v[t]
// likewise (Q is [Heads*HeadDim, In.Cols], K and V [KVHeads*HeadDim,
// In.Cols]), each computed as MatMulOp computes it, with the optional
// Prologue shared; then exactly what RopeStoreKVOp does with q, k and v:
// Out = q rotated, the rotated k and v stored into the cache of Layer at
// position Pos+t. k and v are written to no buffer. Out must not alias
// In. Not valid in a batched graph.
type MatMulRopeKVOp struct {
	Out, In  Buf
	Q, K, V  Projection
	Layer    int
	Prologue *RMSPrologue
	HeadShape
	RopeParams
}

func (*MatMulRopeKVOp) Kind() Kind       { return MatMulRopeKV }
func (o *MatMulRopeKVOp) Inputs() []Buf  { return []Buf{o.In} }
func (o *MatMulRopeKVOp) Outputs() []Buf { return []Buf{o.Out} }
func (o *MatMulRopeKVOp) bufs() []*Buf   { return []*Buf{&o.Out, &o.In} }
func (o *MatMulRopeKVOp) clone() Op {
	c := *o
	c.RopeParams = o.RopeParams.Clone()
	c.Prologue = o.Prologue.clone()
	return &c
}

func (o *MatMulRopeKVOp) validate(g *Graph, shape WeightShape) error {
	if g.Batch {
		return fmt.Errorf("%w: matmul_rope_kv in a batched step", ErrInvalid)
	}
	out, in := g.Bufs[o.Out], g.Bufs[o.In]
	if o.Out == o.In {
		return fmt.Errorf("%w: matmul_rope_kv output aliases its input %q", ErrInvalid, out.Name)
	}
	kv := o.KVHeads * o.HeadDim
	return firstErr(o.Prologue.check(g, o.In, shape), g.sameRows(o.Out, o.In), g.checkKV(o.Layer, o.KVHeads, o.HeadDim),
		checkHeads(o.Heads, o.HeadDim, out), o.RopeParams.check(o.HeadDim),
		checkWeight(shape, o.Q.Weight, out.Cols, in.Cols), checkWeight(shape, o.K.Weight, kv, in.Cols),
		checkWeight(shape, o.V.Weight, kv, in.Cols), checkVector(shape, o.Q.Bias, out.Cols),
		checkVector(shape, o.K.Bias, kv), checkVector(shape, o.V.Bias, kv))
}

func (*EmbedOp) Kind() Kind       { return Embed }
func (*NormOp) Kind() Kind        { return Norm }
func (*MatMulOp) Kind() Kind      { return MatMul }
func (*RopeOp) Kind() Kind        { return Rope }
func (*StoreKVOp) Kind() Kind     { return StoreKV }
func (*AttentionOp) Kind() Kind   { return Attention }
func (*GLUOp) Kind() Kind         { return GLU }
func (*ActivationOp) Kind() Kind  { return Activation }
func (*AddOp) Kind() Kind         { return Add }
func (*SoftCapOp) Kind() Kind     { return SoftCap }
func (*LastRowOp) Kind() Kind     { return LastRow }
func (*MultiMatMulOp) Kind() Kind { return MultiMatMul }
func (*MatMulGLUOp) Kind() Kind   { return MatMulGLU }
func (*ArgmaxOp) Kind() Kind      { return Argmax }
func (*SampleOp) Kind() Kind      { return Sample }
func (*RopeStoreKVOp) Kind() Kind { return RopeStoreKV }

func (*EmbedOp) Inputs() []Buf          { return nil }
func (o *NormOp) Inputs() []Buf         { return []Buf{o.In} }
func (o *RopeOp) Inputs() []Buf         { return []Buf{o.In} }
func (o *StoreKVOp) Inputs() []Buf      { return []Buf{o.K, o.V} }
func (o *AttentionOp) Inputs() []Buf    { return []Buf{o.Q} }
func (o *GLUOp) Inputs() []Buf          { return []Buf{o.Gate, o.Up} }
func (o *ActivationOp) Inputs() []Buf   { return []Buf{o.In} }
func (o *AddOp) Inputs() []Buf          { return []Buf{o.A, o.B} }
func (o *SoftCapOp) Inputs() []Buf      { return []Buf{o.In} }
func (o *LastRowOp) Inputs() []Buf      { return []Buf{o.In} }
func (o *MultiMatMulOp) Inputs() []Buf  { return []Buf{o.In} }
func (o *MatMulGLUOp) Inputs() []Buf    { return []Buf{o.In} }
func (o *ArgmaxOp) Inputs() []Buf       { return []Buf{o.In} }
func (o *SampleOp) Inputs() []Buf       { return []Buf{o.In} }
func (o *RopeStoreKVOp) Inputs() []Buf  { return []Buf{o.Q, o.K, o.V} }
func (o *EmbedOp) Outputs() []Buf       { return []Buf{o.Out} }
func (o *NormOp) Outputs() []Buf        { return []Buf{o.Out} }
func (o *MatMulOp) Outputs() []Buf      { return []Buf{o.Out} }
func (o *RopeOp) Outputs() []Buf        { return []Buf{o.Out} }
func (*StoreKVOp) Outputs() []Buf       { return nil }
func (o *AttentionOp) Outputs() []Buf   { return []Buf{o.Out} }
func (o *GLUOp) Outputs() []Buf         { return []Buf{o.Out} }
func (o *ActivationOp) Outputs() []Buf  { return []Buf{o.Out} }
func (o *AddOp) Outputs() []Buf         { return []Buf{o.Out} }
func (o *SoftCapOp) Outputs() []Buf     { return []Buf{o.Out} }
func (o *LastRowOp) Outputs() []Buf     { return []Buf{o.Out} }
func (o *MatMulGLUOp) Outputs() []Buf   { return []Buf{o.Out} }
func (o *ArgmaxOp) Outputs() []Buf      { return []Buf{o.Out} }
func (o *SampleOp) Outputs() []Buf      { return []Buf{o.Out} }
func (o *RopeStoreKVOp) Outputs() []Buf { return []Buf{o.Q} }

func (o *MatMulOp) Inputs() []Buf {
	if o.Accumulate {
		return []Buf{o.In, o.Out}
	}
	return []Buf{o.In}
}

func (o *MultiMatMulOp) Outputs() []Buf {
	outs := make([]Buf, len(o.Outs))
	for i, p := range o.Outs {
		outs[i] = p.Out
	}
	return outs
}

func (o *EmbedOp) bufs() []*Buf       { return []*Buf{&o.Out} }
func (o *NormOp) bufs() []*Buf        { return []*Buf{&o.Out, &o.In} }
func (o *MatMulOp) bufs() []*Buf      { return []*Buf{&o.Out, &o.In} }
func (o *RopeOp) bufs() []*Buf        { return []*Buf{&o.Out, &o.In} }
func (o *StoreKVOp) bufs() []*Buf     { return []*Buf{&o.K, &o.V} }
func (o *AttentionOp) bufs() []*Buf   { return []*Buf{&o.Out, &o.Q} }
func (o *GLUOp) bufs() []*Buf         { return []*Buf{&o.Out, &o.Gate, &o.Up} }
func (o *ActivationOp) bufs() []*Buf  { return []*Buf{&o.Out, &o.In} }
func (o *AddOp) bufs() []*Buf         { return []*Buf{&o.Out, &o.A, &o.B} }
func (o *SoftCapOp) bufs() []*Buf     { return []*Buf{&o.Out, &o.In} }
func (o *LastRowOp) bufs() []*Buf     { return []*Buf{&o.Out, &o.In} }
func (o *MatMulGLUOp) bufs() []*Buf   { return []*Buf{&o.Out, &o.In} }
func (o *ArgmaxOp) bufs() []*Buf      { return []*Buf{&o.Out, &o.In} }
func (o *SampleOp) bufs() []*Buf      { return []*Buf{&o.Out, &o.In} }
func (o *RopeStoreKVOp) bufs() []*Buf { return []*Buf{&o.Q, &o.K, &o.V} }

func (o *MultiMatMulOp) bufs() []*Buf {
	bs := []*Buf{&o.In}
	for i := range o.Outs {
		bs = append(bs, &o.Outs[i].Out)
	}
	return bs
}

func (o *EmbedOp) clone() Op       { c := *o; return &c }
func (o *NormOp) clone() Op        { c := *o; return &c }
func (o *RopeOp) clone() Op        { c := *o; c.RopeParams = o.RopeParams.Clone(); return &c }
func (o *StoreKVOp) clone() Op     { c := *o; return &c }
func (o *AttentionOp) clone() Op   { c := *o; return &c }
func (o *GLUOp) clone() Op         { c := *o; return &c }
func (o *ActivationOp) clone() Op  { c := *o; return &c }
func (o *AddOp) clone() Op         { c := *o; return &c }
func (o *SoftCapOp) clone() Op     { c := *o; return &c }
func (o *LastRowOp) clone() Op     { c := *o; return &c }
func (o *ArgmaxOp) clone() Op      { c := *o; return &c }
func (o *SampleOp) clone() Op      { c := *o; return &c }
func (o *RopeStoreKVOp) clone() Op { c := *o; c.RopeParams = o.RopeParams.Clone(); return &c }

func (o *MatMulOp) clone() Op {
	c := *o
	c.Prologue = o.Prologue.clone()
	return &c
}

func (o *MultiMatMulOp) clone() Op {
	c := *o
	c.Outs = slices.Clone(o.Outs)
	c.Prologue = o.Prologue.clone()
	return &c
}

func (o *MatMulGLUOp) clone() Op {
	c := *o
	c.Prologue = o.Prologue.clone()
	return &c
}

// Clone returns a deep copy of op (nil for nil), which the caller may
// change without changing op.
func Clone(op Op) Op {
	if op == nil {
		return nil
	}
	return op.clone()
}

func (o *EmbedOp) validate(g *Graph, shape WeightShape) error {
	out := g.Bufs[o.Out]
	if err := g.perToken(out); err != nil {
		return err
	}
	if o.Scale < 0 {
		return fmt.Errorf("%w: negative embedding scale %g", ErrInvalid, o.Scale)
	}
	if o.Positions {
		if ws, ok := shape(o.Weight); ok && len(ws) == 2 && ws[0] < g.KV.MaxLen {
			return fmt.Errorf("%w: %d position rows in %q for a cache of %d", ErrInvalid, ws[0], o.Weight, g.KV.MaxLen)
		}
	}
	return checkWeight(shape, o.Weight, -1, out.Cols)
}

func (o *NormOp) validate(g *Graph, shape WeightShape) error {
	out := g.Bufs[o.Out]
	if !o.Norm.Valid() {
		return fmt.Errorf("%w: norm kind %s", ErrInvalid, o.Norm)
	}
	if !(o.Eps >= 0) {
		return fmt.Errorf("%w: eps %g", ErrInvalid, o.Eps)
	}
	if o.Unit {
		if o.Weight != "" || o.Norm != NormRMS {
			return fmt.Errorf("%w: unit %s norm with weight %q", ErrInvalid, o.Norm, o.Weight)
		}
	} else if o.Weight == "" {
		return fmt.Errorf("%w: norm without a weight", ErrInvalid)
	}
	if o.Norm == NormRMS && o.Bias != "" {
		return fmt.Errorf("%w: rms norm with bias %q", ErrInvalid, o.Bias)
	}
	if o.HeadDim != 0 {
		if o.HeadDim < 0 || o.Norm != NormRMS || out.Cols%o.HeadDim != 0 {
			return fmt.Errorf("%w: %s norm per head of %d over %d columns", ErrInvalid, o.Norm, o.HeadDim, out.Cols)
		}
		return firstErr(g.sameRows(o.Out, o.In), g.sameCols(o.Out, o.In), checkVector(shape, o.Weight, o.HeadDim))
	}
	return firstErr(g.sameRows(o.Out, o.In), g.sameCols(o.Out, o.In),
		checkVector(shape, o.Weight, out.Cols), checkVector(shape, o.Bias, out.Cols))
}

func (o *MatMulOp) validate(g *Graph, shape WeightShape) error {
	out, in := g.Bufs[o.Out], g.Bufs[o.In]
	if o.Out == o.In {
		return fmt.Errorf("%w: matmul output aliases its input %q", ErrInvalid, out.Name)
	}
	return firstErr(o.Prologue.check(g, o.In, shape), g.sameRows(o.Out, o.In),
		checkWeight(shape, o.Weight, out.Cols, in.Cols), checkVector(shape, o.Bias, out.Cols))
}

func (o *MultiMatMulOp) validate(g *Graph, shape WeightShape) error {
	n := len(o.Outs)
	if n < 2 || n > 4 {
		return fmt.Errorf("%w: multi_matmul of %d outputs, want 2 to 4", ErrInvalid, n)
	}
	if err := o.Prologue.check(g, o.In, shape); err != nil {
		return err
	}
	in := g.Bufs[o.In]
	for i, p := range o.Outs {
		out := g.Bufs[p.Out]
		if p.Out == o.In {
			return fmt.Errorf("%w: multi_matmul output %q aliases its input", ErrInvalid, out.Name)
		}
		for _, q := range o.Outs[:i] {
			if q.Out == p.Out {
				return fmt.Errorf("%w: multi_matmul writes %q twice", ErrInvalid, out.Name)
			}
		}
		if out.Rows != in.Rows {
			return fmt.Errorf("%w: input %q has %d rows, output %q has %d", ErrInvalid, in.Name, in.Rows, out.Name, out.Rows)
		}
		if err := firstErr(checkWeight(shape, p.Weight, out.Cols, in.Cols), checkVector(shape, p.Bias, out.Cols)); err != nil {
			return err
		}
	}
	return nil
}

func (o *MatMulGLUOp) validate(g *Graph, shape WeightShape) error {
	out, in := g.Bufs[o.Out], g.Bufs[o.In]
	if o.Out == o.In {
		return fmt.Errorf("%w: matmul_glu output aliases its input %q", ErrInvalid, out.Name)
	}
	if !o.Act.Elementwise() {
		return fmt.Errorf("%w: activation %s (not elementwise)", ErrInvalid, o.Act)
	}
	return firstErr(o.Prologue.check(g, o.In, shape), g.sameRows(o.Out, o.In),
		checkWeight(shape, o.Gate.Weight, out.Cols, in.Cols), checkWeight(shape, o.Up.Weight, out.Cols, in.Cols),
		checkVector(shape, o.Gate.Bias, out.Cols), checkVector(shape, o.Up.Bias, out.Cols))
}

func (o *RopeOp) validate(g *Graph, _ WeightShape) error {
	out, in := g.Bufs[o.Out], g.Bufs[o.In]
	if out.F16 != in.F16 {
		// The dims past RopeDims are copied as they are stored.
		return fmt.Errorf("%w: rope output %q and input %q differ in f16", ErrInvalid, out.Name, in.Name)
	}
	return firstErr(g.perToken(out, in), g.sameCols(o.Out, o.In), checkHeads(o.Heads, o.HeadDim, in),
		o.RopeParams.check(o.HeadDim))
}

func (o *RopeStoreKVOp) validate(g *Graph, _ WeightShape) error {
	if g.Batch {
		return fmt.Errorf("%w: rope_store_kv in a batched step", ErrInvalid)
	}
	if o.K == o.Q || o.V == o.Q {
		return fmt.Errorf("%w: rope_store_kv wants k, v distinct from q", ErrInvalid)
	}
	q, k, v := g.Bufs[o.Q], g.Bufs[o.K], g.Bufs[o.V]
	return firstErr(g.perToken(q, k, v), g.checkKV(o.Layer, o.KVHeads, o.HeadDim), checkHeads(o.Heads, o.HeadDim, q),
		checkHeads(o.KVHeads, o.HeadDim, k), checkHeads(o.KVHeads, o.HeadDim, v), o.RopeParams.check(o.HeadDim))
}

func (o *StoreKVOp) validate(g *Graph, _ WeightShape) error {
	k, v := g.Bufs[o.K], g.Bufs[o.V]
	return firstErr(g.perToken(k, v), g.checkKV(o.Layer, o.KVHeads, o.HeadDim),
		checkHeads(o.KVHeads, o.HeadDim, k), checkHeads(o.KVHeads, o.HeadDim, v))
}

func (o *AttentionOp) validate(g *Graph, shape WeightShape) error {
	out, q := g.Bufs[o.Out], g.Bufs[o.Q]
	if o.Out == o.Q {
		return fmt.Errorf("%w: attention output aliases its input %q", ErrInvalid, out.Name)
	}
	if err := firstErr(g.perToken(out, q), g.sameCols(o.Out, o.Q), g.checkKV(o.Layer, o.KVHeads, o.HeadDim),
		checkHeads(o.Heads, o.HeadDim, q)); err != nil {
		return err
	}
	if o.KVHeads <= 0 || o.Heads%o.KVHeads != 0 {
		return fmt.Errorf("%w: %d heads not a multiple of %d kv heads", ErrInvalid, o.Heads, o.KVHeads)
	}
	if !(o.Scale > 0) || !(o.Cap >= 0) || o.Window < 0 {
		return fmt.Errorf("%w: scale %g, cap %g, window %d", ErrInvalid, o.Scale, o.Cap, o.Window)
	}
	if err := checkSinks(shape, o.Sinks, o.Heads); err != nil {
		return err
	}
	if o.NonCausal && g.Batch {
		return fmt.Errorf("%w: non-causal attention in a batched step", ErrInvalid)
	}
	if o.SymmetricWindow && (!o.NonCausal || g.KV.RingLen(o.Layer) > 0) {
		return fmt.Errorf("%w: a symmetric window without non-causal attention or on a ring cache (layer %d)", ErrInvalid, o.Layer)
	}
	if ring := g.KV.RingLen(o.Layer); ring > 0 {
		// The step stores its rows before attending: the oldest position
		// a row reads must outlive the newest one stored.
		reach := o.Window + g.Tokens - 1
		if g.Batch {
			reach = o.Window
		}
		if o.Window == 0 || reach > ring {
			return fmt.Errorf("%w: attention window %d over %d tokens on a ring of %d positions (layer %d)", ErrInvalid, o.Window, g.Tokens, ring, o.Layer)
		}
	}
	return nil
}

func (o *GLUOp) validate(g *Graph, _ WeightShape) error {
	if !o.Act.Elementwise() {
		return fmt.Errorf("%w: activation %s (not elementwise)", ErrInvalid, o.Act)
	}
	return firstErr(g.sameRows(o.Out, o.Gate, o.Up), g.sameCols(o.Out, o.Gate, o.Up))
}

func (o *ActivationOp) validate(g *Graph, _ WeightShape) error {
	if !o.Act.Elementwise() {
		return fmt.Errorf("%w: activation %s (not elementwise)", ErrInvalid, o.Act)
	}
	return firstErr(g.sameRows(o.Out, o.In), g.sameCols(o.Out, o.In))
}

func (o *AddOp) validate(g *Graph, _ WeightShape) error {
	return firstErr(g.sameRows(o.Out, o.A, o.B), g.sameCols(o.Out, o.A, o.B))
}

func (o *SoftCapOp) validate(g *Graph, _ WeightShape) error {
	if !(o.Cap > 0) {
		return fmt.Errorf("%w: soft cap %g", ErrInvalid, o.Cap)
	}
	return firstErr(g.sameRows(o.Out, o.In), g.sameCols(o.Out, o.In))
}

func (o *LastRowOp) validate(g *Graph, _ WeightShape) error {
	out := g.Bufs[o.Out]
	if out.Rows != 1 {
		return fmt.Errorf("%w: last_row output %q has %d rows, want 1", ErrInvalid, out.Name, out.Rows)
	}
	if o.Out == o.In && g.Tokens > 1 {
		return fmt.Errorf("%w: last_row output aliases its input %q", ErrInvalid, out.Name)
	}
	return g.sameCols(o.Out, o.In)
}

func (o *ArgmaxOp) validate(g *Graph, _ WeightShape) error {
	return g.checkPick(Argmax, o.Out, o.In)
}

func (o *SampleOp) validate(g *Graph, _ WeightShape) error {
	if err := o.Sampling.Validate(); err != nil {
		return err
	}
	return g.checkPick(Sample, o.Out, o.In)
}

// checkPick checks the shapes of an Argmax or Sample op.
func (g *Graph) checkPick(k Kind, o, i Buf) error {
	in, out := g.Bufs[i], g.Bufs[o]
	if in.Rows != 1 {
		return fmt.Errorf("%w: %s input %q has %d rows, want 1", ErrInvalid, k, in.Name, in.Rows)
	}
	if in.Cols > 1<<24 {
		return fmt.Errorf("%w: %s input %q has %d columns, ids past 2^24 are not exact in f32", ErrInvalid, k, in.Name, in.Cols)
	}
	if out.Rows != 1 || out.Cols != 1 {
		return fmt.Errorf("%w: %s output %q is %d x %d, want 1 x 1", ErrInvalid, k, out.Name, out.Rows, out.Cols)
	}
	if o == i {
		return fmt.Errorf("%w: %s output aliases its input %q", ErrInvalid, k, out.Name)
	}
	if in.F16 || out.F16 {
		return fmt.Errorf("%w: %s reads or writes an f16 buffer (logits and ids stay f32)", ErrInvalid, k)
	}
	return nil
}

// Weights returns the names of the tensors op reads (matrices, biases,
// norm scales and attention sinks; "" left out), in the order of its fields.
func Weights(op Op) []string {
	var ns []string
	add := func(names ...string) {
		for _, n := range names {
			if n != "" {
				ns = append(ns, n)
			}
		}
	}
	pro := func(p *RMSPrologue) {
		if p != nil {
			add(p.Weight)
		}
	}
	switch o := op.(type) {
	case *EmbedOp:
		add(o.Weight)
	case *NormOp:
		add(o.Weight, o.Bias)
	case *MatMulOp:
		add(o.Weight, o.Bias)
		pro(o.Prologue)
	case *MultiMatMulOp:
		for _, p := range o.Outs {
			add(p.Weight, p.Bias)
		}
		pro(o.Prologue)
	case *MatMulGLUOp:
		add(o.Gate.Weight, o.Gate.Bias, o.Up.Weight, o.Up.Bias)
		pro(o.Prologue)
	case *MatMulRopeKVOp:
		add(o.Q.Weight, o.Q.Bias, o.K.Weight, o.K.Bias, o.V.Weight, o.V.Bias)
		pro(o.Prologue)
	case *AttentionOp:
		add(o.Sinks)
	case *ScaleOp:
		add(o.Weight)
	case *ShortConvOp:
		add(o.Weight)
	case *DeltaNetOp:
		add(o.Conv, o.DtBias, o.A)
	case *Mamba2Op:
		add(o.Conv, o.ConvBias, o.DtBias, o.A, o.D, o.Norm)
	case *MoEOp:
		add(o.Router, o.RouterBias, o.Gate, o.GateBias, o.Up, o.UpBias, o.Down, o.DownBias)
	case *RowLoRAOp:
		for _, set := range o.Sets {
			for _, p := range set {
				add(p.A, p.B)
			}
		}
	}
	return ns
}
