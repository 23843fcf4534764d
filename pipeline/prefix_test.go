package pipeline_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
	"github.com/gpurun/gpurun/tensors/model"
)

// ids returns n token ids of the 512-token vocabulary drawn from seed
// (never BOS or EOS).
func ids(seed, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 3 + (seed*7919+i*104729+i*i*31)%509
	}
	return out
}

func cat(parts ...[]int) []int { return slices.Concat(parts...) }

// TestPrefixCacheBitwise: a context whose prefix comes from the prefix
// cache (kept from an earlier session, after another context took the
// slot) gives the same logits, bit for bit, as a model without a prefix
// cache, on every backend and both cache types, and runs only the tokens
// after the prefix. The reference runs the same chunks: with one-token
// prefill steps it is a cold prefill of the context from scratch; with the
// default prefill graphs (whose rounding depends on a chunk's length, so
// no two splits of a prompt agree bitwise, with or without a prefix
// cache) it is the earlier context and then the new one on the reference's
// one slot, today's slot reuse.
func TestPrefixCacheBitwise(t *testing.T) {
	ck := storiesCheckpoint(t)
	prefix := ids(1, 45)
	a := cat([]int{1}, prefix, ids(2, 11))
	other := cat([]int{1}, ids(3, 30))
	c := cat([]int{1}, prefix, ids(4, 7))
	for _, backend := range []string{"cpu", "webgpu", "vulkan"} {
		for _, policy := range []string{model.PolicyF32, model.PolicyF16} {
			for _, oneByOne := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/one-token-steps=%v", backend, policy, oneByOne), func(t *testing.T) {
					opts := pipeline.Options{MaxCache: 128, Activations: policy}
					if oneByOne {
						opts.PrefillSizes = []int{1}
					}
					if backend != "cpu" {
						opts.Backend = openBackend(t, backend)
					}
					cold := load(t, ck, opts)
					if !oneByOne {
						if _, _, err := pipeline.PrefillLogits(cold, a); err != nil {
							t.Fatal(err)
						}
					}
					want, _, err := pipeline.PrefillLogits(cold, c)
					if err != nil {
						t.Fatal(err)
					}
					opts.PrefixCacheBytes = 64 << 20
					warm := load(t, ck, opts)
					for _, ctx := range [][]int{a, other} {
						if _, _, err := pipeline.PrefillLogits(warm, ctx); err != nil {
							t.Fatal(err)
						}
					}
					got, ran, err := pipeline.PrefillLogits(warm, c)
					if err != nil {
						t.Fatal(err)
					}
					if want := len(c) - 1 - len(prefix); ran != want {
						t.Errorf("warm prefill ran %d tokens, want %d", ran, want)
					}
					if hits, saves := pipeline.PrefixStats(warm); hits != 1 || saves != 2 {
						t.Errorf("prefix cache: %d hits, %d saves, want 1 and 2", hits, saves)
					}
					diff := 0
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							if diff < 3 {
								t.Errorf("logit %d: %v (bits %08x), reference %v (%08x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
							}
							diff++
						}
					}
					if diff > 0 {
						t.Errorf("%d of %d logits differ from the reference", diff, len(want))
					}
				})
			}
		}
	}
}

// TestPrefixCacheBudget: entries beyond the budget evict the least
// recently used; a context longer than the budget is not kept.
func TestPrefixCacheBudget(t *testing.T) {
	ck := storiesCheckpoint(t)
	m0 := load(t, ck, pipeline.Options{MaxCache: 128})
	_, perPos := m0.DecodeBytes()
	// Room for 60 positions: one context of 40 at a time.
	m := load(t, ck, pipeline.Options{MaxCache: 128, PrefixCacheBytes: 60 * perPos})
	p1, p2 := cat([]int{1}, ids(5, 39)), cat([]int{1}, ids(6, 39))
	for _, ctx := range [][]int{p1, p2, cat([]int{1}, ids(7, 10))} {
		if _, _, err := pipeline.PrefillLogits(m, ctx); err != nil {
			t.Fatal(err)
		}
	}
	// p1 was saved when p2 took the slot, then evicted for p2, saved when
	// the third context took the slot.
	if _, ran, _ := pipeline.PrefillLogits(m, cat(p2, []int{9})); ran != 1 {
		t.Errorf("p2 from the cache ran %d tokens, want 1", ran)
	}
	if _, ran, _ := pipeline.PrefillLogits(m, cat(p1, []int{9})); ran != 40 {
		t.Errorf("p1 after eviction ran %d tokens, want 40 (all but BOS)", ran)
	}
	if _, err := pipeline.FromCheckpoint(context.Background(), ck, pipeline.Options{Backend: cpuBackend(t), PrefixCacheBytes: -1}); err == nil {
		t.Error("a negative budget was accepted")
	}
}

// TestPrefixCacheConcurrent: sessions sharing prefixes generate at once on
// a model with fewer slots than sessions and a prefix cache; each one's
// greedy ids equal its solo run's on a model without a cache, and the
// prompt's cached tokens are reported. Run with -race.
func TestPrefixCacheConcurrent(t *testing.T) {
	ck := storiesCheckpoint(t)
	const sessions = 8
	prompts := make([][]int, sessions)
	for i := range prompts {
		prompts[i] = cat([]int{1}, ids(10+i%2, 40), ids(20+i, 5+i))
	}
	solo := load(t, ck, pipeline.Options{MaxCache: 128})
	want := make([][]int, sessions)
	for i, p := range prompts {
		want[i] = collect(t, solo.NewSession(), pipeline.Prompt{IDs: p}, pipeline.GenerateOptions{MaxTokens: 12, IgnoreStopTokens: true})
	}
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			m := load(t, ck, pipeline.Options{MaxCache: 128, Slots: 3, PrefixCacheBytes: 32 << 20}.WithTuning(tuning.Options{AlwaysBatch: batch, NoBatching: !batch}))
			for round := range 3 {
				var wg sync.WaitGroup
				got := make([][]int, sessions)
				cached := make([]int, sessions)
				errs := make([]error, sessions)
				for i := range sessions {
					wg.Go(func() {
						s := m.NewSession()
						for tok, err := range s.Generate(context.Background(), pipeline.Prompt{IDs: prompts[i]}, pipeline.GenerateOptions{MaxTokens: 12, IgnoreStopTokens: true}) {
							if err != nil {
								errs[i] = err
								return
							}
							got[i] = append(got[i], tok.ID)
						}
						cached[i] = s.Metrics().CachedTokens
						if c, r := s.Metrics().CachedTokens, s.Metrics().PrefillTokens; c+r != len(prompts[i]) {
							errs[i] = fmt.Errorf("cached %d + prefilled %d != prompt %d", c, r, len(prompts[i]))
						}
					})
				}
				wg.Wait()
				total := 0
				for i := range sessions {
					if errs[i] != nil {
						t.Fatalf("round %d session %d: %v", round, i, errs[i])
					}
					if !slices.Equal(got[i], want[i]) {
						t.Errorf("round %d session %d: %v, solo %v", round, i, got[i], want[i])
					}
					total += cached[i]
				}
				if round > 0 && total == 0 {
					t.Errorf("round %d: no prompt token came from a cache", round)
				}
			}
			if hits, _ := pipeline.PrefixStats(m); hits == 0 {
				t.Error("the prefix cache was never used")
			}
		})
	}
}

var _ = testmodels.Path

// TestPrefixCacheRings: on a model whose sliding-window layers keep rings
// (gemma3, window 8, rings of 15), a prefix cache never hands a context
// keys and values its rings lost: contexts far longer than the rings, one
// taking the slot after another and then the first's prefix again, give
// the logits of a model without a prefix cache, on every backend (a ring
// cannot be copied into an entry of positions [0, n), so such reuse fails
// cleanly and the context runs in full).
func TestPrefixCacheRings(t *testing.T) {
	ck, err := gguf.Load(testmodels.Path(t, "arch2", "gemma3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := ids(5, 50)
	a := cat([]int{2}, prefix, ids(6, 9))
	other := cat([]int{2}, ids(7, 44))
	c := cat([]int{2}, prefix, ids(8, 6))
	for _, backend := range []string{"cpu", "webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			opts := pipeline.Options{MaxCache: 128, PrefillSizes: []int{4, 8}}
			if backend != "cpu" {
				opts.Backend = openBackend(t, backend)
			}
			cold := load(t, ck, opts)
			opts.PrefixCacheBytes = 64 << 20
			warm := load(t, ck, opts)
			for _, ctx := range [][]int{a, other, c} {
				want, _, err := pipeline.PrefillLogits(cold, ctx)
				if err != nil {
					t.Fatal(err)
				}
				got, _, err := pipeline.PrefillLogits(warm, ctx)
				if err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("context of %d tokens: logit %d: %v, without a prefix cache %v", len(ctx), i, got[i], want[i])
					}
				}
			}
		})
	}
}
