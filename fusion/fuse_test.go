package fusion

import (
	"slices"
	"testing"
)

// fuseGraph is a small graph over buffers x (residual), h (normed), a, b, c
// (projections) and y (an unrelated reader), all 4 rows of 8 columns.
func fuseGraph(ops ...Op) *Graph {
	g := &Graph{Tokens: 4}
	for _, n := range []string{"x", "h", "a", "b", "c", "y"} {
		g.NewBuf(n, 4, 8)
	}
	g.Ops = ops
	g.Logits = 0
	return g
}

const (
	bx Buf = iota
	bh
	ba
	bb
	bc
	by
)

func mm(out, in Buf, w string) Op { return Op{Kind: MatMul, Out: out, In: []Buf{in}, Weight: w} }
func add(out, a, b Buf) Op        { return Op{Kind: Add, Out: out, In: []Buf{a, b}} }

// norm is a LayerNorm, which no rule folds (the rules other than the norm
// prologue's are tested around it); rms is an RMSNorm.
func norm(out, in Buf) Op {
	return Op{Kind: Norm, Out: out, In: []Buf{in}, Weight: "n", NormKind: "layer", Eps: 1e-5}
}
func rms(out, in Buf) Op {
	return Op{Kind: Norm, Out: out, In: []Buf{in}, Weight: "n", NormKind: "rms", Eps: 1e-5}
}
func rope(b Buf, dims int) Op {
	return Op{Kind: Rope, Out: b, In: []Buf{b}, Heads: 2, HeadDim: 4, RopeDims: dims, RopeBase: 10000, RopeStyle: "halves"}
}
func storeKV(k, v Buf) Op { return Op{Kind: StoreKV, Out: k, In: []Buf{k, v}, KVHeads: 2, HeadDim: 4} }
func attend(out, q Buf) Op {
	return Op{Kind: Attention, Out: out, In: []Buf{q}, Heads: 2, KVHeads: 2, HeadDim: 4, Scale: 0.5}
}

// kvGraph is fuseGraph with a one-layer cache of 2 heads of 4.
func kvGraph(ops ...Op) *Graph {
	g := fuseGraph(ops...)
	g.KV = KVSpec{Layers: 1, KVHeads: 2, HeadDim: 4, MaxLen: 16}
	return g
}

func glu(out, gate, up Buf) Op { return Op{Kind: GLU, Out: out, In: []Buf{gate, up}, Act: "silu"} }

func kinds(ops []Op) []Kind {
	var ks []Kind
	for _, op := range ops {
		ks = append(ks, op.Kind)
	}
	return ks
}

func TestFuse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		g     *Graph
		want  []Kind
		check func(t *testing.T, f *Graph)
	}{
		{"residual add folds into the projection", fuseGraph(norm(bh, bx), mm(ba, bh, "o"), add(bx, bx, ba)),
			[]Kind{Norm, MatMul}, func(t *testing.T, f *Graph) {
				op := f.Ops[1]
				if !op.Accumulate || f.Bufs[op.Out].Name != "x" || f.Bufs[op.In[0]].Name != "h" {
					t.Errorf("fused op %+v", op)
				}
			}},
		{"residual second operand", fuseGraph(norm(bh, bx), mm(ba, bh, "o"), add(bx, ba, bx)),
			[]Kind{Norm, MatMul}, nil},
		{"residual across unrelated ops", fuseGraph(norm(bh, bx), mm(ba, bh, "o"), mm(bb, bh, "u"), add(bx, bx, ba), add(bx, bx, bb)),
			[]Kind{Norm, MultiMatMul, Add, Add}, nil},
		{"projection read after the add", fuseGraph(norm(bh, bx), mm(ba, bh, "o"), add(bx, bx, ba), add(by, ba, bh)),
			[]Kind{Norm, MatMul, Add, Add}, nil},
		{"projection read at the next step", fuseGraph(add(by, ba, bh), norm(bh, bx), mm(ba, bh, "o"), add(bx, bx, ba)),
			[]Kind{Add, Norm, MatMul, Add}, nil},
		{"residual read in between", fuseGraph(norm(bh, bx), mm(ba, bh, "o"), norm(by, bx), add(bx, bx, ba)),
			[]Kind{Norm, MatMul, Norm, Add}, nil},
		{"projection normed before the add", fuseGraph(norm(bh, bx), mm(ba, bh, "o"), norm(ba, ba), add(bx, bx, ba)),
			[]Kind{Norm, MatMul, Norm, Add}, nil},
		{"add into a third buffer", fuseGraph(norm(bh, bx), mm(ba, bh, "o"), add(by, bx, ba), norm(bx, by)),
			[]Kind{Norm, MatMul, Add, Norm}, nil},
		{"add into the matmul input", fuseGraph(mm(ba, bh, "o"), add(bh, bh, ba), norm(bx, bh)),
			[]Kind{MatMul, Add, Norm}, nil},
		{"projection is the logits", func() *Graph {
			g := fuseGraph(norm(bh, bx), mm(ba, bh, "o"), add(bx, bx, ba))
			g.Logits = ba
			return g
		}(), []Kind{Norm, MatMul, Add}, nil},
		{"q k v", fuseGraph(norm(bh, bx), mm(ba, bh, "q"), mm(bb, bh, "k"), mm(bc, bh, "v"), add(by, ba, bb), add(by, by, bc)),
			[]Kind{Norm, MultiMatMul, Add, Add}, func(t *testing.T, f *Graph) {
				op := f.Ops[1]
				if !slices.Equal(op.Weights, []string{"q", "k", "v"}) || len(op.Outs) != 3 || op.Out != op.Outs[0] || op.Biases != nil {
					t.Errorf("fused op %+v", op)
				}
			}},
		{"different inputs", fuseGraph(mm(ba, bh, "q"), mm(bb, bx, "k"), add(by, ba, bb)),
			[]Kind{MatMul, MatMul, Add}, nil},
		{"same output twice", fuseGraph(mm(ba, bh, "q"), mm(ba, bh, "k"), add(by, ba, bh)),
			[]Kind{MatMul, MatMul, Add}, nil},
		{"gate up glu", fuseGraph(norm(bh, bx), mm(bb, bh, "up"), mm(ba, bh, "gate"), glu(bb, ba, bb), mm(bc, bb, "down"), add(bx, bx, bc)),
			[]Kind{Norm, MatMulGLU, MatMul}, func(t *testing.T, f *Graph) {
				op := f.Ops[1]
				if op.Weight != "gate" || op.Up != "up" || op.Act != "silu" || f.Bufs[op.Out].Name != "b" {
					t.Errorf("fused op %+v", op)
				}
				if !f.Ops[2].Accumulate {
					t.Errorf("down projection %+v does not accumulate", f.Ops[2])
				}
				for _, b := range f.Bufs {
					if b.Name == "a" {
						t.Errorf("gate buffer kept")
					}
				}
			}},
		{"gate read later", fuseGraph(norm(bh, bx), mm(bb, bh, "up"), mm(ba, bh, "gate"), glu(bb, ba, bb), add(by, ba, bb)),
			[]Kind{Norm, MultiMatMul, GLU, Add}, nil},
		{"glu into the input", fuseGraph(mm(bb, bh, "up"), mm(ba, bh, "gate"), glu(bh, ba, bb), norm(bx, bh)),
			[]Kind{MultiMatMul, GLU, Norm}, nil},
		{"rms norm into q k v", fuseGraph(rms(bh, bx), mm(ba, bh, "q"), mm(bb, bh, "k"), mm(bc, bh, "v"), add(by, ba, bb), add(by, by, bc)),
			[]Kind{MultiMatMul, Add, Add}, func(t *testing.T, f *Graph) {
				op := f.Ops[0]
				if op.NormWeight != "n" || op.Eps != 1e-5 || f.Bufs[op.In[0]].Name != "x" {
					t.Errorf("fused op %+v", op)
				}
				for _, b := range f.Bufs {
					if b.Name == "h" {
						t.Errorf("normed buffer kept")
					}
				}
			}},
		{"rms norm into two products", fuseGraph(rms(bh, bx), mm(ba, bh, "q"), add(by, ba, bx), mm(bb, bh, "k"), add(by, by, bb)),
			[]Kind{MatMul, Add, MatMul}, func(t *testing.T, f *Graph) {
				if f.Ops[0].NormWeight != "n" || f.Ops[2].NormWeight != "n" {
					t.Errorf("fused ops %+v, %+v", f.Ops[0], f.Ops[2])
				}
			}},
		{"rms norm into gate up", fuseGraph(rms(bh, bx), mm(bb, bh, "up"), mm(ba, bh, "gate"), glu(bb, ba, bb), mm(bc, bb, "down"), add(bx, bx, bc)),
			[]Kind{MatMulGLU, MatMul}, func(t *testing.T, f *Graph) {
				if f.Ops[0].NormWeight != "n" || f.Ops[1].NormWeight != "" {
					t.Errorf("fused ops %+v, %+v", f.Ops[0], f.Ops[1])
				}
			}},
		{"rms norm read by an add", fuseGraph(rms(bh, bx), mm(ba, bh, "q"), add(by, ba, bh)),
			[]Kind{Norm, MatMul, Add}, nil},
		{"rms norm read at the next step", fuseGraph(add(by, by, bh), rms(bh, bx), mm(ba, bh, "q")),
			[]Kind{Add, Norm, MatMul}, nil},
		{"rms norm input written before a product", fuseGraph(rms(bh, bx), mm(ba, bh, "q"), add(bx, bx, ba), mm(bb, bh, "k"), add(by, by, bb)),
			[]Kind{Norm, MatMul, MatMul}, nil},
		{"rms norm into the projection of its input", fuseGraph(rms(bh, bx), mm(ba, bh, "o"), add(bx, bx, ba)),
			[]Kind{Norm, MatMul}, nil},
		{"rms norm is the logits", func() *Graph {
			g := fuseGraph(rms(ba, bx), mm(bb, ba, "q"), add(by, by, bb))
			g.Logits = ba
			return g
		}(), []Kind{Norm, MatMul}, nil},
		{"rope rope store", kvGraph(mm(bb, bh, "k"), rope(ba, 4), rope(bb, 4), storeKV(bb, bc), attend(by, ba)),
			[]Kind{MatMul, RopeStoreKV, Attention}, func(t *testing.T, f *Graph) {
				op := f.Ops[1]
				if !slices.Equal(op.In, []Buf{op.Out, f.Ops[0].Out, op.In[2]}) || f.Bufs[op.Out].Name != "a" ||
					f.Bufs[op.In[2]].Name != "c" || op.Heads != 2 || op.KVHeads != 2 || op.RopeDims != 4 || op.RopeStyle != "halves" {
					t.Errorf("fused op %+v", op)
				}
			}},
		{"rope k first", kvGraph(mm(bb, bh, "k"), rope(bb, 4), rope(ba, 4), storeKV(bb, bc), attend(by, ba)),
			[]Kind{MatMul, RopeStoreKV, Attention}, nil},
		{"rotated k read later", kvGraph(mm(bb, bh, "k"), rope(ba, 4), rope(bb, 4), storeKV(bb, bc), attend(by, ba), add(bx, bx, bb)),
			[]Kind{MatMul, Rope, Rope, StoreKV, Attention, Add}, nil},
		{"rotated k read at the next step", kvGraph(rope(ba, 4), rope(bb, 4), storeKV(bb, bc), attend(by, ba)),
			[]Kind{Rope, Rope, StoreKV, Attention}, nil},
		{"ropes differ", kvGraph(mm(bb, bh, "k"), rope(ba, 2), rope(bb, 4), storeKV(bb, bc), attend(by, ba)),
			[]Kind{MatMul, Rope, Rope, StoreKV, Attention}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.g.Ops)
			f := Fuse(tc.g)
			if got := kinds(f.Ops); !slices.Equal(got, tc.want) {
				t.Fatalf("kinds %v, want %v", got, tc.want)
			}
			if err := f.Validate(nil); err != nil {
				t.Fatalf("fused graph invalid: %v", err)
			}
			if !slices.EqualFunc(orig, tc.g.Ops, func(a, b Op) bool { return a.Kind == b.Kind && a.Out == b.Out && a.Accumulate == b.Accumulate }) {
				t.Errorf("Fuse changed its input graph")
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

func TestValidateFused(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   Op
	}{
		{"multi aliasing its input", Op{Kind: MultiMatMul, Out: ba, Outs: []Buf{ba, bh}, In: []Buf{bh}, Weights: []string{"q", "k"}}},
		{"multi writing twice", Op{Kind: MultiMatMul, Out: ba, Outs: []Buf{ba, ba}, In: []Buf{bh}, Weights: []string{"q", "k"}}},
		{"multi out not outs[0]", Op{Kind: MultiMatMul, Out: bb, Outs: []Buf{ba, bb}, In: []Buf{bh}, Weights: []string{"q", "k"}}},
		{"multi weights short", Op{Kind: MultiMatMul, Out: ba, Outs: []Buf{ba, bb}, In: []Buf{bh}, Weights: []string{"q"}}},
		{"multi one output", Op{Kind: MultiMatMul, Out: ba, Outs: []Buf{ba}, In: []Buf{bh}, Weights: []string{"q"}}},
		{"multi biases short", Op{Kind: MultiMatMul, Out: ba, Outs: []Buf{ba, bb}, In: []Buf{bh}, Weights: []string{"q", "k"}, Biases: []string{""}}},
		{"glu aliasing its input", Op{Kind: MatMulGLU, Out: bh, In: []Buf{bh}, Weight: "g", Up: "u", Act: "silu"}},
		{"glu bad act", Op{Kind: MatMulGLU, Out: ba, In: []Buf{bh}, Weight: "g", Up: "u", Act: "tanh"}},
		{"glu no up", Op{Kind: MatMulGLU, Out: ba, In: []Buf{bh}, Weight: "g", Act: "silu"}},
		{"rope_store_kv out not q", Op{Kind: RopeStoreKV, Out: by, In: []Buf{ba, bb, bc}, Heads: 2, KVHeads: 2, HeadDim: 4, RopeDims: 4, RopeBase: 1e4, RopeStyle: "halves"}},
		{"rope_store_kv q is k", Op{Kind: RopeStoreKV, Out: ba, In: []Buf{ba, ba, bc}, Heads: 2, KVHeads: 2, HeadDim: 4, RopeDims: 4, RopeBase: 1e4, RopeStyle: "halves"}},
		{"rope_store_kv bad style", Op{Kind: RopeStoreKV, Out: ba, In: []Buf{ba, bb, bc}, Heads: 2, KVHeads: 2, HeadDim: 4, RopeDims: 4, RopeBase: 1e4, RopeStyle: "x"}},
		{"rope_store_kv two inputs", Op{Kind: RopeStoreKV, Out: ba, In: []Buf{ba, bb}, Heads: 2, KVHeads: 2, HeadDim: 4, RopeDims: 4, RopeBase: 1e4, RopeStyle: "halves"}},
		{"norm prologue on an add", Op{Kind: Add, Out: bx, In: []Buf{bx, ba}, NormWeight: "n"}},
		{"norm prologue bad eps", Op{Kind: MatMul, Out: ba, In: []Buf{bh}, Weight: "o", NormWeight: "n", Eps: -1}},
		{"accumulate on an add", Op{Kind: Add, Out: bx, In: []Buf{bx, ba}, Accumulate: true}},
		{"accumulate aliasing its input", Op{Kind: MatMul, Out: bh, In: []Buf{bh}, Weight: "o", Accumulate: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := kvGraph(tc.op).Validate(nil); err == nil {
				t.Errorf("accepted %+v", tc.op)
			}
		})
	}
}
