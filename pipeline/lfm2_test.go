package pipeline_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
	"github.com/gpurun/gpurun/tensors/model"
)

// lfm2 loads arch3's LFM2 (a hybrid: short convolution layers with
// recurrent states beside attention) and its llama.cpp golden.
func lfm2(t *testing.T) (*model.Checkpoint, testmodels.ArchGolden) {
	t.Helper()
	ck, err := gguf.Load(testmodels.Path(t, "arch3", "lfm2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	return ck, testmodels.Arch3(t, "lfm2").ArchGolden
}

// TestLFM2Generation: on the hybrid, every way the pipeline decodes gives
// llama.cpp's 24 greedy ids: plain sessions, and two sessions at once in
// batched rounds (each row its own sequence's state); speculative decoding
// by prompt lookup (off on hybrids) gives the ids of plain decoding.
func TestLFM2Generation(t *testing.T) {
	ck, g := lfm2(t)
	greedy := pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs), IgnoreStopTokens: true}
	prompt := pipeline.Prompt{IDs: g.PromptIDs}
	m := load(t, ck, pipeline.Options{MaxCache: 64})
	if got := collect(t, m.NewSession(), prompt, greedy); !slices.Equal(got, g.GreedyIDs) {
		t.Errorf("greedy ids\n got %v\nwant %v (llama.cpp)", got, g.GreedyIDs)
	}
	// Sampled from the prompt twice: lookup drafts tokens the target
	// rejects (the 15th token repeats an earlier one, and lookup guesses
	// what followed it), so a verifier would have to roll the states back.
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

// TestLFM2Turns: a five-turn conversation on the hybrid continues its
// states from turn to turn, prefilling only each turn's new tokens (its
// prompt and the last token generated before it, which no step ran), and
// each turn's ids equal those of a fresh session given the whole
// conversation at once. A session on the same slot whose context is not
// a continuation of what the slot holds (here: one token changed) cannot
// roll the states back and prefills all of its context from 0, with the
// ids of a fresh model.
func TestLFM2Turns(t *testing.T) {
	ck, g := lfm2(t)
	opts := pipeline.GenerateOptions{MaxTokens: 4, IgnoreStopTokens: true}
	m := load(t, ck, pipeline.Options{MaxCache: 128})
	// fresh runs ctx on a model of its own, from position 0.
	fresh := func(ctx []int) []int {
		return collect(t, load(t, ck, pipeline.Options{MaxCache: 128}).NewSession(), pipeline.Prompt{IDs: ctx}, opts)
	}
	s := m.NewSession()
	turns := [][]int{g.PromptIDs, {300, 301, 302}, {17, 400}, {88, 89, 90, 91}, {5}}
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

	// Not a continuation: the slot holds the conversation, the new
	// context shares its first tokens only.
	ctx := s.History()
	ctx[len(g.PromptIDs)] ^= 1
	s2 := m.NewSession()
	got := collect(t, s2, pipeline.Prompt{IDs: ctx}, opts)
	if n := s2.Metrics().PrefillTokens; n != len(ctx) {
		t.Errorf("diverging context: prefilled %d tokens, want all %d (states cannot roll back)", n, len(ctx))
	}
	if want := fresh(ctx); !slices.Equal(got, want) {
		t.Errorf("diverging context: ids %v, a fresh model gives %v", got, want)
	}
}

// TestLFM2PrefixCache: the prefix cache on the hybrid serves an entry
// whose every token the new context extends (its states hold the entry's
// end), reporting those tokens cached, with the ids of a model without a
// prefix cache.
func TestLFM2PrefixCache(t *testing.T) {
	ck, g := lfm2(t)
	opts := pipeline.GenerateOptions{MaxTokens: 6, IgnoreStopTokens: true}
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
	// The entry holds a's history but its last token, which no step ran.
	if n, want := c.Metrics().CachedTokens, len(a.History())-1; n != want {
		t.Errorf("cached tokens %d, want %d", n, want)
	}
	if want := collect(t, plain.NewSession(), pipeline.Prompt{IDs: ctx}, opts); !slices.Equal(got, want) {
		t.Errorf("ids from the prefix cache %v, without it %v", got, want)
	}
	// A context sharing only part of an entry (a's prompt): the entry's
	// states are past it, so it serves nothing and the context runs whole.
	part := append(slices.Clone(g.PromptIDs), 5, 6)
	d := m.NewSession()
	got = collect(t, d, pipeline.Prompt{IDs: part}, opts)
	if hits, _ := pipeline.PrefixStats(m); hits != 1 || d.Metrics().PrefillTokens != len(part) {
		t.Errorf("partial prefix: prefix cache hits %d (want still 1), prefilled %d of %d tokens", hits, d.Metrics().PrefillTokens, len(part))
	}
	if want := collect(t, plain.NewSession(), pipeline.Prompt{IDs: part}, opts); !slices.Equal(got, want) {
		t.Errorf("partial prefix: ids %v, without a prefix cache %v", got, want)
	}
}
