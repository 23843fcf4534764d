package pipeline_test

import (
	"context"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/internal/vision"
	"github.com/gpurun/gpurun/pipeline"
)

// TestVisionLFM2GPU: the lfm2 projector's embeddings of image.png on
// WebGPU and Vulkan equal llama.cpp's within lfm2Tol and the CPU
// backend's within 1e-3 (both steps are ops the gemma3 encoder uses on
// the GPU: input rows, columns, self-attention, LayerNorm, GELU), after
// another image of another size went through the same encoder.
func TestVisionLFM2GPU(t *testing.T) {
	clip, png, g := loadLFM2(t)
	cpuEnc, err := pipeline.NewVisionEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := cpuEnc.EncodeFile(context.Background(), png, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := g.imageEmbd(t)
	for _, name := range []string{"webgpu", "vulkan"} {
		t.Run(name, func(t *testing.T) {
			enc, err := pipeline.NewVisionEncoder(openBackend(t, name), clip)
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Close()
			wide := &vision.RGB{W: 96, H: 40, Pix: make([]uint8, 3*96*40)}
			for i := range wide.Pix {
				wide.Pix[i] = uint8(i * 5)
			}
			if _, err := enc.Encode(context.Background(), wide); err != nil {
				t.Fatal(err)
			}
			got, err := enc.EncodeFile(context.Background(), png, 0)
			if err != nil {
				t.Fatal(err)
			}
			if d := testmodels.MaxAbsDiff(got, want); !(d <= lfm2Tol) {
				t.Errorf("image embeddings differ from llama.cpp's by %g (tolerance %g)", d, lfm2Tol)
			} else {
				t.Logf("image embeddings: max |diff| from llama.cpp's %.3g", d)
			}
			if d := testmodels.MaxAbsDiff(got, f64s(ref)); !(d <= 1e-3) {
				t.Errorf("image embeddings differ from the cpu's by %g (tolerance 1e-3)", d)
			} else {
				t.Logf("image embeddings: max |diff| from the cpu's %.3g", d)
			}
		})
	}
}

// TestVisionLFM2TiledGPU: a tile of the tiled image (row 2, col 1: 1024
// patches in one encoder run) on WebGPU and Vulkan equals llama.cpp's
// within lfm2Tol (tiled.json; one tile keeps lavapipe's time short, the
// thumbnail's path is the untiled one TestVisionLFM2GPU covers).
func TestVisionLFM2TiledGPU(t *testing.T) {
	clip, png, g, want := loadTiled(t)
	img, err := vision.Decode(png, 0)
	if err != nil {
		t.Fatal(err)
	}
	const tile = 2
	for _, name := range []string{"webgpu", "vulkan"} {
		t.Run(name, func(t *testing.T) {
			enc, err := pipeline.NewVisionEncoder(openBackend(t, name), clip)
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Close()
			in, err := enc.PrepareLFM2Tiles(img)
			if err != nil {
				t.Fatal(err)
			}
			if len(in.Runs) != len(want) {
				t.Fatalf("%d runs, golden %d", len(in.Runs), len(want))
			}
			got, err := enc.EncodeLFM2(context.Background(), in.Runs[tile])
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff32(strided(got, enc.Width(), g.EmbdStride), want[tile]); !(d <= lfm2Tol) {
				t.Errorf("tile %d differs from llama.cpp's by %g (tolerance %g)", tile, d, lfm2Tol)
			} else {
				t.Logf("tile %d: max |diff| from llama.cpp's %.3g", tile, d)
			}
		})
	}
}
