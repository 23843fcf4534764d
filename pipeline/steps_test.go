package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// stepCounter wraps a GPU backend and records the multi-step submissions
// (gpu.Program.RunSteps) of its programs: the steps asked for and the
// ids returned.
type stepCounter struct {
	gpu.Backend
	asked, got []int
	samplers   int // graphs ending in fusion.Sample compiled
	compiles   int // graphs compiled
}

// Caps turns windows of decode steps off (gpu.Caps.ReadAhead): these
// tests count and hold RunSteps' one-at-a-time submissions (windows:
// TestWindowSteps).
func (b *stepCounter) Caps() gpu.Caps {
	c := b.Backend.Caps()
	c.ReadAhead = false
	return c
}

func (b *stepCounter) Compile(g *fusion.Graph, w gpu.Weights, kv gpu.KVCache) (gpu.Program, error) {
	b.compiles++
	if slices.ContainsFunc(g.Ops, func(op fusion.Op) bool { return op.Kind() == fusion.Sample }) {
		b.samplers++
	}
	p, err := b.Backend.Compile(g, w, kv)
	if err != nil {
		return nil, err
	}
	return &countedSteps{Program: p, b: b}, nil
}

type countedSteps struct {
	gpu.Program
	b *stepCounter
}

func (p *countedSteps) RunSteps(ctx context.Context, token int32, pos, n int, stops []int32) ([]int32, error) {
	ids, err := p.Program.RunSteps(ctx, token, pos, n, stops)
	if err == nil {
		p.b.asked, p.b.got = append(p.b.asked, n), append(p.b.got, len(ids))
	}
	return ids, err
}

// submissions returns how many multi-step submissions generating tokens
// ids after the prefill's takes with n steps per submission: one per n
// ids, the last one short; a last one of a single step is a plain Run.
func submissions(tokens, n int) int {
	count := 0
	for rest := tokens - 1; rest > 0; rest -= min(n, rest) {
		if min(n, rest) >= 2 {
			count++
		}
	}
	return count
}

// TestStepsPerSubmit: on both GPU backends, greedy decoding with 1, 4 and 8
// decode steps per submission gives llama.cpp's golden ids for every
// golden prompt, and seeded sampling (temperature 0.8, top-k 40, top-p
// 0.9) gives the CPU backend's ids, token for token, with the expected
// number of multi-step submissions.
func TestStepsPerSubmit(t *testing.T) {
	ck := storiesCheckpoint(t)
	sampled := pipeline.GenerateOptions{MaxTokens: 64, Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 1234, IgnoreStopTokens: true}
	cases := testmodels.StoriesCases(t)
	ref := load(t, ck, pipeline.Options{Backend: cpu.New(cpu.Options{}), MaxCache: 128})
	var want [][]int
	for _, c := range cases {
		want = append(want, collect(t, ref.NewSession(), pipeline.Prompt{IDs: c.PromptIDs}, sampled))
	}
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			b := openBackend(t, backend)
			for _, n := range []int{1, 4, 8} {
				sc := &stepCounter{Backend: b}
				// f32 activations, as TestDeviceSampling: compared with the CPU's draws.
				m := load(t, ck, pipeline.Options{Backend: sc, MaxCache: 128, StepsPerSubmit: n, Activations: "f32"})
				for i, c := range cases {
					sc.asked = nil
					greedy := pipeline.GenerateOptions{MaxTokens: len(c.GeneratedIDs), IgnoreStopTokens: true}
					if got := collect(t, m.NewSession(), pipeline.Prompt{IDs: c.PromptIDs}, greedy); !slices.Equal(got, c.GeneratedIDs) {
						t.Errorf("n=%d %s greedy: ids\n got %v\nwant %v (llama.cpp)", n, c.Name, got, c.GeneratedIDs)
					}
					if s := submissions(len(c.GeneratedIDs), n); len(sc.asked) != s {
						t.Errorf("n=%d %s greedy: %d multi-step submissions %v, want %d", n, c.Name, len(sc.asked), sc.asked, s)
					}
					sc.asked = nil
					if got := collect(t, m.NewSession(), pipeline.Prompt{IDs: c.PromptIDs}, sampled); !slices.Equal(got, want[i]) {
						t.Errorf("n=%d %s sampled: ids\n got %v\nwant %v (cpu)", n, c.Name, got, want[i])
					}
					if s := submissions(sampled.MaxTokens, n); len(sc.asked) != s {
						t.Errorf("n=%d %s sampled: %d multi-step submissions %v, want %d", n, c.Name, len(sc.asked), sc.asked, s)
					}
				}
			}
		})
	}
}

// TestStepsStopToken: a stop token the device picks in the middle of a
// submission ends the submission there (it returns fewer ids than it was
// asked for, the stop id last) and the generation with it; the session's
// next turn continues from the cache the device left, as a fresh
// one-step-per-submission model does from the same conversation.
func TestStepsStopToken(t *testing.T) {
	ck := storiesCheckpoint(t)
	c := testmodels.StoriesCases(t)[0]
	ids := c.GeneratedIDs
	// A stop id first generated at index k (k >= 1: not the prefill's),
	// inside the first submission of 8 steps (ids 1..8).
	k := -1
	for i := 3; i <= 6 && k < 0; i++ {
		if slices.Index(ids, ids[i]) == i {
			k = i
		}
	}
	if k < 0 {
		t.Fatalf("no id first generated at 3..6 in %v", ids)
	}
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			b := openBackend(t, backend)
			sc := &stepCounter{Backend: b}
			m := load(t, ck, pipeline.Options{Backend: sc, MaxCache: 128, StepsPerSubmit: 8})
			s := m.NewSession()
			opts := pipeline.GenerateOptions{MaxTokens: 32, StopTokens: []int{ids[k]}}
			got := collect(t, s, pipeline.Prompt{IDs: c.PromptIDs}, opts)
			if !slices.Equal(got, ids[:k]) {
				t.Errorf("ids\n got %v\nwant %v", got, ids[:k])
			}
			if r := s.Metrics().StopReason; r != pipeline.StopToken {
				t.Errorf("stop reason %q, want %q", r, pipeline.StopToken)
			}
			if len(sc.asked) != 1 || sc.asked[0] != 8 || sc.got[0] != k {
				t.Errorf("submissions: asked %v, got %v ids, want one of 8 returning %d", sc.asked, sc.got, k)
			}
			// The next turn: the same conversation continued with 16 more
			// greedy ids on a model stepping one token per submission.
			turn := pipeline.GenerateOptions{MaxTokens: 16, IgnoreStopTokens: true}
			next := collect(t, s, pipeline.Prompt{IDs: []int{ids[k]}}, turn)
			one := load(t, ck, pipeline.Options{Backend: b, MaxCache: 128, StepsPerSubmit: 1})
			fresh := one.NewSession()
			collect(t, fresh, pipeline.Prompt{IDs: c.PromptIDs}, opts)
			if wantNext := collect(t, fresh, pipeline.Prompt{IDs: []int{ids[k]}}, turn); !slices.Equal(next, wantNext) {
				t.Errorf("next turn: ids\n got %v\nwant %v (one step per submission)", next, wantNext)
			}
		})
	}
}

// TestStepsCancel: cancelling while a submission's ids are being streamed
// ends the generation before the next submission: no more ids and no
// more submissions follow.
func TestStepsCancel(t *testing.T) {
	ck := storiesCheckpoint(t)
	c := testmodels.StoriesCases(t)[0]
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			sc := &stepCounter{Backend: openBackend(t, backend)}
			m := load(t, ck, pipeline.Options{Backend: sc, MaxCache: 128, StepsPerSubmit: 4})
			s := m.NewSession()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got []int
			var gotErr error
			for tok, err := range s.Generate(ctx, pipeline.Prompt{IDs: c.PromptIDs}, pipeline.GenerateOptions{MaxTokens: 64, IgnoreStopTokens: true}) {
				if err != nil {
					gotErr = err
					break
				}
				got = append(got, tok.ID)
				if len(got) == 3 {
					cancel() // the prefill's id and two of the first submission's four
				}
			}
			if !errors.Is(gotErr, context.Canceled) || s.Metrics().StopReason != pipeline.StopCancelled {
				t.Errorf("err %v, stop reason %q: want cancellation", gotErr, s.Metrics().StopReason)
			}
			if !slices.Equal(got, c.GeneratedIDs[:3]) {
				t.Errorf("ids %v, want %v", got, c.GeneratedIDs[:3])
			}
			if len(sc.asked) != 1 {
				t.Errorf("%d submissions %v, want 1", len(sc.asked), sc.asked)
			}
		})
	}
}

// TestStepsSamplingRule: the sampling rule lives in the decode program's
// step tensor, so a session changing it (seed, temperature, top-k, top-p)
// reuses the one compiled sampling program, and every rule gives the CPU
// backend's ids, with one and with 8 steps per submission.
func TestStepsSamplingRule(t *testing.T) {
	ck := storiesCheckpoint(t)
	c := testmodels.StoriesCases(t)[1]
	rules := []pipeline.GenerateOptions{
		{MaxTokens: 24, Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 1234, IgnoreStopTokens: true},
		{MaxTokens: 24, Temperature: 1.3, Seed: 5, IgnoreStopTokens: true},
		{MaxTokens: 24, Temperature: 0.6, TopK: 5, Seed: 1 << 40, IgnoreStopTokens: true},
		{MaxTokens: 24, Temperature: 1, TopP: 0.5, Seed: 77, IgnoreStopTokens: true},
	}
	ref := load(t, ck, pipeline.Options{Backend: cpu.New(cpu.Options{}), MaxCache: 128})
	var want [][]int
	for _, o := range rules {
		want = append(want, collect(t, ref.NewSession(), pipeline.Prompt{IDs: c.PromptIDs}, o))
	}
	for i := range want[1:] {
		if slices.Equal(want[i], want[i+1]) {
			t.Fatalf("rules %d and %d give the same ids %v", i, i+1, want[i])
		}
	}
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			b := openBackend(t, backend)
			for _, n := range []int{1, 8} {
				sc := &stepCounter{Backend: b}
				// f32 activations: the logits agree closely enough with the
				// CPU's for the flat distributions of these rules.
				m := load(t, ck, pipeline.Options{Backend: sc, MaxCache: 128, StepsPerSubmit: n, Activations: "f32"})
				s := m.NewSession()
				for i, o := range rules {
					s.Reset()
					if got := collect(t, s, pipeline.Prompt{IDs: c.PromptIDs}, o); !slices.Equal(got, want[i]) {
						t.Errorf("n=%d rule %d: ids\n got %v\nwant %v (cpu)", n, i, got, want[i])
					}
				}
				if sc.samplers != 1 {
					t.Errorf("n=%d: %d sampling programs compiled for %d rules, want 1", n, sc.samplers, len(rules))
				}
			}
		})
	}
}
