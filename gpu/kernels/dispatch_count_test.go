package kernels

import (
	"context"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu/vulkan"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline/arch"
	"github.com/gpurun/gpurun/tensors/llama2c"
)

// TestFusedDispatches counts the dispatches of one stories260K decode step
// before and after fusion.Fuse: per layer the residual adds of the output
// and down projections fold into them and the gate projection and GLU
// into the up projection (Q, K and V stay three dispatches here), so the
// fused step must have at least 4 fewer dispatches per layer.
func TestFusedDispatches(t *testing.T) {
	dev, err := vulkan.Open(context.Background())
	gputest.NoDevice(t, "vulkan", err)
	defer dev.Close()
	ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	be := New(dev)
	defer be.Close()
	ctx := context.Background()
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	g, err := arch.Build(&ck.Config, arch.BuildOptions{Tokens: 1, MaxLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := be.NewKVCache(g.KV)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	count := func(g *fusion.Graph) int {
		p, err := be.Compile(g, w, kv)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release()
		n := 0
		for _, it := range p.(*program).items {
			if it.kernel != "" {
				n++
			}
		}
		return n
	}
	before, after := count(g), count(fusion.Fuse(g))
	layers := ck.Config.Layers
	t.Logf("stories260K decode step: %d dispatches unfused, %d fused (%d layers)", before, after, layers)
	if after > before-4*layers {
		t.Errorf("fused step has %d dispatches, want at most %d", after, before-4*layers)
	}
}
