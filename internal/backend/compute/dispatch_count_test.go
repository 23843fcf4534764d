package compute

import (
	"context"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// maxLayerDispatches bounds the dispatches of one transformer layer of a
// fused Llama decode step: Q, K and V with the attention norm as
// prologue, the rope of q and k and the KV store (one lanes_rope_kv),
// attention (split and combine), the output projection with its residual
// add, gate+up+GLU with the FFN norm as prologue and the down projection
// with its residual add: 6, issue 9's bound.
const maxLayerDispatches = 6

// TestFusedDispatches counts the dispatches per layer of one stories260K
// decode step before and after gpu.Fuse, on Vulkan and WebGPU: the
// fused layer must have at most
// maxLayerDispatches and at least 8 fewer than the unfused one (the two
// residual adds, the gate projection and GLU, the two ropes, the two
// norms, the K and V projections and the store).
func TestFusedDispatches(t *testing.T) {
	ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, d := range TestDevices {
		t.Run(d.Name, func(t *testing.T) {
			dev, err := d.Open(ctx)
			gputest.NoDevice(t, d.Name, err)
			defer dev.Close()
			be := New(dev)
			defer be.Close()
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
			// perLayer counts the dispatches of the ops between the
			// embedding and the LastRow that follows the last layer.
			perLayer := func(g *fusion.Graph) float64 {
				last := -1
				for i, op := range g.Ops {
					if op.Kind() == fusion.LastRow {
						last = i
					}
				}
				if last < 0 || g.Ops[0].Kind() != fusion.Embed {
					t.Fatalf("decode graph without embed or last_row: %v", g.Ops)
				}
				p, err := be.Compile(g, w, kv)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Release()
				n := 0
				for _, it := range p.(*program).items {
					if it.kernel != "" && it.op > 0 && it.op < last {
						n++
					}
				}
				return float64(n) / float64(ck.Config.Layers)
			}
			before, after := perLayer(g), perLayer(gpu.Fuse(be, w, g))
			t.Logf("stories260K decode step, %.1f dispatches per layer unfused, %.1f fused", before, after)
			if after > maxLayerDispatches || after > before-8 {
				t.Errorf("fused layer has %.1f dispatches, want at most %d and at most %.1f", after, maxLayerDispatches, before-8)
			}
		})
	}
}
