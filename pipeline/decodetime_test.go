package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// TestTimeDecode: on a GPU backend with timestamps the timed decode runs
// the steps asked for in a window's submissions (growing to
// StepsPerSubmit), its device time is positive and within the call's wall
// time (a tick count taken for nanoseconds, or timestamps of the wrong
// submission, break that), and the slot it used gives llama.cpp's ids
// afterwards; the CPU backend, with no timestamps, refuses with
// ErrUnsupported.
func TestTimeDecode(t *testing.T) {
	ck := storiesCheckpoint(t)
	c := testmodels.StoriesCases(t)[0]
	ctx := context.Background()
	t.Run("cpu", func(t *testing.T) {
		m := load(t, ck, pipeline.Options{Backend: cpu.New(cpu.Options{}), MaxCache: 64})
		if _, err := m.TimeDecode(ctx, c.PromptIDs, 4); !errors.Is(err, gpu.ErrUnsupported) {
			t.Errorf("CPU backend: %v, want ErrUnsupported", err)
		}
	})
	for _, name := range []string{"webgpu", "vulkan"} {
		t.Run(name, func(t *testing.T) {
			b := openBackend(t, name)
			if !b.Caps().Timestamps {
				t.Fatalf("%s on %s: no timestamps (the test drivers have them)", name, b.Info().Name)
			}
			m := load(t, ck, pipeline.Options{Backend: b, MaxCache: 128, StepsPerSubmit: 8})
			start := time.Now()
			d, err := m.TimeDecode(ctx, c.PromptIDs, 20)
			wall := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d steps in %d submissions, device %v (%v a step), wall of the submissions %v, of the call %v", b.Info().Name, d.Steps, d.Submissions, d.Device, d.PerStep(), d.Wall, wall)
			if d.Steps != 20 || d.Submissions != 5 {
				t.Errorf("%d steps in %d submissions, want 20 in 5 (a window's 1+2+4+8+5)", d.Steps, d.Submissions)
			}
			if d.Device <= 0 || d.Device > d.Wall || d.Wall > wall {
				t.Errorf("device time %v, wall of the submissions %v, want 0 < device <= that wall <= %v, the call's", d.Device, d.Wall, wall)
			}
			got := collect(t, m.NewSession(), pipeline.Prompt{IDs: c.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(c.GeneratedIDs)})
			if !slices.Equal(got, c.GeneratedIDs) {
				t.Errorf("after the timed decode: ids\n got %v\nwant %v", got, c.GeneratedIDs)
			}
		})
	}
}
