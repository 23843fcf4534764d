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

// qwen35 loads arch3's Qwen3.5 (Gated DeltaNet layers with recurrent
// states beside gated attention) and its llama.cpp golden.
func qwen35(t *testing.T) (*model.Checkpoint, testmodels.ArchGolden) {
	t.Helper()
	ck, err := gguf.Load(testmodels.Path(t, "arch3", "qwen35.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	return ck, testmodels.Arch3(t, "qwen35").ArchGolden
}

// TestQwen35Generation: on Qwen3.5 the pipeline's plain sessions and two
// sessions at once in batched rounds (each row its own sequence's delta
// states) give llama.cpp's 24 greedy ids.
func TestQwen35Generation(t *testing.T) {
	ck, g := qwen35(t)
	greedy := pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs), IgnoreStopTokens: true}
	prompt := pipeline.Prompt{IDs: g.PromptIDs}
	m := load(t, ck, pipeline.Options{MaxCache: 64})
	if got := collect(t, m.NewSession(), prompt, greedy); !slices.Equal(got, g.GreedyIDs) {
		t.Errorf("greedy ids\n got %v\nwant %v (llama.cpp)", got, g.GreedyIDs)
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

// TestQwen35Turns: a five-turn conversation on Qwen3.5 carries its
// convolution windows and delta-rule state matrices from turn to turn
// (hybridTurns; the fresh session's one prefill runs the chunked form over
// what the turns ran partly in the recurrent form).
func TestQwen35Turns(t *testing.T) {
	ck, g := qwen35(t)
	hybridTurns(t, ck, g.PromptIDs, nil)
}

// TestQwen35GPU: Qwen3.5 through the pipeline on WebGPU and Vulkan (the
// Gated DeltaNet kernels, their windows and matrices in the caches, and
// the gated attention's sigmoid gate) gives llama.cpp's greedy ids in a
// plain session and in two sessions' batched rounds (the kernels
// dispatched once per row, each binding its sequence's states); on WebGPU
// it runs hybridTurns too: five turns, each prefilling only its new
// tokens, and a diverging context resumed from the state checkpoint
// (CopyState on the device), with the ids of fresh models on the same
// backend. Both backends share the planner and the caches' state copies
// (internal/backend/compute), and hybridTurns loads seven models, which
// on lavapipe's Vulkan costs 3-4 s each in pipeline creation, so Vulkan
// runs the first two checks only. internal/backend/compute's
// TestQwen35Golden holds the logits, TestQwen35States the states' copies
// and resets on both backends.
func TestQwen35GPU(t *testing.T) {
	ck, g := qwen35(t)
	const steps = 8
	greedy := pipeline.GenerateOptions{MaxTokens: steps, IgnoreStopTokens: true}
	prompt := pipeline.Prompt{IDs: g.PromptIDs}
	want := g.GreedyIDs[:steps]
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			if got := collect(t, load(t, ck, pipeline.Options{Backend: openBackend(t, backend), MaxCache: 64}).NewSession(), prompt, greedy); !slices.Equal(got, want) {
				t.Errorf("greedy ids\n got %v\nwant %v (llama.cpp)", got, want)
			}
			mb := load(t, ck, pipeline.Options{Backend: openBackend(t, backend), MaxCache: 64, Slots: 2}.WithTuning(tuning.Options{AlwaysBatch: true}))
			var wg sync.WaitGroup
			ids := make([][]int, 2)
			for i := range ids {
				wg.Go(func() { ids[i] = collect(t, mb.NewSession(), prompt, greedy) })
			}
			wg.Wait()
			for i, got := range ids {
				if !slices.Equal(got, want) {
					t.Errorf("batched session %d: ids\n got %v\nwant %v (llama.cpp)", i, got, want)
				}
			}
			if rounds, _ := pipeline.BatchStats(mb); rounds == 0 {
				t.Error("no batched round ran")
			}
			if backend == "webgpu" {
				hybridTurns(t, ck, g.PromptIDs, func() gpu.Backend { return openBackend(t, backend) })
			}
		})
	}
}

// TestQwen35PrefixCache: the prefix cache on Qwen3.5 serves an entry the
// new context extends (CopyKV copies its convolution windows and delta
// state matrices at the entry's end), reporting those tokens cached, with
// the ids of a model without a prefix cache.
func TestQwen35PrefixCache(t *testing.T) {
	ck, g := qwen35(t)
	opts := pipeline.GenerateOptions{MaxTokens: 6, IgnoreStopTokens: true, Temperature: 1.5, Seed: 5}
	m := load(t, ck, pipeline.Options{MaxCache: 128, PrefixCacheBytes: 1 << 20})
	plain := load(t, ck, pipeline.Options{MaxCache: 128})
	a := m.NewSession()
	collect(t, a, pipeline.Prompt{IDs: g.PromptIDs}, opts)
	// Another context takes the slot over: a's tokens go to an entry.
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
}
