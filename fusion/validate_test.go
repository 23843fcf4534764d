package fusion

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// smallGraph is embed, norm, matmul, rope, store_kv, attention, last_row:
// valid as built; each case below breaks one thing.
func smallGraph() *Graph {
	g := &Graph{Tokens: 2, KV: KVSpec{Layers: 1, KVHeads: 1, HeadDim: 4, MaxLen: 8}}
	x := g.NewBuf("x", 2, 8)
	h := g.NewBuf("h", 2, 8)
	q := g.NewBuf("q", 2, 8)
	k := g.NewBuf("k", 2, 4)
	o := g.NewBuf("o", 2, 8)
	last := g.NewBuf("last", 1, 8)
	g.Add(&EmbedOp{Out: x, Weight: "emb"})
	g.Add(&NormOp{Out: h, In: x, Weight: "norm", Norm: NormRMS, Eps: 1e-5})
	g.Add(&MatMulOp{Out: q, In: h, Projection: Projection{Weight: "wq"}})
	g.Add(&MatMulOp{Out: k, In: h, Projection: Projection{Weight: "wk", Bias: "bk"}})
	g.Add(&RopeOp{Out: q, In: q, Heads: 2, HeadDim: 4, RopeParams: RopeParams{Dims: 4, Base: 1e4, Style: RopeHalves}})
	g.Add(&StoreKVOp{K: k, V: k, Layer: 0, KVHeads: 1, HeadDim: 4})
	g.Add(&AttentionOp{Out: o, Q: q, Layer: 0, HeadShape: HeadShape{Heads: 2, KVHeads: 1, HeadDim: 4}, Scale: 0.5})
	g.Add(&LastRowOp{Out: last, In: o})
	g.Logits = last
	return g
}

func shapes(name string) ([]int, bool) {
	s, ok := map[string][]int{"emb": {10, 8}, "norm": {8}, "wq": {8, 8}, "wk": {4, 8}, "bk": {4}, "sinks": {2}, "sinks2d": {1, 2}}[name]
	return s, ok
}

func TestValidate(t *testing.T) {
	if err := smallGraph().Validate(shapes); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	g := smallGraph()
	g.KV.Ring, g.Ops[6].(*AttentionOp).Window = []int{6}, 5 // window 5 + 2 tokens - 1 fits a ring of 6
	if err := g.Validate(shapes); err != nil {
		t.Fatalf("valid graph with a ring layer: %v", err)
	}
	g = smallGraph()
	g.Ops[1].(*NormOp).HeadDim, g.Ops[1].(*NormOp).Weight = 4, "bk" // a per-head norm of 4-value heads
	g.Ops[4].(*RopeOp).Factors, g.Ops[4].(*RopeOp).Scale = []float32{1, 8}, 1.2
	if err := g.Validate(shapes); err != nil {
		t.Fatalf("valid graph with a per-head norm and rope factors: %v", err)
	}
	g = smallGraph()
	g.Ops[6].(*AttentionOp).Sinks = "sinks"
	if err := g.Validate(shapes); err != nil {
		t.Fatalf("valid graph with attention sinks: %v", err)
	}
	if w := Weights(g.Ops[6]); len(w) != 1 || w[0] != "sinks" {
		t.Errorf("Weights(attention with sinks) = %v", w)
	}
	if c := Clone(g.Ops[6]).(*AttentionOp); c.Sinks != "sinks" {
		t.Errorf("Clone lost the sinks: %q", c.Sinks)
	}
	for _, tc := range []struct {
		name   string
		breaks func(g *Graph)
	}{
		{"embed width", func(g *Graph) { g.Bufs[0].Cols = 6; g.Bufs[1].Cols = 6 }},
		{"missing norm weight", func(g *Graph) { g.Ops[1].(*NormOp).Weight = "" }},
		{"rms with bias", func(g *Graph) { g.Ops[1].(*NormOp).Bias = "norm" }},
		{"norm weight length", func(g *Graph) { g.Ops[1].(*NormOp).Weight = "bk" }},
		{"norm kind unset", func(g *Graph) { g.Ops[1].(*NormOp).Norm = 0 }},
		{"matmul weight transposed", func(g *Graph) { g.Ops[3].(*MatMulOp).Weight = "wq" }},
		{"bias missing", func(g *Graph) { g.Ops[3].(*MatMulOp).Bias = "bq" }},
		{"prologue weight length", func(g *Graph) { g.Ops[3].(*MatMulOp).Prologue = &RMSPrologue{Weight: "bk"} }},
		{"rope odd dims", func(g *Graph) { g.Ops[4].(*RopeOp).Dims = 3 }},
		{"rope base", func(g *Graph) { g.Ops[4].(*RopeOp).Base = 0 }},
		{"rope style unset", func(g *Graph) { g.Ops[4].(*RopeOp).Style = 0 }},
		{"rope factors of the wrong length", func(g *Graph) { g.Ops[4].(*RopeOp).Factors = []float32{1} }},
		{"rope factor zero", func(g *Graph) { g.Ops[4].(*RopeOp).Factors = []float32{1, 0} }},
		{"rope scale negative", func(g *Graph) { g.Ops[4].(*RopeOp).Scale = -1 }},
		{"head norm on a layer norm", func(g *Graph) { g.Ops[1].(*NormOp).Norm, g.Ops[1].(*NormOp).HeadDim = NormLayer, 4 }},
		{"head norm not dividing the row", func(g *Graph) { g.Ops[1].(*NormOp).HeadDim = 3 }},
		{"head norm weight of the row", func(g *Graph) { g.Ops[1].(*NormOp).HeadDim = 4 }},
		{"rope on last row", func(g *Graph) { g.Ops[4].(*RopeOp).In = 5; g.Ops[4].(*RopeOp).Out = 5 }},
		{"store wrong layer", func(g *Graph) { g.Ops[5].(*StoreKVOp).Layer = 1 }},
		{"attention heads", func(g *Graph) { g.Ops[6].(*AttentionOp).Heads = 3 }},
		{"attention window", func(g *Graph) { g.Ops[6].(*AttentionOp).Window = -1 }},
		{"attention cap", func(g *Graph) { g.Ops[6].(*AttentionOp).Cap = -1 }},
		{"attention sinks missing", func(g *Graph) { g.Ops[6].(*AttentionOp).Sinks = "nope" }},
		{"attention sinks per kv head", func(g *Graph) { g.Ops[6].(*AttentionOp).Sinks = "bk" }},
		{"attention sinks 2-D", func(g *Graph) { g.Ops[6].(*AttentionOp).Sinks = "sinks2d" }},
		{"last row into many rows", func(g *Graph) { g.Ops[7].(*LastRowOp).Out = 4 }},
		{"rows mismatch", func(g *Graph) { g.Ops[2].(*MatMulOp).Out = 5 }},
		{"input out of range", func(g *Graph) { g.Ops[2].(*MatMulOp).In = 9 }},
		{"typed nil op", func(g *Graph) { g.Ops[2] = (*MatMulOp)(nil) }},
		{"missing weight", func(g *Graph) { g.Ops[0].(*EmbedOp).Weight = "nope" }},
		{"kv spec negative", func(g *Graph) { g.KV.MaxLen = -1 }},
		{"kv rings for the wrong layer count", func(g *Graph) { g.KV.Ring = []int{4, 4} }},
		{"kv ring past the cache", func(g *Graph) { g.KV.Ring = []int{9} }},
		{"ring layer without a window", func(g *Graph) { g.KV.Ring = []int{6} }},
		{"window and step past the ring", func(g *Graph) { g.KV.Ring = []int{6}; g.Ops[6].(*AttentionOp).Window = 6 }},
		{"position rows short of the cache", func(g *Graph) {
			g.Ops[0].(*EmbedOp).Positions = true
			g.KV.MaxLen = 11 // emb has 10 rows
		}},
		{"symmetric window on a ring", func(g *Graph) {
			g.KV.Ring = []int{6}
			a := g.Ops[6].(*AttentionOp)
			a.Window, a.NonCausal, a.SymmetricWindow = 5, true, true
		}},
		{"symmetric window of causal attention", func(g *Graph) {
			a := g.Ops[6].(*AttentionOp)
			a.Window, a.SymmetricWindow = 5, true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := smallGraph()
			tc.breaks(g)
			if err := g.Validate(shapes); !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate: %v, want ErrInvalid", err)
			}
		})
	}
}

// TestValidateArgmax checks the argmax contract: one input row, a 1x1
// output that does not alias it.
func TestValidateArgmax(t *testing.T) {
	withArgmax := func() *Graph {
		g := smallGraph()
		id := g.NewBuf("id", 1, 1)
		g.Logits = g.Add(&ArgmaxOp{Out: id, In: g.Logits})
		return g
	}
	if err := withArgmax().Validate(shapes); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	for _, tc := range []struct {
		name   string
		breaks func(g *Graph)
	}{
		{"input of many rows", func(g *Graph) { g.Ops[8].(*ArgmaxOp).In = 4 }},
		{"output wider than one", func(g *Graph) { g.Bufs[6].Cols = 2 }},
		{"output of many rows", func(g *Graph) { g.Bufs[6].Rows = 2 }},
		{"output aliases input", func(g *Graph) { g.Ops[8].(*ArgmaxOp).In = 6 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := withArgmax()
			tc.breaks(g)
			if err := g.Validate(shapes); !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate: %v, want ErrInvalid", err)
			}
		})
	}
}

// TestValidateBatch: a batched graph passes ValidateBatch only, without
// one-row buffers, LastRow or Argmax; Validate refuses it with ErrBatch.
func TestValidateBatch(t *testing.T) {
	batched := func() *Graph {
		g := smallGraph()
		g.Ops = g.Ops[:len(g.Ops)-1] // drop LastRow
		g.Bufs = g.Bufs[:len(g.Bufs)-1]
		g.Logits = 4 // o
		g.Batch = true
		return g
	}
	if err := batched().ValidateBatch(shapes); err != nil {
		t.Fatalf("valid batched graph: %v", err)
	}
	if err := batched().Validate(shapes); !errors.Is(err, ErrBatch) {
		t.Errorf("Validate of a batched graph: %v, want ErrBatch", err)
	}
	if err := smallGraph().ValidateBatch(shapes); !errors.Is(err, ErrInvalid) {
		t.Errorf("ValidateBatch of a plain graph: %v, want ErrInvalid", err)
	}
	g := smallGraph()
	g.Batch = true
	if err := g.ValidateBatch(shapes); !errors.Is(err, ErrInvalid) {
		t.Errorf("batched graph with LastRow: %v, want ErrInvalid", err)
	}
	g = batched()
	g.Ops = append(g.Ops, &ArgmaxOp{Out: g.NewBuf("id", 2, 1), In: 4})
	if err := g.ValidateBatch(shapes); !errors.Is(err, ErrInvalid) {
		t.Errorf("batched graph with Argmax: %v, want ErrInvalid", err)
	}
	g = batched()
	g.Ops[6].(*AttentionOp).NonCausal = true
	if err := g.ValidateBatch(shapes); !errors.Is(err, ErrInvalid) {
		t.Errorf("batched graph with non-causal attention: %v, want ErrInvalid", err)
	}
}

// TestValidateSample checks the sample contract: argmax's shapes and a
// rule that internal/sampler can run.
func TestValidateSample(t *testing.T) {
	withSample := func(r Sampling) *Graph {
		g := smallGraph()
		id := g.NewBuf("id", 1, 1)
		g.Logits = g.Add(&SampleOp{Out: id, In: g.Logits, Sampling: r})
		return g
	}
	good := Sampling{Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 1}
	if err := withSample(good).Validate(shapes); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	nan := float32(math.NaN())
	for _, r := range []Sampling{
		{Temperature: 0}, {Temperature: -1}, {Temperature: nan}, {Temperature: float32(math.Inf(1))},
		{Temperature: 1, TopK: -1}, {Temperature: 1, TopP: -0.1}, {Temperature: 1, TopP: 1.5}, {Temperature: 1, TopP: nan},
	} {
		if err := withSample(r).Validate(shapes); !errors.Is(err, ErrInvalid) {
			t.Errorf("rule %+v: %v, want ErrInvalid", r, err)
		}
	}
	g := withSample(good)
	g.Bufs[6].Cols = 2
	if err := g.Validate(shapes); !errors.Is(err, ErrInvalid) {
		t.Errorf("2-wide output: %v, want ErrInvalid", err)
	}
}

// TestParse: the config names convert both ways, unknown ones are errors.
func TestParse(t *testing.T) {
	for _, n := range []string{"rms", "layer"} {
		if k, err := ParseNormKind(n); err != nil || k.String() != n {
			t.Errorf("norm %q: %v, %v", n, k, err)
		}
	}
	for _, n := range []string{"silu", "gelu_tanh", "gelu", "relu", "swiglu_oai"} {
		if a, err := ParseAct(n); err != nil || a.String() != n || !a.Valid() || a.Elementwise() != (n != "swiglu_oai") {
			t.Errorf("act %q: %v, %v", n, a, err)
		}
	}
	for _, n := range []string{"interleaved", "halves"} {
		if s, err := ParseRopeStyle(n); err != nil || s.String() != n {
			t.Errorf("rope style %q: %v, %v", n, s, err)
		}
	}
	if _, err := ParseNormKind(""); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty norm: %v", err)
	}
	if _, err := ParseAct("tanh"); !errors.Is(err, ErrInvalid) {
		t.Errorf("tanh: %v", err)
	}
	if _, err := ParseRopeStyle("neox"); !errors.Is(err, ErrInvalid) {
		t.Errorf("neox: %v", err)
	}
	if Act(0).Valid() || Act(6).Valid() || Act(6).Elementwise() || Gating(2).Valid() || NormKind(3).Valid() || RopeStyle(0).Valid() {
		t.Errorf("zero or unknown value valid")
	}
}

// TestValidateMoE: a MoE op as the builder makes it validates; each case
// breaks one part of its contract.
func TestValidateMoE(t *testing.T) {
	moeShapes := func(name string) ([]int, bool) {
		s, ok := map[string][]int{"emb": {10, 8}, "router": {4, 8}, "gate": {4, 6, 8}, "up": {4, 6, 8}, "down": {4, 8, 6},
			"rb": {4}, "gb": {4, 6}, "ub": {4, 6}, "db": {4, 8}}[name]
		return s, ok
	}
	build := func(oai bool) *Graph {
		g := &Graph{Tokens: 2}
		x, out := g.NewBuf("x", 2, 8), g.NewBuf("out", 2, 8)
		g.Add(&EmbedOp{Out: x, Weight: "emb"})
		op := &MoEOp{Out: out, In: x, Router: "router", Gate: "gate", Up: "up", Down: "down",
			Experts: 4, Used: 2, Hidden: 6, Act: ActSiLU, NormTopK: true}
		if oai {
			op.Act, op.SwiGLUOAI, op.Gating, op.NormTopK = ActSwiGLUOAI, SwiGLUOAIDefault, GatingSoftmaxWeight, false
			op.RouterBias, op.GateBias, op.UpBias, op.DownBias = "rb", "gb", "ub", "db"
		}
		g.Add(op)
		g.Logits = out
		return g
	}
	for _, oai := range []bool{false, true} {
		if err := build(oai).Validate(moeShapes); err != nil {
			t.Fatalf("valid graph (gpt-oss %v): %v", oai, err)
		}
	}
	moe := func(g *Graph) *MoEOp { return g.Ops[1].(*MoEOp) }
	for _, tc := range []struct {
		name   string
		oai    bool // the gpt-oss form
		breaks func(g *Graph)
	}{
		{"aliased", false, func(g *Graph) { moe(g).Out = moe(g).In }},
		{"more used than experts", false, func(g *Graph) { moe(g).Used = 5 }},
		{"none used", false, func(g *Graph) { moe(g).Used = 0 }},
		{"expert count of the weights", false, func(g *Graph) { moe(g).Experts = 3 }},
		{"hidden width", false, func(g *Graph) { moe(g).Hidden = 5 }},
		{"down transposed", false, func(g *Graph) { moe(g).Down = "gate" }},
		{"router missing", false, func(g *Graph) { moe(g).Router = "wr" }},
		{"2-D experts", false, func(g *Graph) { moe(g).Up = "router" }},
		{"activation unset", false, func(g *Graph) { moe(g).Act = 0 }},
		{"f16 input", false, func(g *Graph) { g.Bufs[0].F16 = true }},
		{"unknown gating", false, func(g *Graph) { moe(g).Gating = 2 }},
		{"swiglu_oai parameters with silu", false, func(g *Graph) { moe(g).SwiGLUOAI = SwiGLUOAIDefault }},
		{"swiglu_oai without parameters", true, func(g *Graph) { moe(g).SwiGLUOAI = SwiGLUOAIParams{} }},
		{"swiglu_oai without a limit", true, func(g *Graph) { moe(g).SwiGLUOAI.Limit = 0 }},
		{"swiglu_oai of negative alpha", true, func(g *Graph) { moe(g).SwiGLUOAI.Alpha = -1 }},
		{"swiglu_oai of infinite limit", true, func(g *Graph) { moe(g).SwiGLUOAI.Limit = float32(math.Inf(1)) }},
		{"router bias missing", true, func(g *Graph) { moe(g).RouterBias = "nb" }},
		{"router bias of the hidden width", true, func(g *Graph) { moe(g).RouterBias = "gb" }},
		{"gate bias missing", true, func(g *Graph) { moe(g).GateBias = "nb" }},
		{"gate bias of the output width", true, func(g *Graph) { moe(g).GateBias = "db" }},
		{"up bias a vector", true, func(g *Graph) { moe(g).UpBias = "rb" }},
		{"down bias of the hidden width", true, func(g *Graph) { moe(g).DownBias = "ub" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(tc.oai)
			tc.breaks(g)
			if err := g.Validate(moeShapes); !errors.Is(err, ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
	// swiglu_oai is the MoE op's alone: the elementwise ops refuse it.
	g := &Graph{Tokens: 1}
	a, b := g.NewBuf("a", 1, 8), g.NewBuf("b", 1, 8)
	g.Add(&EmbedOp{Out: a, Weight: "emb"})
	g.Add(&EmbedOp{Out: b, Weight: "emb"})
	g.Logits = g.Add(&GLUOp{Out: g.NewBuf("o", 1, 8), Gate: a, Up: b, Act: ActSwiGLUOAI})
	if err := g.Validate(moeShapes); !errors.Is(err, ErrInvalid) {
		t.Errorf("GLU of swiglu_oai: err = %v, want ErrInvalid", err)
	} else {
		t.Log(err)
	}
	// Clone is deep and Weights lists the router and the experts, with
	// their biases after each.
	g = build(true)
	c := Clone(g.Ops[1]).(*MoEOp)
	c.Used, c.SwiGLUOAI.Limit, c.DownBias = 3, 1, ""
	if m := moe(g); m.Used != 2 || m.SwiGLUOAI != SwiGLUOAIDefault || m.DownBias != "db" {
		t.Error("Clone shares the op")
	}
	if w := Weights(build(false).Ops[1]); !slices.Equal(w, []string{"router", "gate", "up", "down"}) {
		t.Errorf("Weights = %v", w)
	}
	if w := Weights(g.Ops[1]); !slices.Equal(w, []string{"router", "rb", "gate", "gb", "up", "ub", "down", "db"}) {
		t.Errorf("Weights (gpt-oss) = %v", w)
	}
}

func TestValidateRowLoRA(t *testing.T) {
	shapes := func(name string) ([]int, bool) {
		s, ok := map[string][]int{"emb": {10, 8}, "w": {6, 8}, "a1": {2, 8}, "b1": {6, 2}, "a2": {4, 8}, "b2": {6, 4}}[name]
		return s, ok
	}
	build := func() *Graph {
		g := &Graph{Tokens: 3, Batch: true}
		x, y := g.NewBuf("x", 3, 8), g.NewBuf("y", 3, 6)
		g.Add(&EmbedOp{Out: x, Weight: "emb"})
		g.Add(&MatMulOp{Out: y, In: x, Projection: Projection{Weight: "w"}})
		g.Add(&RowLoRAOp{Out: y, In: x, Sets: [][]LoRAWeights{nil, {{A: "a1", B: "b1", Rank: 2}}, {{A: "a2", B: "b2", Rank: 4}, {A: "a1", B: "b1", Rank: 2}}}})
		g.Logits = y
		return g
	}
	if err := build().ValidateBatch(shapes); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	op := func(g *Graph) *RowLoRAOp { return g.Ops[2].(*RowLoRAOp) }
	for _, tc := range []struct {
		name   string
		breaks func(g *Graph)
	}{
		{"aliased", func(g *Graph) { op(g).Out = op(g).In }},
		{"rank of the weights", func(g *Graph) { op(g).Sets[1][0].Rank = 3 }},
		{"no rank", func(g *Graph) { op(g).Sets[1][0].Rank = 0 }},
		{"A and B swapped", func(g *Graph) { op(g).Sets[1][0].A, op(g).Sets[1][0].B = "b1", "a1" }},
		{"missing weight", func(g *Graph) { op(g).Sets[2][1].B = "nope" }},
		{"f16 output", func(g *Graph) { g.Bufs[1].F16 = true }},
		{"too many sets", func(g *Graph) { op(g).Sets = make([][]LoRAWeights, MaxRowLoRASets+1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build()
			tc.breaks(g)
			if err := g.ValidateBatch(shapes); !errors.Is(err, ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
	t.Run("unbatched", func(t *testing.T) {
		g := build()
		g.Batch = false
		if err := g.Validate(shapes); !errors.Is(err, ErrInvalid) {
			t.Errorf("err = %v, want ErrInvalid", err)
		}
	})
	// Clone is deep and Weights lists every set's matrices.
	g := build()
	c := Clone(g.Ops[2]).(*RowLoRAOp)
	c.Sets[1][0].Rank = 9
	if op(g).Sets[1][0].Rank != 2 {
		t.Error("Clone shares the sets")
	}
	if w := Weights(g.Ops[2]); len(w) != 6 || w[0] != "a1" || w[5] != "b1" {
		t.Errorf("Weights = %v", w)
	}
}
