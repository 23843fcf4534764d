package cpu_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/checkpoint/verify"
	"github.com/gpurun/gpurun/tensors"
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
	return qwen35RunCheckpoint(t, fused, func(ck *model.Checkpoint) {
		if edit != nil {
			edit(&ck.Config)
		}
	})
}

// qwen35RunCheckpoint is qwen35Run with the checkpoint edited by edit.
func qwen35RunCheckpoint(t *testing.T, fused bool, edit func(*model.Checkpoint)) (prompt, decode float64, departed int) {
	t.Helper()
	return arch3Run(t, "qwen35", 2, fused, edit)
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

// TestQwen35MoEEquivalence holds Qwen3.5 MoE's FFN (routed experts plus a
// shared expert scaled by a sigmoid gate, model.ArchQwen35MoE) to the
// dense golden, with no MoE golden at hand: arch3's qwen35 rewritten as a
// mixture whose 4 experts (2 used) are copies of each layer's dense FFN
// equals llama.cpp's dense logits when the shared expert's down
// projection is zero, and again when the routed experts' down projections
// are zero and the shared one is twice the dense one under a gate of zero
// weights (sigmoid(0) = 1/2): the routing renormalizes the used experts'
// weights to 1, and the gate is a sigmoid of one value per row (a shared
// expert without its gate, or with the sum of the gate's row rather than
// its sigmoid, would double or drop the FFN in the second form). The
// fused rewrite of the graph gives the same.
func TestQwen35MoEEquivalence(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shared bool
	}{{"routed experts", false}, {"shared expert", true}} {
		for _, fused := range []bool{false, true} {
			prompt, decode, departed := qwen35RunCheckpoint(t, fused, func(ck *model.Checkpoint) { toQwen35MoE(t, ck, tc.shared) })
			t.Logf("%s, fused %t: prompt logits max|Δ| %.3g, decode logits max|Δ| %.3g from the dense golden, greedy ids depart at %d", tc.name, fused, prompt, decode, departed)
			if worst := max(prompt, decode); worst > qwen35Tol || departed >= 0 {
				t.Errorf("%s, fused %t: logits differ from the dense golden by %.3g (tolerance %g), ids depart at %d", tc.name, fused, worst, qwen35Tol, departed)
			}
		}
	}
}

// toQwen35MoE rewrites the dense qwen35 checkpoint as a qwen35moe one of
// 4 experts (2 used) that copy each layer's FFN, a random router, and a
// shared expert of the FFN's gate and up rows: with shared false, the
// shared down projection is zero; with shared true, the experts' down
// projections are zero and the shared one is twice the dense one.
func toQwen35MoE(t *testing.T, ck *model.Checkpoint, shared bool) {
	t.Helper()
	c := &ck.Config
	const experts = 4
	h := c.HiddenDim
	c.Arch, c.Experts, c.ExpertsUsed, c.ExpertHidden, c.NormTopK, c.SharedExpertHidden = model.ArchQwen35MoE, experts, 2, h, true, h
	byName := map[string][]float32{}
	var kept []*tensors.Tensor
	for _, x := range ck.Tensors {
		v, err := x.Float32()
		if err != nil {
			t.Fatal(err)
		}
		byName[x.Name] = v
		switch {
		case strings.HasSuffix(x.Name, "."+model.WGate), strings.HasSuffix(x.Name, "."+model.WUp), strings.HasSuffix(x.Name, "."+model.WDown):
		default:
			kept = append(kept, x)
		}
	}
	tensor := func(name string, shape []int, vals []float32) *tensors.Tensor {
		x, err := tensors.FromF32(name, shape, vals, tensors.F32)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	stack := func(v []float32) []float32 {
		var out []float32
		for range experts {
			out = append(out, v...)
		}
		return out
	}
	scaled := func(v []float32, f float32) []float32 {
		out := make([]float32, len(v))
		for i := range v {
			out[i] = f * v[i]
		}
		return out
	}
	r := rand.New(rand.NewPCG(35, 35))
	for l := range c.Layers {
		gate, up, down := byName[model.Layer(l, model.WGate)], byName[model.Layer(l, model.WUp)], byName[model.Layer(l, model.WDown)]
		router := make([]float32, experts*c.Dim)
		for i := range router {
			router[i] = float32(r.NormFloat64())
		}
		expertDown, sharedDown := down, scaled(down, 0)
		if shared {
			expertDown, sharedDown = scaled(down, 0), scaled(down, 2)
		}
		kept = append(kept,
			tensor(model.Layer(l, model.Router), []int{experts, c.Dim}, router),
			tensor(model.Layer(l, model.ExpertsGate), []int{experts, h, c.Dim}, stack(gate)),
			tensor(model.Layer(l, model.ExpertsUp), []int{experts, h, c.Dim}, stack(up)),
			tensor(model.Layer(l, model.ExpertsDown), []int{experts, c.Dim, h}, stack(expertDown)),
			tensor(model.Layer(l, model.SharedGate), []int{h, c.Dim}, gate),
			tensor(model.Layer(l, model.SharedUp), []int{h, c.Dim}, up),
			tensor(model.Layer(l, model.SharedDown), []int{c.Dim, h}, sharedDown),
			tensor(model.Layer(l, model.SharedRouter), []int{1, c.Dim}, make([]float32, c.Dim)))
	}
	ck.Tensors = kept
	if err := verify.Complete(ck); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
