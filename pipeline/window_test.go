package pipeline_test

import (
	"context"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// windowCounter wraps a backend and counts the windows of decode steps
// (gpu.Program.StartSteps) its programs start and the multi-step
// submissions (RunSteps) they run one at a time.
type windowCounter struct {
	gpu.Backend
	windows, steps int
}

func (b *windowCounter) Compile(g *fusion.Graph, w gpu.Weights, kv gpu.KVCache) (gpu.Program, error) {
	p, err := b.Backend.Compile(g, w, kv)
	if err != nil {
		return nil, err
	}
	return &windowProgram{Program: p, b: b}, nil
}

type windowProgram struct {
	gpu.Program
	b *windowCounter
}

func (p *windowProgram) StartSteps(ctx context.Context, token int32, pos, steps, per int, stops []int32, timed bool) (gpu.StepWindow, error) {
	w, err := p.Program.StartSteps(ctx, token, pos, steps, per, stops, timed)
	if err == nil {
		p.b.windows++
	}
	return w, err
}

func (p *windowProgram) RunSteps(ctx context.Context, token int32, pos, n int, stops []int32) ([]int32, error) {
	p.b.steps++
	return p.Program.RunSteps(ctx, token, pos, n, stops)
}

// TestWindowSteps: on WebGPU and Vulkan (which read ahead, gpu.Caps.ReadAhead), a
// generation in windows of decode steps (the next submission queued
// before the host reads the one before) equals the same generation
// submitted one at a time (pipeline.NoWindows), token for token: greedy
// (llama.cpp's ids), sampled, a stop id the device picks mid-window, the
// consumer stopping mid-window and a token limit mid-window (the window
// queued steps past the stop, which must not matter: the next turn of
// each conversation equals the unwindowed one's). The windowed model
// must start windows and run no one-at-a-time submission.
func TestWindowSteps(t *testing.T) {
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) { windowSteps(t, backend) })
	}
}

func windowSteps(t *testing.T, backend string) {
	ck := storiesCheckpoint(t)
	cases := testmodels.StoriesCases(t)
	wc := &windowCounter{Backend: openBackend(t, backend)}
	if !wc.Caps().ReadAhead {
		t.Fatalf("the %s backend does not read ahead", backend)
	}
	win := load(t, ck, pipeline.Options{Backend: wc, MaxCache: 160, StepsPerSubmit: 8})
	oc := &windowCounter{Backend: wc.Backend}
	one := load(t, ck, pipeline.Options{Backend: oc, MaxCache: 160, StepsPerSubmit: 8})
	pipeline.NoWindows(one)

	// turns runs two turns (the second: 24 ids after the token given) on
	// a fresh session of m, the first stopping after limit ids where
	// limit > 0 (the consumer), and returns both turns' ids.
	// Another generation first fills the cache positions the turns take
	// with other keys and values, so that a position the windows claim
	// but did not write (or wrote past a stop) shows in the next turn.
	poison := pipeline.GenerateOptions{MaxTokens: 100, Temperature: 1.5, Seed: 5, IgnoreStopTokens: true}
	turns := func(m *pipeline.Model, prompt []int, o pipeline.GenerateOptions, limit, next int) ([]int, []int) {
		collect(t, m.NewSession(), pipeline.Prompt{IDs: cases[1].PromptIDs}, poison)
		s := m.NewSession()
		var first []int
		for tok, err := range s.Generate(context.Background(), pipeline.Prompt{IDs: prompt}, o) {
			if err != nil {
				t.Fatal(err)
			}
			if tok.ID >= 0 {
				first = append(first, tok.ID)
			}
			if limit > 0 && len(first) == limit {
				break
			}
		}
		second := collect(t, s, pipeline.Prompt{IDs: []int{next}}, pipeline.GenerateOptions{MaxTokens: 24, IgnoreStopTokens: true})
		return first, second
	}
	c := cases[0]
	ids := c.GeneratedIDs
	// A stop id first generated past the window's first submission
	// (ids 1..8 come from it).
	k := 11
	for slices.Contains(ids[:k], ids[k]) {
		k++
	}
	sampled := pipeline.GenerateOptions{MaxTokens: 64, Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 99, IgnoreStopTokens: true}
	for _, tc := range []struct {
		name  string
		o     pipeline.GenerateOptions
		limit int
		want  []int // nil: only the unwindowed model's
	}{
		{"greedy", pipeline.GenerateOptions{MaxTokens: len(ids), IgnoreStopTokens: true}, 0, ids},
		{"sampled", sampled, 0, nil},
		{"stop id mid-window", pipeline.GenerateOptions{MaxTokens: 64, StopTokens: []int{ids[k]}}, 0, ids[:k]},
		{"consumer stops mid-window", pipeline.GenerateOptions{MaxTokens: 64, IgnoreStopTokens: true}, 13, ids[:13]},
		{"sampled, consumer stops mid-window", sampled, 21, nil},
		{"token limit mid-window", pipeline.GenerateOptions{MaxTokens: 19, IgnoreStopTokens: true}, 0, ids[:19]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wc.windows, wc.steps, oc.windows, oc.steps = 0, 0, 0, 0
			got, gotNext := turns(win, c.PromptIDs, tc.o, tc.limit, 7)
			if wc.windows == 0 || wc.steps != 0 {
				t.Errorf("windowed model: %d windows, %d one-at-a-time submissions: want windows only", wc.windows, wc.steps)
			}
			want, wantNext := turns(one, c.PromptIDs, tc.o, tc.limit, 7)
			if oc.steps == 0 || oc.windows != 0 {
				t.Errorf("unwindowed model: %d windows, %d one-at-a-time submissions: want submissions only", oc.windows, oc.steps)
			}
			if !slices.Equal(got, want) {
				t.Errorf("ids in windows\n got %v\nwant %v (one submission at a time)", got, want)
			}
			if tc.want != nil && !slices.Equal(got, tc.want) {
				t.Errorf("ids in windows\n got %v\nwant %v (llama.cpp)", got, tc.want)
			}
			if !slices.Equal(gotNext, wantNext) {
				t.Errorf("next turn\n got %v\nwant %v (one submission at a time)", gotNext, wantNext)
			}
		})
	}
	// Every golden prompt, greedy: llama.cpp's ids.
	for _, c := range cases[1:] {
		if got := collect(t, win.NewSession(), pipeline.Prompt{IDs: c.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(c.GeneratedIDs), IgnoreStopTokens: true}); !slices.Equal(got, c.GeneratedIDs) {
			t.Errorf("%s in windows: ids\n got %v\nwant %v (llama.cpp)", c.Name, got, c.GeneratedIDs)
		}
	}
}
