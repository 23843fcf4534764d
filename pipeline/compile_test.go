package pipeline_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// TestNoCompileAfterLoad: a model on a GPU backend compiles at load every
// program its generations use (the prefill and decode programs and the
// token-picking ones, greedy and sampling), so that no generation waits
// for a compile: none is compiled by a sampled generation, a greedy one,
// or a sampled one with another rule, each with a few steps per
// submission and without.
func TestNoCompileAfterLoad(t *testing.T) {
	ck := storiesCheckpoint(t)
	c := testmodels.StoriesCases(t)[0]
	for _, backend := range []string{"vulkan", "webgpu"} {
		t.Run(backend, func(t *testing.T) {
			sc := &stepCounter{Backend: openBackend(t, backend)}
			m := load(t, ck, pipeline.Options{Backend: sc, MaxCache: 64, StepsPerSubmit: 4})
			loaded := sc.compiles
			s := m.NewSession()
			for _, o := range []pipeline.GenerateOptions{
				{MaxTokens: 6, Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 7},
				{MaxTokens: 6},
				{MaxTokens: 6, Temperature: 1.2, Seed: 8},
			} {
				s.Reset()
				collect(t, s, pipeline.Prompt{IDs: c.PromptIDs}, o)
			}
			if sc.compiles != loaded {
				t.Errorf("%d programs compiled at load, %d more by the generations: want none", loaded, sc.compiles-loaded)
			}
		})
	}
}

// cancelAfterWeights cancels a context once the weights are uploaded, as a
// Ctrl-C during the compiles of a load does.
type cancelAfterWeights struct {
	stepCounter
	cancel func()
}

func (b *cancelAfterWeights) LoadWeights(ctx context.Context, ws []*tensors.Tensor) (gpu.Weights, error) {
	w, err := b.stepCounter.LoadWeights(ctx, ws)
	b.cancel()
	return w, err
}

// TestLoadCancelledBetweenCompiles: a context cancelled during a load's
// compiles ends the load after the compile in progress, with the
// context's error.
func TestLoadCancelledBetweenCompiles(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := &cancelAfterWeights{stepCounter: stepCounter{Backend: cpu.New(cpu.Options{})}, cancel: cancel}
	m, err := pipeline.FromCheckpoint(ctx, storiesCheckpoint(t), pipeline.Options{Backend: b})
	if err == nil {
		m.Close()
	}
	if !errors.Is(err, context.Canceled) || b.compiles > 1 {
		t.Errorf("error %v after %d compiles, want cancellation after at most 1", err, b.compiles)
	}
}
