package cpu_test

import (
	"context"
	"testing"

	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// qwen35Tol is the tolerance of the arch3 Qwen3.5 golden: llama.cpp's
// logits are printed to 6 significant digits (up to 5e-6 of rounding) and
// an independent float64 pass reproduces them within 2.8e-6
// (arch3/README.md); the smallest convention effect measured there (the
// attention output gate zeroed) is 2.4e-2. 1e-4 leaves 20x room for f32
// summation order (the chunked and recurrent forms of the delta rule sum
// in different orders) and stays 240x below that effect; the README's
// suggested 1e-3 would also hold.
const qwen35Tol = 1e-4

// qwen35Run runs the arch3 Qwen3.5 model (cfg edited by edit, when set)
// as llama.cpp did: the 12 prompt ids in one step with logits at every
// position (the chunked delta rule), then the 24 greedy ids one decode
// step each (the recurrent form), following the reference's ids. It
// returns the largest |Δlogit| of the prompt and of the decode steps, and
// the first step whose greedy id differs (-1: none).
func qwen35Run(t *testing.T, fused bool, edit func(*model.Config)) (prompt, decode float64, departed int) {
	t.Helper()
	g := testmodels.Arch3(t, "qwen35")
	ck, err := gguf.Load(testmodels.Path(t, "arch3", "qwen35.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&ck.Config)
	}
	ctx := context.Background()
	be := cpu.New(cpu.Options{Threads: 2})
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	const maxLen = 64
	n := len(g.PromptIDs)
	compile := testmodels.Compiler(t, be, w, &ck.Config, arch.BuildOptions{MaxLen: maxLen}, fused)
	pre, dec := compile(n, true), compile(1, false)
	if err := pre.Run(ctx, testmodels.IDs32(g.PromptIDs), 0); err != nil {
		t.Fatal(err)
	}
	vocab := ck.Config.VocabSize
	all := make([]float32, n*vocab)
	if _, err := pre.Logits(all); err != nil {
		t.Fatal(err)
	}
	for p := range n {
		prompt = max(prompt, testmodels.MaxAbsDiff(all[p*vocab:(p+1)*vocab], g.Logits[p]))
	}
	logits := all[(n-1)*vocab:]
	departed = -1
	for step, want := range g.GreedyIDs {
		decode = max(decode, testmodels.MaxAbsDiff(logits, g.GreedyLogits[step]))
		if testmodels.Argmax(logits) != want && departed < 0 {
			departed = step
		}
		if err := dec.Run(ctx, []int32{int32(want)}, n+step); err != nil {
			t.Fatal(err)
		}
		logits = make([]float32, vocab)
		if _, err := dec.Logits(logits); err != nil {
			t.Fatal(err)
		}
	}
	return prompt, decode, departed
}

// TestQwen35Golden holds the CPU backend's Qwen3.5 (Gated DeltaNet layers
// beside gated attention, arch3/qwen35.gguf) to llama.cpp 81ff7abe5: the
// 24 greedy ids equal, prompt and decode logits within qwen35Tol, from the
// graph as built and from its fused rewrite, and with chunks of 5 rows so
// that the 12-row prompt spans three chunks, the last partial.
func TestQwen35Golden(t *testing.T) {
	for _, tc := range []struct {
		fused bool
		chunk int
	}{{false, 64}, {true, 64}, {false, 5}} {
		old := cpu.SetDeltaChunk(tc.chunk)
		prompt, decode, departed := qwen35Run(t, tc.fused, nil)
		cpu.SetDeltaChunk(old)
		t.Logf("fused %t, chunk %d: prompt logits max|Δ| %.3g, decode logits max|Δ| %.3g, greedy ids depart at step %d (-1: never)", tc.fused, tc.chunk, prompt, decode, departed)
		if prompt > qwen35Tol || decode > qwen35Tol {
			t.Errorf("fused %t, chunk %d: logits differ from llama.cpp by %.3g (prompt) / %.3g (decode), tolerance %g", tc.fused, tc.chunk, prompt, decode, qwen35Tol)
		}
		if departed >= 0 {
			t.Errorf("fused %t, chunk %d: greedy id at step %d differs from llama.cpp", tc.fused, tc.chunk, departed)
		}
	}
}

// TestQwen35Ablations shows the golden pins each convention: the state
// not carried between steps (only the decode steps read it), the
// convolution window off by one position, the value heads paired with key
// heads in HF's grouped order, the attention output gate dropped, and the
// wrong RoPE (every dim of the head rotated; pairs interleaved rather than
// NEOX halves) each move the logits at least 10x the tolerance.
func TestQwen35Ablations(t *testing.T) {
	defer cpu.SetDeltaAblation(cpu.DeltaExact)
	for _, tc := range []struct {
		name string
		a    cpu.DeltaAblation
		edit func(*model.Config)
	}{
		{"state not carried", cpu.DeltaForgetState, nil},
		{"window off by one", cpu.DeltaShiftWindow, nil},
		{"grouped head pairing", cpu.DeltaGroupedHeads, nil},
		{"output gate dropped", cpu.DeltaNoOutputGate, nil},
		{"rotary over the whole head", cpu.DeltaExact, func(c *model.Config) { c.RopeDims = c.HeadDim }},
		{"interleaved rotary pairs", cpu.DeltaExact, func(c *model.Config) { c.RopeStyle = model.RopeInterleaved }},
	} {
		cpu.SetDeltaAblation(tc.a)
		prompt, decode, _ := qwen35Run(t, false, tc.edit)
		cpu.SetDeltaAblation(cpu.DeltaExact)
		t.Logf("%s: prompt logits max|Δ| %.3g, decode logits max|Δ| %.3g", tc.name, prompt, decode)
		if worst := max(prompt, decode); worst < 10*qwen35Tol {
			t.Errorf("%s: logits move only %.3g, not past 10x the tolerance %g", tc.name, worst, qwen35Tol)
		}
	}
}
