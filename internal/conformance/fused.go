package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// FusedCases returns the parity cases of the kinds fusion.Fuse emits:
// MatMul with Accumulate, MultiMatMul and MatMulGLU, for every weight type,
// decode (1 token) and prefill (5 and 40 tokens) shapes, RopeStoreKV
// for both rope styles, partial rope dims and both cache types, the
// RMS-norm prologue of the three (Prologue) for every weight type, and
// MatMulRopeKV (its decode kernels, and shapes a GPU backend refuses,
// which RunCases runs there as their parts: unfuse).
func FusedCases() []Case {
	var cs []Case
	cs = append(cs, accumulateCases()...)
	cs = append(cs, multiCases()...)
	cs = append(cs, gluCases()...)
	cs = append(cs, ropeKVCases()...)
	cs = append(cs, normPrologueCases()...)
	cs = append(cs, matMulRopeKVCases()...)
	return cs
}

// fusedSample is a few of FusedCases for the op table: every fused kind and
// kernel (decode and tiled; a GLU the GPU kernels take whole and one they
// refuse) at least once. Device
// packages that compile kernels per case run these; internal/backend/compute, which
// shares its backends, runs all of FusedCases on both devices.
func fusedSample() []Case {
	keep := map[string]bool{
		"matmul_acc/int4_b8_f16_t1_biastrue":                                        true,
		"matmul_acc/int8_b16_f16_t5_biasfalse":                                      true,
		"multi_matmul/t5_out2":                                                      true,
		"multi_matmul/t1_out1":                                                      true,
		"matmul_glu/silu_int8_b16_f16_int8_b16_f16_biastruefalse_t1":                true,
		"matmul_glu/silu_int4_b8_f16_int4_b8_f16_biasfalsefalse_t40":                true,
		"matmul_glu/silu_f16_int4_b8_f16_biasfalsetrue_t5":                          true,
		"rope_store_kv/interleaved_h4_kv2_d8_r8_f16false_qfalse":                    true,
		"rope_store_kv/halves_h3_kv1_d7_r6_f16true_qfalse":                          true,
		"norm_prologue/matmul_int8_b16_f16_in64_t1":                                 true,
		"norm_prologue/glu_int4_b8_f16_in64_t1":                                     true,
		"norm_prologue/multi0_f16_in64_t1":                                          true,
		"matmul_rope_kv/int8_b16_f16_halves_r4_f16true_normtrue_t1_bias_false_attn": true,
	}
	var cs []Case
	for _, c := range FusedCases() {
		if keep[c.Name] {
			cs = append(cs, c)
		}
	}
	if len(cs) != len(keep) {
		panic(fmt.Sprintf("conformance: fused sample matched %d of %d names", len(cs), len(keep)))
	}
	return cs
}

// weightType is one stored weight layout of the fused cases.
type weightType struct {
	dt    tensors.DType
	block int
	scale tensors.DType
}

func (w weightType) String() string {
	if !w.dt.Quantized() {
		return w.dt.String()
	}
	return fmt.Sprintf("%s_b%d_%s", w.dt, w.block, w.scale)
}

// fusedTypes covers every stored type and both kinds of scales.
var fusedTypes = []weightType{
	{tensors.F32, 0, 0}, {tensors.F16, 0, 0}, {tensors.BF16, 0, 0},
	{tensors.I8, 0, tensors.F32}, {tensors.I8, 16, tensors.F16},
	{tensors.I4, 0, tensors.F32}, {tensors.I4, 8, tensors.F16},
}

var fusedTokens = []int{1, 5, 40} // matrix-vector, one tile and two tiles of the tiled kernel

// accumulateCases: r = r + (W·x + b), the residual being an embedded input.
func accumulateCases() []Case {
	var cs []Case
	for _, wt := range fusedTypes {
		for _, tokens := range fusedTokens {
			bias := tokens != 5
			const in, out = 48, 37
			cs = append(cs, Case{
				Name: fmt.Sprintf("matmul_acc/%s_t%d_bias%v", wt, tokens, bias),
				Build: func() (*fusion.Graph, []*tensors.Tensor) {
					r := rand.New(rand.NewPCG(9, uint64(tokens)))
					g := &fusion.Graph{Tokens: tokens}
					x := input(g, "x", in)
					res := input(g, "res", out)
					op := &fusion.MatMulOp{Out: res, In: x, Projection: fusion.Projection{Weight: "w"}, Accumulate: true}
					ws := []*tensors.Tensor{matrix(r, "x", vocab, in, tensors.F32, 0, 0), matrix(r, "res", vocab, out, tensors.F32, 0, 0),
						matrix(r, "w", out, in, wt.dt, wt.block, wt.scale)}
					if bias {
						op.Bias = "b"
						ws = append(ws, vector(r, "b", out, 1, 0))
					}
					g.Logits = g.Add(op)
					return g, ws
				},
				Steps: []Step{{seq(tokens), 0}, {seq(1), 0}},
				Tol:   dot,
			})
		}
	}
	return cs
}

// multiCases: Q, K, V of three different layouts and widths from one input;
// one case per output read back, so a swapped output fails.
func multiCases() []Case {
	var cs []Case
	types := []weightType{fusedTypes[1], fusedTypes[4], fusedTypes[6]}
	widths := []int{32, 16, 24}
	for _, tokens := range fusedTokens {
		for read := range 3 {
			cs = append(cs, Case{
				Name: fmt.Sprintf("multi_matmul/t%d_out%d", tokens, read),
				Build: func() (*fusion.Graph, []*tensors.Tensor) {
					r := rand.New(rand.NewPCG(10, uint64(tokens)))
					const in = 64
					g := &fusion.Graph{Tokens: tokens}
					x := input(g, "x", in)
					ws := []*tensors.Tensor{matrix(r, "x", vocab, in, tensors.F32, 0, 0)}
					op := &fusion.MultiMatMulOp{In: x}
					for i, wt := range types {
						name := fmt.Sprintf("w%d", i)
						o := g.NewBuf(name+"_out", tokens, widths[i])
						ws = append(ws, matrix(r, name, widths[i], in, wt.dt, wt.block, wt.scale))
						bias := ""
						if i != 1 {
							bias = name + "_b"
							ws = append(ws, vector(r, bias, widths[i], 1, 0))
						}
						op.Outs = append(op.Outs, fusion.Product{Out: o, Projection: fusion.Projection{Weight: name, Bias: bias}})
					}
					g.Add(op)
					g.Logits = op.Outs[read].Out
					return g, ws
				},
				Steps: []Step{{seq(tokens), 0}, {seq(1), 0}},
				Tol:   dot,
			})
		}
	}
	return cs
}

// gluCases: act(G·x + bg) * (U·x + bu) with gate and up of one layout (the
// fused kernel), of two layouts and with two biases (planned unfused by
// internal/backend/compute), for silu and gelu_tanh.
func gluCases() []Case {
	type tc struct {
		gate, up         weightType
		gateBias, upBias bool
		act              string
	}
	var table []tc
	for i, wt := range fusedTypes {
		table = append(table, tc{wt, wt, i%3 == 1, i%3 == 2, []string{"silu", "gelu_tanh"}[i%2]})
	}
	table = append(table, tc{fusedTypes[1], fusedTypes[6], false, true, "silu"}, tc{fusedTypes[3], fusedTypes[3], true, true, "gelu_tanh"})
	// int4 blocks of whole 16-byte chunks: the kernels' chunked path (the
	// other int4 types' blocks take the element-wise one).
	i4b32 := weightType{tensors.I4, 32, tensors.F16}
	table = append(table, tc{i4b32, i4b32, true, false, "silu"})
	var cs []Case
	for _, c := range table {
		for _, tokens := range fusedTokens {
			// gelu_tanh rounds its input to binary16: inputs a few ulps
			// apart can land on neighbouring halves, 2^-10 relative.
			tol := Tolerance{Abs: 3e-5, Rel: 3e-5}
			if c.act == "gelu_tanh" {
				tol = Tolerance{Abs: 3e-5, Rel: 1e-3}
			}
			cs = append(cs, Case{
				Name: fmt.Sprintf("matmul_glu/%s_%s_%s_bias%v%v_t%d", c.act, c.gate, c.up, c.gateBias, c.upBias, tokens),
				Build: func() (*fusion.Graph, []*tensors.Tensor) {
					r := rand.New(rand.NewPCG(11, uint64(tokens)))
					const in, out = 64, 45
					g := &fusion.Graph{Tokens: tokens}
					x := input(g, "x", in)
					op := &fusion.MatMulGLUOp{Out: g.NewBuf("y", tokens, out), In: x, Gate: fusion.Projection{Weight: "gate"},
						Up: fusion.Projection{Weight: "up"}, Act: mustParse(fusion.ParseAct(c.act))}
					ws := []*tensors.Tensor{matrix(r, "x", vocab, in, tensors.F32, 0, 0),
						matrix(r, "gate", out, in, c.gate.dt, c.gate.block, c.gate.scale),
						matrix(r, "up", out, in, c.up.dt, c.up.block, c.up.scale)}
					if c.gateBias {
						op.Gate.Bias = "gb"
						ws = append(ws, vector(r, "gb", out, 1, 0))
					}
					if c.upBias {
						op.Up.Bias = "ub"
						ws = append(ws, vector(r, "ub", out, 1, 0))
					}
					g.Logits = g.Add(op)
					return g, ws
				},
				Steps: []Step{{seq(tokens), 0}, {seq(1), 0}},
				Tol:   tol,
			})
		}
	}
	return cs
}

// ropeKVCases: RopeStoreKV of q, k, v, read back as the rotated q, and as
// the attention of q over the cache it filled (the rotated keys and the
// values), over a prefill and decode steps; f32 and f16 caches, both rope
// styles, partial rope dims and an odd head dim (a half-filled last f16
// word).
func ropeKVCases() []Case {
	type tc struct {
		style                  string
		heads, kvHeads, hd, rd int
		f16                    bool
		scale                  float32 // with factors and this cos/sin scale (0: neither)
	}
	table := []tc{
		{"interleaved", 4, 2, 8, 8, false, 0}, {"halves", 4, 2, 8, 8, true, 0},
		{"interleaved", 2, 1, 10, 6, true, 0}, {"halves", 3, 3, 7, 4, false, 0}, {"halves", 3, 1, 7, 6, true, 0},
		{"halves", 4, 2, 8, 6, false, 1.1832}, {"interleaved", 4, 2, 8, 8, true, 1.25},
	}
	var cs []Case
	for _, c := range table {
		for _, readQ := range []bool{false, true} {
			if readQ && c.hd != 8 {
				continue // the rotated q of both styles, full dims: the first two rows
			}
			tol := attention
			if readQ {
				tol = transc
			}
			const prefill, maxLen = 3, 8
			cs = append(cs, Case{
				Name: fmt.Sprintf("rope_store_kv/%s_h%d_kv%d_d%d_r%d_f16%v_q%v", c.style, c.heads, c.kvHeads, c.hd, c.rd, c.f16, readQ) + scaleSuffix(c.scale),
				Build: func() (*fusion.Graph, []*tensors.Tensor) {
					r := rand.New(rand.NewPCG(11, uint64(c.hd*10+c.rd)))
					g := &fusion.Graph{Tokens: prefill}
					g.KV = fusion.KVSpec{Layers: 2, KVHeads: c.kvHeads, HeadDim: c.hd, MaxLen: maxLen, F16: c.f16}
					qc, kc := c.heads*c.hd, c.kvHeads*c.hd
					q, k, v := input(g, "q", qc), input(g, "k", kc), input(g, "v", kc)
					rp := fusion.RopeParams{Dims: c.rd, Base: 10000, Style: mustParse(fusion.ParseRopeStyle(c.style))}
					if c.scale != 0 {
						rp.Factors, rp.Scale = ropeFactors(c.rd), c.scale
					}
					g.Add(&fusion.RopeStoreKVOp{Q: q, K: k, V: v, Layer: 1, HeadShape: fusion.HeadShape{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd},
						RopeParams: rp})
					g.Logits = q
					if !readQ {
						g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", prefill, qc), Q: q, Layer: 1,
							HeadShape: fusion.HeadShape{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd}, Scale: 0.7})
					}
					return g, []*tensors.Tensor{matrix(r, "q", vocab, qc, tensors.F32, 0, 0),
						matrix(r, "k", vocab, kc, tensors.F32, 0, 0), matrix(r, "v", vocab, kc, tensors.F32, 0, 0)}
				},
				Steps: []Step{{seq(prefill), 0}, {[]int32{4}, prefill}, {[]int32{2}, prefill + 1}, {seq(2), prefill + 2}},
				Tol:   tol,
			})
		}
	}
	return cs
}

// normPrologueCases: MatMul (plain, accumulating, with a bias), MultiMatMul and
// MatMulGLU with the RMS-norm prologue, decode (1 token: the matvec
// kernels run it, rows of whole chunks or not) and prefill (5 tokens: a
// norm dispatch first).
func normPrologueCases() []Case {
	type tc struct {
		kind   string // matmul, acc, bias, multi (read output 1), multi0 (output 0), glu
		wt     weightType
		in, tk int
	}
	var table []tc
	for _, wt := range fusedTypes {
		table = append(table, tc{"matmul", wt, 64, 1})
	}
	f16, i4 := fusedTypes[1], fusedTypes[6]
	table = append(table, tc{"matmul", i4, 48, 1}, tc{"glu", f16, 64, 1}, tc{"glu", i4, 64, 1}, tc{"matmul", f16, 64, 5},
		tc{"acc", f16, 64, 1}, tc{"bias", i4, 64, 1}, tc{"glu", i4, 64, 5})
	table = append(table, tc{"multi", fusedTypes[1], 64, 1}, tc{"multi0", fusedTypes[1], 64, 1}, tc{"multi", fusedTypes[1], 64, 5})
	var cs []Case
	for _, c := range table {
		name := fmt.Sprintf("norm_prologue/%s_%s_in%d_t%d", c.kind, c.wt, c.in, c.tk)
		if c.kind == "multi" || c.kind == "multi0" {
			name = fmt.Sprintf("norm_prologue/%s_f16_in%d_t%d", c.kind, c.in, c.tk)
		}
		cs = append(cs, Case{
			Name: name,
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(12, uint64(c.in*10+c.tk)))
				const out = 40
				g := &fusion.Graph{Tokens: c.tk}
				x := input(g, "x", c.in)
				ws := []*tensors.Tensor{matrix(r, "x", vocab, c.in, tensors.F32, 0, 0), vector(r, "g", c.in, 0.5, 1),
					matrix(r, "w", out, c.in, c.wt.dt, c.wt.block, c.wt.scale)}
				pro := &fusion.RMSPrologue{Weight: "g", Eps: 1e-5}
				op := &fusion.MatMulOp{In: x, Projection: fusion.Projection{Weight: "w"}, Prologue: pro}
				switch c.kind {
				case "matmul":
					op.Out = g.NewBuf("o", c.tk, out)
				case "acc":
					op.Out, op.Accumulate = input(g, "res", out), true
					ws = append(ws, matrix(r, "res", vocab, out, tensors.F32, 0, 0))
				case "bias":
					op.Out, op.Bias = g.NewBuf("o", c.tk, out), "b"
					ws = append(ws, vector(r, "b", out, 1, 0))
				case "glu":
					ws = append(ws, matrix(r, "u", out, c.in, c.wt.dt, c.wt.block, c.wt.scale))
					g.Logits = g.Add(&fusion.MatMulGLUOp{Out: g.NewBuf("o", c.tk, out), In: x, Gate: fusion.Projection{Weight: "w"},
						Up: fusion.Projection{Weight: "u"}, Act: fusion.ActSiLU, Prologue: pro})
					return g, ws
				case "multi", "multi0":
					m := &fusion.MultiMatMulOp{In: x, Prologue: pro, Outs: []fusion.Product{
						{Out: g.NewBuf("o1", c.tk, out), Projection: fusion.Projection{Weight: "w"}},
						{Out: g.NewBuf("o2", c.tk, 24), Projection: fusion.Projection{Weight: "u"}}}}
					ws = append(ws, matrix(r, "u", 24, c.in, tensors.I8, 16, tensors.F16))
					g.Add(m)
					g.Logits = m.Outs[1].Out
					if c.kind == "multi0" {
						g.Logits = m.Outs[0].Out
					}
					return g, ws
				}
				g.Logits = g.Add(op)
				return g, ws
			},
			Steps: []Step{{seq(c.tk), 0}, {seq(1), 0}},
			Tol:   dot,
		})
	}
	return cs
}

// matMulRopeKVCases: MatMulRopeKV (Q, K and V projections, rope and
// store), read back as the rotated q or as the attention of q over the
// cache it filled, over several steps: decode graphs (the qkv.wgsl
// kernels: both rope styles, partial rope dims, both caches, with and
// without the norm prologue, GQA) and shapes the GPU backend refuses (a
// 5-token graph, a bias), which it runs as their parts (RunCases).
func matMulRopeKVCases() []Case {
	type tc struct {
		wt       weightType
		style    string
		rd       int
		f16      bool
		norm     bool
		tokens   int
		bias     bool
		readAttn bool
		scale    float32 // with factors and this cos/sin scale (0: neither)
	}
	table := []tc{
		{fusedTypes[0], "interleaved", 8, false, true, 1, false, false, 0},
		{fusedTypes[4], "halves", 4, true, true, 1, false, true, 0},
		{fusedTypes[6], "halves", 8, false, false, 1, false, false, 0},
		{fusedTypes[1], "interleaved", 6, true, true, 1, false, true, 0},
		{fusedTypes[1], "halves", 8, false, true, 5, false, true, 0},
		{fusedTypes[3], "interleaved", 8, false, false, 1, true, true, 0},
		{fusedTypes[0], "halves", 6, false, true, 1, false, false, 1.1832},
		{fusedTypes[0], "interleaved", 8, true, false, 1, false, true, 1},
	}
	var cs []Case
	for _, c := range table {
		read := "q"
		tol := dot
		if c.readAttn {
			read, tol = "attn", attention
		}
		if c.tokens > 1 {
			// The prefill's keys and values come from the tiled kernels,
			// whose sums run in another order than the reference's: dot
			// products' errors, then attention's.
			tol = Tolerance{Abs: 4e-5, Rel: 1e-4}
		}
		const heads, kvHeads, hd, in, maxLen = 4, 2, 8, 64, 8
		cs = append(cs, Case{
			Name: fmt.Sprintf("matmul_rope_kv/%s_%s_r%d_f16%v_norm%v_t%d_bias_%v_%s", c.wt, c.style, c.rd, c.f16, c.norm, c.tokens, c.bias, read) + scaleSuffix(c.scale),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(13, uint64(c.rd*100+c.tokens)))
				g := &fusion.Graph{Tokens: c.tokens}
				g.KV = fusion.KVSpec{Layers: 2, KVHeads: kvHeads, HeadDim: hd, MaxLen: maxLen, F16: c.f16}
				x := input(g, "x", in)
				q := g.NewBuf("q", c.tokens, heads*hd)
				ws := []*tensors.Tensor{matrix(r, "x", vocab, in, tensors.F32, 0, 0),
					matrix(r, "wq", heads*hd, in, c.wt.dt, c.wt.block, c.wt.scale),
					matrix(r, "wk", kvHeads*hd, in, c.wt.dt, c.wt.block, c.wt.scale),
					matrix(r, "wv", kvHeads*hd, in, c.wt.dt, c.wt.block, c.wt.scale)}
				op := &fusion.MatMulRopeKVOp{Out: q, In: x, Q: fusion.Projection{Weight: "wq"}, K: fusion.Projection{Weight: "wk"},
					V: fusion.Projection{Weight: "wv"}, Layer: 1, HeadShape: fusion.HeadShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd},
					RopeParams: fusion.RopeParams{Dims: c.rd, Base: 10000, Style: mustParse(fusion.ParseRopeStyle(c.style))}}
				if c.scale != 0 {
					op.Factors, op.Scale = ropeFactors(c.rd), c.scale
				}
				if c.norm {
					op.Prologue = &fusion.RMSPrologue{Weight: "g", Eps: 1e-5}
					ws = append(ws, vector(r, "g", in, 0.5, 1))
				}
				if c.bias {
					op.K.Bias = "bk"
					ws = append(ws, vector(r, "bk", kvHeads*hd, 1, 0))
				}
				g.Logits = g.Add(op)
				if c.readAttn {
					g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", c.tokens, heads*hd), Q: q,
						Layer: 1, HeadShape: fusion.HeadShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd}, Scale: 0.7})
				}
				return g, ws
			},
			Steps: []Step{{seq(c.tokens), 0}, {[]int32{4}, c.tokens}, {[]int32{2}, c.tokens + 1}, {[]int32{1}, c.tokens + 2}},
			Tol:   tol,
		})
	}
	return cs
}

// scaleSuffix names a case's rope factors and cos/sin scale ("" for none).
func scaleSuffix(scale float32) string {
	if scale == 0 {
		return ""
	}
	return fmt.Sprintf("_factors_scale%g", scale)
}
