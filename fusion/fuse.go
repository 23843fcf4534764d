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
//   - RMS Norm h = norm(x) + the MatMul, MultiMatMul and MatMulGLU ops that
//     read h -> those ops with the norm as their prologue (NormWeight),
//     when they are all of h's readers until h is overwritten, x is not
//     written before the last of them and h is dead after it.
//
// A buffer is dead after an op when the next op that touches it, scanning
// forward and wrapping around to the start of the next step, writes it
// without reading it; the logits buffer is never dead. Buffers no op uses
// any more are dropped and the rest renumbered. Fuse(nil) is nil.
func Fuse(g *Graph) *Graph {
	if g == nil {
		return nil
	}
	out := &Graph{Tokens: g.Tokens, Batch: g.Batch, Bufs: slices.Clone(g.Bufs), Logits: g.Logits, KV: g.KV}
	ops := make([]Op, len(g.Ops))
	for i, op := range g.Ops {
		ops[i] = cloneOp(op)
	}
	ops = fuseGLU(ops, g.Logits)
	ops = fuseMulti(ops)
	ops = fuseAccumulate(ops, g.Logits)
	if !g.Batch {
		ops = fuseRopeKV(ops, g.Logits)
	}
	ops = fuseNorm(ops, g.Logits)
	out.Ops = ops
	out.dropUnused()
	return out
}

func cloneOp(op Op) Op {
	op.In = slices.Clone(op.In)
	op.Outs = slices.Clone(op.Outs)
	op.Weights = slices.Clone(op.Weights)
	op.Biases = slices.Clone(op.Biases)
	return op
}

// reads reports whether op reads b.
func reads(op *Op, b Buf) bool {
	return slices.Contains(op.In, b) || (op.Kind == MatMul && op.Accumulate && op.Out == b)
}

// writes reports whether op writes b.
func writes(op *Op, b Buf) bool {
	switch op.Kind {
	case StoreKV:
		return false
	case MultiMatMul:
		return slices.Contains(op.Outs, b)
	}
	return op.Out == b
}

func touches(op *Op, b Buf) bool { return reads(op, b) || writes(op, b) }

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
		if reads(&ops[j], b) {
			return false
		}
		if writes(&ops[j], b) {
			return true
		}
	}
	return true
}

// plainMatMul reports whether op is a MatMul that overwrites its output.
func plainMatMul(op *Op) bool { return op.Kind == MatMul && !op.Accumulate && len(op.In) == 1 }

// fuseGLU rewrites MatMul a, MatMul b (same input), GLU(gate, up) where
// {gate, up} are the outputs of a and b.
func fuseGLU(ops []Op, logits Buf) []Op {
	var out []Op
	for i := 0; i < len(ops); i++ {
		if i+2 < len(ops) {
			if f, ok := matchGLU(ops, i, logits); ok {
				out = append(out, f)
				i += 2
				continue
			}
		}
		out = append(out, ops[i])
	}
	return out
}

func matchGLU(ops []Op, i int, logits Buf) (Op, bool) {
	a, b, glu := &ops[i], &ops[i+1], &ops[i+2]
	if !plainMatMul(a) || !plainMatMul(b) || glu.Kind != GLU || len(glu.In) != 2 {
		return Op{}, false
	}
	x := a.In[0]
	if b.In[0] != x || a.Out == b.Out || a.Out == x || b.Out == x || glu.Out == x {
		return Op{}, false
	}
	gate, up := a, b
	if glu.In[0] == b.Out && glu.In[1] == a.Out {
		gate, up = b, a
	} else if glu.In[0] != a.Out || glu.In[1] != b.Out {
		return Op{}, false
	}
	for _, t := range []Buf{a.Out, b.Out} {
		if t != glu.Out && !deadAfter(ops, i+2, t, logits) {
			return Op{}, false
		}
	}
	return Op{Kind: MatMulGLU, Out: glu.Out, In: []Buf{x}, Weight: gate.Weight, Bias: gate.Bias,
		Up: up.Weight, UpBias: up.Bias, Act: glu.Act}, true
}

// fuseMulti rewrites runs of 2 to 4 consecutive MatMuls of one input into
// distinct outputs.
func fuseMulti(ops []Op) []Op {
	var out []Op
	for i := 0; i < len(ops); {
		n := 1
		if plainMatMul(&ops[i]) {
			x := ops[i].In[0]
			outs := []Buf{ops[i].Out}
			for n < 4 && i+n < len(ops) {
				op := &ops[i+n]
				if !plainMatMul(op) || op.In[0] != x || op.Out == x || slices.Contains(outs, op.Out) {
					break
				}
				outs = append(outs, op.Out)
				n++
			}
			if ops[i].Out == x {
				n = 1
			}
		}
		if n == 1 {
			out = append(out, ops[i])
			i++
			continue
		}
		m := Op{Kind: MultiMatMul, Out: ops[i].Out, In: []Buf{ops[i].In[0]}}
		hasBias := false
		for _, op := range ops[i : i+n] {
			m.Outs = append(m.Outs, op.Out)
			m.Weights = append(m.Weights, op.Weight)
			m.Biases = append(m.Biases, op.Bias)
			hasBias = hasBias || op.Bias != ""
		}
		if !hasBias {
			m.Biases = nil
		}
		out = append(out, m)
		i += n
	}
	return out
}

// fuseAccumulate folds Add x = x + p into the MatMul that wrote p.
func fuseAccumulate(ops []Op, logits Buf) []Op {
	removed := map[int]bool{}
	for i := range ops {
		if !plainMatMul(&ops[i]) || removed[i] {
			continue
		}
		p, in := ops[i].Out, ops[i].In[0]
		for j := i + 1; j < len(ops); j++ {
			if removed[j] {
				continue
			}
			op := &ops[j]
			if op.Kind == Add && len(op.In) == 2 && slices.Contains(op.In, p) {
				x := op.Out
				other := op.In[0]
				if other == p {
					other = op.In[1]
				}
				if other == x && x != p && x != in && residualFree(ops, i, j, x, removed) &&
					deadAfter(ops, j, p, logits, append(removedList(removed), i)...) {
					ops[i].Out, ops[i].Accumulate = x, true
					removed[j] = true
				}
				break
			}
			if touches(op, p) {
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
func fuseRopeKV(ops []Op, logits Buf) []Op {
	var out []Op
	for i := 0; i < len(ops); i++ {
		if i+2 < len(ops) {
			if f, ok := matchRopeKV(ops, i, logits); ok {
				out = append(out, f)
				i += 2
				continue
			}
		}
		out = append(out, ops[i])
	}
	return out
}

func matchRopeKV(ops []Op, i int, logits Buf) (Op, bool) {
	a, b, st := &ops[i], &ops[i+1], &ops[i+2]
	if a.Kind != Rope || b.Kind != Rope || st.Kind != StoreKV || len(st.In) != 2 {
		return Op{}, false
	}
	k, v := st.In[0], st.In[1]
	rq, rk := a, b
	if a.Out == k {
		rq, rk = b, a
	}
	q := rq.Out
	if len(rq.In) != 1 || len(rk.In) != 1 || rq.In[0] != q || rk.In[0] != k || rk.Out != k ||
		q == k || q == v || k == v || q == logits {
		return Op{}, false
	}
	if rq.RopeDims != rk.RopeDims || rq.RopeBase != rk.RopeBase || rq.RopeStyle != rk.RopeStyle ||
		rq.HeadDim != rk.HeadDim || rk.HeadDim != st.HeadDim || rk.Heads != st.KVHeads {
		return Op{}, false
	}
	if !deadAfter(ops, i+2, k, logits) {
		return Op{}, false
	}
	return Op{Kind: RopeStoreKV, Out: q, In: []Buf{q, k, v}, Layer: st.Layer, Heads: rq.Heads, KVHeads: st.KVHeads,
		HeadDim: st.HeadDim, RopeDims: rq.RopeDims, RopeBase: rq.RopeBase, RopeStyle: rq.RopeStyle}, true
}

// fuseNorm folds RMS norms into the products that read them.
func fuseNorm(ops []Op, logits Buf) []Op {
	removed := map[int]bool{}
	for i := range ops {
		n := &ops[i]
		if n.Kind != Norm || n.NormKind != "rms" || n.Bias != "" || len(n.In) != 1 || n.Out == n.In[0] || n.Out == logits {
			continue
		}
		h, x := n.Out, n.In[0]
		var users []int
		ok, xWritten := true, false
		for j := i + 1; j < len(ops); j++ {
			op := &ops[j]
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
		for _, j := range users {
			ops[j].In[0], ops[j].NormWeight, ops[j].Eps = x, n.Weight, n.Eps
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
func prologueOK(op *Op, h, x Buf) bool {
	switch op.Kind {
	case MatMul, MultiMatMul, MatMulGLU:
	default:
		return false
	}
	if len(op.In) != 1 || op.In[0] != h || op.NormWeight != "" || writes(op, x) || writes(op, h) {
		return false
	}
	return !(op.Kind == MatMul && op.Accumulate && op.Out == h)
}

// residualFree reports whether no op strictly between i and j touches x.
func residualFree(ops []Op, i, j int, x Buf, removed map[int]bool) bool {
	for k := i + 1; k < j; k++ {
		if !removed[k] && touches(&ops[k], x) {
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
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Kind != StoreKV {
			mark(op.Out)
		}
		for _, b := range op.In {
			mark(b)
		}
		for _, b := range op.Outs {
			mark(b)
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
	for i := range g.Ops {
		op := &g.Ops[i]
		op.Out = re(op.Out)
		for k, b := range op.In {
			op.In[k] = re(b)
		}
		for k, b := range op.Outs {
			op.Outs[k] = re(b)
		}
	}
}
