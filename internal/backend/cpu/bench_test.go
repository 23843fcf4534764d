package cpu_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/conformance"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// weightType is one stored type the benchmarks compare.
type weightType struct {
	name  string
	dtype tensors.DType
	block int
}

// blockBenchTypes adds llama.cpp's block types to the f32 and int4 baselines.
var blockBenchTypes = []weightType{
	{"f32", tensors.F32, 0},
	{"int4-block32", tensors.I4, 32},
	{"q4_k", tensors.Q4K, 0},
	{"q5_k", tensors.Q5K, 0},
	{"q6_k", tensors.Q6K, 0},
	{"q5_0", tensors.Q5_0, 0},
}

var benchTypes = []weightType{
	{"f32", tensors.F32, 0},
	{"f16", tensors.F16, 0},
	{"int8", tensors.I8, 0},
	{"int4-block32", tensors.I4, 32},
}

// forwardTypes adds the K-quant types of llama.cpp's common mixes (Q4_K_M
// is mostly Q4_K and Q6_K) and their most common fallback type (Q5_0) to
// benchTypes for the whole-model forms.
var forwardTypes = append(benchTypes[:len(benchTypes):len(benchTypes)],
	weightType{"q4_k", tensors.Q4K, 0}, weightType{"q5_k", tensors.Q5K, 0}, weightType{"q6_k", tensors.Q6K, 0},
	weightType{"q5_0", tensors.Q5_0, 0})

// dynamicApplies reports whether MathDynamic changes how wt is used.
func dynamicApplies(wt weightType) bool {
	return wt.dtype.Quantized() || wt.dtype.Block()
}

// storeAs builds a [rows, cols] tensor of random values in the given type.
func storeAs(b testing.TB, name string, rows, cols int, wt weightType, rng *rand.Rand) *tensors.Tensor {
	b.Helper()
	vals := randVals(rng, rows*cols, 0.05)
	var t *tensors.Tensor
	var err error
	if wt.dtype.Block() {
		return conformance.BlockMatrix(rng, name, rows, cols, wt.dtype)
	}
	if wt.dtype.Quantized() {
		t, err = tensors.Quantize(name, []int{rows, cols}, vals, wt.dtype, wt.block, tensors.F16)
		if err == nil {
			t.Scales.Name = model.ScaleName(name)
		}
	} else {
		t, err = tensors.FromF32(name, []int{rows, cols}, vals, wt.dtype)
	}
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// syntheticModel is a llama-style model of moderate size: dim 512, 4 layers,
// 8 heads of 64, FFN 1536, vocab 4096; matrices in the given type.
func syntheticModel(b testing.TB, wt weightType) (*model.Config, []*tensors.Tensor) {
	cfg := &model.Config{Arch: model.ArchLlama, VocabSize: 4096, Dim: 512, HiddenDim: 1536, Layers: 4, Heads: 8,
		KVHeads: 8, HeadDim: 64, Norm: model.NormRMS, NormEps: 1e-5, RopeStyle: model.RopeInterleaved,
		RopeDims: 64, RopeBase: 10000, Act: model.ActSiLU, GatedFFN: true, Tied: true, BOS: 1, EOS: 2}
	return cfg, syntheticWeights(b, cfg, wt)
}

// syntheticWeights builds random weights for a llama-style cfg, every
// matrix in the given type.
func syntheticWeights(b testing.TB, cfg *model.Config, wt weightType) []*tensors.Tensor {
	rng := rand.New(rand.NewPCG(1, 1))
	ones := func(name string) *tensors.Tensor {
		v := make([]float32, cfg.Dim)
		for i := range v {
			v[i] = 1
		}
		return f32Tensor(b, name, []int{cfg.Dim}, v)
	}
	ws := []*tensors.Tensor{storeAs(b, model.TokenEmbedding, cfg.VocabSize, cfg.Dim, wt, rng), ones(model.FinalNorm)}
	for l := range cfg.Layers {
		ws = append(ws, ones(model.Layer(l, model.AttnNorm)), ones(model.Layer(l, model.FFNNorm)))
		for _, m := range []struct {
			suffix     string
			rows, cols int
		}{{model.WQ, cfg.Dim, cfg.Dim}, {model.WK, cfg.Dim, cfg.Dim}, {model.WV, cfg.Dim, cfg.Dim}, {model.WO, cfg.Dim, cfg.Dim},
			{model.WGate, cfg.HiddenDim, cfg.Dim}, {model.WUp, cfg.HiddenDim, cfg.Dim}, {model.WDown, cfg.Dim, cfg.HiddenDim}} {
			ws = append(ws, storeAs(b, model.Layer(l, m.suffix), m.rows, m.cols, wt, rng))
		}
	}
	return ws
}

// BenchmarkDecode110M measures decode at the llama 110M shape (dim 768,
// 12 layers, FFN 2048, vocabulary 32000; the shape issue 28 quotes
// llama.cpp's K-quant figures at) with every matrix Q4_K or Q6_K, in exact
// and dynamic math.
func BenchmarkDecode110M(b *testing.B) {
	cfg := &model.Config{Arch: model.ArchLlama, VocabSize: 32000, Dim: 768, HiddenDim: 2048, Layers: 12, Heads: 12,
		KVHeads: 12, HeadDim: 64, Norm: model.NormRMS, NormEps: 1e-5, RopeStyle: model.RopeInterleaved,
		RopeDims: 64, RopeBase: 10000, Act: model.ActSiLU, GatedFFN: true, Tied: true, BOS: 1, EOS: 2}
	for _, wt := range []weightType{{"q4_k", tensors.Q4K, 0}, {"q6_k", tensors.Q6K, 0}} {
		ws := syntheticWeights(b, cfg, wt)
		for _, m := range []cpu.Math{cpu.MathExact, cpu.MathDynamic} {
			b.Run(wt.name+"/"+m.String(), func(b *testing.B) {
				p, toks := forwardProgram(b, cfg, ws, 1, m)
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if err := p.Run(ctx, toks, 64); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}

// BenchmarkForward measures decode (one token per step at position 64) and
// prefill (64 tokens in one step) of the synthetic model, per weight type
// and, for quantized weights, per math (allocs/op of decode must be 0).
func BenchmarkForward(b *testing.B) {
	for _, wt := range forwardTypes {
		cfg, ws := syntheticModel(b, wt)
		maths := []cpu.Math{cpu.MathExact}
		if dynamicApplies(wt) {
			maths = append(maths, cpu.MathDynamic)
		}
		for _, m := range maths {
			for _, tokens := range []int{1, 64} {
				name := "decode"
				if tokens > 1 {
					name = fmt.Sprintf("prefill%d", tokens)
				}
				b.Run(wt.name+"/"+m.String()+"/"+name, func(b *testing.B) {
					p, toks := forwardProgram(b, cfg, ws, tokens, m)
					ctx := context.Background()
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						if err := p.Run(ctx, toks, 64); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(tokens*b.N)/b.Elapsed().Seconds(), "tok/s")
				})
			}
		}
	}
}

// forwardProgram compiles the synthetic model's step for the given token
// count on a fresh backend.
func forwardProgram(b testing.TB, cfg *model.Config, ws []*tensors.Tensor, tokens int, m cpu.Math) (gpu.Program, []int32) {
	return forwardProgramLen(b, cfg, ws, tokens, m, 256)
}

// forwardProgramLen is forwardProgram with a KV cache of maxLen positions.
func forwardProgramLen(b testing.TB, cfg *model.Config, ws []*tensors.Tensor, tokens int, m cpu.Math, maxLen int) (gpu.Program, []int32) {
	ctx := context.Background()
	be := cpu.New(cpu.Options{Math: m})
	w, err := be.LoadWeights(ctx, ws)
	if err != nil {
		b.Fatal(err)
	}
	g, err := arch.Build(cfg, arch.BuildOptions{Tokens: tokens, MaxLen: maxLen})
	if err != nil {
		b.Fatal(err)
	}
	kv, err := be.NewKVCache(g.KV)
	if err != nil {
		b.Fatal(err)
	}
	p, err := be.Compile(g, w, kv)
	if err != nil {
		b.Fatal(err)
	}
	toks := make([]int32, tokens)
	for i := range toks {
		toks[i] = int32(i * 7 % cfg.VocabSize)
	}
	return p, toks
}

// TestDecodeAllocatesNothing runs decode steps of the synthetic model in
// every weight type and math and counts heap allocations.
func TestDecodeAllocatesNothing(t *testing.T) {
	for _, wt := range forwardTypes {
		maths := []cpu.Math{cpu.MathExact, cpu.MathDynamic}
		if testing.Short() && wt.dtype.Block() {
			// Under qemu (-short) the block types' exact decode, which
			// dequantizes every row, costs minutes: one K-quant type and
			// one 32-value type, dynamic math only.
			if wt.dtype != tensors.Q4K && wt.dtype != tensors.Q5_0 {
				continue
			}
			maths = maths[1:]
		}
		// Under qemu (-short) 5 steps a type, not 20: an allocation on
		// every step shows either way, and the decode steps dominated
		// the emulated package's time (50 s of its 107 s a CPU model).
		runs := 20
		if testing.Short() {
			runs = 5
		}
		cfg, ws := syntheticModel(t, wt)
		for _, m := range maths {
			p, toks := forwardProgram(t, cfg, ws, 1, m)
			ctx := context.Background()
			pos := 0
			if n := testing.AllocsPerRun(runs, func() {
				if err := p.Run(ctx, toks, 64+pos%100); err != nil {
					t.Fatal(err)
				}
				pos++
			}); n != 0 {
				t.Errorf("%s/%s: %v allocations per decode step, want 0", wt.name, m, n)
			}
		}
	}
}

// BenchmarkMatMul measures one 2048x2048 product (plus a negligible embed
// of the input rows): the matrix-vector product of decode and a 32-token
// prefill product.
func BenchmarkMatMul(b *testing.B) {
	benchProduct(b, 2048, 2048, benchTypes, []int{1, 32}, rand.New(rand.NewPCG(2, 2)))
}

// BenchmarkMatMulBlocks is BenchmarkMatMul for llama.cpp's block types,
// beside f32 and int4 block 32.
func BenchmarkMatMulBlocks(b *testing.B) {
	benchProduct(b, 2048, 2048, blockBenchTypes, []int{1, 32}, rand.New(rand.NewPCG(2, 2)))
}

// BenchmarkMatVecFFN measures the decode matrix-vector product of a
// TinyLlama-sized FFN down projection (2048 rows of 5632), where quantized
// decode is bound by unpacking and bandwidth, and the 4-token product that
// prefill's row-times-four-tokens path runs.
func BenchmarkMatVecFFN(b *testing.B) {
	types := []weightType{{"int8", tensors.I8, 0}, {"int8-block32", tensors.I8, 32}, {"int4-block32", tensors.I4, 32}}
	benchProduct(b, 2048, 5632, types, []int{1, 4}, rand.New(rand.NewPCG(3, 3)))
}

// benchProduct times one rows x cols MatMul per weight type and token count,
// reporting weight bytes and multiply-adds per second.
func benchProduct(b *testing.B, rows, cols int, types []weightType, tokenCounts []int, rng *rand.Rand) {
	for _, wt := range types {
		w := storeAs(b, "w", rows, cols, wt, rng)
		for _, tokens := range tokenCounts {
			b.Run(fmt.Sprintf("%s/T=%d", wt.name, tokens), func(b *testing.B) {
				g := &fusion.Graph{Tokens: tokens}
				x := g.NewBuf("x", tokens, cols)
				y := g.NewBuf("y", tokens, rows)
				g.Add(&fusion.EmbedOp{Out: x, Weight: "x"})
				g.Add(&fusion.MatMulOp{Out: y, In: x, Projection: fusion.Projection{Weight: "w"}})
				g.Logits = y
				h := compile(b, g, []*tensors.Tensor{w, f32Tensor(b, "x", []int{tokens, cols}, randVals(rng, tokens*cols, 1))}, 0)
				ctx := context.Background()
				toks := seq(tokens)
				b.SetBytes(int64(len(w.Data)))
				b.ResetTimer()
				for b.Loop() {
					if err := h.prog.Run(ctx, toks, 0); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(2*rows*cols*tokens*b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

var _ gpu.Backend = cpu.New(cpu.Options{})

// BenchmarkF32Model110M measures the llama 110M shape with f32 and f16
// weights (issue 28's F32 comparison with llama.cpp): prefill of 512
// tokens from position 0 and decode at position 64, two threads, in the
// math gpurun bench uses by default (dynamic) and exact math.
func BenchmarkF32Model110M(b *testing.B) {
	cfg := &model.Config{Arch: model.ArchLlama, VocabSize: 32000, Dim: 768, HiddenDim: 2048, Layers: 12, Heads: 12,
		KVHeads: 12, HeadDim: 64, Norm: model.NormRMS, NormEps: 1e-5, RopeStyle: model.RopeInterleaved,
		RopeDims: 64, RopeBase: 10000, Act: model.ActSiLU, GatedFFN: true, Tied: true, BOS: 1, EOS: 2}
	for _, wt := range []weightType{{"f32", tensors.F32, 0}, {"f16", tensors.F16, 0}} {
		ws := syntheticWeights(b, cfg, wt)
		for _, m := range []cpu.Math{cpu.MathExact, cpu.MathDynamic} {
			for _, tc := range []struct {
				name        string
				tokens, pos int
			}{{"pp512", 512, 0}, {"decode", 1, 64}} {
				b.Run(wt.name+"/"+m.String()+"/"+tc.name, func(b *testing.B) {
					p, toks := forwardProgramLen(b, cfg, ws, tc.tokens, m, 1024)
					ctx := context.Background()
					b.ResetTimer()
					for b.Loop() {
						if err := p.Run(ctx, toks, tc.pos); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(tc.tokens*b.N)/b.Elapsed().Seconds(), "tok/s")
				})
			}
		}
	}
}
