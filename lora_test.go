package gpurun_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestLoRABackends opens the tiny llama with two adapters, merged at load
// (WithLoRA) and unmerged (WithUnmergedLoRA), on every backend and
// generates llama.cpp's greedy ids with the
// same adapters (testdata/lora/llama_two.golden.json: llama.cpp applies
// them unmerged). internal/arch's TestLoRAGoldens compares the logits.
func TestLoRABackends(t *testing.T) {
	dir := filepath.Join(testmodels.Root(t), "testdata", "lora")
	var g testmodels.ArchGolden
	testmodels.DecodeJSON(t, filepath.Join(dir, "llama_two.golden.json"), &g)
	for _, tc := range []struct {
		backend  string
		unmerged bool
	}{{"cpu", false}, {"cpu", true}, {"vulkan", false}, {"vulkan", true}, {"webgpu", false}, {"webgpu", true}} {
		name := tc.backend
		if tc.unmerged {
			name += "/unmerged"
		}
		t.Run(name, func(t *testing.T) {
			opts := []gpurun.Option{gpurun.WithBackend(tc.backend), gpurun.WithActivations("f32"), gpurun.WithMaxCache(64),
				gpurun.WithLoRA(filepath.Join(dir, "llama_r4.gguf"), 1),
				gpurun.WithLoRA(filepath.Join(dir, "llama_r16.gguf"), 0.5)}
			if tc.unmerged {
				opts = append(opts, gpurun.WithUnmergedLoRA())
			}
			m, err := gpurun.Open(context.Background(), testmodels.Path(t, "arch", "llama.gguf"), opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			var got []int
			for tok, err := range m.NewSession().Generate(context.Background(), gpurun.Prompt{IDs: g.PromptIDs}, gpurun.GenerateOptions{MaxTokens: len(g.GreedyIDs), IgnoreStopTokens: true}) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, tok.ID)
			}
			if !slices.Equal(got, g.GreedyIDs) {
				t.Errorf("ids\n got %v\nwant %v", got, g.GreedyIDs)
			}
		})
	}
}

// TestLoRAOptions: adapters on a converted model file, or a missing one,
// are clear errors, and OpenCheckpoint leaves the caller's checkpoint as
// it was.
func TestLoRAOptions(t *testing.T) {
	ctx := context.Background()
	_, err := gpurun.Open(ctx, testmodels.Path(t, "arch", "llama.gguf"), gpurun.WithBackend("cpu"), gpurun.WithLoRA("no/such/adapter.gguf", 1))
	if err == nil {
		t.Error("a missing adapter opened")
	}
	_, err = gpurun.Open(ctx, testmodels.Path(t, "arch", "phi2.gguf"), gpurun.WithBackend("cpu"),
		gpurun.WithLoRA(filepath.Join(testmodels.Root(t), "testdata", "lora", "llama_r4.gguf"), 1))
	if err == nil {
		t.Error("a llama adapter opened on phi2")
	}
	t.Log(err)
	if errors.Is(err, gpurun.ErrOptions) {
		t.Errorf("a mismatch is no option error: %v", err)
	}
}
