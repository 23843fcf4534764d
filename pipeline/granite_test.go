package pipeline_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
	"github.com/gpurun/gpurun/tensors/model"
)

// graniteHybrid loads arch3's Granite 4.0 H (Mamba-2 layers with recurrent
// states beside NoPE attention) and its llama.cpp golden.
func graniteHybrid(t *testing.T) (*model.Checkpoint, testmodels.ArchGolden) {
	t.Helper()
	ck, err := gguf.Load(testmodels.Path(t, "arch3", "granitehybrid.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	return ck, testmodels.Arch3(t, "granitehybrid").ArchGolden
}

// TestGraniteHybridGeneration: a plain session and two sessions in batched
// rounds (each row its own sequence's Mamba-2 state) give llama.cpp's 24
// greedy ids; speculative decoding by prompt lookup gives the ids of plain
// decoding. The model declares a context of 2^20 positions (Granite's
// converter writes that for NoPE models); without MaxCache the cache holds
// DefaultMaxCache positions, not the model's context.
func TestGraniteHybridGeneration(t *testing.T) {
	ck, g := graniteHybrid(t)
	if ck.Config.MaxSeqLen != 1<<20 {
		t.Fatalf("context length %d, want the file's 2^20", ck.Config.MaxSeqLen)
	}
	greedy := pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs), IgnoreStopTokens: true}
	prompt := pipeline.Prompt{IDs: g.PromptIDs}
	m := load(t, ck, pipeline.Options{})
	if m.MaxCache() != pipeline.DefaultMaxCache {
		t.Errorf("max cache %d positions, want the default %d (not the model's context)", m.MaxCache(), pipeline.DefaultMaxCache)
	}
	if got := collect(t, m.NewSession(), prompt, greedy); !slices.Equal(got, g.GreedyIDs) {
		t.Errorf("greedy ids\n got %v\nwant %v (llama.cpp)", got, g.GreedyIDs)
	}
	// Sampled from the prompt twice, with speculation by prompt lookup
	// (whose drafts a verifier could not roll the states back from): the
	// ids of plain decoding.
	sampled := pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs), IgnoreStopTokens: true, Temperature: 2, Seed: 7}
	twice := pipeline.Prompt{IDs: append(slices.Clone(g.PromptIDs), g.PromptIDs...)}
	want := collect(t, m.NewSession(), twice, sampled)
	sampled.Speculation = &pipeline.Speculation{Lookup: 3}
	if got := collect(t, m.NewSession(), twice, sampled); !slices.Equal(got, want) {
		t.Errorf("speculative (lookup): ids\n got %v\nwant %v (plain decoding)", got, want)
	}

	mb := load(t, ck, pipeline.Options{MaxCache: 64, Slots: 2}.WithTuning(tuning.Options{AlwaysBatch: true}))
	var wg sync.WaitGroup
	got := make([][]int, 2)
	for i := range got {
		wg.Go(func() { got[i] = collect(t, mb.NewSession(), prompt, greedy) })
	}
	wg.Wait()
	for i, ids := range got {
		if !slices.Equal(ids, g.GreedyIDs) {
			t.Errorf("batched session %d: ids\n got %v\nwant %v", i, ids, g.GreedyIDs)
		}
	}
	if rounds, _ := pipeline.BatchStats(mb); rounds == 0 {
		t.Error("no batched round ran")
	}
}

// TestGraniteHybridTurns: a five-turn conversation on Granite 4.0 H
// carries its Mamba-2 states (conv windows and state matrices) from turn
// to turn (hybridTurns).
func TestGraniteHybridTurns(t *testing.T) {
	ck, g := graniteHybrid(t)
	hybridTurns(t, ck, g.PromptIDs, nil)
}

// hybridTurns checks a hybrid model's five-turn conversation: each turn
// prefills only its new tokens (its prompt and the last token generated
// before it, which no step ran), and its ids equal those of a fresh
// session given the whole conversation at once, sampled at a high
// temperature (the greedy ids of arch3's random weights repeat one
// token). A context departing from the slot's right after the first
// prompt resumes at the state checkpoint taken before that prompt's last
// token (pipeline/checkpoint.go), with a fresh model's ids. Every model
// runs on a backend from backend (nil: the CPU backend's).
func hybridTurns(t *testing.T, ck *model.Checkpoint, prompt []int, backend func() gpu.Backend) {
	t.Helper()
	opts := pipeline.GenerateOptions{MaxTokens: 4, IgnoreStopTokens: true, Temperature: 1.5, Seed: 3}
	newModel := func() *pipeline.Model {
		o := pipeline.Options{MaxCache: 128}
		if backend != nil {
			o.Backend = backend()
		}
		return load(t, ck, o)
	}
	m := newModel()
	fresh := func(ctx []int) []int {
		return collect(t, newModel().NewSession(), pipeline.Prompt{IDs: ctx}, opts)
	}
	s := m.NewSession()
	turns := [][]int{prompt, {300, 301, 302}, {17, 400}, {88, 89, 90, 91}, {5}}
	for i, ids := range turns {
		before := s.History()
		got := collect(t, s, pipeline.Prompt{IDs: ids}, opts)
		want := len(ids)
		if i > 0 {
			want++ // the previous turn's last token
		}
		if n := s.Metrics().PrefillTokens; n != want {
			t.Errorf("turn %d: prefilled %d tokens, want %d (its new ones)", i, n, want)
		}
		whole := fresh(append(before, ids...))
		if !slices.Equal(got, whole) {
			t.Errorf("turn %d: ids %v, a fresh session on the whole conversation gives %v", i, got, whole)
		}
	}
	ctx := s.History()
	ctx[len(prompt)] ^= 1
	s2 := m.NewSession()
	got := collect(t, s2, pipeline.Prompt{IDs: ctx}, opts)
	if n, want := s2.Metrics().PrefillTokens, len(ctx)-(len(prompt)-1); n != want {
		t.Errorf("diverging context: prefilled %d tokens, want %d (from the checkpoint at %d)", n, want, len(prompt)-1)
	}
	if want := fresh(ctx); !slices.Equal(got, want) {
		t.Errorf("diverging context: ids %v, a fresh model gives %v", got, want)
	}
}

// TestGraniteHybridGPU: Granite 4.0 H through the pipeline on WebGPU and
// Vulkan (the Mamba-2 kernels, their states in the caches) gives the CPU
// backend's ids: a plain session's greedy ids, two sessions' in batched
// rounds, and a five-turn conversation that prefills only each turn's new
// tokens; internal/backend/compute's TestGraniteHybridGPU and
// TestGraniteHybridGolden hold the logits.
func TestGraniteHybridGPU(t *testing.T) {
	ck, g := graniteHybrid(t)
	greedy := pipeline.GenerateOptions{MaxTokens: 8, IgnoreStopTokens: true}
	turns := [][]int{g.PromptIDs, {300, 301, 302}, {17, 400}, {88, 89, 90, 91}, {5}}
	run := func(m *pipeline.Model) (ids [][]int, prefilled []int) {
		ids = append(ids, collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, greedy))
		s := m.NewSession()
		for _, turn := range turns {
			ids = append(ids, collect(t, s, pipeline.Prompt{IDs: turn}, pipeline.GenerateOptions{MaxTokens: 3, IgnoreStopTokens: true}))
			prefilled = append(prefilled, s.Metrics().PrefillTokens)
		}
		return ids, prefilled
	}
	want, wantPre := run(load(t, ck, pipeline.Options{MaxCache: 64}))
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			got, pre := run(load(t, ck, pipeline.Options{Backend: openBackend(t, backend), MaxCache: 64}))
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("run %d: ids %v, the CPU's %v", i, got[i], want[i])
				}
			}
			if !slices.Equal(pre, wantPre) {
				t.Errorf("tokens prefilled per turn %v, the CPU's %v", pre, wantPre)
			}
			// Two sessions in batched rounds: each row its sequence's
			// states (the kernels dispatched once per row).
			mb := load(t, ck, pipeline.Options{Backend: openBackend(t, backend), MaxCache: 64, Slots: 2}.WithTuning(tuning.Options{AlwaysBatch: true}))
			var wg sync.WaitGroup
			ids := make([][]int, 2)
			for i := range ids {
				wg.Go(func() { ids[i] = collect(t, mb.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, greedy) })
			}
			wg.Wait()
			for i, got := range ids {
				if !slices.Equal(got, want[0]) {
					t.Errorf("batched session %d: ids %v, the CPU's %v", i, got, want[0])
				}
			}
			if rounds, _ := pipeline.BatchStats(mb); rounds == 0 {
				t.Error("no batched round ran")
			}
		})
	}
}

// TestGraniteHybridPrefixCache: the prefix cache on Granite 4.0 H serves
// an entry whose every token the new context extends (its Mamba-2 states,
// window and matrices, hold the entry's end), reporting those tokens
// cached, with the ids of a model without a prefix cache; an entry the
// context only partly shares serves its state checkpoint within the
// shared part (taken before the first prompt's last token). (The sampled ids of these
// random weights follow the convolution windows closely but hardly the
// state matrices, whose share of the logits is about 1e-2:
// internal/backend/cpu's TestGraniteHybridStateCache holds their copies
// bit for bit.)
func TestGraniteHybridPrefixCache(t *testing.T) {
	ck, g := graniteHybrid(t)
	opts := pipeline.GenerateOptions{MaxTokens: 6, IgnoreStopTokens: true, Temperature: 1.5, Seed: 5}
	m := load(t, ck, pipeline.Options{MaxCache: 128, PrefixCacheBytes: 1 << 20})
	plain := load(t, ck, pipeline.Options{MaxCache: 128})
	a := m.NewSession()
	collect(t, a, pipeline.Prompt{IDs: g.PromptIDs}, opts)
	collect(t, m.NewSession(), pipeline.Prompt{IDs: []int{9, 8, 7, 6, 5}}, opts)
	ctx := append(a.History(), 77, 78, 79)
	c := m.NewSession()
	got := collect(t, c, pipeline.Prompt{IDs: ctx}, opts)
	if hits, _ := pipeline.PrefixStats(m); hits != 1 {
		t.Errorf("prefix cache hits %d, want 1", hits)
	}
	if n, want := c.Metrics().CachedTokens, len(a.History())-1; n != want {
		t.Errorf("cached tokens %d, want %d", n, want)
	}
	if want := collect(t, plain.NewSession(), pipeline.Prompt{IDs: ctx}, opts); !slices.Equal(got, want) {
		t.Errorf("ids from the prefix cache %v, without it %v", got, want)
	}
	part := append(slices.Clone(g.PromptIDs), 5, 6)
	d := m.NewSession()
	got = collect(t, d, pipeline.Prompt{IDs: part}, opts)
	if hits, _ := pipeline.PrefixStats(m); hits != 2 || d.Metrics().PrefillTokens != len(part)-(len(g.PromptIDs)-1) {
		t.Errorf("partial prefix: prefix cache hits %d (want 2), prefilled %d of %d tokens (want those after the checkpoint at %d)", hits, d.Metrics().PrefillTokens, len(part), len(g.PromptIDs)-1)
	}
	if want := collect(t, plain.NewSession(), pipeline.Prompt{IDs: part}, opts); !slices.Equal(got, want) {
		t.Errorf("partial prefix: ids %v, without a prefix cache %v", got, want)
	}
}
