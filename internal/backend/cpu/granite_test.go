package cpu_test

import (
	"context"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// graniteTol is the tolerance of the arch3 Granite 4.0 H golden: llama.cpp's
// logits are printed to 6 significant digits (up to 5e-6 of rounding) and
// an independent float64 pass reproduces them within 5.1e-6
// (arch3/README.md). The smallest convention effects llama.cpp itself
// measures there are RoPE applied to the NoPE attention (6.5e-3) and
// attention.scale ignored (1.0e-2); 1e-4, the tolerance of the f32 models
// of TestGGUFGoldens, leaves 20x room for f32 summation order and stays
// 65x below the smaller of them (README's suggestion is 1e-3).
const graniteTol = 1e-4

// graniteRun runs the arch3 Granite 4.0 H model as llama.cpp did (the 12
// prompt ids in one step with logits at every position, then the 24
// greedy ids one decode step each, following the reference's ids), with
// edit applied to the imported config (nil: none), and returns the largest
// |Δlogit| of the prompt and of the decode steps, and the first step whose
// greedy id differs (-1: none).
func graniteRun(t *testing.T, fused bool, edit func(*model.Config)) (prompt, decode float64, departed int) {
	t.Helper()
	// The fused graph runs on two threads (the scan's heads split
	// between them), the graph as built on one.
	threads := 1
	if fused {
		threads = 2
	}
	return arch3Run(t, "granitehybrid", threads, fused, func(ck *model.Checkpoint) {
		if edit != nil {
			edit(&ck.Config)
		}
	})
}

// TestGraniteHybridGolden holds the CPU backend's Granite 4.0 H (Mamba-2
// layers beside NoPE attention, Granite's multipliers;
// arch3/granitehybrid.gguf) to llama.cpp 81ff7abe5: the 24 greedy ids
// equal, prompt and decode logits within graniteTol, from the graph as
// built (one thread) and from its fused rewrite (two threads).
func TestGraniteHybridGolden(t *testing.T) {
	for _, fused := range []bool{false, true} {
		prompt, decode, departed := graniteRun(t, fused, nil)
		t.Logf("fused %t: prompt logits max|Δ| %.3g, decode logits max|Δ| %.3g, greedy ids depart at step %d (-1: never)", fused, prompt, decode, departed)
		if prompt > graniteTol || decode > graniteTol {
			t.Errorf("fused %t: logits differ from llama.cpp by %.3g (prompt) / %.3g (decode), tolerance %g", fused, prompt, decode, graniteTol)
		}
		if departed >= 0 {
			t.Errorf("fused %t: greedy id at step %d differs from llama.cpp", fused, departed)
		}
	}
}

// TestGraniteHybridAblations shows the golden pins each convention of the
// Mamba-2 mixer and of Granite's NoPE attention: the state not carried
// between steps (only the decode steps read it), or only its matrices not
// (the smallest effect, about 1e-2: with these weights the convolution
// window dominates what a step carries), the convolution window
// off by one position, the D skip or the z gate dropped, RoPE applied to
// the NoPE attention (NORM pairs, as llama.cpp would with
// rope.scaling.finetuned) and attention.scale ignored (1/√head_dim) each
// move the logits at least 10x the tolerance.
func TestGraniteHybridAblations(t *testing.T) {
	defer cpu.SetSSMAblation(cpu.SSMExact)
	for _, tc := range []struct {
		name string
		a    cpu.SSMAblation
		edit func(*model.Config)
	}{
		{"state not carried", cpu.SSMForgetState, nil},
		{"state matrices not carried", cpu.SSMForgetMatrices, nil},
		{"window off by one", cpu.SSMShiftWindow, nil},
		{"D skip dropped", cpu.SSMNoSkip, nil},
		{"z gate dropped", cpu.SSMNoGate, nil},
		{"RoPE applied", cpu.SSMExact, func(c *model.Config) { c.RopeDims = c.HeadDim }},
		{"attention.scale ignored", cpu.SSMExact, func(c *model.Config) { c.AttnScale = 0 }},
	} {
		cpu.SetSSMAblation(tc.a)
		prompt, decode, _ := graniteRun(t, false, tc.edit)
		cpu.SetSSMAblation(cpu.SSMExact)
		t.Logf("%s: prompt logits max|Δ| %.3g, decode logits max|Δ| %.3g", tc.name, prompt, decode)
		if worst := max(prompt, decode); worst < 10*graniteTol {
			t.Errorf("%s: logits move only %.3g, not past 10x the tolerance %g", tc.name, worst, graniteTol)
		}
	}
}

// TestGraniteHybridStateCache: CopyKV copies a Mamba-2 layer's whole state,
// its convolution window and its matrices: a cache that held another
// sequence, given the state of the golden's prompt, decodes bit for bit as
// the source (matrices left stale move the logits by about 1e-2).
func TestGraniteHybridStateCache(t *testing.T) {
	g := testmodels.Arch3(t, "granitehybrid")
	ck, err := gguf.Load(testmodels.Path(t, "arch3", "granitehybrid.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	be := cpu.New(cpu.Options{Threads: 1})
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	n := len(g.PromptIDs)
	build := func(tokens int) *fusion.Graph {
		graph, err := arch.Build(&ck.Config, arch.BuildOptions{Tokens: tokens, MaxLen: 32})
		if err != nil {
			t.Fatal(err)
		}
		return graph
	}
	spec := build(1).KV
	if st := spec.LayerState(0); st.MatrixValues() == 0 || st.ConvValues() == 0 {
		t.Fatalf("layer 0's state %+v: want a window and matrices", st)
	}
	progs := func() (gpu.KVCache, gpu.Program, gpu.Program) {
		kv, err := be.NewKVCache(spec)
		if err != nil {
			t.Fatal(err)
		}
		pre, err := be.Compile(build(n), w, kv)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := be.Compile(build(1), w, kv)
		if err != nil {
			t.Fatal(err)
		}
		return kv, pre, dec
	}
	src, pre, dec := progs()
	dst, pre2, dec2 := progs()
	if err := pre.Run(ctx, testmodels.IDs32(g.PromptIDs), 0); err != nil {
		t.Fatal(err)
	}
	// dst holds another sequence of the same length first.
	other := slices.Clone(g.PromptIDs)
	slices.Reverse(other)
	if err := pre2.Run(ctx, testmodels.IDs32(other), 0); err != nil {
		t.Fatal(err)
	}
	if err := be.CopyKV(dst, src, n); err != nil {
		t.Fatal(err)
	}
	vocab := ck.Config.VocabSize
	a, b := make([]float32, vocab), make([]float32, vocab)
	for i, p := range []gpu.Program{dec, dec2} {
		if err := p.Run(ctx, []int32{int32(g.GreedyIDs[0])}, n); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Logits([][]float32{a, b}[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(a, b) {
		t.Errorf("the copied cache decodes differently: max |Δ| %g", testmodels.MaxAbsDiff(a, toF64(b)))
	}
	if d := testmodels.MaxAbsDiff(a, g.GreedyLogits[1]); d > graniteTol {
		t.Errorf("decode after the prompt: logits %.3g from llama.cpp's", d)
	}
}
