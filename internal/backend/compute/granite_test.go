package compute_test

import (
	"context"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/conformance"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// graniteTol bounds the GPU backends' logits on arch3's Granite 4.0 H
// against the CPU backend's, which reproduce llama.cpp's within 5e-6
// (internal/backend/cpu TestGraniteHybridGolden): 1e-4 leaves 20 times
// that for other summation orders and stays 65 times below the smallest
// convention effect measured on this model (arch3/README.md: RoPE applied
// to its NoPE attention, 6.5e-3).
const graniteTol = 1e-4

// TestGraniteHybridGPU runs arch3/granitehybrid.gguf (Mamba-2 layers with
// their recurrent states beside NoPE attention) on WebGPU and Vulkan as
// llama.cpp ran it (the 12 prompt ids in one step with logits at every
// position, then the 24 greedy ids one decode step each, carrying the
// convolutions' windows and the scan's matrices) and holds every logit
// to the CPU backend's within graniteTol and every step's greedy id to
// its, unfused and fused, with Granite's residual and logit multipliers
// (fusion.ScaleOps: the scale kernel); TestGraniteHybridGolden holds the
// same runs to llama.cpp's logits.
func TestGraniteHybridGPU(t *testing.T) {
	g := testmodels.Arch3(t, "granitehybrid")
	ck, err := gguf.Load(testmodels.Path(t, "arch3", "granitehybrid.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	n, vocab := len(g.PromptIDs), ck.Config.VocabSize
	want := graniteRun(t, cpuSession(t, ck, n, 64), g.PromptIDs, g.GreedyIDs, vocab)
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, fused := range []bool{false, true} {
			s := newSession(t, dev, ck, n, 64, true, fused, false, compute.Options{})
			got := graniteRun(t, s, g.PromptIDs, g.GreedyIDs, vocab)
			var worst float64
			for i := range want {
				worst = max(worst, testmodels.MaxAbsDiff(got[i], toF64(want[i])))
				if a, b := testmodels.Argmax(got[i]), testmodels.Argmax(want[i]); a != b {
					t.Errorf("fused %t: row %d's greedy id %d, the CPU's %d", fused, i, a, b)
				}
			}
			t.Logf("fused %t: logits max|Δ| %.3g from the CPU backend's over the prompt and 24 decode steps", fused, worst)
			if worst > graniteTol {
				t.Errorf("fused %t: logits %.3g from the CPU backend's, tolerance %g", fused, worst, graniteTol)
			}
		}
		graniteBatched(t, dev, ck, g.PromptIDs, g.GreedyIDs, want)
	})
}

// graniteBatched runs batched rounds of two sequences on dev (each row its
// own sequence's states, the Mamba-2 kernels dispatched per row):
// sequence 0 decodes from the prompt's end, sequence 1 runs the prompt's
// last two ids first and idles a round; every row's logits within
// graniteTol of the CPU's at its position (want: rows of graniteRun).
func graniteBatched(t *testing.T, dev gpu.Device, ck *model.Checkpoint, prompt, ids []int, want [][]float32) {
	t.Helper()
	ctx := context.Background()
	be := backendOn(t, dev, compute.Options{})
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	const maxLen = 64
	n, vocab := len(prompt), ck.Config.VocabSize
	build := func(o arch.BuildOptions) *fusion.Graph {
		o.MaxLen = maxLen
		g, err := arch.Build(&ck.Config, o)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	var kvs []gpu.KVCache
	for s, m := range []int{n, n - 2} {
		kv, err := be.NewKVCache(build(arch.BuildOptions{Tokens: 1}).KV)
		if err != nil {
			t.Fatal(err)
		}
		defer kv.Release()
		p, err := be.Compile(build(arch.BuildOptions{Tokens: m}), w, kv)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(ctx, testmodels.IDs32(prompt[:m]), 0); err != nil {
			t.Fatalf("sequence %d: %v", s, err)
		}
		p.Release()
		kvs = append(kvs, kv)
	}
	bp, err := be.CompileBatch(build(arch.BuildOptions{Tokens: 2, Batch: true}), w, kvs)
	if err != nil {
		t.Fatal(err)
	}
	defer bp.Release()
	token := func(p int) int32 {
		if p < n {
			return int32(prompt[p])
		}
		return int32(ids[p-n])
	}
	pos := []int{n, n - 2}
	logits := make([]float32, 2*vocab)
	for round := range 8 {
		var rows []gpu.Row
		for s := range 2 {
			if round == 3 && s == 1 {
				continue // sequence 1 idles: its states must stay
			}
			rows = append(rows, gpu.Row{Token: token(pos[s]), Pos: pos[s], Seq: s})
		}
		if err := bp.RunBatch(ctx, rows); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if _, err := bp.Logits(logits); err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			if d := testmodels.MaxAbsDiff(logits[i*vocab:(i+1)*vocab], toF64(want[r.Pos])); d > graniteTol {
				t.Errorf("round %d: sequence %d at %d: logits %.3g from the CPU's", round, r.Seq, r.Pos, d)
			}
			pos[r.Seq]++
		}
	}
}

// cpuSession is newSession on the CPU backend.
func cpuSession(t *testing.T, ck *model.Checkpoint, prefillLen, maxLen int) *session {
	t.Helper()
	ctx := context.Background()
	be := cpu.New(cpu.Options{Threads: 1})
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := be.NewKVCache(arch.KVSpec(&ck.Config, arch.BuildOptions{MaxLen: maxLen}))
	if err != nil {
		t.Fatal(err)
	}
	s := &session{vocab: ck.Config.VocabSize}
	for _, spec := range []struct {
		tokens int
		all    bool
		dst    *gpu.Program
	}{{prefillLen, true, &s.prefill}, {1, false, &s.decode}} {
		g, err := arch.Build(&ck.Config, arch.BuildOptions{Tokens: spec.tokens, MaxLen: maxLen, AllLogits: spec.all})
		if err != nil {
			t.Fatal(err)
		}
		if *spec.dst, err = be.Compile(g, w, kv); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// graniteRun runs the prompt in one step (logits at every position), then
// each of ids one decode step, and returns every row of logits.
func graniteRun(t *testing.T, s *session, prompt, ids []int, vocab int) [][]float32 {
	t.Helper()
	ctx := context.Background()
	n := len(prompt)
	if err := s.prefill.Run(ctx, testmodels.IDs32(prompt), 0); err != nil {
		t.Fatal(err)
	}
	all := make([]float32, n*vocab)
	if _, err := s.prefill.Logits(all); err != nil {
		t.Fatal(err)
	}
	var rows [][]float32
	for p := range n {
		rows = append(rows, all[p*vocab:(p+1)*vocab])
	}
	for step, id := range ids {
		if err := s.decode.Run(ctx, []int32{int32(id)}, n+step); err != nil {
			t.Fatal(err)
		}
		l := make([]float32, vocab)
		if _, err := s.decode.Logits(l); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, l)
	}
	return rows
}

// TestMamba2Conformance runs the Mamba-2 mixer's parity cases
// (conformance.Mamba2Cases: the window and matrices carried across prefill
// chunks and decode steps, reset at position 0, channel and row counts
// around the workgroups, f32, f16 and bf16 taps) against
// internal/backend/cpu on WebGPU and Vulkan.
func TestMamba2Conformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		conformance.RunCases(t, conformance.Mamba2Cases(), func(t testing.TB) gpu.Backend {
			return sharedBackend{backendOn(t, dev, compute.Options{})}
		})
	})
}

func toF64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// TestGraniteHybridGolden: Granite 4.0 H whole (its Mamba-2 mixers, NoPE
// attention with attention.scale, and the embedding, residual and logit
// multipliers, the last two through the scale kernel) on WebGPU and
// Vulkan gives llama.cpp's prompt and decode logits within lfm2Tol (the
// CPU's tolerance for arch3's hybrids, 1e-4: the smallest convention
// effect here, RoPE applied, is 6.5e-3) and its greedy ids.
func TestGraniteHybridGolden(t *testing.T) {
	path := testmodels.Path(t, "arch3", "granitehybrid.gguf")
	golden := testmodels.Arch3(t, "granitehybrid").ArchGolden
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		t.Run("granitehybrid", func(t *testing.T) { archGoldenCase(t, dev, path, golden, lfm2Tol, false, compute.Options{}) })
		t.Run("granitehybrid_fused", func(t *testing.T) { archGoldenCase(t, dev, path, golden, lfm2Tol, true, compute.Options{}) })
	})
}
