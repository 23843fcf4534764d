package pipeline_test

import (
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// TestMoEGPUSessions: qwen3moe (arch2) on both GPU backends, its MoE ops
// on the device (router, top-k and expert products with no host round
// trip), through sessions that pick ids on the device: greedy decoding
// with 1 and 4 decode steps per submission gives llama.cpp's greedy ids,
// with the expected multi-step submissions, and seeded sampling gives the
// same ids packed or not.
func TestMoEGPUSessions(t *testing.T) {
	g := testmodels.Arch2(t, "qwen3moe")
	ck, err := gguf.Load(testmodels.Path(t, "arch2", "qwen3moe.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	sampled := pipeline.GenerateOptions{MaxTokens: 16, Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 99, IgnoreStopTokens: true}
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			b := openBackend(t, backend)
			var first []int
			for _, n := range []int{1, 4} {
				sc := &stepCounter{Backend: b}
				m := load(t, ck, pipeline.Options{Backend: sc, MaxCache: 64, StepsPerSubmit: n})
				greedy := pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs), IgnoreStopTokens: true}
				if got := collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, greedy); !slices.Equal(got, g.GreedyIDs) {
					t.Errorf("n=%d greedy: ids\n got %v\nwant %v (llama.cpp)", n, got, g.GreedyIDs)
				}
				if s := submissions(len(g.GreedyIDs), n); len(sc.asked) != s {
					t.Errorf("n=%d greedy: %d multi-step submissions %v, want %d", n, len(sc.asked), sc.asked, s)
				}
				got := collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, sampled)
				if sc.samplers == 0 {
					t.Errorf("n=%d: no graph ending in fusion.Sample compiled: not sampled on the device", n)
				}
				if first == nil {
					first = got
				} else if !slices.Equal(got, first) {
					t.Errorf("n=%d sampled: ids\n got %v\nwant %v (n=1)", n, got, first)
				}
			}
		})
	}
}
