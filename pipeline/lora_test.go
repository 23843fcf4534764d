package pipeline_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// TestVariants loads the tiny llama once with three adapter sets (none,
// llama_r4, llama_r16 at 0.5) and runs one generation on each at the same
// time: each gives llama.cpp's greedy ids for its set (testdata/lora and
// the base model's own golden).
func TestVariants(t *testing.T) {
	ck, err := gguf.Load(testmodels.Path(t, "arch", "llama.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(testmodels.Root(t), "testdata", "lora")
	adapter := func(name string, scale float32) []lora.Applied {
		a, err := checkpoint.LoadLoRA(filepath.Join(dir, name+".gguf"), &ck.Config)
		if err != nil {
			t.Fatal(err)
		}
		return []lora.Applied{{Adapter: a, Scale: scale}}
	}
	goldens := []testmodels.ArchGolden{testmodels.Arch(t, "llama")}
	for _, name := range []string{"llama_r4", "llama_r16_half"} {
		var g testmodels.ArchGolden
		testmodels.DecodeJSON(t, filepath.Join(dir, name+".golden.json"), &g)
		goldens = append(goldens, g)
	}
	be := cpu.New(cpu.Options{})
	defer be.Close()
	models, err := pipeline.FromCheckpointVariants(context.Background(), ck, pipeline.Options{Backend: be, MaxCache: 64},
		[][]lora.Applied{nil, adapter("llama_r4", 1), adapter("llama_r16", 0.5)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([][]int, len(models))
	for i, m := range models {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tok, err := range m.NewSession().Generate(context.Background(), pipeline.Prompt{IDs: goldens[i].PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(goldens[i].GreedyIDs)}) {
				if err != nil {
					t.Error(err)
					return
				}
				if tok.ID >= 0 {
					got[i] = append(got[i], tok.ID)
				}
			}
		}()
	}
	wg.Wait()
	for i, g := range goldens {
		if !slices.Equal(got[i], g.GreedyIDs) {
			t.Errorf("set %d: ids\n got %v\nwant %v", i, got[i], g.GreedyIDs)
		}
	}
	// The weights outlive the first variants closed.
	models[0].Close()
	models[1].Close()
	if ids := collect(t, models[2].NewSession(), pipeline.Prompt{IDs: goldens[2].PromptIDs}, pipeline.GenerateOptions{MaxTokens: 4}); !slices.Equal(ids, goldens[2].GreedyIDs[:4]) {
		t.Errorf("after closing the others: %v", ids)
	}
	models[2].Close()
}
