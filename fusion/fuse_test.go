package fusion

import (
	"reflect"
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

func mm(out, in Buf, w string) Op {
	return &MatMulOp{Out: out, In: in, Projection: Projection{Weight: w}}
}
func add(out, a, b Buf) Op { return &AddOp{Out: out, A: a, B: b} }

// norm is a LayerNorm, which no rule folds (the rules other than the norm
// prologue's are tested around it); rms is an RMSNorm.
func norm(out, in Buf) Op {
	return &NormOp{Out: out, In: in, Weight: "n", Norm: NormLayer, Eps: 1e-5}
}
func rms(out, in Buf) Op {
	return &NormOp{Out: out, In: in, Weight: "n", Norm: NormRMS, Eps: 1e-5}
}
func rope(b Buf, dims int) Op {
	return &RopeOp{Out: b, In: b, Heads: 2, HeadDim: 4, RopeParams: RopeParams{Dims: dims, Base: 10000, Style: RopeHalves}}
}
func storeKV(k, v Buf) Op { return &StoreKVOp{K: k, V: v, KVHeads: 2, HeadDim: 4} }
func attend(out, q Buf) Op {
	return &AttentionOp{Out: out, Q: q, HeadShape: HeadShape{Heads: 2, KVHeads: 2, HeadDim: 4}, Scale: 0.5}
}

// kvGraph is fuseGraph with a one-layer cache of 2 heads of 4.
func kvGraph(ops ...Op) *Graph {
	g := fuseGraph(ops...)
	g.KV = KVSpec{Layers: 1, KVHeads: 2, HeadDim: 4, MaxLen: 16}
	return g
}

func glu(out, gate, up Buf) Op { return &GLUOp{Out: out, Gate: gate, Up: up, Act: ActSiLU} }

func kinds(ops []Op) []Kind {
	var ks []Kind
	for _, op := range ops {
		ks = append(ks, op.Kind())
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
				op := f.Ops[1].(*MatMulOp)
				if !op.Accumulate || f.Bufs[op.Out].Name != "x" || f.Bufs[op.In].Name != "h" {
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
				op := f.Ops[1].(*MultiMatMulOp)
				var ws []string
				for _, p := range op.Outs {
					ws = append(ws, p.Weight)
					if p.Bias != "" {
						t.Errorf("bias %q", p.Bias)
					}
				}
				if !slices.Equal(ws, []string{"q", "k", "v"}) {
					t.Errorf("fused op %+v", op)
				}
			}},
		{"different inputs", fuseGraph(mm(ba, bh, "q"), mm(bb, bx, "k"), add(by, ba, bb)),
			[]Kind{MatMul, MatMul, Add}, nil},
		{"same output twice", fuseGraph(mm(ba, bh, "q"), mm(ba, bh, "k"), add(by, ba, bh)),
			[]Kind{MatMul, MatMul, Add}, nil},
		{"gate up glu", fuseGraph(norm(bh, bx), mm(bb, bh, "up"), mm(ba, bh, "gate"), glu(bb, ba, bb), mm(bc, bb, "down"), add(bx, bx, bc)),
			[]Kind{Norm, MatMulGLU, MatMul}, func(t *testing.T, f *Graph) {
				op := f.Ops[1].(*MatMulGLUOp)
				if op.Gate.Weight != "gate" || op.Up.Weight != "up" || op.Act != ActSiLU || f.Bufs[op.Out].Name != "b" {
					t.Errorf("fused op %+v", op)
				}
				if !f.Ops[2].(*MatMulOp).Accumulate {
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
				op := f.Ops[0].(*MultiMatMulOp)
				if *op.Prologue != (RMSPrologue{Weight: "n", Eps: 1e-5}) || f.Bufs[op.In].Name != "x" {
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
				if p0, p2 := f.Ops[0].(*MatMulOp).Prologue, f.Ops[2].(*MatMulOp).Prologue; p0 == nil || p0.Weight != "n" || p2 == nil || p2.Weight != "n" || p0 == p2 {
					t.Errorf("fused ops %+v, %+v", f.Ops[0], f.Ops[2])
				}
			}},
		{"rms norm into gate up", fuseGraph(rms(bh, bx), mm(bb, bh, "up"), mm(ba, bh, "gate"), glu(bb, ba, bb), mm(bc, bb, "down"), add(bx, bx, bc)),
			[]Kind{MatMulGLU, MatMul}, func(t *testing.T, f *Graph) {
				if p := f.Ops[0].(*MatMulGLUOp).Prologue; p == nil || p.Weight != "n" || f.Ops[1].(*MatMulOp).Prologue != nil {
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
				op := f.Ops[1].(*RopeStoreKVOp)
				if op.K != f.Ops[0].(*MatMulOp).Out || f.Bufs[op.Q].Name != "a" ||
					f.Bufs[op.V].Name != "c" || op.Heads != 2 || op.KVHeads != 2 || op.Dims != 4 || op.Style != RopeHalves {
					t.Errorf("fused op %+v", op)
				}
			}},
		{"rope k first", kvGraph(mm(bb, bh, "k"), rope(bb, 4), rope(ba, 4), storeKV(bb, bc), attend(by, ba)),
			[]Kind{MatMul, RopeStoreKV, Attention}, nil},
		{"rotated k read later", kvGraph(mm(bb, bh, "k"), rope(ba, 4), rope(bb, 4), storeKV(bb, bc), attend(by, ba), add(bx, bx, bb)),
			[]Kind{MatMul, Rope, Rope, StoreKV, Attention, Add}, nil},
		{"rotated k read at the next step", kvGraph(rope(ba, 4), rope(bb, 4), storeKV(bb, bc), attend(by, ba)),
			[]Kind{Rope, Rope, StoreKV, Attention}, nil},
		{"q k v rope store", kvGraph(rms(bh, bx), mm(bc, bh, "v"), mm(ba, bh, "q"), mm(bb, bh, "k"), rope(ba, 4), rope(bb, 4), storeKV(bb, bc), attend(by, ba)),
			[]Kind{MatMulRopeKV, Attention}, func(t *testing.T, f *Graph) {
				op := f.Ops[0].(*MatMulRopeKVOp)
				if op.Q.Weight != "q" || op.K.Weight != "k" || op.V.Weight != "v" || f.Bufs[op.Out].Name != "a" || f.Bufs[op.In].Name != "x" ||
					op.Prologue == nil || op.Prologue.Weight != "n" || op.Heads != 2 || op.KVHeads != 2 || op.Dims != 4 || op.Style != RopeHalves {
					t.Errorf("fused op %+v", op)
				}
				for _, b := range f.Bufs {
					if b.Name == "b" || b.Name == "c" || b.Name == "h" {
						t.Errorf("buffer %s kept", b.Name)
					}
				}
			}},
		{"v read after the store", kvGraph(mm(ba, bh, "q"), mm(bb, bh, "k"), mm(bc, bh, "v"), rope(ba, 4), rope(bb, 4), storeKV(bb, bc), attend(by, ba), add(bx, bx, bc)),
			[]Kind{MultiMatMul, RopeStoreKV, Attention, Add}, nil},
		{"two projections and rope store", kvGraph(mm(ba, bh, "q"), mm(bb, bh, "k"), mm(bc, bx, "v"), rope(ba, 4), rope(bb, 4), storeKV(bb, bc), attend(by, ba)),
			[]Kind{MultiMatMul, MatMul, RopeStoreKV, Attention}, nil},
		{"ropes differ", kvGraph(mm(bb, bh, "k"), rope(ba, 2), rope(bb, 4), storeKV(bb, bc), attend(by, ba)),
			[]Kind{MatMul, Rope, Rope, StoreKV, Attention}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var orig []Op
			for _, op := range tc.g.Ops {
				orig = append(orig, Clone(op))
			}
			f := Fuse(tc.g)
			if got := kinds(f.Ops); !slices.Equal(got, tc.want) {
				t.Fatalf("kinds %v, want %v", got, tc.want)
			}
			if err := f.Validate(nil); err != nil {
				t.Fatalf("fused graph invalid: %v", err)
			}
			if !reflect.DeepEqual(orig, tc.g.Ops) {
				t.Errorf("Fuse changed its input graph")
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

func TestValidateFused(t *testing.T) {
	rs := RopeParams{Dims: 4, Base: 1e4, Style: RopeHalves}
	hs := HeadShape{Heads: 2, KVHeads: 2, HeadDim: 4}
	pq, pk := Product{Out: ba, Projection: Projection{Weight: "q"}}, Product{Out: bb, Projection: Projection{Weight: "k"}}
	for _, tc := range []struct {
		name string
		op   Op
	}{
		{"multi aliasing its input", &MultiMatMulOp{In: bh, Outs: []Product{pq, {Out: bh, Projection: Projection{Weight: "k"}}}}},
		{"multi writing twice", &MultiMatMulOp{In: bh, Outs: []Product{pq, {Out: ba, Projection: Projection{Weight: "k"}}}}},
		{"multi weight missing", &MultiMatMulOp{In: bh, Outs: []Product{pq, {Out: bb}}}},
		{"multi one output", &MultiMatMulOp{In: bh, Outs: []Product{pq}}},
		{"multi five outputs", &MultiMatMulOp{In: bx, Outs: []Product{pq, pk, {Out: bc, Projection: Projection{Weight: "v"}},
			{Out: by, Projection: Projection{Weight: "w"}}, {Out: bh, Projection: Projection{Weight: "u"}}}}},
		{"multi output out of range", &MultiMatMulOp{In: bh, Outs: []Product{pq, {Out: 9, Projection: Projection{Weight: "k"}}}}},
		{"glu aliasing its input", &MatMulGLUOp{Out: bh, In: bh, Gate: Projection{Weight: "g"}, Up: Projection{Weight: "u"}, Act: ActSiLU}},
		{"glu bad act", &MatMulGLUOp{Out: ba, In: bh, Gate: Projection{Weight: "g"}, Up: Projection{Weight: "u"}, Act: Act(9)}},
		{"glu no act", &MatMulGLUOp{Out: ba, In: bh, Gate: Projection{Weight: "g"}, Up: Projection{Weight: "u"}}},
		{"glu no up", &MatMulGLUOp{Out: ba, In: bh, Gate: Projection{Weight: "g"}, Act: ActSiLU}},
		{"rope_store_kv q is k", &RopeStoreKVOp{Q: ba, K: ba, V: bc, HeadShape: hs, RopeParams: rs}},
		{"rope_store_kv q is v", &RopeStoreKVOp{Q: ba, K: bb, V: ba, HeadShape: hs, RopeParams: rs}},
		{"rope_store_kv bad style", &RopeStoreKVOp{Q: ba, K: bb, V: bc, HeadShape: hs, RopeParams: RopeParams{Dims: 4, Base: 1e4}}},
		{"rope_store_kv v out of range", &RopeStoreKVOp{Q: ba, K: bb, V: -1, HeadShape: hs, RopeParams: rs}},
		{"matmul_rope_kv aliasing its input", &MatMulRopeKVOp{Out: bh, In: bh, Q: Projection{Weight: "q"}, K: Projection{Weight: "k"}, V: Projection{Weight: "v"}, HeadShape: hs, RopeParams: rs}},
		{"matmul_rope_kv no v", &MatMulRopeKVOp{Out: ba, In: bh, Q: Projection{Weight: "q"}, K: Projection{Weight: "k"}, HeadShape: hs, RopeParams: rs}},
		{"matmul_rope_kv bad heads", &MatMulRopeKVOp{Out: ba, In: bh, Q: Projection{Weight: "q"}, K: Projection{Weight: "k"}, V: Projection{Weight: "v"}, HeadShape: HeadShape{Heads: 3, KVHeads: 2, HeadDim: 4}, RopeParams: rs}},
		{"matmul_rope_kv odd rope dims", &MatMulRopeKVOp{Out: ba, In: bh, Q: Projection{Weight: "q"}, K: Projection{Weight: "k"}, V: Projection{Weight: "v"}, HeadShape: hs, RopeParams: RopeParams{Dims: 3, Base: 1e4, Style: RopeHalves}}},
		{"norm prologue without a weight", &MatMulOp{Out: ba, In: bh, Projection: Projection{Weight: "o"}, Prologue: &RMSPrologue{Eps: 1e-5}}},
		{"norm prologue bad eps", &MatMulOp{Out: ba, In: bh, Projection: Projection{Weight: "o"}, Prologue: &RMSPrologue{Weight: "n", Eps: -1}}},
		{"accumulate aliasing its input", &MatMulOp{Out: bh, In: bh, Projection: Projection{Weight: "o"}, Accumulate: true}},
		{"nil op", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := kvGraph(tc.op).Validate(nil); err == nil {
				t.Errorf("accepted %+v", tc.op)
			}
		})
	}
}

// refuse is a Support that runs every fused op whole except those its
// predicate names.
type refuse func(op Op) bool

func (r refuse) Fuses(_ *Graph, op Op) bool { return !r(op) }

// TestFuseFor: a rule whose fused op the backend would not run whole does
// not fire, and the graph keeps the ops it had; the rules the backend
// takes still do.
func TestFuseFor(t *testing.T) {
	layer := func() *Graph {
		return fuseGraph(rms(bh, bx), mm(bb, bh, "up"), mm(ba, bh, "gate"), glu(bb, ba, bb), mm(bc, bb, "down"), add(bx, bx, bc))
	}
	for _, tc := range []struct {
		name string
		s    Support
		want []Kind
	}{
		{"every rewrite", nil, []Kind{MatMulGLU, MatMul}},
		{"no GLU", refuse(func(op Op) bool { return op.Kind() == MatMulGLU }),
			[]Kind{MultiMatMul, GLU, MatMul}},
		{"no prologue", refuse(func(op Op) bool {
			in, pro, ok := product(op)
			return ok && in != nil && *pro != nil
		}), []Kind{Norm, MatMulGLU, MatMul}},
		{"no accumulate", refuse(func(op Op) bool { m, ok := op.(*MatMulOp); return ok && m.Accumulate }),
			[]Kind{MatMulGLU, MatMul, Add}},
		{"nothing", refuse(func(Op) bool { return true }), []Kind{Norm, MatMul, MatMul, GLU, MatMul, Add}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := FuseFor(layer(), tc.s)
			if got := kinds(f.Ops); !slices.Equal(got, tc.want) {
				t.Errorf("ops %v, want %v", got, tc.want)
			}
		})
	}
}
