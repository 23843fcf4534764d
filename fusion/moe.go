package fusion

import "fmt"

// MoEOp: the feed-forward block of a mixture of experts (Qwen 3 MoE,
// gpt-oss). For each row t, with x = In[t]:
//
//	r = Router · x (+ RouterBias)           (Experts logits)
//	Gating GatingSoftmax (the zero value, Qwen 3 MoE):
//	  p = softmax(r)
//	  S = the Used experts of largest p, in decreasing p
//	  w_e = p_e
//	Gating GatingSoftmaxWeight (gpt-oss):
//	  S = the Used experts of largest r, in decreasing r
//	  w = softmax of (r_e for e in S)
//	(the lower index first on ties), then with NormTopK
//	  w_e = w_e / sum_{j in S} w_j
//	g_e = Gate_e · x (+ GateBias[e]), u_e = Up_e · x (+ UpBias[e])
//	h_e = act(g_e) * u_e, or ActSwiGLUOAI(g_e, u_e) with SwiGLUOAI
//	Out[t] = sum_{e in S, in that order} w_e * (Down_e · h_e (+ DownBias[e]))
//
// Router is [Experts, In.Cols]; Gate and Up are [Experts, Hidden, In.Cols]
// and Down [Experts, Out.Cols, Hidden] (expert-major: expert e's matrix is
// its e-th slab), each product computed as MatMulOp computes it. The
// optional biases (llama.cpp's ffn_gate_inp.bias, ffn_gate_exps.bias,
// ffn_up_exps.bias, ffn_down_exps.bias) are RouterBias [Experts], GateBias
// and UpBias [Experts, Hidden] and DownBias [Experts, Out.Cols]: expert
// e's is row e, added to its product before the activation (gate, up) and
// before the weighting (down). Only the selected experts' rows are read.
// Out and In have the same width; Out must not alias In.
type MoEOp struct {
	Out, In        Buf
	Router         string
	Gate, Up, Down string
	Experts, Used  int
	Hidden         int
	Act            Act
	// SwiGLUOAI are ActSwiGLUOAI's parameters (zero with any other Act).
	SwiGLUOAI SwiGLUOAIParams
	Gating    Gating
	NormTopK  bool
	// Optional biases ("": none).
	RouterBias                 string
	GateBias, UpBias, DownBias string
}

// Gating is how a MoE op selects and weighs its experts from the router
// logits (see MoEOp).
type Gating uint8

const (
	// GatingSoftmax: the experts of largest softmax probability, weighted
	// by it (llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX).
	GatingSoftmax Gating = iota
	// GatingSoftmaxWeight: the experts of largest logit, weighted by the
	// softmax of the selected logits alone (llama.cpp's
	// LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT, gpt-oss).
	GatingSoftmaxWeight
)

var gatingNames = [...]string{GatingSoftmax: "softmax", GatingSoftmaxWeight: "softmax_weight"}

func (g Gating) String() string {
	if int(g) < len(gatingNames) {
		return gatingNames[g]
	}
	return fmt.Sprintf("gating(%d)", uint8(g))
}

// Valid reports whether g is one of the constants.
func (g Gating) Valid() bool { return g <= GatingSoftmaxWeight }

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
	if (o.Act == ActSwiGLUOAI) != o.SwiGLUOAI.valid() || o.Act != ActSwiGLUOAI && o.SwiGLUOAI != (SwiGLUOAIParams{}) {
		return fmt.Errorf("%w: moe activation %s with swiglu_oai parameters %+v", ErrInvalid, o.Act, o.SwiGLUOAI)
	}
	if !o.Gating.Valid() {
		return fmt.Errorf("%w: moe %s", ErrInvalid, o.Gating)
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
		checkExperts(shape, o.Down, o.Experts, out.Cols, o.Hidden),
		checkVector(shape, o.RouterBias, o.Experts),
		checkExpertBias(shape, o.GateBias, o.Experts, o.Hidden),
		checkExpertBias(shape, o.UpBias, o.Experts, o.Hidden),
		checkExpertBias(shape, o.DownBias, o.Experts, out.Cols))
}

// checkExpertBias checks an optional stack of expert biases: [experts, n].
func checkExpertBias(shape WeightShape, name string, experts, n int) error {
	if name == "" {
		return nil
	}
	if err := checkWeight(shape, name, experts, n); err != nil {
		return fmt.Errorf("expert bias: %w", err)
	}
	return nil
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
