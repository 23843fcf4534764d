package compute_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestQuantizedGGUF runs llama.cpp's Q8_0 and Q4_0 quantizations of the
// tiny llama (imported as int8 / int4 with one f16 scale per 32-element
// block) over the golden prompt on every device and on the CPU reference,
// which dequantizes the same blocks in Go: all 12 rows of logits must agree
// within f32 summation-order noise (2e-5 at logits of magnitude ~1).
// llama.cpp's own logits for these files are not a target: it quantizes
// the activations too (README of ../shared/models/arch).
func TestQuantizedGGUF(t *testing.T) {
	dir := testmodels.Path(t, "arch")
	for _, name := range []string{"llama-q8_0", "llama-q4_0"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".gguf")
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("%s not present", path)
			}
			golden := testmodels.Arch(t, name)
			ck, err := gguf.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			quantized := 0
			for _, w := range ck.Tensors {
				if w.DType.Quantized() {
					quantized++
				}
			}
			if quantized == 0 {
				t.Fatal("no quantized tensors imported")
			}
			c := &ck.Config
			n := len(golden.PromptIDs)
			g, err := arch.Build(c, arch.BuildOptions{Tokens: n, MaxLen: 32, AllLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			logits := func(t *testing.T, be gpu.Backend) []float32 {
				ctx := context.Background()
				w, err := be.LoadWeights(ctx, ck.Tensors)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Release()
				kv, err := be.NewKVCache(fusion.KVSpec{Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, MaxLen: 32})
				if err != nil {
					t.Fatal(err)
				}
				defer kv.Release()
				p, err := be.Compile(g, w, kv)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Release()
				if err := p.Run(ctx, testmodels.IDs32(golden.PromptIDs), 0); err != nil {
					t.Fatal(err)
				}
				out := make([]float32, n*c.VocabSize)
				if _, err := p.Logits(out); err != nil {
					t.Fatal(err)
				}
				return out
			}
			ref := logits(t, cpu.New(cpu.Options{Threads: 1}))
			forEachDevice(t, func(t *testing.T, dev gpu.Device) {
				got := logits(t, backendOn(t, dev, compute.Options{}))
				var worst float64
				for i := range ref {
					worst = max(worst, math.Abs(float64(got[i])-float64(ref[i])))
				}
				t.Logf("%d quantized tensors; max |Δlogit| vs CPU = %.3g", quantized, worst)
				if worst > 2e-5 {
					t.Errorf("logits differ from the CPU reference by %.3g", worst)
				}
			})
		})
	}
}
