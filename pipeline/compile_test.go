package pipeline_test

import (
	"testing"

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
