package fusion

import "slices"

// Fuse returns g rewritten into fewer, larger ops; g itself is not changed.
// Each rule fires only where the rewritten graph computes exactly what g
// computes (the same arithmetic in the same order) and every buffer it stops
// writing is dead:
//
//   - gate MatMul + up MatMul of one input + their GLU -> MatMulGLU;
//   - consecutive MatMuls of one input (Q, K, V) -> MultiMatMul;
//   - MatMul into p + a later Add x = x + p -> MatMul accumulating into x,
//     when nothing in between touches x or p and p is dead after the Add;
//   - in-place Rope of q + in-place Rope of k + StoreKV of k and v ->
//     RopeStoreKV, when the ropes agree, k is dead after the StoreKV and
//     the graph is not batched;
//   - MultiMatMul of q, k and v + the RopeStoreKV of q, k and v right
//     after it -> MatMulRopeKV, when k and v are dead after the
//     RopeStoreKV (the graph is not batched);
//   - RMS Norm h = norm(x) + the MatMul, MultiMatMul, MatMulGLU and
//     MatMulRopeKV ops that read h -> those ops with the norm as their
//     prologue (RMSPrologue),
//     when they are all of h's readers until h is overwritten, x is not
//     written before the last of them and h is dead after it.
//
// FuseFor also asks the backend which of these fused ops it runs whole.
//
// A buffer is dead after an op when the next op that touches it, scanning
// forward and wrapping around to the start of the next step, writes it
// without reading it; the logits buffer is never dead. Buffers no op uses
// any more are dropped and the rest renumbered. Fuse(nil) is nil.
func Fuse(g *Graph) *Graph { return FuseFor(g, nil) }

// Support tells the fusion pass which fused ops a backend runs whole, as
// one kernel (or the dispatches its kind always takes), so that the
// backend never has to split a fused op back into its parts.
type Support interface {
	// Fuses reports whether the backend runs op whole in graph g (op is
	// the fused op a rule is about to write; g holds its buffers).
	Fuses(g *Graph, op Op) bool
}

// FuseFor is Fuse asking s before every rewrite: a rule whose fused op s
// does not run whole does not fire there, and the ops stay as they were
// (a norm folds into its readers only if every one of them takes it). A
// nil s takes every rewrite (Fuse).
func FuseFor(g *Graph, s Support) *Graph {
	if g == nil {
		return nil
	}
	out := &Graph{Tokens: g.Tokens, Batch: g.Batch, Bufs: slices.Clone(g.Bufs), Logits: g.Logits, KV: g.KV}
	ops := make([]Op, len(g.Ops))
	for i, op := range g.Ops {
		ops[i] = Clone(op)
	}
	// The candidates are asked about in out, whose buffers are g's until
	// dropUnused renumbers them at the end.
	ok := func(op Op) bool { return s == nil || s.Fuses(out, op) }
	ops = fuseGLU(ops, g.Logits, ok)
	ops = fuseMulti(ops, ok)
	ops = fuseAccumulate(ops, g.Logits, ok)
	if !g.Batch {
		ops = fuseRopeKV(ops, g.Logits, ok)
		ops = fuseProjRopeKV(ops, g.Logits, ok)
	}
	ops = fuseNorm(ops, g.Logits, ok)
	out.Ops = ops
	out.dropUnused()
	return out
}

// reads reports whether op reads b.
func reads(op Op, b Buf) bool { return op != nil && slices.Contains(op.Inputs(), b) }

// writes reports whether op writes b.
func writes(op Op, b Buf) bool { return op != nil && slices.Contains(op.Outputs(), b) }

func touches(op Op, b Buf) bool { return reads(op, b) || writes(op, b) }

// deadAfter reports whether b is dead after ops[i], ignoring the ops in
// skip (those a rule is about to remove).
func deadAfter(ops []Op, i int, b, logits Buf, skip ...int) bool {
	if b == logits {
		return false
	}
	for k := 1; k < len(ops); k++ {
		j := (i + k) % len(ops)
		if slices.Contains(skip, j) {
			continue
		}
		if reads(ops[j], b) {
			return false
		}
		if writes(ops[j], b) {
			return true
		}
	}
	return true
}

// plainMatMul returns op as a MatMul that overwrites its output without a
// norm prologue, or nil.
func plainMatMul(op Op) *MatMulOp {
	if m, ok := op.(*MatMulOp); ok && !m.Accumulate && m.Prologue == nil {
		return m
	}
	return nil
}

// fuseGLU rewrites MatMul a, MatMul b (same input), GLU(gate, up) where
// {gate, up} are the outputs of a and b.
func fuseGLU(ops []Op, logits Buf, ok func(Op) bool) []Op {
	var out []Op
	for i := 0; i < len(ops); i++ {
		if i+2 < len(ops) {
			if f := matchGLU(ops, i, logits); f != nil && ok(f) {
				out = append(out, f)
				i += 2
				continue
			}
		}
		out = append(out, ops[i])
	}
	return out
}

func matchGLU(ops []Op, i int, logits Buf) *MatMulGLUOp {
	a, b := plainMatMul(ops[i]), plainMatMul(ops[i+1])
	glu, ok := ops[i+2].(*GLUOp)
	if a == nil || b == nil || !ok {
		return nil
	}
	x := a.In
	if b.In != x || a.Out == b.Out || a.Out == x || b.Out == x || glu.Out == x {
		return nil
	}
	gate, up := a, b
	if glu.Gate == b.Out && glu.Up == a.Out {
		gate, up = b, a
	} else if glu.Gate != a.Out || glu.Up != b.Out {
		return nil
	}
	for _, t := range []Buf{a.Out, b.Out} {
		if t != glu.Out && !deadAfter(ops, i+2, t, logits) {
			return nil
		}
	}
	return &MatMulGLUOp{Out: glu.Out, In: x, Gate: gate.Projection, Up: up.Projection, Act: glu.Act}
}

// fuseMulti rewrites runs of 2 to 4 consecutive MatMuls of one input into
// distinct outputs.
func fuseMulti(ops []Op, ok func(Op) bool) []Op {
	var out []Op
	for i := 0; i < len(ops); {
		var run []Product
		if first := plainMatMul(ops[i]); first != nil && first.Out != first.In {
			x := first.In
			run = []Product{{Out: first.Out, Projection: first.Projection}}
			for len(run) < 4 && i+len(run) < len(ops) {
				op := plainMatMul(ops[i+len(run)])
				if op == nil || op.In != x || op.Out == x || slices.ContainsFunc(run, func(p Product) bool { return p.Out == op.Out }) {
					break
				}
				run = append(run, Product{Out: op.Out, Projection: op.Projection})
			}
		}
		var f *MultiMatMulOp
		if len(run) >= 2 {
			f = &MultiMatMulOp{In: ops[i].(*MatMulOp).In, Outs: run}
		}
		if f == nil || !ok(f) {
			out = append(out, ops[i])
			i++
			continue
		}
		out = append(out, f)
		i += len(run)
	}
	return out
}

// fuseAccumulate folds Add x = x + p into the MatMul that wrote p.
func fuseAccumulate(ops []Op, logits Buf, accept func(Op) bool) []Op {
	removed := map[int]bool{}
	for i := range ops {
		m := plainMatMul(ops[i])
		if m == nil || removed[i] {
			continue
		}
		p, in := m.Out, m.In
		for j := i + 1; j < len(ops); j++ {
			if removed[j] {
				continue
			}
			if a, ok := ops[j].(*AddOp); ok && (a.A == p || a.B == p) {
				x := a.Out
				other := a.A
				if other == p {
					other = a.B
				}
				f := *m
				f.Out, f.Accumulate = x, true
				if other == x && x != p && x != in && residualFree(ops, i, j, x, removed) &&
					deadAfter(ops, j, p, logits, append(removedList(removed), i)...) && accept(&f) {
					m.Out, m.Accumulate = x, true
					removed[j] = true
				}
				break
			}
			if touches(ops[j], p) {
				break
			}
		}
	}
	var out []Op
	for i, op := range ops {
		if !removed[i] {
			out = append(out, op)
		}
	}
	return out
}

// fuseRopeKV rewrites Rope(q), Rope(k), StoreKV(k, v) (the ropes in either
// order) into one RopeStoreKV.
func fuseRopeKV(ops []Op, logits Buf, ok func(Op) bool) []Op {
	var out []Op
	for i := 0; i < len(ops); i++ {
		if i+2 < len(ops) {
			if f := matchRopeKV(ops, i, logits); f != nil && ok(f) {
				out = append(out, f)
				i += 2
				continue
			}
		}
		out = append(out, ops[i])
	}
	return out
}

func matchRopeKV(ops []Op, i int, logits Buf) *RopeStoreKVOp {
	a, ok1 := ops[i].(*RopeOp)
	b, ok2 := ops[i+1].(*RopeOp)
	st, ok3 := ops[i+2].(*StoreKVOp)
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	k, v := st.K, st.V
	rq, rk := a, b
	if a.Out == k {
		rq, rk = b, a
	}
	q := rq.Out
	if rq.In != q || rk.In != k || rk.Out != k || q == k || q == v || k == v || q == logits {
		return nil
	}
	if !rq.RopeParams.Equal(rk.RopeParams) || rq.HeadDim != rk.HeadDim || rk.HeadDim != st.HeadDim || rk.Heads != st.KVHeads {
		return nil
	}
	if !deadAfter(ops, i+2, k, logits) {
		return nil
	}
	return &RopeStoreKVOp{Q: q, K: k, V: v, Layer: st.Layer,
		HeadShape:  HeadShape{Heads: rq.Heads, KVHeads: st.KVHeads, HeadDim: st.HeadDim},
		RopeParams: rq.RopeParams}
}

// fuseProjRopeKV rewrites MultiMatMul(x -> q, k, v) + RopeStoreKV(q, k,
// v) into one MatMulRopeKV.
func fuseProjRopeKV(ops []Op, logits Buf, ok func(Op) bool) []Op {
	var out []Op
	for i := 0; i < len(ops); i++ {
		if i+1 < len(ops) {
			if f := matchProjRopeKV(ops, i, logits); f != nil && ok(f) {
				out = append(out, f)
				i++
				continue
			}
		}
		out = append(out, ops[i])
	}
	return out
}

func matchProjRopeKV(ops []Op, i int, logits Buf) *MatMulRopeKVOp {
	m, ok1 := ops[i].(*MultiMatMulOp)
	r, ok2 := ops[i+1].(*RopeStoreKVOp)
	if !ok1 || !ok2 || len(m.Outs) != 3 || m.Prologue != nil {
		return nil
	}
	// ps[j] is the projection writing q, k, v.
	var ps [3]Projection
	for j, b := range []Buf{r.Q, r.K, r.V} {
		k := slices.IndexFunc(m.Outs, func(p Product) bool { return p.Out == b })
		if k < 0 {
			return nil
		}
		ps[j] = m.Outs[k].Projection
	}
	if r.K == r.V || !deadAfter(ops, i+1, r.K, logits) || !deadAfter(ops, i+1, r.V, logits) {
		return nil
	}
	return &MatMulRopeKVOp{Out: r.Q, In: m.In, Q: ps[0], K: ps[1], V: ps[2], Layer: r.Layer,
		HeadShape: r.HeadShape, RopeParams: r.RopeParams}
}

// product returns the input and the prologue of a MatMul kind, ok false
// for other ops.
func product(op Op) (in *Buf, pro **RMSPrologue, ok bool) {
	switch o := op.(type) {
	case *MatMulOp:
		return &o.In, &o.Prologue, true
	case *MultiMatMulOp:
		return &o.In, &o.Prologue, true
	case *MatMulGLUOp:
		return &o.In, &o.Prologue, true
	case *MatMulRopeKVOp:
		return &o.In, &o.Prologue, true
	}
	return nil, nil, false
}

// fuseNorm folds RMS norms into the products that read them.
func fuseNorm(ops []Op, logits Buf, accept func(Op) bool) []Op {
	removed := map[int]bool{}
	for i := range ops {
		n, ok := ops[i].(*NormOp)
		if !ok || n.Norm != NormRMS || n.Bias != "" || n.HeadDim != 0 || n.Unit || n.Out == n.In || n.Out == logits {
			continue
		}
		h, x := n.Out, n.In
		var users []int
		ok, xWritten := true, false
		for j := i + 1; j < len(ops); j++ {
			op := ops[j]
			if reads(op, h) {
				if xWritten || !prologueOK(op, h, x) {
					ok = false
					break
				}
				users = append(users, j)
				continue
			}
			if writes(op, h) {
				break
			}
			xWritten = xWritten || writes(op, x)
		}
		// After the rewrite neither the norm nor its users touch h.
		skip := append(append(removedList(removed), i), users...)
		if !ok || len(users) == 0 || !deadAfter(ops, users[len(users)-1], h, logits, skip...) {
			continue
		}
		fused := make([]Op, len(users))
		for k, j := range users {
			f := Clone(ops[j])
			in, pro, _ := product(f)
			*in, *pro = x, &RMSPrologue{Weight: n.Weight, Eps: n.Eps}
			if ok = accept(f); !ok {
				break
			}
			fused[k] = f
		}
		if !ok {
			continue
		}
		for k, j := range users {
			ops[j] = fused[k]
		}
		removed[i] = true
	}
	var out []Op
	for i, op := range ops {
		if !removed[i] {
			out = append(out, op)
		}
	}
	return out
}

// prologueOK reports whether op can take the norm h = norm(x) as its
// prologue: a product of h without one, writing neither h nor x.
func prologueOK(op Op, h, x Buf) bool {
	in, pro, ok := product(op)
	return ok && *in == h && *pro == nil && !writes(op, x) && !writes(op, h)
}

// residualFree reports whether no op strictly between i and j touches x.
func residualFree(ops []Op, i, j int, x Buf, removed map[int]bool) bool {
	for k := i + 1; k < j; k++ {
		if !removed[k] && touches(ops[k], x) {
			return false
		}
	}
	return true
}

func removedList(m map[int]bool) []int {
	var l []int
	for k := range m {
		l = append(l, k)
	}
	return l
}

// dropUnused removes buffers no op or the logits refer to and renumbers the
// rest in their original order.
func (g *Graph) dropUnused() {
	used := make([]bool, len(g.Bufs))
	mark := func(b Buf) {
		if b >= 0 && int(b) < len(used) {
			used[b] = true
		}
	}
	mark(g.Logits)
	for _, op := range g.Ops {
		for _, b := range op.bufs() {
			mark(*b)
		}
	}
	remap := make([]Buf, len(g.Bufs))
	var bufs []BufInfo
	for i, info := range g.Bufs {
		remap[i] = Buf(len(bufs))
		if used[i] {
			bufs = append(bufs, info)
		}
	}
	re := func(b Buf) Buf {
		if b >= 0 && int(b) < len(remap) {
			return remap[b]
		}
		return b
	}
	g.Bufs = bufs
	g.Logits = re(g.Logits)
	for _, op := range g.Ops {
		for _, b := range op.bufs() {
			*b = re(*b)
		}
	}
}
