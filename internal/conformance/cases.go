package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// vocab is the row count of every embedding table in the cases.
const vocab = 13

// Tolerances, with the reason for each:
//   - exact: embedding and row copies do the same f32 operations.
//   - dot: f32 dot products of up to ~100 terms with |x|,|w| <= 1 summed in
//     another order than the CPU's: a few ulps of the largest partial sum.
//   - transc: exp/tanh/sin/cos from the device's math library against Go's
//     float64 math rounded to f32, plus f32 rope angles: a few ulps.
//   - attention: dot products, then exp and a rescaled streaming softmax.
//   - attentionWide: the same with 256-term dot products.
var (
	exact     = Tolerance{}
	dot       = Tolerance{Abs: 2e-5, Rel: 2e-5}
	transc    = Tolerance{Abs: 2e-6, Rel: 2e-5}
	attention = Tolerance{Abs: 1e-5, Rel: 5e-5}
	// attentionWide: attention with 256-dim heads, four times the terms
	// per score.
	attentionWide = Tolerance{Abs: 4e-5, Rel: 1e-4}
)

func uniform(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (r.Float32()*2 - 1) * scale
	}
	return v
}

// mustTensor panics on a tensors error: case builders only pass shapes they
// computed themselves, so an error is a bug in the table.
func mustTensor(t *tensors.Tensor, err error) *tensors.Tensor {
	if err != nil {
		panic(fmt.Sprintf("conformance: building a case tensor: %v", err))
	}
	return t
}

// matrix is a [rows, cols] tensor of dt with values in [-1, 1]; quantized
// types use block scales (block > 0) or per-row scales of scaleType.
func matrix(r *rand.Rand, name string, rows, cols int, dt tensors.DType, block int, scaleType tensors.DType) *tensors.Tensor {
	vals := uniform(r, rows*cols, 1)
	if dt.Quantized() {
		return mustTensor(tensors.Quantize(name, []int{rows, cols}, vals, dt, block, scaleType))
	}
	return mustTensor(tensors.FromF32(name, []int{rows, cols}, vals, dt))
}

func vector(r *rand.Rand, name string, n int, scale, offset float32) *tensors.Tensor {
	v := uniform(r, n, scale)
	for i := range v {
		v[i] += offset
	}
	return mustTensor(tensors.FromF32(name, []int{n}, v, tensors.F32))
}

// mustParse returns v, panicking on err: the tables name the parameters
// as model configs do (fusion.Parse* converts them).
func mustParse[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// input adds an embedding of table name: the way tokens bring data in.
func input(g *fusion.Graph, name string, cols int) fusion.Buf {
	return g.Add(&fusion.EmbedOp{Out: g.NewBuf(name, g.Tokens, cols), Weight: name})
}

// lateSeq is seq with every token 0 of the first 64 positions (the first
// chunk of the attention kernels) made a 1; AttentionCases' late cases
// also lengthen key 0, so a query row whose largest score is a token-0 key
// finds it in a later chunk and its running max rises after values were
// already summed.
func lateSeq(n int) []int32 {
	out := seq(n)
	for i := range min(n, 64) {
		if out[i] == 0 {
			out[i] = 1
		}
	}
	return out
}

func seq(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32((3*i + 1) % vocab)
	}
	return out
}

// Cases returns the per-op parity table.
func Cases() []Case {
	var cs []Case
	cs = append(cs, embedCases()...)
	cs = append(cs, matmulCases()...)
	cs = append(cs, normCases()...)
	cs = append(cs, ropeCases()...)
	cs = append(cs, elementwiseCases()...)
	cs = append(cs, lastRowCases()...)
	cs = append(cs, ArgmaxCases()...)
	cs = append(cs, AttentionCases()...)
	cs = append(cs, fusedSample()...)
	cs = append(cs, ShortConvCases()...)
	cs = append(cs, Mamba2Cases()...)
	return cs
}

func embedCases() []Case {
	type tc struct {
		dt    tensors.DType
		block int
		cols  int
		scale float32
	}
	table := []tc{
		{tensors.F32, 0, 37, 0}, {tensors.F16, 0, 64, 0}, {tensors.BF16, 0, 5, 2},
		{tensors.I8, 0, 37, 0}, {tensors.I8, 8, 64, 1.5}, {tensors.I4, 0, 38, 0}, {tensors.I4, 16, 64, 0.5},
	}
	var cs []Case
	for _, c := range table {
		cs = append(cs, Case{
			Name: fmt.Sprintf("embed/%s_b%d_c%d_s%g", c.dt, c.block, c.cols, c.scale),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(1, uint64(c.cols)))
				g := &fusion.Graph{Tokens: 3}
				g.Logits = g.Add(&fusion.EmbedOp{Out: g.NewBuf("x", 3, c.cols), Weight: "tok", Scale: c.scale})
				return g, []*tensors.Tensor{matrix(r, "tok", vocab, c.cols, c.dt, c.block, tensors.F32)}
			},
			Steps: []Step{{[]int32{3, 0, 12}, 0}, {[]int32{5}, 3}},
			Tol:   exact,
		})
	}
	return cs
}

func matmulCases() []Case {
	type tc struct {
		dt      tensors.DType
		block   int
		scale   tensors.DType
		in, out int
		tokens  int
		bias    bool
	}
	var table []tc
	for _, tokens := range []int{1, 5} { // matrix-vector and matrix-matrix kernels
		table = append(table,
			tc{tensors.F32, 0, 0, 37, 19, tokens, true},
			tc{tensors.F16, 0, 0, 64, 130, tokens, false},
			tc{tensors.BF16, 0, 0, 40, 21, tokens, true},
			tc{tensors.I8, 0, tensors.F32, 37, 19, tokens, false},
			tc{tensors.I8, 16, tensors.F16, 48, 21, tokens, true},
			tc{tensors.I4, 0, tensors.F32, 38, 17, tokens, false},
			tc{tensors.I4, 8, tensors.F16, 64, 33, tokens, true})
	}
	var cs []Case
	for _, c := range table {
		cs = append(cs, Case{
			Name: fmt.Sprintf("matmul/%s_b%d_%dx%d_t%d_bias%v", c.dt, c.block, c.out, c.in, c.tokens, c.bias),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(2, uint64(c.in*1000+c.out)))
				g := &fusion.Graph{Tokens: c.tokens}
				x := input(g, "x", c.in)
				op := &fusion.MatMulOp{Out: g.NewBuf("y", c.tokens, c.out), In: x, Projection: fusion.Projection{Weight: "w"}}
				ws := []*tensors.Tensor{matrix(r, "x", vocab, c.in, tensors.F32, 0, 0), matrix(r, "w", c.out, c.in, c.dt, c.block, c.scale)}
				if c.bias {
					op.Bias = "b"
					ws = append(ws, vector(r, "b", c.out, 1, 0))
				}
				g.Logits = g.Add(op)
				return g, ws
			},
			Steps: []Step{{seq(c.tokens), 0}, {seq(1), 0}},
			Tol:   dot,
		})
	}
	return cs
}

func normCases() []Case {
	table := []struct {
		kind    string
		bias    bool
		cols    int
		inPlace bool
		head    int // a per-head norm of heads of this many values (0: the whole row)
	}{{"rms", false, 5, false, 0}, {"rms", false, 300, false, 0}, {"rms", false, 20, true, 0}, {"layer", false, 7, false, 0}, {"layer", true, 130, false, 0},
		{"rms", false, 64, true, 16}, {"rms", false, 96, false, 32}, {"rms", false, 18, false, 6}}
	var cs []Case
	for _, c := range table {
		name := fmt.Sprintf("norm/%s_bias%v_c%d_inplace%v", c.kind, c.bias, c.cols, c.inPlace)
		if c.head > 0 {
			name += fmt.Sprintf("_head%d", c.head)
		}
		cs = append(cs, Case{
			Name: name,
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(3, uint64(c.cols)))
				g := &fusion.Graph{Tokens: 3}
				x := input(g, "x", c.cols)
				out := x
				if !c.inPlace {
					out = g.NewBuf("n", 3, c.cols)
				}
				op := &fusion.NormOp{Out: out, In: x, Weight: "w", Norm: mustParse(fusion.ParseNormKind(c.kind)), Eps: 1e-5, HeadDim: c.head}
				wn := c.cols
				if c.head > 0 {
					wn = c.head
				}
				ws := []*tensors.Tensor{matrix(r, "x", vocab, c.cols, tensors.F32, 0, 0), vector(r, "w", wn, 0.5, 1)}
				if c.bias {
					op.Bias = "b"
					ws = append(ws, vector(r, "b", c.cols, 1, 0))
				}
				g.Logits = g.Add(op)
				return g, ws
			},
			Steps: []Step{{seq(3), 0}},
			Tol:   dot,
		})
	}
	return cs
}

func ropeCases() []Case {
	table := []struct {
		style           string
		heads, hd, dims int
		inPlace         bool
		pos             int
		factors         bool    // per-pair divisors (Llama 3, LongRoPE)
		scale           float32 // cos/sin multiplier (LongRoPE's attention factor)
	}{
		{"interleaved", 2, 8, 8, true, 0, false, 0}, {"interleaved", 3, 8, 4, false, 5, false, 0},
		{"halves", 2, 8, 8, false, 3, false, 0}, {"halves", 3, 10, 6, true, 40, false, 0},
		{"interleaved", 2, 16, 16, true, 30, true, 0}, {"halves", 3, 16, 12, false, 20, true, 1.1832},
	}
	var cs []Case
	for _, c := range table {
		cs = append(cs, Case{
			Name: fmt.Sprintf("rope/%s_%dx%d_r%d_inplace%v_factors%v_scale%g", c.style, c.heads, c.hd, c.dims, c.inPlace, c.factors, c.scale),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(4, uint64(c.hd)))
				g := &fusion.Graph{Tokens: 3}
				cols := c.heads * c.hd
				x := input(g, "x", cols)
				out := x
				if !c.inPlace {
					out = g.NewBuf("r", 3, cols)
				}
				rp := fusion.RopeParams{Dims: c.dims, Base: 10000, Style: mustParse(fusion.ParseRopeStyle(c.style)), Scale: c.scale}
				if c.factors {
					rp.Factors = ropeFactors(c.dims)
				}
				g.Logits = g.Add(&fusion.RopeOp{Out: out, In: x, Heads: c.heads, HeadDim: c.hd, RopeParams: rp})
				return g, []*tensors.Tensor{matrix(r, "x", vocab, cols, tensors.F32, 0, 0)}
			},
			Steps: []Step{{seq(3), c.pos}, {seq(1), c.pos + 3}},
			Tol:   transc,
		})
	}
	return cs
}

func elementwiseCases() []Case {
	type tc struct {
		kind fusion.Kind
		act  string
		tol  Tolerance
	}
	table := []tc{
		{fusion.GLU, "silu", transc},
		// gelu_tanh rounds to binary16 on both sides; a tanh ulp apart can
		// land on neighbouring halves: 2^-10 relative.
		{fusion.GLU, "gelu_tanh", Tolerance{Abs: 1e-6, Rel: 1e-3}},
		// gelu's erf approximation (A&S 7.1.26, 1.5e-7) scaled by |x|/2.
		{fusion.Activation, "gelu", Tolerance{Abs: 1e-6, Rel: 2e-5}},
		{fusion.Activation, "relu", exact},
		{fusion.Add, "", exact},
		{fusion.SoftCap, "", transc},
	}
	var cs []Case
	for _, c := range table {
		cs = append(cs, Case{
			Name: fmt.Sprintf("elementwise/%s_%s", c.kind, c.act),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(5, uint64(c.kind)))
				const cols = 37
				g := &fusion.Graph{Tokens: 3}
				a := input(g, "a", cols)
				var b fusion.Buf
				if c.kind == fusion.GLU || c.kind == fusion.Add {
					b = input(g, "b", cols)
				}
				y := g.NewBuf("y", 3, cols)
				var op fusion.Op
				switch c.kind {
				case fusion.GLU:
					op = &fusion.GLUOp{Out: y, Gate: a, Up: b, Act: mustParse(fusion.ParseAct(c.act))}
				case fusion.Activation:
					op = &fusion.ActivationOp{Out: y, In: a, Act: mustParse(fusion.ParseAct(c.act))}
				case fusion.Add:
					op = &fusion.AddOp{Out: y, A: a, B: b}
				case fusion.SoftCap:
					op = &fusion.SoftCapOp{Out: y, In: a, Cap: 1.5}
				}
				g.Logits = g.Add(op)
				// Values up to +-12 reach the flat parts of tanh and gelu.
				ta := mustTensor(tensors.FromF32("a", []int{vocab, cols}, uniform(r, vocab*cols, 12), tensors.F32))
				return g, []*tensors.Tensor{ta, matrix(r, "b", vocab, cols, tensors.F32, 0, 0)}
			},
			Steps: []Step{{seq(3), 0}, {seq(1), 3}},
			Tol:   c.tol,
		})
	}
	return cs
}

func lastRowCases() []Case {
	return []Case{{
		Name: "last_row/t4",
		Build: func() (*fusion.Graph, []*tensors.Tensor) {
			r := rand.New(rand.NewPCG(6, 4))
			g := &fusion.Graph{Tokens: 4}
			x := input(g, "x", 70)
			g.Logits = g.Add(&fusion.LastRowOp{Out: g.NewBuf("l", 1, 70), In: x})
			return g, []*tensors.Tensor{matrix(r, "x", vocab, 70, tensors.F32, 0, 0)}
		},
		Steps: []Step{{seq(4), 0}, {seq(2), 0}},
		Tol:   exact,
	}}
}

// AttentionCases stores K and V for a prefill and decode steps and attends
// over the cache. Besides GQA, soft cap, sliding window and head dims past
// 64, they cover the geometry of the split decode kernels (attn_split:
// chunks of 64 positions, batches of 8 query heads): several chunks, a
// last chunk cut by the cache end, a window straddling chunk edges,
// decode steps that open a new chunk, GQA groups past one batch, and a
// cache much longer than the visible positions; and of the tiled prefill
// kernel (attn_tiled: tiles of 8 query rows over chunks of 64 positions,
// online softmax); and attention sinks over these geometries (sinkCases).
func AttentionCases() []Case {
	type tc struct {
		heads, kvHeads, hd int
		capv               float32
		window             int
		prefill, decode    int
		f16                bool
		maxLen             int  // 0: prefill+decode+1
		late               bool // the prompt is lateSeq: the largest scores come after the first 64 positions
	}
	var table []tc
	for _, f16 := range []bool{false, true} { // f32 cache, f16 cache (halves packed in pairs)
		table = append(table,
			tc{4, 2, 8, 0, 0, 3, 3, f16, 0, false},      // grouped-query attention
			tc{6, 2, 8, 30, 0, 4, 2, f16, 0, false},     // soft-capped scores
			tc{2, 1, 8, 0, 3, 4, 3, f16, 0, false},      // sliding window
			tc{2, 1, 72, 0, 0, 2, 1, f16, 0, false},     // head dim past 64
			tc{2, 2, 8, 0, 0, 70, 2, f16, 0, false},     // cache longer than 64 positions
			tc{4, 1, 16, 0, 0, 150, 3, f16, 0, false},   // three chunks, the last cut by the cache end
			tc{2, 1, 8, 0, 70, 140, 2, f16, 0, false},   // window straddling chunk edges
			tc{12, 1, 8, 20, 0, 5, 2, f16, 0, false},    // a group of 12: two head batches
			tc{4, 2, 16, 0, 0, 64, 2, f16, 0, false},    // decode opens a new chunk
			tc{2, 1, 64, 0, 0, 10, 2, f16, 1280, false}) // 10 visible positions of 1280
	}
	table = append(table,
		tc{3, 3, 7, 0, 0, 3, 2, true, 0, false},      // odd head dim: a half-filled last word
		tc{4, 2, 256, 0, 0, 3, 1, true, 0, false},    // largest head dim: two words per invocation
		tc{2, 1, 256, 0, 0, 70, 1, false, 0, false},  // largest f32 head dim: key tiles of 8
		tc{4, 2, 64, 30, 70, 140, 2, true, 0, false}, // attn_tiled: groups, caps, a window straddling chunks
		tc{2, 2, 64, 0, 0, 130, 2, true, 0, false},   // attn_tiled: three chunks, a tile's rows over two
		tc{2, 2, 64, 0, 0, 130, 2, true, 0, true},    // attn_tiled: running maxima raised by later chunks
		tc{6, 1, 128, 0, 0, 9, 2, true, 16, false})   // head dim 128, a group of 6
	cs := []Case{f16RoundingCase()}
	for _, c := range table {
		// Both sides read the same halves from an f16 cache (rounded to
		// nearest even), so the f32 tolerance holds; 256-term scores
		// summed in another order need a little more.
		tol := attention
		if c.hd > 128 {
			tol = attentionWide
		}
		prompt, suffix := seq(c.prefill), ""
		if c.late {
			prompt, suffix = lateSeq(c.prefill), "_late"
		}
		steps := []Step{{prompt, 0}}
		for d := range c.decode {
			steps = append(steps, Step{Tokens: []int32{int32((5*d + 2) % vocab)}, Pos: c.prefill + d})
		}
		maxLen := c.maxLen
		if maxLen == 0 {
			maxLen = c.prefill + c.decode + 1
		}
		cs = append(cs, Case{
			Name: fmt.Sprintf("attention/h%d_kv%d_d%d_cap%g_w%d_p%d_f16%v_max%d%s", c.heads, c.kvHeads, c.hd, c.capv, c.window, c.prefill, c.f16, maxLen, suffix),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(7, uint64(c.hd*100+c.prefill)))
				g := &fusion.Graph{Tokens: c.prefill}
				g.KV = fusion.KVSpec{Layers: 2, KVHeads: c.kvHeads, HeadDim: c.hd, MaxLen: maxLen, F16: c.f16}
				q := input(g, "q", c.heads*c.hd)
				k := input(g, "k", c.kvHeads*c.hd)
				v := input(g, "v", c.kvHeads*c.hd)
				g.Add(&fusion.StoreKVOp{K: k, V: v, Layer: 1, KVHeads: c.kvHeads, HeadDim: c.hd})
				g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", c.prefill, c.heads*c.hd), Q: q, Layer: 1,
					HeadShape: fusion.HeadShape{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd}, Scale: 0.9, Cap: c.capv, Window: c.window})
				scaled := func(name string, cols int) *tensors.Tensor {
					return mustTensor(tensors.FromF32(name, []int{vocab, cols}, uniform(r, vocab*cols, 2), tensors.F32))
				}
				keys := scaled("k", c.kvHeads*c.hd)
				if c.late {
					// Key 0 three times as long: where its score is
					// positive it is the row's largest by far.
					ks := uniform(r, vocab*c.kvHeads*c.hd, 2)
					for i := range c.kvHeads * c.hd {
						ks[i] *= 3
					}
					keys = mustTensor(tensors.FromF32("k", []int{vocab, c.kvHeads * c.hd}, ks, tensors.F32))
				}
				return g, []*tensors.Tensor{scaled("q", c.heads*c.hd), keys, scaled("v", c.kvHeads*c.hd)}
			},
			Steps: steps,
			Tol:   tol,
		})
	}
	return append(cs, sinkCases()...)
}

// f16RoundingCase stores awkward values in an f16 cache and reads them
// back exactly: attention over a single position weighs its value by
// exactly 1, so the output is the cached half. The values are ties (to
// even), subnormals, and magnitudes past the binary16 range, which
// saturate to ±65504 on every backend; an odd head dim leaves the last
// packed word half empty.
func f16RoundingCase() Case {
	vals := []float32{0, 1, -2, 1 + 1.0/2048, 1 + 3.0/2048, 1.0 / 3, 65504, 65519, 65520, 1e9, -1e9,
		1.0 / 16384, 1.0 / (1 << 24), 1.0 / (1 << 25), 3.0 / (1 << 25), -0.1, 123.456}
	n := len(vals)
	return Case{
		Name: fmt.Sprintf("attention/f16_rounding_d%d", n),
		Build: func() (*fusion.Graph, []*tensors.Tensor) {
			g := &fusion.Graph{Tokens: 1, KV: fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: n, MaxLen: 1, F16: true}}
			q := input(g, "q", n)
			kv := input(g, "kv", n)
			g.Add(&fusion.StoreKVOp{K: kv, V: kv, KVHeads: 1, HeadDim: n})
			g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", 1, n), Q: q,
				HeadShape: fusion.HeadShape{Heads: 1, KVHeads: 1, HeadDim: n}, Scale: 1})
			rows := make([]float32, vocab*n)
			for r := range vocab {
				copy(rows[r*n:], vals)
			}
			zero := mustTensor(tensors.FromF32("q", []int{vocab, n}, make([]float32, vocab*n), tensors.F32))
			return g, []*tensors.Tensor{zero, mustTensor(tensors.FromF32("kv", []int{vocab, n}, rows, tensors.F32))}
		},
		Steps: []Step{{[]int32{4}, 0}},
		Tol:   exact,
	}
}

// ropeFactors is a per-pair divisor table of dims/2 values from 1 up to
// about 8, the range of Llama 3's and LongRoPE's.
func ropeFactors(dims int) []float32 {
	fs := make([]float32, dims/2)
	for i := range fs {
		fs[i] = 1 + 7*float32(i)/float32(max(len(fs)-1, 1))
	}
	return fs
}
