package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
)

// TestSlotsConcurrent: sessions generating at once on a model with several
// KV caches over one copy of the weights each give llama.cpp's golden
// greedy ids, on the CPU backend, the CPU posing as a GPU (steps
// serialized on the device) and the GPU backends (batched rounds). Each session also
// continues its conversation in a second Generate, after the others have
// moved the slots around.
func TestSlotsConcurrent(t *testing.T) {
	ck := storiesCheckpoint(t)
	cases := testmodels.StoriesCases(t)
	for _, backend := range []string{"cpu", "cpu-as-gpu", "webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			opts := pipeline.Options{MaxCache: 128, Slots: 3}.WithTuning(tuning.Options{AlwaysBatch: true})
			switch backend {
			case "cpu":
			case "cpu-as-gpu":
				opts.Backend = &readCounter{Backend: cpu.New(cpu.Options{}), device: true}
			default:
				opts.Backend = openBackend(t, backend)
			}
			m := load(t, ck, opts)
			if m.Slots() != 3 {
				t.Fatalf("Slots() = %d, want 3", m.Slots())
			}
			// The CPU and GPU backends run batched graphs; a wrapped CPU
			// backend (readCounter reports no gpu.Caps.Batch) steps each session alone.
			if got, want := m.Batching(), backend != "cpu-as-gpu"; got != want {
				t.Errorf("Batching() = %v, want %v", got, want)
			}
			// More sessions than slots: the extra ones wait.
			const sessions = 5
			var wg sync.WaitGroup
			errs := make([]error, sessions)
			for i := range sessions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tc := cases[i%len(cases)]
					s := m.NewSession()
					var got []int
					for _, part := range []struct {
						p pipeline.Prompt
						n int
					}{{pipeline.Prompt{IDs: tc.PromptIDs}, 9}, {pipeline.Prompt{IDs: []int{}}, len(tc.GeneratedIDs) - 9}} {
						for tok, err := range s.Generate(context.Background(), part.p, pipeline.GenerateOptions{MaxTokens: part.n}) {
							if err != nil {
								errs[i] = err
								return
							}
							got = append(got, tok.ID)
						}
					}
					if !slices.Equal(got, tc.GeneratedIDs) {
						errs[i] = errors.New(tc.Name + ": ids differ from llama.cpp's")
						t.Logf("session %d %s:\n got %v\nwant %v", i, tc.Name, got, tc.GeneratedIDs)
					}
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("session %d: %v", i, err)
				}
			}
		})
	}
}

func TestSlotsOption(t *testing.T) {
	ck := storiesCheckpoint(t)
	for _, n := range []int{-1, pipeline.MaxSlots + 1} {
		if _, err := pipeline.FromCheckpoint(context.Background(), ck, pipeline.Options{Backend: cpuBackend(t), Slots: n}); !errors.Is(err, pipeline.ErrOptions) {
			t.Errorf("Slots %d: %v, want ErrOptions", n, err)
		}
	}
	m := load(t, ck, pipeline.Options{MaxCache: 64})
	if m.Slots() != 1 {
		t.Errorf("default Slots() = %d, want 1", m.Slots())
	}
}
