package pipeline_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// randomDraft is ck with every f32 weight replaced by a seeded random
// value: the same vocabulary, proposals the target mostly rejects.
func randomDraft(ck *model.Checkpoint) *model.Checkpoint {
	r := rand.New(rand.NewPCG(7, 30))
	out := *ck
	out.Tensors = nil
	for _, t := range ck.Tensors {
		c := *t
		if t.DType == tensors.F32 {
			c.Data = make([]byte, len(t.Data))
			for i := 0; i+4 <= len(c.Data); i += 4 {
				binary.LittleEndian.PutUint32(c.Data[i:], math.Float32bits(float32(r.NormFloat64()*0.1)))
			}
		}
		out.Tensors = append(out.Tensors, &c)
	}
	return &out
}

// TestSpeculativeGreedyGolden: greedy decoding with speculation, drafted
// by prompt lookup, by the model itself loaded again, or by a random
// model (rejecting most drafts, so the cache is rolled back nearly every
// step), gives llama.cpp's golden ids for every golden prompt, token for
// token, on every backend, and a conversation continued after it still
// does; the counts show drafts were verified in fewer model steps than
// tokens.
func TestSpeculativeGreedyGolden(t *testing.T) {
	ck := storiesCheckpoint(t)
	cases := testmodels.StoriesCases(t)
	for _, backend := range []string{"cpu", "webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			var b gpu.Backend
			if backend != "cpu" {
				b = openBackend(t, backend)
			}
			opts := pipeline.Options{Backend: b, MaxCache: 256}
			m := load(t, ck, opts)
			self := load(t, ck, opts)
			random := load(t, randomDraft(ck), opts)
			for _, sc := range []struct {
				name      string
				spec      pipeline.Speculation
				minAccept float64 // the least acceptance rate expected
			}{
				{"lookup3/k4", pipeline.Speculation{Lookup: 3}, 0},
				{"lookup1/k8", pipeline.Speculation{Lookup: 1, Tokens: 8}, 0},
				{"self/k2", pipeline.Speculation{Draft: self, Tokens: 2}, 0.9},
				{"self/k5", pipeline.Speculation{Draft: self, Tokens: 5}, 0.9},
				{"random/k3", pipeline.Speculation{Draft: random, Tokens: 3}, 0},
			} {
				t.Run(sc.name, func(t *testing.T) {
					var drafted, accepted, steps, decoded int
					for _, tc := range cases {
						s := m.NewSession()
						spec := sc.spec
						got := collect(t, s, pipeline.Prompt{IDs: tc.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(tc.GeneratedIDs), Speculation: &spec})
						if !slices.Equal(got, tc.GeneratedIDs) {
							t.Fatalf("%s: ids\n got %v\nwant %v", tc.Name, got, tc.GeneratedIDs)
						}
						mt := s.Metrics()
						drafted, accepted, steps, decoded = drafted+mt.DraftTokens, accepted+mt.AcceptedTokens, steps+mt.TargetSteps, decoded+mt.DecodeSteps
						// Every token after the first came from a model step
						// or is a draft it kept.
						if mt.AcceptedTokens > mt.DraftTokens || mt.TargetSteps+mt.AcceptedTokens != mt.GeneratedTokens-1 || mt.DecodeSteps != mt.GeneratedTokens-1 {
							t.Errorf("%s: metrics %+v", tc.Name, mt)
						}
					}
					if drafted == 0 {
						t.Errorf("no drafts")
					}
					if rate := float64(accepted) / float64(drafted); rate < sc.minAccept {
						t.Errorf("acceptance %.2f (%d of %d), want at least %.2f", rate, accepted, drafted, sc.minAccept)
					}
					t.Logf("acceptance %d/%d, %.2f tokens per model step", accepted, drafted, float64(decoded)/float64(steps))
				})
			}
			t.Run("continued", func(t *testing.T) {
				// The first turn speculates with a random draft (most
				// drafts rolled back), the second goes on without: the
				// cache must hold exactly the conversation.
				tc := cases[0]
				half := len(tc.GeneratedIDs) / 2
				s := m.NewSession()
				got := collect(t, s, pipeline.Prompt{IDs: tc.PromptIDs}, pipeline.GenerateOptions{MaxTokens: half, Speculation: &pipeline.Speculation{Draft: random, Tokens: 4}})
				next := collect(t, s, pipeline.Prompt{IDs: []int{}}, pipeline.GenerateOptions{MaxTokens: len(tc.GeneratedIDs) - half})
				if got = append(got, next...); !slices.Equal(got, tc.GeneratedIDs) {
					t.Fatalf("ids\n got %v\nwant %v", got, tc.GeneratedIDs)
				}
			})
		})
	}
}

// TestSpeculationOptions: speculation options that cannot work are an
// ErrOptions error before anything runs.
func TestSpeculationOptions(t *testing.T) {
	ck := storiesCheckpoint(t)
	m := load(t, ck, pipeline.Options{MaxCache: 64})
	other := load(t, ck, pipeline.Options{MaxCache: 64, Slots: 1})
	for _, tc := range []struct {
		name string
		spec pipeline.Speculation
	}{
		{"nothing", pipeline.Speculation{}},
		{"both", pipeline.Speculation{Draft: other, Lookup: 2}},
		{"negative lookup", pipeline.Speculation{Lookup: -1}},
		{"lookup too long", pipeline.Speculation{Lookup: pipeline.MaxLookup + 1}},
		{"too many tokens", pipeline.Speculation{Lookup: 2, Tokens: pipeline.MaxDraftTokens + 1}},
		{"negative tokens", pipeline.Speculation{Lookup: 2, Tokens: -1}},
		{"self", pipeline.Speculation{Draft: m}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			var err error
			for _, e := range m.NewSession().Generate(t.Context(), pipeline.Prompt{IDs: []int{1, 2, 3}}, pipeline.GenerateOptions{MaxTokens: 4, Speculation: &spec}) {
				if e != nil {
					err = e
				}
			}
			if !errors.Is(err, pipeline.ErrOptions) {
				t.Fatalf("error %v, want ErrOptions", err)
			}
		})
	}
}

// TestSpeculativeSamplingReproducible: sampled speculative decoding (the
// model itself and a random model as drafts, and prompt lookup) gives the
// same ids for the same seed run to run, other ids for another seed, and
// consistent counts.
func TestSpeculativeSamplingReproducible(t *testing.T) {
	ck := storiesCheckpoint(t)
	m := load(t, ck, pipeline.Options{MaxCache: 256})
	self := load(t, ck, pipeline.Options{MaxCache: 256})
	random := load(t, randomDraft(ck), pipeline.Options{MaxCache: 256})
	prompt := pipeline.Prompt{IDs: testmodels.StoriesCases(t)[0].PromptIDs}
	for _, sc := range []struct {
		name string
		spec pipeline.Speculation
	}{
		{"self", pipeline.Speculation{Draft: self, Tokens: 4}},
		{"random", pipeline.Speculation{Draft: random, Tokens: 4}},
		{"lookup", pipeline.Speculation{Lookup: 2, Tokens: 4}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			run := func(seed uint64) []int {
				s := m.NewSession()
				spec := sc.spec
				ids := collect(t, s, prompt, pipeline.GenerateOptions{MaxTokens: 80, Temperature: 1, TopK: 40, Seed: seed, IgnoreStopTokens: true, Speculation: &spec})
				mt := s.Metrics()
				if len(ids) != 80 || mt.AcceptedTokens > mt.DraftTokens || mt.TargetSteps+mt.AcceptedTokens != mt.GeneratedTokens-1 {
					t.Errorf("%d ids, metrics %+v", len(ids), mt)
				}
				return ids
			}
			a, b, c := run(1), run(1), run(2)
			if !slices.Equal(a, b) {
				t.Errorf("seed 1 twice:\n%v\n%v", a, b)
			}
			if slices.Equal(a, c) {
				t.Errorf("seeds 1 and 2 give the same ids %v", a)
			}
		})
	}
}

// TestSpeculativeConcurrent: sessions speculating at once on a model with
// batched decode rounds (two slots, AlwaysBatch), beside one that does
// not, each give llama.cpp's golden greedy ids.
func TestSpeculativeConcurrent(t *testing.T) {
	ck := storiesCheckpoint(t)
	cases := testmodels.StoriesCases(t)
	m := load(t, ck, pipeline.Options{MaxCache: 256, Slots: 3}.WithTuning(tuning.Options{AlwaysBatch: true}))
	draft := load(t, randomDraft(ck), pipeline.Options{MaxCache: 256, Slots: 3})
	specs := []*pipeline.Speculation{{Lookup: 2}, {Draft: draft, Tokens: 3}, nil}
	errs := make(chan error, len(specs)*len(cases))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() {
			for j := range cases {
				tc := cases[(i+j)%len(cases)]
				s := m.NewSession()
				var got []int
				for tok, err := range s.Generate(t.Context(), pipeline.Prompt{IDs: tc.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(tc.GeneratedIDs), Speculation: spec}) {
					if err != nil {
						errs <- err
						return
					}
					if tok.ID >= 0 {
						got = append(got, tok.ID)
					}
				}
				if !slices.Equal(got, tc.GeneratedIDs) {
					errs <- fmt.Errorf("session %d, %s: ids\n got %v\nwant %v", i, tc.Name, got, tc.GeneratedIDs)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestSpeculativeArchitectures: over the GGUF architecture models,
// speculative greedy decoding (prompt lookup, and the model loaded again
// as its own draft, K = 4 and 8: 7 on gemma3's rings) gives llama.cpp's greedy ids; gemma3 with small
// prefill sizes keeps its local layers on rings (window 8, ring of 15),
// which the rolled-back drafts must not disturb.
func TestSpeculativeArchitectures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int
	}{
		{"llama", nil}, {"gemma2", nil}, {"phi2", nil}, {"falcon", nil}, {"llama-q8_0", nil},
		{"arch2/qwen3", nil}, {"arch2/gemma3", nil}, {"arch2/gemma3", []int{4, 8}}, {"arch2/qwen3moe", nil},
		// gemma4's shared layers read rolled-back caches of other layers.
		{"arch3/gemma4", nil}, {"arch3/gemma4", []int{4, 8}},
	} {
		t.Run(fmt.Sprint(tc.name, tc.sizes), func(t *testing.T) {
			var g testmodels.ArchGolden
			path := testmodels.Path(t, "arch", tc.name+".gguf")
			if base, ok := strings.CutPrefix(tc.name, "arch2/"); ok {
				g, path = testmodels.Arch2(t, base).ArchGolden, testmodels.Path(t, "arch2", base+".gguf")
			} else if base, ok := strings.CutPrefix(tc.name, "arch3/"); ok {
				g, path = testmodels.Arch3(t, base).ArchGolden, testmodels.Path(t, "arch3", base+".gguf")
			} else {
				g = testmodels.Arch(t, tc.name)
			}
			ck, err := gguf.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			opts := pipeline.Options{MaxCache: 64, PrefillSizes: tc.sizes}
			m := load(t, ck, opts)
			self := load(t, ck, opts)
			for _, spec := range []pipeline.Speculation{{Lookup: 2, Tokens: 4}, {Draft: self, Tokens: 4}, {Draft: self, Tokens: 8}} {
				s := m.NewSession()
				got := collect(t, s, pipeline.Prompt{IDs: g.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs), Speculation: &spec})
				if !slices.Equal(got, g.GreedyIDs) {
					t.Errorf("%+v: ids\n got %v\nwant %v", spec, got, g.GreedyIDs)
				}
				if mt := s.Metrics(); spec.Draft != nil && mt.AcceptedTokens == 0 {
					t.Errorf("%+v: metrics %+v", spec, mt)
				}
			}
		})
	}
}
