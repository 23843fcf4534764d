package gpurun

import (
	"context"
	"errors"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/tensors"
)

// TestMemoryUse: the GPU backends count the device memory their buffers
// take: loading 4 MiB of weights raises the count by at least that, the
// peak keeps it after they are released, and ResetPeakMemory lowers the
// peak to what is held.
func TestMemoryUse(t *testing.T) {
	ctx := context.Background()
	const n = 1 << 20 // f32 values: 4 MiB
	w, err := tensors.FromF32("w", []int{1024, 1024}, make([]float32, n), tensors.F32)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vulkan", "webgpu"} {
		t.Run(name, func(t *testing.T) {
			b, err := OpenBackend(ctx, name, BackendOptions{})
			if err != nil {
				if errors.Is(err, gpu.ErrNoDevice) {
					gputest.NoDevice(t, name, err)
				}
				t.Fatal(err)
			}
			defer b.Close()
			r := b
			before := r.MemoryUse()
			ws, err := b.LoadWeights(ctx, []*tensors.Tensor{w})
			if err != nil {
				t.Fatal(err)
			}
			loaded := r.MemoryUse()
			if got := loaded.Current - before.Current; got < 4*n || got > 4*n+(8<<20) {
				t.Errorf("loading 4 MiB of weights added %d bytes, want 4 MiB plus at most 8 MiB of staging and padding", got)
			}
			if loaded.Peak < loaded.Current {
				t.Errorf("peak %d below current %d", loaded.Peak, loaded.Current)
			}
			ws.Release()
			after := r.MemoryUse()
			if after.Current > loaded.Current-4*n {
				t.Errorf("releasing the weights left %d bytes of %d", after.Current, loaded.Current)
			}
			if after.Peak < loaded.Current {
				t.Errorf("peak %d forgot the %d held before the release", after.Peak, loaded.Current)
			}
			r.ResetPeakMemory()
			if got := r.MemoryUse(); got.Peak != got.Current {
				t.Errorf("after ResetPeakMemory: %+v, want peak = current", got)
			}
		})
	}
}
