package cpu_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// kvPrompt is the prompt of the quantized-cache goldens (arch2's).
var kvPrompt = []int{160, 483, 357, 185, 71, 402, 205, 303, 318, 152, 189, 472}

// kvRun is one run of a GGUF with a cache of types k and v (noRot: the
// rotation skipped) as testdata/kvquant's goldens were made: the prompt in
// one step with every row's logits, then one decode step per id of
// follow (the reference's greedy ids). It returns the prompt's rows of
// logits, the logits after each decode step, and the greedy id before each
// step.
func kvRun(t *testing.T, path string, k, v fusion.KVType, noRot bool, follow []int) (prompt [][]float32, decode [][]float32, greedy []int) {
	t.Helper()
	ck, err := gguf.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	be := cpu.New(cpu.Options{Threads: 2})
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	n := len(kvPrompt)
	opts := arch.BuildOptions{MaxLen: n + len(follow) + 1, CacheK: k, CacheV: v}
	var kv interface{ Release() }
	_ = kv
	build := func(tokens int, all bool) *fusion.Graph {
		o := opts
		o.Tokens, o.AllLogits = tokens, all
		g, err := arch.Build(&ck.Config, o)
		if err != nil {
			t.Fatal(err)
		}
		g.KV.NoRotation = noRot
		return g
	}
	pg, dg := build(n, true), build(1, false)
	cache, err := be.NewKVCache(pg.KV)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := be.Compile(pg, w, cache)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := be.Compile(dg, w, cache)
	if err != nil {
		t.Fatal(err)
	}
	if err := pre.Run(ctx, testmodels.IDs32(kvPrompt), 0); err != nil {
		t.Fatal(err)
	}
	vocab := ck.Config.VocabSize
	all := make([]float32, n*vocab)
	if _, err := pre.Logits(all); err != nil {
		t.Fatal(err)
	}
	for p := range n {
		prompt = append(prompt, all[p*vocab:(p+1)*vocab])
	}
	last := prompt[n-1]
	for step, id := range follow {
		greedy = append(greedy, testmodels.Argmax(last))
		if err := dec.Run(ctx, []int32{int32(id)}, n+step); err != nil {
			t.Fatal(err)
		}
		last = make([]float32, vocab)
		if _, err := dec.Logits(last); err != nil {
			t.Fatal(err)
		}
		decode = append(decode, last)
	}
	return prompt, decode, greedy
}

func maxDiff32(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// kvGolden is one of testdata/kvquant's llama.cpp runs (README.md there).
type kvGolden struct {
	TypeK            string      `json:"type_k"`
	TypeV            string      `json:"type_v"`
	RotationDisabled bool        `json:"rotation_disabled"`
	PromptIDs        []int       `json:"prompt_ids"`
	PromptRows       []int       `json:"prompt_rows"`
	PromptLogits     [][]float64 `json:"prompt_logits"`
	GreedyIDs        []int       `json:"greedy_ids"`
	GreedyMargins    []float64   `json:"greedy_margins"`
	DecodeSteps      []int       `json:"decode_steps"`
	DecodeLogits     [][]float64 `json:"decode_logits"`
}

// kvGoldenRun runs the model of a golden with its cache types (the
// rotation skipped with noRot) following its greedy ids, and returns the
// largest |Δlogit| over its recorded rows and the greedy steps (where
// llama.cpp's top two logits are more than 0.05 apart) whose argmax
// differs.
func kvGoldenRun(t *testing.T, model, golden string, noRot bool) (diff float64, departed []int) {
	t.Helper()
	var g kvGolden
	testmodels.DecodeJSON(t, "testdata/kvquant/"+golden, &g)
	k, _, err := fusion.ParseKVType(g.TypeK)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := fusion.ParseKVType(g.TypeV)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.PromptIDs, kvPrompt) {
		t.Fatalf("%s: prompt %v, want %v", golden, g.PromptIDs, kvPrompt)
	}
	prompt, decode, greedy := kvRun(t, model, k, v, noRot, g.GreedyIDs)
	for i, r := range g.PromptRows {
		diff = max(diff, testmodels.MaxAbsDiff(prompt[r], g.PromptLogits[i]))
	}
	for i, s := range g.DecodeSteps {
		diff = max(diff, testmodels.MaxAbsDiff(decode[s], g.DecodeLogits[i]))
	}
	for s, id := range g.GreedyIDs {
		if greedy[s] != id && g.GreedyMargins[s] > 0.05 {
			departed = append(departed, s)
		}
	}
	return diff, departed
}

// TestKVQuantGoldens holds each quantized cache type to llama.cpp's logits
// with the same -ctk/-ctv (testdata/kvquant: llama.cpp 81ff7abe5, CPU,
// flash attention): a tiny Qwen3 of head dim 128, whose quantized caches
// llama.cpp rotates (keys by H_128, values by H_64), and arch2's Qwen3 of
// head dim 32, which it does not rotate. The prompt's rows and three
// decode steps' logits within 5e-3 (the f32 cache: 1e-4; measured: q4_0
// 6e-5, q8_0 4e-4, q4_1 2.9e-3, logits of magnitude ~10: a value at a
// rounding edge quantized to the other level where the f32 arithmetic
// before the store differs in its last bits), the 64 greedy ids equal
// wherever llama.cpp's top two are 0.05 apart.
//
// The ablation: skipping the rotation, or rotating the keys with H_64 (the
// values' matrix) rather than H_128, misses llama.cpp's q4_0 logits by
// over 500 times the tolerance; and the unrotated run is held to llama.cpp's
// own run with the rotation disabled (LLAMA_ATTN_ROT_DISABLE), which it
// matches as closely as the rotated one does.
func TestKVQuantGoldens(t *testing.T) {
	const rot = "testdata/kvquant/kvrot-qwen3.gguf"
	arch2 := testmodels.Path(t, "arch2", "qwen3.gguf")
	cases := []struct {
		model, golden string
		tol           float64
	}{
		{rot, "kvrot-qwen3.f32-f32.json", 1e-4},
		{rot, "kvrot-qwen3.q8_0-q8_0.json", 5e-3},
		{rot, "kvrot-qwen3.q4_0-q4_0.json", 5e-3},
		{rot, "kvrot-qwen3.q4_1-q4_1.json", 5e-3},
		{rot, "kvrot-qwen3.q5_0-q5_0.json", 5e-3},
		{rot, "kvrot-qwen3.q5_1-q5_1.json", 5e-3},
		{rot, "kvrot-qwen3.iq4_nl-iq4_nl.json", 5e-3},
		{rot, "kvrot-qwen3.q8_0-q4_0.json", 5e-3},
		{arch2, "qwen3.q8_0-q8_0.json", 5e-3},
		{arch2, "qwen3.q4_0-q4_0.json", 5e-3},
	}
	for _, c := range cases {
		d, dep := kvGoldenRun(t, c.model, c.golden, false)
		t.Logf("%s: max |Δlogit| %.3g, greedy departures %v", c.golden, d, dep)
		if d > c.tol || len(dep) > 0 {
			t.Errorf("%s: max |Δlogit| %.3g (tolerance %g), greedy departures at steps %v", c.golden, d, c.tol, dep)
		}
	}
	d, _ := kvGoldenRun(t, rot, "kvrot-qwen3.q4_0-q4_0.norot.json", true)
	t.Logf("unrotated vs llama.cpp unrotated: %.3g", d)
	if d > 5e-3 {
		t.Errorf("q4_0 without the rotation: %.3g from llama.cpp's run with LLAMA_ATTN_ROT_DISABLE (tolerance 5e-3)", d)
	}
	d, _ = kvGoldenRun(t, rot, "kvrot-qwen3.q4_0-q4_0.json", true)
	t.Logf("unrotated vs llama.cpp rotated: %.3g", d)
	if d < 2.5 {
		t.Errorf("q4_0 without the rotation: %.3g from llama.cpp's rotated run, want > 2.5 (500 times the tolerance)", d)
	}
	cpu.SetKVRotationAblation(64)
	defer cpu.SetKVRotationAblation(0)
	d, _ = kvGoldenRun(t, rot, "kvrot-qwen3.q4_0-q4_0.json", false)
	t.Logf("keys rotated by H_64 vs llama.cpp's H_128: %.3g", d)
	if d < 2.5 {
		t.Errorf("q4_0 with the keys rotated by H_64: %.3g from llama.cpp's run, want > 2.5 (500 times the tolerance)", d)
	}
}

// TestKVQuantRingAndCopy holds a quantized, rotated cache (q4_0 keys, q5_1
// values, head dim 128) to the contracts the float caches keep: a
// sliding layer on a ring gives the logits of a full cache, and a cache
// copied (the prefix cache's CopyKV) continues as the original does, both
// bit for bit.
func TestKVQuantRingAndCopy(t *testing.T) {
	ck, err := gguf.Load("testdata/kvquant/kvrot-qwen3.gguf")
	if err != nil {
		t.Fatal(err)
	}
	ck.Config.SlidingWindow, ck.Config.SlidingLayers = 8, "even"
	ctx := context.Background()
	be := cpu.New(cpu.Options{Threads: 2})
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	n, vocab := len(kvPrompt), ck.Config.VocabSize
	follow := []int{5, 300, 77, 12, 480, 9, 100, 250, 33, 64, 128, 7}
	// run prefills the prompt into a new cache (a ring where ringTokens >
	// 0), optionally copies it into another, then decodes follow.
	run := func(ringTokens int, copyKV bool) (logits []float32) {
		opts := arch.BuildOptions{MaxLen: 64, RingTokens: ringTokens, CacheK: fusion.KVQ4_0, CacheV: fusion.KVQ5_1}
		build := func(tokens int) *fusion.Graph {
			o := opts
			o.Tokens = tokens
			g, err := arch.Build(&ck.Config, o)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		pg, dg := build(n), build(1)
		if (pg.KV.Ring != nil) != (ringTokens > 0) || pg.KV.KRotation(0) != 128 || pg.KV.VRotation(0) != 64 || pg.KV.KRotation(1) != 128 {
			t.Fatalf("spec %+v: want a ring %v, rotations 128 and 64", pg.KV, ringTokens > 0)
		}
		kv, err := be.NewKVCache(pg.KV)
		if err != nil {
			t.Fatal(err)
		}
		pre, err := be.Compile(pg, w, kv)
		if err != nil {
			t.Fatal(err)
		}
		if err := pre.Run(ctx, testmodels.IDs32(kvPrompt), 0); err != nil {
			t.Fatal(err)
		}
		if copyKV {
			dst, err := be.NewKVCache(pg.KV)
			if err != nil {
				t.Fatal(err)
			}
			if err := be.CopyKV(dst, kv, n); err != nil {
				t.Fatal(err)
			}
			kv = dst
		}
		dec, err := be.Compile(dg, w, kv)
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range follow {
			if err := dec.Run(ctx, []int32{int32(id)}, n+i); err != nil {
				t.Fatal(err)
			}
			row := make([]float32, vocab)
			if _, err := dec.Logits(row); err != nil {
				t.Fatal(err)
			}
			logits = append(logits, row...)
		}
		return logits
	}
	full := run(0, false)
	for _, c := range []struct {
		name string
		ring int
		copy bool
	}{{"ring", n, false}, {"copy", 0, true}, {"ring copy", n, true}} {
		got := run(c.ring, c.copy)
		for i := range full {
			if math.Float32bits(got[i]) != math.Float32bits(full[i]) {
				t.Errorf("%s: logit %d of step %d is %g, the full cache's %g", c.name, i%vocab, i/vocab, got[i], full[i])
				break
			}
		}
	}
}
