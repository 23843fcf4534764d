package pipeline_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
	"github.com/gpurun/gpurun/tensors"
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

// lfm2Logits is the logits after ctx on a fresh model (its states run
// from position 0).
func lfm2Logits(t *testing.T, ck *model.Checkpoint, ctx []int) []float32 {
	t.Helper()
	logits, _, err := pipeline.PrefillLogits(load(t, ck, pipeline.Options{MaxCache: 128}), ctx)
	if err != nil {
		t.Fatal(err)
	}
	return logits
}

// resumeTol bounds the logits of a context resumed from a state
// checkpoint against a fresh model's: the CPU backend's one-token and
// several-token steps sum in other orders (1.2e-7 measured between a
// prompt run whole and run as all but its last token, then that one),
// while a state not the one its position had moves them 100x more: a
// restore that leaves the windows as they were (at a later position)
// moved them by 1.2e-3 to 2e-3 in every check below.
const resumeTol = 1e-5

// resumed prefills ctx on m as a Generate would and checks that it ran
// ran tokens and that the logits after ctx are a fresh model's within
// resumeTol (the greedy ids of arch3's random-weight models hardly depend
// on the convolution states, so ids alone would not show a wrong one).
func resumed(t *testing.T, ck *model.Checkpoint, m *pipeline.Model, ctx []int, ran int) {
	t.Helper()
	got, n, err := pipeline.PrefillLogits(m, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != ran {
		t.Errorf("prefilled %d of %d tokens, want %d", n, len(ctx), ran)
	}
	if want := lfm2Logits(t, ck, ctx); maxDiff(got, want) > resumeTol {
		t.Errorf("logits after %d tokens (%d of them run) differ from a fresh model's by %.3g, more than %g", len(ctx), n, maxDiff(got, want), resumeTol)
	}
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// TestLFM2Generation: on the hybrid, a plain session gives llama.cpp's
// 24 greedy ids; three sessions at once in batched rounds (each row its
// own sequence's state), of three prompts, one of them decoding
// speculatively with a hybrid draft (its plain steps in the rounds too),
// each get the ids a fresh model gives their prompt alone, and afterwards
// each slot holds its sequence with the states a fresh model gets
// (resumed).
func TestLFM2Generation(t *testing.T) {
	ck, g := lfm2(t)
	greedy := pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs), IgnoreStopTokens: true}
	m := load(t, ck, pipeline.Options{MaxCache: 64})
	if got := collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, greedy); !slices.Equal(got, g.GreedyIDs) {
		t.Errorf("greedy ids\n got %v\nwant %v (llama.cpp)", got, g.GreedyIDs)
	}
	prompts := [][]int{g.PromptIDs, slices.Clone(g.PromptIDs), slices.Clone(g.PromptIDs)}
	prompts[1][0] ^= 1
	slices.Reverse(prompts[2])
	want := make([][]int, len(prompts))
	for i, p := range prompts {
		want[i] = collect(t, load(t, ck, pipeline.Options{MaxCache: 64}).NewSession(), pipeline.Prompt{IDs: p}, greedy)
	}
	mb := load(t, ck, pipeline.Options{MaxCache: 64, Slots: 3}.WithTuning(tuning.Options{AlwaysBatch: true}))
	draft := load(t, noisyDraft(ck, 0.02), pipeline.Options{MaxCache: 64})
	var wg sync.WaitGroup
	got := make([][]int, len(prompts))
	histories := make([][]int, len(prompts))
	for i, p := range prompts {
		wg.Go(func() {
			opts := greedy
			if i == 2 {
				opts.Speculation = &pipeline.Speculation{Draft: draft, Tokens: 4}
			}
			s := mb.NewSession()
			got[i] = collect(t, s, pipeline.Prompt{IDs: p}, opts)
			histories[i] = s.History()
		})
	}
	wg.Wait()
	for i, ids := range got {
		if !slices.Equal(ids, want[i]) {
			t.Errorf("batched session %d: ids\n got %v\nwant %v", i, ids, want[i])
		}
	}
	if rounds, _ := pipeline.BatchStats(mb); rounds == 0 {
		t.Error("no batched round ran")
	}
	// Each slot's states give a fresh model's logits when its sequence is
	// fed again. How much runs again depends on the rounds' timing: a
	// slot whose batched rounds ran its last token holds states past the
	// context's last position and restarts from its latest checkpoint or
	// from 0 (seen in 14 of 20 runs; the single-session tests hold the
	// one-token resume exactly).
	for _, h := range histories {
		got, n, err := pipeline.PrefillLogits(mb, h)
		if err != nil {
			t.Fatal(err)
		}
		if want := lfm2Logits(t, ck, h); n < 1 || n > len(h) || maxDiff(got, want) > resumeTol {
			t.Errorf("resumed after %d tokens (%d run): logits differ from a fresh model's by %.3g, more than %g", len(h), n, maxDiff(got, want), resumeTol)
		}
	}
}

// TestLFM2Turns: a five-turn conversation on the hybrid continues its
// states from turn to turn, prefilling only each turn's new tokens (its
// prompt and the last token generated before it, which no step ran), and
// each turn's ids equal those of a fresh session given the whole
// conversation at once. A session on the same slot whose context is not
// a continuation of what the slot holds (here: one token changed just
// after the first prompt) cannot roll the states back: it resumes at the
// state checkpoint taken before the first prompt's last token, with the
// ids of a fresh model; without checkpoints it prefills all of its
// context from 0.
func TestLFM2Turns(t *testing.T) {
	ck, g := lfm2(t)
	opts := pipeline.GenerateOptions{MaxTokens: 4, IgnoreStopTokens: true}
	// fresh runs ctx on a model of its own, from position 0.
	fresh := func(ctx []int) []int {
		return collect(t, load(t, ck, pipeline.Options{MaxCache: 128}).NewSession(), pipeline.Prompt{IDs: ctx}, opts)
	}
	turns := [][]int{g.PromptIDs, {300, 301, 302}, {17, 400}, {88, 89, 90, 91}, {5}}
	for _, tc := range []struct {
		name   string
		budget int64
	}{{"checkpoints", 0}, {"no checkpoints", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t, ck, pipeline.Options{MaxCache: 128, StateCheckpointBytes: tc.budget})
			s := m.NewSession()
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
			want := len(ctx) - (len(g.PromptIDs) - 1)
			if tc.budget < 0 {
				want = len(ctx)
			}
			resumed(t, ck, m, ctx, want)
		})
	}
}

// TestLFM2RenderedTurns: a five-turn chat on the hybrid in which every
// turn is a new request carrying the whole conversation (as a server gets
// it), rendered as a template that drops a reply's reasoning renders it
// (Qwen3's writes an empty think block in its place): the previous reply
// appears as two marker tokens and the reply without its first two
// tokens, closed by an end-of-turn token. The slot's states are past the point where the
// rendering departs from what it ran, so each turn resumes at the state
// checkpoint taken before the previous prompt's last token and prefills
// only that token, the reply as rendered and the new message (llama.cpp's
// server, which keeps no such checkpoint, prefills it all); each turn's
// ids equal a fresh model's on the whole rendered conversation. Without
// checkpoints every turn prefills everything.
func TestLFM2RenderedTurns(t *testing.T) {
	ck, g := lfm2(t)
	opts := pipeline.GenerateOptions{MaxTokens: 5, IgnoreStopTokens: true}
	const endOfTurn, thinkOpen, thinkClose = 2, 450, 451
	users := [][]int{g.PromptIDs, {300, 301, 302}, {17, 400}, {88, 89, 90, 91}, {5, 6}}
	for _, tc := range []struct {
		name   string
		budget int64
	}{{"checkpoints", 0}, {"no checkpoints", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t, ck, pipeline.Options{MaxCache: 128, StateCheckpointBytes: tc.budget})
			// mb takes the same turns with their logits checked.
			mb := load(t, ck, pipeline.Options{MaxCache: 128, StateCheckpointBytes: tc.budget})
			var ctx, per []int
			prompt := 0 // the previous turn's prompt length
			for i, user := range users {
				ctx = append(ctx, user...)
				s := m.NewSession()
				got := collect(t, s, pipeline.Prompt{IDs: ctx}, opts)
				ran := s.Metrics().PrefillTokens
				per = append(per, ran)
				want := len(ctx)
				if i > 0 && tc.budget >= 0 {
					want = len(ctx) - (prompt - 1)
				}
				prompt = len(ctx)
				resumed(t, ck, mb, ctx, want)
				if _, _, err := pipeline.PrefillLogits(mb, append(slices.Clone(ctx), got[:len(got)-1]...)); err != nil {
					t.Fatal(err) // mb's slot now holds what m's does
				}
				if ran != want || s.Metrics().CachedTokens != len(ctx)-ran {
					t.Errorf("turn %d: prefilled %d of %d tokens (%d cached), want %d", i, ran, len(ctx), s.Metrics().CachedTokens, want)
				}
				whole := collect(t, load(t, ck, pipeline.Options{MaxCache: 128}).NewSession(), pipeline.Prompt{IDs: ctx}, opts)
				if !slices.Equal(got, whole) {
					t.Errorf("turn %d: ids %v, a fresh model on the whole conversation gives %v", i, got, whole)
				}
				// The reply as the template renders it.
				if got[0] == thinkOpen {
					t.Fatalf("turn %d: the reply starts with the marker %d", i, thinkOpen)
				}
				ctx = append(append(append(ctx, thinkOpen, thinkClose), got[2:]...), endOfTurn)
			}
			st := m.StateCheckpoints()
			t.Logf("tokens prefilled per turn: %v; checkpoints: %+v", per, st)
		})
	}
}

// TestLFM2PrefixCache: the prefix cache on the hybrid serves an entry
// whose every token the new context extends (its states hold the entry's
// end), reporting those tokens cached, with the ids of a model without a
// prefix cache, and a context sharing only part of an entry up to the
// entry's latest state checkpoint within that part (here the one taken
// before its prompt's last token); without checkpoints that entry serves
// nothing and the context runs whole.
func TestLFM2PrefixCache(t *testing.T) {
	ck, g := lfm2(t)
	opts := pipeline.GenerateOptions{MaxTokens: 6, IgnoreStopTokens: true}
	plain := load(t, ck, pipeline.Options{MaxCache: 128})
	for _, tc := range []struct {
		name   string
		budget int64
	}{{"checkpoints", 0}, {"no checkpoints", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t, ck, pipeline.Options{MaxCache: 128, PrefixCacheBytes: 1 << 20, StateCheckpointBytes: tc.budget})
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
			// A context sharing only part of an entry (a's prompt): the
			// entry's states are past it.
			part := append(slices.Clone(g.PromptIDs), 5, 6)
			wantHits, wantCached := 2, len(g.PromptIDs)-1
			if tc.budget < 0 {
				wantHits, wantCached = 1, 0
			}
			resumed(t, ck, m, part, len(part)-wantCached)
			if hits, _ := pipeline.PrefixStats(m); hits != wantHits {
				t.Errorf("partial prefix: prefix cache hits %d, want %d", hits, wantHits)
			}
		})
	}
}

// TestLFM2CheckpointBudget: a state checkpoint of arch3's LFM2 costs
// 2048 bytes (its 3 convolution layers' windows of 2 x 64 f32 inputs and
// one position of keys and values, 2 heads x 16 f32, of its 2 attention
// layers: from the model's dimensions, not the pipeline's). Along a
// prompt of 14 tokens with a checkpoint every 4 positions the model keeps
// four (4, 8, 12, and 13 before the last token); a context diverging at
// position 10 resumes at 8. Under a budget of two and a half, the two
// oldest are evicted, the bytes held stay within the budget, and the same
// context finds none at or before 10: it prefills everything, with the
// same logits.
func TestLFM2CheckpointBudget(t *testing.T) {
	ck, g := lfm2(t)
	const per = 3*64*2*4 + 2*2*16*4*2
	opts := pipeline.GenerateOptions{MaxTokens: 3, IgnoreStopTokens: true}
	prompt := append(slices.Clone(g.PromptIDs), 40, 41)
	diverging := append(slices.Clone(prompt[:10]), 7, 7, 7)
	for _, tc := range []struct {
		name               string
		budget             int64
		held, evicted, ran int
	}{
		{"ample", 1 << 20, 4, 0, len(diverging) - 8},
		{"two and a half", 2*per + per/2, 2, 2, len(diverging)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t, ck, pipeline.Options{MaxCache: 64, StateCheckpointBytes: tc.budget}.WithTuning(tuning.Options{CheckpointEvery: 4}))
			collect(t, m.NewSession(), pipeline.Prompt{IDs: prompt}, opts)
			st := m.StateCheckpoints()
			if st.PerCheckpoint != per || st.Budget != tc.budget || st.Taken != 4 || st.Held != int64(tc.held) || st.Evicted != tc.evicted || st.Bytes != st.Held*per || st.Bytes > st.Budget {
				t.Errorf("checkpoints %+v, want %d bytes each, 4 taken, %d held, %d evicted, within the budget %d", st, per, tc.held, tc.evicted, tc.budget)
			}
			resumed(t, ck, m, diverging, tc.ran)
		})
	}
}

// TestLFM2Speculative: speculative greedy decoding on the hybrid, with
// either way of rolling the states back (verify.go: the checkpoint
// before the step and the kept tokens run again, or a checkpoint per
// drafted position), gives the ids of plain greedy decoding, drafted by
// prompt lookup over a prompt whose first half comes again at its end
// (the target rejects what followed that half the first time), by the
// model itself, and by a hybrid
// draft of random weights (every draft rejected) or of the model's
// weights with noise (some drafts kept, steps rejecting after them; its
// own states rolled back to the drafts kept). After the generation the target's cache, and
// the draft's, hold their sequences with the states a fresh model gets
// (resumed). The counts of the steps and tokens each way ran are the
// measurement verify.go cites.
func TestLFM2Speculative(t *testing.T) {
	ck, g := lfm2(t)
	rck := randomDraft(ck)
	nck := noisyDraft(ck, 0.02)
	const n = 20
	greedy := pipeline.GenerateOptions{MaxTokens: n, IgnoreStopTokens: true}
	// The prompt, then its first half again: lookup proposes what
	// followed the half the first time.
	twice := append(slices.Clone(g.PromptIDs), g.PromptIDs[:6]...)
	want := collect(t, load(t, ck, pipeline.Options{MaxCache: 128}).NewSession(), pipeline.Prompt{IDs: twice}, greedy)
	for _, strategy := range []struct {
		name        string
		perPosition bool
	}{{"recompute", false}, {"per position", true}} {
		for _, draft := range []struct {
			name string
			ck   *model.Checkpoint // nil: prompt lookup
		}{{"lookup", nil}, {"self", ck}, {"random hybrid", rck}, {"noisy hybrid", nck}} {
			t.Run(strategy.name+"/"+draft.name, func(t *testing.T) {
				m := load(t, ck, pipeline.Options{MaxCache: 128}.WithTuning(tuning.Options{PerPositionRollback: strategy.perPosition}))
				spec := &pipeline.Speculation{Lookup: 3, Tokens: 4}
				var d *pipeline.Model
				if draft.ck != nil {
					d = load(t, draft.ck, pipeline.Options{MaxCache: 128})
					spec = &pipeline.Speculation{Draft: d, Tokens: 4}
				}
				opts := greedy
				opts.Speculation = spec
				s := m.NewSession()
				start := time.Now()
				steps0, tokens0 := pipeline.RunCounts(m)
				got := collect(t, s, pipeline.Prompt{IDs: twice}, opts)
				elapsed := time.Since(start)
				steps, tokens := pipeline.RunCounts(m)
				mt := s.Metrics()
				if !slices.Equal(got, want) {
					t.Errorf("ids\n got %v\nwant %v (plain greedy decoding)", got, want)
				}
				if mt.DraftTokens == 0 || draft.ck == rck && mt.AcceptedTokens == mt.DraftTokens || draft.ck == nck && (mt.AcceptedTokens == 0 || mt.AcceptedTokens == mt.DraftTokens) {
					t.Errorf("metrics %+v: want drafts (from the random draft, some rejected; from the noisy one, some kept and some rejected)", mt)
				}
				t.Logf("%d tokens: %d drafted, %d kept, %d target steps; the target ran %d steps of %d tokens (the prompt's %d included) in %v",
					len(got), mt.DraftTokens, mt.AcceptedTokens, mt.TargetSteps, steps-steps0, tokens-tokens0, mt.PrefillTokens, elapsed)
				// The cache holds the conversation but its last token.
				resumed(t, ck, m, s.History(), 1)
				if d != nil {
					// The draft's slot holds the context it drafted
					// from; whatever it resumes from, its states are
					// those of the tokens it holds.
					got, _, err := pipeline.PrefillLogits(d, s.History())
					if err != nil {
						t.Fatal(err)
					}
					if want := lfm2Logits(t, draft.ck, s.History()); maxDiff(got, want) > resumeTol {
						t.Errorf("the draft's logits after the generation differ from a fresh draft's by %.3g", maxDiff(got, want))
					}
				}
			})
		}
	}
}

// noisyDraft is ck with seeded noise of deviation sigma added to every
// f32 weight: a draft that agrees with ck on some tokens and not others.
func noisyDraft(ck *model.Checkpoint, sigma float64) *model.Checkpoint {
	r := rand.New(rand.NewPCG(5, 17))
	out := *ck
	out.Tensors = nil
	for _, t := range ck.Tensors {
		c := *t
		if t.DType == tensors.F32 {
			c.Data = make([]byte, len(t.Data))
			for i := 0; i+4 <= len(c.Data); i += 4 {
				v := math.Float32frombits(binary.LittleEndian.Uint32(t.Data[i:]))
				binary.LittleEndian.PutUint32(c.Data[i:], math.Float32bits(v+float32(r.NormFloat64()*sigma)))
			}
		}
		out.Tensors = append(out.Tensors, &c)
	}
	return &out
}
