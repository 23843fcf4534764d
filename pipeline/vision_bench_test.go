package pipeline_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors"
)

// syntheticClip is a gemma3 projector of random f32 weights: Gemma 3's
// SigLIP shape (896 pixels, patch 14, width 1152, 27 layers, 16 heads, FF
// 4304, pool 4, text width 2560) with GPURUN_VISION_BENCH=full, else a
// small one (224 pixels, 4 layers) that runs in seconds.
func syntheticClip(b *testing.B) *gguf.Clip {
	c := &gguf.Clip{Projector: gguf.ProjectorGemma3, ImageSize: 224, PatchSize: 14, Width: 1152, FF: 4304, Layers: 4, Heads: 16,
		Eps: 1e-6, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}, PoolKernel: 4, ProjectionDim: 2560}
	if os.Getenv("GPURUN_VISION_BENCH") == "full" {
		c.ImageSize, c.Layers = 896, 27
	}
	r := rand.New(rand.NewPCG(1, 2))
	add := func(name string, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		xs := make([]float32, n)
		for i := range xs {
			xs[i] = float32(r.NormFloat64() * 0.02)
		}
		t, err := tensors.FromF32(name, shape, xs, tensors.F32)
		if err != nil {
			b.Fatal(err)
		}
		c.Tensors = append(c.Tensors, t)
	}
	W, n := c.Width, c.ImageSize/c.PatchSize
	add("v.patch_embd.weight", W, 3*c.PatchSize*c.PatchSize)
	add("v.patch_embd.bias", W)
	add("v.position_embd.weight", n*n, W)
	for l := range c.Layers {
		p := fmt.Sprintf("v.blk.%d.", l)
		for _, s := range []string{"ln1", "ln2"} {
			add(p+s+".weight", W)
			add(p+s+".bias", W)
		}
		for _, s := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			add(p+s+".weight", W, W)
			add(p+s+".bias", W)
		}
		add(p+"ffn_up.weight", c.FF, W)
		add(p+"ffn_up.bias", c.FF)
		add(p+"ffn_down.weight", W, c.FF)
		add(p+"ffn_down.bias", W)
	}
	add("v.post_ln.weight", W)
	add("v.post_ln.bias", W)
	add("mm.soft_emb_norm.weight", W)
	add("mm.input_projection.weight", c.ProjectionDim, W)
	return c
}

// BenchmarkVisionEncode: one image through the gemma3 encoder on the CPU
// backend and on WebGPU and Vulkan (patches preprocessed once; the
// projector loaded and the graph compiled before the timer, once, as
// VisionEncoder does). Indicative only on a shared machine.
func BenchmarkVisionEncode(b *testing.B) {
	c := syntheticClip(b)
	n := c.ImageSize / c.PatchSize
	patches := make([]float32, n*n*3*c.PatchSize*c.PatchSize)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range patches {
		patches[i] = float32(r.Float64()*2 - 1)
	}
	for _, name := range []string{"cpu", "webgpu", "vulkan"} {
		b.Run(name, func(b *testing.B) {
			var be gpu.Backend = cpu.New(cpu.Options{})
			if name != "cpu" {
				be = openBackend(b, name)
			}
			enc, err := pipeline.NewVisionEncoder(be, c)
			if err != nil {
				b.Fatal(err)
			}
			defer enc.Close()
			if _, err := enc.EncodePatches(context.Background(), patches); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := enc.EncodePatches(context.Background(), patches); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
