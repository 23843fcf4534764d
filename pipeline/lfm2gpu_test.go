package pipeline_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
)

// TestLFM2GPU: the hybrid on the GPU backends (gpu.Caps.RecurrentState:
// the convolutions' states in their caches) through the pipeline: a plain
// session gives llama.cpp's 24 greedy ids (its decode steps several per
// submission, RunSteps); two sessions at once in batched rounds each give
// them too; a three-turn conversation prefills only each turn's new
// tokens with the ids of the CPU backend's; and the prefix cache serves
// an entry the new context extends, with the ids of a model without one.
func TestLFM2GPU(t *testing.T) {
	ck, g := lfm2(t)
	greedy := pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs), IgnoreStopTokens: true}
	prompt := pipeline.Prompt{IDs: g.PromptIDs}
	short := pipeline.GenerateOptions{MaxTokens: 4, IgnoreStopTokens: true}
	turns := [][]int{g.PromptIDs, {300, 301, 302}, {17, 400}}
	cpu := load(t, ck, pipeline.Options{MaxCache: 128})
	cs := cpu.NewSession()
	var cpuTurns [][]int
	for _, ids := range turns {
		cpuTurns = append(cpuTurns, collect(t, cs, pipeline.Prompt{IDs: ids}, short))
	}
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			b := openBackend(t, backend)
			m := load(t, ck, pipeline.Options{Backend: b, MaxCache: 128, PrefixCacheBytes: 1 << 20})
			if got := collect(t, m.NewSession(), prompt, greedy); !slices.Equal(got, g.GreedyIDs) {
				t.Errorf("greedy ids\n got %v\nwant %v (llama.cpp)", got, g.GreedyIDs)
			}

			mb := load(t, ck, pipeline.Options{Backend: b, MaxCache: 64, Slots: 2}.WithTuning(tuning.Options{AlwaysBatch: true}))
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

			s := m.NewSession()
			for i, ids := range turns {
				got := collect(t, s, pipeline.Prompt{IDs: ids}, short)
				want := len(ids)
				if i > 0 {
					want++ // the previous turn's last token
				}
				if n := s.Metrics().PrefillTokens; n != want {
					t.Errorf("turn %d: prefilled %d tokens, want %d (its new ones)", i, n, want)
				}
				if !slices.Equal(got, cpuTurns[i]) {
					t.Errorf("turn %d: ids %v, the cpu backend's %v", i, got, cpuTurns[i])
				}
			}
			// Another context takes the slot over; the conversation's
			// tokens go to a prefix cache entry that the next context
			// extends.
			collect(t, m.NewSession(), pipeline.Prompt{IDs: []int{9, 8, 7, 6, 5}}, short)
			ctx := append(s.History(), 77, 78, 79)
			c := m.NewSession()
			got2 := collect(t, c, pipeline.Prompt{IDs: ctx}, short)
			if hits, _ := pipeline.PrefixStats(m); hits != 1 || c.Metrics().CachedTokens != len(s.History())-1 {
				t.Errorf("prefix cache hits %d, cached tokens %d; want 1 and %d", hits, c.Metrics().CachedTokens, len(s.History())-1)
			}
			if want := collect(t, cpu.NewSession(), pipeline.Prompt{IDs: ctx}, short); !slices.Equal(got2, want) {
				t.Errorf("ids from the prefix cache %v, the cpu backend's without it %v", got2, want)
			}
		})
	}
}
