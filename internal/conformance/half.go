package conformance

import (
	"strings"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// halfTol is the tolerance of the f16-activation cases. Both backends
// round the same f32 values to binary16 at the same points, but the f32
// values differ by the tolerances above (a few ulps): where they straddle
// the midpoint between two halves, they round to neighbouring halves, one
// half ulp (2^-10 relative) apart, and such a difference travels on
// through the ops that follow. 2.5e-3 relative allows a flip or two per
// chain; a missing rounding is caught by the halves check of RunCases
// (every value of an f16 case is a half), not by the tolerance.
var halfTol = Tolerance{Abs: 4e-5, Rel: 2.5e-3}

// HalfCases is the f16-activation policy's parity table: a few cases of
// every op family of Cases, FusedCases, BlockCases and Gemma4Cases (the first, middle
// and last of each, to keep the time small) with every buffer made an f16
// activation (fusion.BufInfo.F16) and the former logits doubled by an Add
// into an f32 logits buffer (doubling is exact, so the logits are twice
// the halves the last op stored). Cases ending in Argmax or Sample (ids,
// never f16) are left out.
func HalfCases() []Case {
	var all []Case
	all = append(all, Cases()...)
	all = append(all, FusedCases()...)
	all = append(all, BlockCases()...)
	all = append(all, Gemma4Cases()...)
	fams := map[string][]Case{}
	var order []string
	for _, c := range all {
		if strings.HasPrefix(c.Name, "argmax") || strings.HasPrefix(c.Name, "sample") || strings.Contains(c.Name, "sample") {
			continue
		}
		if strings.HasPrefix(c.Name, "gemma4/shared_kv") {
			// Their logits add two attention outputs that largely
			// cancel: a half ulp of a summand is not within a tolerance
			// relative to the sum. Their f16 caches run in Gemma4Cases.
			continue
		}
		f, _, _ := strings.Cut(c.Name, "/")
		if _, ok := fams[f]; !ok {
			order = append(order, f)
		}
		fams[f] = append(fams[f], c)
	}
	var out []Case
	for _, f := range order {
		cs := fams[f]
		picked := map[int]bool{0: true, len(cs) / 2: true, len(cs) - 1: true}
		for i, c := range cs {
			if picked[i] {
				out = append(out, half(c))
			}
		}
	}
	return out
}

// half is case c under the f16 activation policy.
func half(c Case) Case {
	build := c.Build
	c.Name = "f16/" + c.Name
	c.Build = func() (*fusion.Graph, []*tensors.Tensor) {
		g, ws := build()
		for i := range g.Bufs {
			g.Bufs[i].F16 = true
		}
		for _, op := range g.Ops {
			if o, ok := op.(*fusion.MatMulRopeKVOp); ok {
				g.Bufs[o.Out].F16 = false // its q stays f32 (fusion.HalfActivations)
			}
		}
		if !g.Bufs[g.Logits].F16 {
			// q is the case's output: round its double through an f16
			// add, so that every logit is still twice a half.
			l := g.Bufs[g.Logits]
			mid := g.NewBuf("logits_half", l.Rows, l.Cols)
			g.Bufs[mid].F16 = true
			g.Logits = g.Add(&fusion.AddOp{Out: mid, A: g.Logits, B: g.Logits})
		}
		l := g.Bufs[g.Logits]
		out := g.NewBuf("logits_f32", l.Rows, l.Cols)
		g.Logits = g.Add(&fusion.AddOp{Out: out, A: g.Logits, B: g.Logits})
		return g, ws
	}
	c.Tol = Tolerance{Abs: max(c.Tol.Abs, halfTol.Abs), Rel: max(c.Tol.Rel, halfTol.Rel)}
	c.Half = true
	return c
}

// isHalf reports whether v is twice a binary16 value (an f16 case's logit).
func isHalf(v float32) bool {
	h := v / 2
	return tensors.F16Float(tensors.F16Bits(h)) == h
}

// f16ArithTol is the tolerance of F16ArithCases: the f16-arithmetic decode
// kernel (the Vulkan backend's matvec_sg_h) rounds every dequantized
// weight, product and 4-term sum to f16 (2^-11 relative), a random walk of
// about 2^-11 * sqrt(sum (w x)^2) per output: with these cases' |w|, |x|
// <= ~1.5 and rows of up to a few hundred columns, a few 1e-3 (measured
// worst 4.3e-3). 1.5e-2 absolute and 1e-2 relative; a decoding mistake
// (wrong element, scale or row) moves outputs by O(0.1-1).
var f16ArithTol = Tolerance{Abs: 1.5e-2, Rel: 1e-2}

// F16ArithCases is HalfCases with the tolerance of kernels computing in
// f16 arithmetic (f16ArithTol): for backends that pick such variants
// under the f16 activation policy.
func F16ArithCases() []Case {
	cs := HalfCases()
	for i := range cs {
		cs[i].Name = "f16arith/" + strings.TrimPrefix(cs[i].Name, "f16/")
		cs[i].Tol = Tolerance{Abs: max(cs[i].Tol.Abs, f16ArithTol.Abs), Rel: max(cs[i].Tol.Rel, f16ArithTol.Rel)}
	}
	return cs
}
