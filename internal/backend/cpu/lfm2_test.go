package cpu_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// lfm2Tol is the tolerance of the arch3 LFM2 golden: llama.cpp's logits
// are printed to 6 significant digits (up to 5e-6 of rounding) and an
// independent float64 pass reproduces them within 4.6e-6 (arch3/README.md),
// as this backend does (4.6e-6 measured); the smallest convention effect
// measured there (the conv keeping only its current tap) is 1.5e-2. 1e-4,
// the tolerance of the f32 models of TestGGUFGoldens, leaves 20x room for
// f32 summation order and stays 150x below that.
const lfm2Tol = 1e-4

// lfm2Run runs the arch3 LFM2 model as llama.cpp did (the 12 prompt ids in
// one step with logits at every position, then the 24 greedy ids one
// decode step each, following the reference's ids) and returns the
// largest |Δlogit| of the prompt and of the decode steps, and the first
// step whose greedy id differs (-1: none).
func lfm2Run(t *testing.T, fused bool) (prompt, decode float64, departed int) {
	t.Helper()
	return arch3Run(t, "lfm2", 1, fused, nil)
}

// TestLFM2Golden holds the CPU backend's LFM2 (gated short convolutions
// beside GQA attention, arch3/lfm2.gguf) to llama.cpp 81ff7abe5: the 24
// greedy ids equal, prompt and decode logits within lfm2Tol, from the graph
// as built and from its fused rewrite.
func TestLFM2Golden(t *testing.T) {
	for _, fused := range []bool{false, true} {
		prompt, decode, departed := lfm2Run(t, fused)
		t.Logf("fused %t: prompt logits max|Δ| %.3g, decode logits max|Δ| %.3g, greedy ids depart at step %d (-1: never)", fused, prompt, decode, departed)
		if prompt > lfm2Tol || decode > lfm2Tol {
			t.Errorf("fused %t: logits differ from llama.cpp by %.3g (prompt) / %.3g (decode), tolerance %g", fused, prompt, decode, lfm2Tol)
		}
		if departed >= 0 {
			t.Errorf("fused %t: greedy id at step %d differs from llama.cpp", fused, departed)
		}
	}
}

// TestLFM2Ablations shows the golden pins each convention of the short
// convolution: the state not carried between steps (only the decode steps
// read it), the window off by one position, and either gate dropped each
// move the logits at least 10x the tolerance.
func TestLFM2Ablations(t *testing.T) {
	defer cpu.SetConvAblation(cpu.ConvExact)
	for _, tc := range []struct {
		name string
		a    cpu.ConvAblation
	}{
		{"state not carried", cpu.ConvForgetState},
		{"window off by one", cpu.ConvShiftWindow},
		{"input gate B dropped", cpu.ConvNoInputGate},
		{"output gate C dropped", cpu.ConvNoOutputGate},
	} {
		cpu.SetConvAblation(tc.a)
		prompt, decode, _ := lfm2Run(t, false)
		cpu.SetConvAblation(cpu.ConvExact)
		t.Logf("%s: prompt logits max|Δ| %.3g, decode logits max|Δ| %.3g", tc.name, prompt, decode)
		if worst := max(prompt, decode); worst < 10*lfm2Tol {
			t.Errorf("%s: logits move only %.3g, not past 10x the tolerance %g", tc.name, worst, lfm2Tol)
		}
	}
}

// TestRecurrentStateCache: a recurrent state goes forward only. A step
// that does not continue where the state ends fails with gpu.ErrStep (no
// silent logits from a stale state); CopyKV copies a state for exactly the
// position it holds (the copy then decodes bit for bit as the source),
// refuses any other prefix, and with n = 0 resets it.
func TestRecurrentStateCache(t *testing.T) {
	g := testmodels.Arch3(t, "lfm2")
	ck, err := gguf.Load(testmodels.Path(t, "arch3", "lfm2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	be := cpu.New(cpu.Options{Threads: 1})
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	build := func(tokens int) *fusion.Graph {
		graph, err := arch.Build(&ck.Config, arch.BuildOptions{Tokens: tokens, MaxLen: 32})
		if err != nil {
			t.Fatal(err)
		}
		return graph
	}
	n := len(g.PromptIDs)
	spec := build(1).KV
	if !spec.Recurrent() {
		t.Fatal("lfm2's cache spec has no recurrent state")
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
	if err := pre.Run(ctx, testmodels.IDs32(g.PromptIDs), 0); err != nil {
		t.Fatal(err)
	}
	if err := dec.Run(ctx, []int32{1}, n+1); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("decode past the state's position: %v, want gpu.ErrStep", err)
	}
	if err := dec.Run(ctx, []int32{1}, n-1); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("decode before the state's position: %v, want gpu.ErrStep", err)
	}
	dst, _, dec2 := progs()
	if err := be.CopyKV(dst, src, n-1); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("copy of %d positions from a state at %d: %v, want gpu.ErrStep", n-1, n, err)
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
	if err := be.CopyKV(dst, src, 0); err != nil {
		t.Fatal(err)
	}
	if err := dec2.Run(ctx, []int32{1}, n+1); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("decode after a reset to 0: %v, want gpu.ErrStep", err)
	}
}

func toF64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// TestStateCheckpoint: CopyState into a cache of one position checkpoints
// a sequence's states, and the copy back restores them after the sequence
// went on: the next step at the checkpoint's position gives the logits it
// gave before, bit for bit, and a step elsewhere still fails with
// gpu.ErrStep. Caches whose states differ are refused.
func TestStateCheckpoint(t *testing.T) {
	g := testmodels.Arch3(t, "lfm2")
	ck, err := gguf.Load(testmodels.Path(t, "arch3", "lfm2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	be := cpu.New(cpu.Options{Threads: 1})
	if !be.Caps().CopyState {
		t.Fatal("the CPU backend does not report CopyState")
	}
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	compile := func(tokens int, kv gpu.KVCache) gpu.Program {
		graph, err := arch.Build(&ck.Config, arch.BuildOptions{Tokens: tokens, MaxLen: 32})
		if err != nil {
			t.Fatal(err)
		}
		p, err := be.Compile(graph, w, kv)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	n := len(g.PromptIDs)
	graph, err := arch.Build(&ck.Config, arch.BuildOptions{Tokens: 1, MaxLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	spec := graph.KV
	kv, err := be.NewKVCache(spec)
	if err != nil {
		t.Fatal(err)
	}
	one := spec
	one.MaxLen, one.Ring = 1, nil
	point, err := be.NewKVCache(one)
	if err != nil {
		t.Fatal(err)
	}
	pre, dec := compile(n, kv), compile(1, kv)
	if err := pre.Run(ctx, testmodels.IDs32(g.PromptIDs), 0); err != nil {
		t.Fatal(err)
	}
	if err := be.CopyState(point, kv); err != nil {
		t.Fatal(err)
	}
	vocab := ck.Config.VocabSize
	step := func(tok int32, pos int) []float32 {
		t.Helper()
		if err := dec.Run(ctx, []int32{tok}, pos); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, vocab)
		if _, err := dec.Logits(out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := step(int32(g.GreedyIDs[0]), n)
	step(7, n+1) // the sequence goes on: its states are past n
	if err := be.CopyState(kv, point); err != nil {
		t.Fatal(err)
	}
	if err := dec.Run(ctx, []int32{7}, n+2); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("a step past the restored position: %v, want gpu.ErrStep", err)
	}
	if again := step(int32(g.GreedyIDs[0]), n); !slices.Equal(again, first) {
		t.Errorf("the restored states decode differently: max |Δ| %g", testmodels.MaxAbsDiff(again, toF64(first)))
	}
	other := one
	other.State = slices.Clone(one.State)
	for l := range other.State {
		if other.State[l].Recurrent() {
			other.State[l].ConvWindow++
			break
		}
	}
	bad, err := be.NewKVCache(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.CopyState(bad, kv); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("copy between caches of other states: %v, want gpu.ErrStep", err)
	}
}
