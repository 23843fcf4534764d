package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/model"
)

// posRecorder wraps a backend and records where its programs run: the
// first position and the count of every Run, RunSteps and TimeSteps.
type posRecorder struct {
	gpu.Backend
	runs [][2]int // {pos, tokens}
}

func (b *posRecorder) Compile(g *fusion.Graph, w gpu.Weights, kv gpu.KVCache) (gpu.Program, error) {
	p, err := b.Backend.Compile(g, w, kv)
	if err != nil {
		return nil, err
	}
	return &posProgram{Program: p, b: b}, nil
}

type posProgram struct {
	gpu.Program
	b *posRecorder
}

func (p *posProgram) Run(ctx context.Context, tokens []int32, pos int) error {
	p.b.runs = append(p.b.runs, [2]int{pos, len(tokens)})
	return p.Program.Run(ctx, tokens, pos)
}

func (p *posProgram) RunSteps(ctx context.Context, token int32, pos, n int, stops []int32) ([]int32, error) {
	ids, err := p.Program.RunSteps(ctx, token, pos, n, stops)
	p.b.runs = append(p.b.runs, [2]int{pos, len(ids)})
	return ids, err
}

// covered checks that runs write positions from..to-1 once each, in order.
func covered(t *testing.T, what string, runs [][2]int, from, to int) {
	t.Helper()
	next := from
	for _, r := range runs {
		if r[0] != next {
			t.Fatalf("%s: runs %v: one at %d, want %d", what, runs, r[0], next)
		}
		next += r[1]
	}
	if next != to {
		t.Fatalf("%s: runs %v end at %d, want %d", what, runs, next, to)
	}
}

// TestKVDepthFill: a session at a depth of D positions, filled with random
// keys and values (Session.FillRandom) or prefilled (Session.Prefill),
// continues at position D: its prompt and decode steps run at D, D+1, ...
// (the attention of a step at p reads the positions <= p), and its logits
// read the filled positions: they differ from the same token's at depth
// 0, and from another seed's fill, while the same seed gives the same
// logits bit for bit. A prefilled depth gives the logits of one prompt of
// the D+1 tokens.
func TestKVDepthFill(t *testing.T) {
	ck := storiesCheckpoint(t)
	ctx := context.Background()
	const depth = 700 // two store steps of 512, one of them short
	rec := &posRecorder{Backend: cpuBackend(t)}
	m := load(t, ck, pipeline.Options{Backend: rec, MaxCache: 1024})
	ctxIDs := ids(5, depth)
	tok := 77

	logitsAt := func(seed uint64) []float32 {
		t.Helper()
		s := m.NewSession()
		rec.runs = nil
		if err := s.FillRandom(ctx, ctxIDs, seed); err != nil {
			t.Fatal(err)
		}
		covered(t, "fill", rec.runs, 0, depth)
		if h := s.History(); !slices.Equal(h, ctxIDs) {
			t.Fatalf("history after the fill: %d ids, want the %d filled", len(h), depth)
		}
		rec.runs = nil
		row, ran, err := pipeline.PrefillLogits(m, cat(ctxIDs, []int{tok}))
		if err != nil {
			t.Fatal(err)
		}
		if ran != 1 {
			t.Fatalf("after a fill of %d, the next token ran %d tokens, want 1 (the filled positions reused)", depth, ran)
		}
		covered(t, "step after the fill", rec.runs, depth, depth+1)
		return row
	}
	a := logitsAt(1)
	b := logitsAt(2)
	a2 := logitsAt(1)
	shallow, _, err := pipeline.PrefillLogits(load(t, ck, pipeline.Options{MaxCache: 1024}), []int{tok})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, a2) {
		t.Errorf("two fills of seed 1 give different logits")
	}
	if d := maxDiff(a, b); d < 1e-3 {
		t.Errorf("fills of seeds 1 and 2 give logits within %g: the filled positions are not read", d)
	}
	if d := maxDiff(a, shallow); d < 1e-3 {
		t.Errorf("logits at depth %d within %g of depth 0's: the filled positions are not read", depth, d)
	}

	// Decode steps after a fill run at depth+1, depth+2, ...
	s := m.NewSession()
	if err := s.FillRandom(ctx, ctxIDs, 3); err != nil {
		t.Fatal(err)
	}
	rec.runs = nil
	got := collect(t, s, pipeline.Prompt{IDs: []int{tok}}, pipeline.GenerateOptions{MaxTokens: 5, IgnoreStopTokens: true})
	if len(got) != 5 {
		t.Fatalf("generated %d tokens, want 5", len(got))
	}
	covered(t, "generation after the fill", rec.runs, depth, depth+5)
	if met := s.Metrics(); met.PrefillTokens != 1 || met.DecodeSteps != 4 {
		t.Errorf("metrics after the fill: prefill %d tokens, %d decode steps, want 1 and 4", met.PrefillTokens, met.DecodeSteps)
	}

	// A prefilled depth (other ids: the slot holding the filled ones
	// would give them back): the logits of the whole context run at once.
	ctxIDs = ids(6, depth)
	s = m.NewSession()
	rec.runs = nil
	if err := s.Prefill(ctx, ctxIDs); err != nil {
		t.Fatal(err)
	}
	covered(t, "prefill", rec.runs, 0, depth)
	if met := s.Metrics(); met.PrefillTokens != depth || met.PromptTokens != depth {
		t.Errorf("prefill metrics %+v, want %d tokens", met, depth)
	}
	deep, ran, err := pipeline.PrefillLogits(m, cat(ctxIDs, []int{tok}))
	if err != nil || ran != 1 {
		t.Fatalf("after the prefill: ran %d, %v", ran, err)
	}
	whole, _, err := pipeline.PrefillLogits(load(t, ck, pipeline.Options{MaxCache: 1024}), cat(ctxIDs, []int{tok}))
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(deep, whole); d > 1e-4 {
		t.Errorf("prefilled depth: logits %g from one prompt's", d)
	}
}

// TestKVDepthFillQuantized: a random fill stores through the quantized,
// rotated caches' store path: seeds give different logits, and the same
// seed the same ones.
func TestKVDepthFillQuantized(t *testing.T) {
	ck, err := gguf.Load(kvrotPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, kt := range []fusion.KVType{fusion.KVQ8_0, fusion.KVQ4_0} {
		m := load(t, ck, pipeline.Options{MaxCache: 128, CacheTypeK: kt, CacheTypeV: kt})
		ctxIDs := make([]int, 100)
		for i := range ctxIDs {
			ctxIDs[i] = 1 + i%50
		}
		row := func(seed uint64) []float32 {
			if err := m.NewSession().FillRandom(context.Background(), ctxIDs, seed); err != nil {
				t.Fatal(err)
			}
			r, ran, err := pipeline.PrefillLogits(m, cat(ctxIDs, []int{7}))
			if err != nil || ran != 1 {
				t.Fatalf("%v: ran %d, %v", kt, ran, err)
			}
			return r
		}
		a, b, a2 := row(1), row(2), row(1)
		if !slices.Equal(a, a2) || maxDiff(a, b) < 1e-3 {
			t.Errorf("%v: same seed differs by %g, seeds 1 and 2 by %g", kt, maxDiff(a, a2), maxDiff(a, b))
		}
	}
}

// TestKVDepthFillErrors: what a random fill refuses.
func TestKVDepthFillErrors(t *testing.T) {
	ck := storiesCheckpoint(t)
	ctx := context.Background()
	m := load(t, ck, pipeline.Options{MaxCache: 64})
	s := m.NewSession()
	if err := s.FillRandom(ctx, ids(1, 65), 1); !errors.Is(err, pipeline.ErrPromptTooLong) {
		t.Errorf("a fill past the cache: %v, want ErrPromptTooLong", err)
	}
	if err := s.FillRandom(ctx, nil, 1); !errors.Is(err, pipeline.ErrPrompt) {
		t.Errorf("an empty fill: %v, want ErrPrompt", err)
	}
	if err := s.FillRandom(ctx, []int{3, 100000}, 1); !errors.Is(err, pipeline.ErrPrompt) {
		t.Errorf("an id outside the vocabulary: %v, want ErrPrompt", err)
	}
	if err := s.FillRandom(ctx, ids(1, 10), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.FillRandom(ctx, ids(1, 10), 1); !errors.Is(err, pipeline.ErrPrompt) {
		t.Errorf("a second fill of the session: %v, want ErrPrompt", err)
	}
	if err := s.Prefill(ctx, ids(2, 60)); !errors.Is(err, pipeline.ErrPromptTooLong) {
		t.Errorf("a prefill past the cache: %v, want ErrPromptTooLong", err)
	}
	pm := load(t, ck, pipeline.Options{MaxCache: 64, PrefixCacheBytes: 1 << 20})
	if err := pm.NewSession().FillRandom(ctx, ids(1, 10), 1); !errors.Is(err, pipeline.ErrOptions) {
		t.Errorf("a fill with a prefix cache: %v, want ErrOptions", err)
	}
}

// TestKVDepthFillGPU: a random fill on the GPU backends stores the rows
// the CPU backend stores (one seed, one stream of rows) through their own
// store kernels, f32 and q8_0 (rotated) caches alike: the logits of the
// next position equal the CPU's within the backends' tolerance, and
// another seed's differ by far more.
func TestKVDepthFillGPU(t *testing.T) {
	stories := storiesCheckpoint(t)
	rot, err := gguf.Load(kvrotPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"vulkan", "webgpu"} {
		t.Run(backend, func(t *testing.T) {
			b := openBackend(t, backend)
			for _, tc := range []struct {
				name string
				ck   *model.Checkpoint
				opts pipeline.Options
				tol  float64
			}{
				{"stories f32", stories, pipeline.Options{MaxCache: 256, Activations: "f32"}, 1e-3},
				{"qwen3 q8_0", rot, pipeline.Options{MaxCache: 256, Activations: "f32", CacheTypeK: fusion.KVQ8_0, CacheTypeV: fusion.KVQ8_0}, 2e-2},
			} {
				ctxIDs := make([]int, 200)
				for i := range ctxIDs {
					ctxIDs[i] = 3 + i%100
				}
				row := func(m *pipeline.Model, seed uint64) []float32 {
					t.Helper()
					if err := m.NewSession().FillRandom(context.Background(), ctxIDs, seed); err != nil {
						t.Fatalf("%s on %s: %v", tc.name, backend, err)
					}
					r, ran, err := pipeline.PrefillLogits(m, cat(ctxIDs, []int{5}))
					if err != nil || ran != 1 {
						t.Fatalf("%s on %s: ran %d, %v", tc.name, backend, ran, err)
					}
					return r
				}
				cpuModel := load(t, tc.ck, tc.opts)
				opts := tc.opts
				opts.Backend = b
				gpuModel := load(t, tc.ck, opts)
				want, other := row(cpuModel, 1), row(cpuModel, 2)
				got := row(gpuModel, 1)
				if d, apart := maxDiff(got, want), maxDiff(other, want); d > tc.tol || apart < 10*tc.tol {
					t.Errorf("%s: %s fill %g from the CPU's (tolerance %g); another seed's %g apart", tc.name, backend, d, tc.tol, apart)
				}
			}
		})
	}
}
