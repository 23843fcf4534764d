package pipeline_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
)

// TestBatchingRule: by default a model batches where it pays (on a GPU
// backend always, on the CPU from BatchMinWeightBytes of weights), so
// stories260K (1 MiB) on the CPU steps its slots apart; AlwaysBatch and
// NoBatching override the rule, and cannot be combined.
func TestBatchingRule(t *testing.T) {
	cpuCaps, gpuCaps := gpu.Caps{Host: true, Batch: true}, gpu.Caps{Batch: true, SubgroupSize: 32}
	for _, tc := range []struct {
		caps  gpu.Caps
		bytes int64
		want  bool
	}{
		{cpuCaps, 0, false},
		{cpuCaps, 1 << 20, false},
		{cpuCaps, pipeline.BatchMinWeightBytes - 1, false},
		{cpuCaps, pipeline.BatchMinWeightBytes, true},
		{cpuCaps, 140 << 20, true},
		{gpuCaps, 0, true},
		{gpuCaps, 1 << 20, true},
		// A GPU backend on a CPU device (lavapipe, Info().Type gpu.CPU)
		// is no Host backend: it steps its slots one at a time on the
		// device queue anyway.
		{gpu.Caps{Batch: true}, 1 << 20, true},
	} {
		if got := pipeline.BatchPays(tc.caps, tc.bytes); got != tc.want {
			t.Errorf("BatchPays(%+v, %d) = %v, want %v", tc.caps, tc.bytes, got, tc.want)
		}
	}
	ck := storiesCheckpoint(t)
	// The size the rule sees: every tensor's bytes (stories260K: f32,
	// 260K parameters, the embedding shared with the classifier).
	var params int
	for _, w := range ck.Tensors {
		params += w.NumElements()
	}
	if got, want := pipeline.WeightBytes(ck.Tensors), int64(4*params); got != want || got < 900_000 || got > 1_200_000 {
		t.Errorf("WeightBytes = %d, want %d (about 1 MiB)", got, want)
	}
	for _, tc := range []struct {
		name string
		opts pipeline.Options
		want bool
	}{
		{"default", pipeline.Options{Slots: 4}, false},
		{"AlwaysBatch", pipeline.Options{Slots: 4}.WithTuning(tuning.Options{AlwaysBatch: true}), true},
		{"NoBatching", pipeline.Options{Slots: 4}.WithTuning(tuning.Options{NoBatching: true}), false},
		{"one slot", pipeline.Options{Slots: 1}.WithTuning(tuning.Options{AlwaysBatch: true}), false},
	} {
		tc.opts.MaxCache = 32
		m := load(t, ck, tc.opts)
		if got := m.Batching(); got != tc.want {
			t.Errorf("%s: Batching() = %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := pipeline.FromCheckpoint(context.Background(), ck, pipeline.Options{Backend: cpuBackend(t), Slots: 4}.WithTuning(tuning.Options{NoBatching: true, AlwaysBatch: true})); !errors.Is(err, pipeline.ErrOptions) {
		t.Errorf("NoBatching with AlwaysBatch: %v, want ErrOptions", err)
	}
}
