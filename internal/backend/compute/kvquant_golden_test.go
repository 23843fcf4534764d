package compute_test

import (
	"context"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// kvGoldenDir holds the CPU backend's quantized-cache goldens (llama.cpp
// 81ff7abe5 with -ctk/-ctv; its README says how they were made).
const kvGoldenDir = "../cpu/testdata/kvquant/"

// kvGolden is the part of a golden file these tests read.
type kvGolden struct {
	TypeK         string      `json:"type_k"`
	TypeV         string      `json:"type_v"`
	PromptIDs     []int       `json:"prompt_ids"`
	PromptRows    []int       `json:"prompt_rows"`
	PromptLogits  [][]float64 `json:"prompt_logits"`
	GreedyIDs     []int       `json:"greedy_ids"`
	GreedyMargins []float64   `json:"greedy_margins"`
	DecodeSteps   []int       `json:"decode_steps"`
	DecodeLogits  [][]float64 `json:"decode_logits"`
}

// TestKVQuantGoldens holds the block caches of WebGPU and Vulkan to
// llama.cpp's logits with the same -ctk/-ctv, at the CPU backend's
// tolerance (its TestKVQuantGoldens: 5e-3): the head-dim-128 Qwen3 whose
// caches llama.cpp rotates (keys by H_128, values by H_64), and arch2's
// Qwen3 of head dim 32, not rotated: the prompt in one step with every
// row's logits, then a decode step per greedy id of llama.cpp's, whose
// ids must be the GPU's wherever llama.cpp's top two are 0.05 apart
// (measured on lavapipe and SwiftShader, the CPU's figures: q8_0 4.3e-4,
// q4_0 5.4e-5, q8_0/q4_0 2.9e-3, q4_1 2.9e-3, q5_0 5.4e-4, q5_1 1.5e-3,
// iq4_nl 2.5e-4; arch2 6e-7).
func TestKVQuantGoldens(t *testing.T) {
	cases := []struct{ model, golden string }{
		{kvGoldenDir + "kvrot-qwen3.gguf", "kvrot-qwen3.q8_0-q8_0.json"},
		{kvGoldenDir + "kvrot-qwen3.gguf", "kvrot-qwen3.q4_0-q4_0.json"},
		{kvGoldenDir + "kvrot-qwen3.gguf", "kvrot-qwen3.q8_0-q4_0.json"},
		{kvGoldenDir + "kvrot-qwen3.gguf", "kvrot-qwen3.q4_1-q4_1.json"},
		{kvGoldenDir + "kvrot-qwen3.gguf", "kvrot-qwen3.q5_0-q5_0.json"},
		{kvGoldenDir + "kvrot-qwen3.gguf", "kvrot-qwen3.q5_1-q5_1.json"},
		{kvGoldenDir + "kvrot-qwen3.gguf", "kvrot-qwen3.iq4_nl-iq4_nl.json"},
		{testmodels.Path(t, "arch2", "qwen3.gguf"), "qwen3.q8_0-q8_0.json"},
		{testmodels.Path(t, "arch2", "qwen3.gguf"), "qwen3.q4_0-q4_0.json"},
	}
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		be := backendOn(t, dev, compute.Options{})
		for _, c := range cases {
			t.Run(c.golden, func(t *testing.T) {
				d, dep := kvGoldenRun(t, be, c.model, c.golden)
				t.Logf("max |Δlogit| %.3g, greedy departures %v", d, dep)
				if d > 5e-3 || len(dep) > 0 {
					t.Errorf("max |Δlogit| %.3g (tolerance 5e-3), greedy departures at steps %v", d, dep)
				}
			})
		}
	})
}

// kvGoldenRun runs model on be with the golden's cache types following its
// greedy ids and returns the largest |Δlogit| over its recorded rows and
// the greedy steps (llama.cpp's top two over 0.05 apart) whose argmax
// differs.
func kvGoldenRun(t *testing.T, be gpu.Backend, model, golden string) (diff float64, departed []int) {
	t.Helper()
	var g kvGolden
	testmodels.DecodeJSON(t, kvGoldenDir+golden, &g)
	k, _, err := fusion.ParseKVType(g.TypeK)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := fusion.ParseKVType(g.TypeV)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := gguf.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	n := len(g.PromptIDs)
	build := func(tokens int, all bool) *fusion.Graph {
		gr, err := arch.Build(&ck.Config, arch.BuildOptions{MaxLen: n + len(g.GreedyIDs) + 1, CacheK: k, CacheV: v, Tokens: tokens, AllLogits: all})
		if err != nil {
			t.Fatal(err)
		}
		return gr
	}
	pg, dg := build(n, true), build(1, false)
	cache, err := be.NewKVCache(pg.KV)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Release()
	pre, err := be.Compile(pg, w, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer pre.Release()
	dec, err := be.Compile(dg, w, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Release()
	if err := pre.Run(ctx, testmodels.IDs32(g.PromptIDs), 0); err != nil {
		t.Fatal(err)
	}
	vocab := ck.Config.VocabSize
	all := make([]float32, n*vocab)
	if _, err := pre.Logits(all); err != nil {
		t.Fatal(err)
	}
	for i, r := range g.PromptRows {
		diff = max(diff, testmodels.MaxAbsDiff(all[r*vocab:(r+1)*vocab], g.PromptLogits[i]))
	}
	last := all[(n-1)*vocab:]
	for s, id := range g.GreedyIDs {
		if testmodels.Argmax(last) != id && g.GreedyMargins[s] > 0.05 {
			departed = append(departed, s)
		}
		if err := dec.Run(ctx, []int32{int32(id)}, n+s); err != nil {
			t.Fatal(err)
		}
		last = make([]float32, vocab)
		if _, err := dec.Logits(last); err != nil {
			t.Fatal(err)
		}
		if i := slices.Index(g.DecodeSteps, s); i >= 0 {
			diff = max(diff, testmodels.MaxAbsDiff(last, g.DecodeLogits[i]))
		}
	}
	return diff, departed
}
