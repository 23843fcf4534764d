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
// tokens (the first: its last, the slot holding its prompt from the
// first session) with the ids of the CPU backend's; and the prefix cache serves
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
				switch {
				case i == 0:
					// The slot ran this prompt for the first session:
					// it resumes at its state checkpoint before the last
					// token, served by the prefix cache entry its tokens
					// went to.
					want = 1
				case i > 0:
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
			if hits, _ := pipeline.PrefixStats(m); hits != 2 || c.Metrics().CachedTokens != len(s.History())-1 {
				t.Errorf("prefix cache hits %d, cached tokens %d; want 2 (the first turn's too) and %d", hits, c.Metrics().CachedTokens, len(s.History())-1)
			}
			if want := collect(t, cpu.NewSession(), pipeline.Prompt{IDs: ctx}, short); !slices.Equal(got2, want) {
				t.Errorf("ids from the prefix cache %v, the cpu backend's without it %v", got2, want)
			}
		})
	}
}

// TestLFM2GPUCheckpoints: the state checkpoints on the GPU backends
// (gpu.Caps.CopyState): stateless turns whose rendering departs from the
// previous reply resume at the checkpoint before the previous prompt's
// last token, with logits within gpuResumeTol of a fresh CPU model's; and
// speculative greedy decoding with a hybrid draft (rejections rolled back
// from checkpoints) gives the CPU backend's plain greedy ids.
func TestLFM2GPUCheckpoints(t *testing.T) {
	// The GPU kernels are within 4.7e-6 of llama.cpp on this model
	// (TestLFM2Golden); a wrong state moves the logits 1e-3 or more
	// (resumeTol).
	const gpuResumeTol = 1e-4
	ck, g := lfm2(t)
	short := pipeline.GenerateOptions{MaxTokens: 4, IgnoreStopTokens: true}
	twice := append(slices.Clone(g.PromptIDs), g.PromptIDs[:6]...)
	greedy := pipeline.GenerateOptions{MaxTokens: 12, IgnoreStopTokens: true}
	want := collect(t, load(t, ck, pipeline.Options{MaxCache: 128}).NewSession(), pipeline.Prompt{IDs: twice}, greedy)
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			b := openBackend(t, backend)
			m := load(t, ck, pipeline.Options{Backend: b, MaxCache: 128})
			var ctx []int
			prompt := 0
			for i, user := range [][]int{g.PromptIDs, {300, 301, 302}, {17, 400}} {
				ctx = append(ctx, user...)
				ran := len(ctx)
				if i > 0 {
					ran = len(ctx) - (prompt - 1)
				}
				prompt = len(ctx)
				got, n, err := pipeline.PrefillLogits(m, ctx)
				if err != nil {
					t.Fatal(err)
				}
				if d := maxDiff(got, lfm2Logits(t, ck, ctx)); n != ran || d > gpuResumeTol {
					t.Errorf("turn %d: prefilled %d of %d tokens (want %d), logits %.3g from a fresh CPU model's", i, n, len(ctx), ran, d)
				}
				s := m.NewSession()
				reply := collect(t, s, pipeline.Prompt{IDs: ctx}, short)
				// Rendered otherwise: two markers in place of the reply's
				// first two tokens, an end of turn.
				ctx = append(append(append(ctx, 450, 451), reply[2:]...), 2)
			}
			draft := load(t, noisyDraft(ck, 0.02), pipeline.Options{Backend: b, MaxCache: 128})
			opts := greedy
			opts.Speculation = &pipeline.Speculation{Draft: draft, Tokens: 4}
			s := m.NewSession()
			if got := collect(t, s, pipeline.Prompt{IDs: twice}, opts); !slices.Equal(got, want) {
				t.Errorf("speculative: ids\n got %v\nwant %v (plain greedy, CPU)", got, want)
			}
			if mt := s.Metrics(); mt.AcceptedTokens == mt.DraftTokens {
				t.Errorf("speculative: metrics %+v, want rejected drafts", mt)
			}
			if st := m.StateCheckpoints(); st.Taken == 0 || st.Restored == 0 {
				t.Errorf("checkpoints %+v: none taken or restored", st)
			}
		})
	}
}
