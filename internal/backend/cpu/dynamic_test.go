package cpu_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// ggufDiff runs a tiny GGUF model of ../shared/models/arch with the given
// math (prompt as one prefill step with every position's logits, then 24
// decode steps following llama.cpp's ids) and returns the largest logit
// difference from llama.cpp's golden.
func ggufDiff(t *testing.T, name string, m cpu.Math, fused bool) float64 {
	t.Helper()
	g := testmodels.Arch(t, name)
	ck, err := gguf.Load(filepath.Join(testmodels.Path(t, "arch"), name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	be := cpu.New(cpu.Options{Math: m})
	defer be.Close()
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	compile := testmodels.Compiler(t, be, w, &ck.Config, arch.BuildOptions{MaxLen: 128}, fused)
	n := len(g.PromptIDs)
	prefill, decode := compile(n, true), compile(1, false)
	if err := prefill.Run(ctx, testmodels.IDs32(g.PromptIDs), 0); err != nil {
		t.Fatal(err)
	}
	vocab := ck.Config.VocabSize
	all := make([]float32, n*vocab)
	if _, err := prefill.Logits(all); err != nil {
		t.Fatal(err)
	}
	var diff float64
	for p := range n {
		diff = max(diff, testmodels.MaxAbsDiff(all[p*vocab:(p+1)*vocab], g.Logits[p]))
	}
	logits := all[(n-1)*vocab:]
	for step, want := range g.GreedyIDs {
		diff = max(diff, testmodels.MaxAbsDiff(logits, g.GreedyLogits[step]))
		if err := decode.Run(ctx, []int32{int32(want)}, n+step); err != nil {
			t.Fatal(err)
		}
		logits = make([]float32, vocab)
		if _, err := decode.Logits(logits); err != nil {
			t.Fatal(err)
		}
	}
	return diff
}

// TestDynamicMathGGUF: llama.cpp quantizes activations to Q8_0 blocks in
// the dot products of Q8_0 and Q4_0 weights, as MathDynamic does, so the
// dynamic logits must agree with llama.cpp's within the bound internal/arch
// sets for f32 models (1e-4; exact math is ~5e-3 away on these models,
// dynamic 5e-7), closer than the exact ones; f32 weights are untouched by
// the mode.
func TestDynamicMathGGUF(t *testing.T) {
	for _, tc := range []struct {
		name   string
		closer bool
	}{{"llama-q8_0", true}, {"llama-q4_0", true}, {"llama", false}} {
		for _, fused := range []bool{false, true} {
			exact := ggufDiff(t, tc.name, cpu.MathExact, fused)
			dyn := ggufDiff(t, tc.name, cpu.MathDynamic, fused)
			t.Logf("%-10s fused=%v: max |Δlogit| vs llama.cpp: exact %.3g, dynamic %.3g", tc.name, fused, exact, dyn)
			const tol = 1e-4 // measured: 5.4e-7 for both quantized models
			if dyn > tol || math.IsNaN(dyn) {
				t.Errorf("%s: dynamic logits differ by %.3g, tolerance %g", tc.name, dyn, tol)
			}
			if tc.closer && !(dyn < exact) {
				t.Errorf("%s: dynamic logits (%.3g) are not closer to llama.cpp than exact ones (%.3g)", tc.name, dyn, exact)
			}
		}
	}
}
