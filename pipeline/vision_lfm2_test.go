package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/internal/vision"
	"github.com/gpurun/gpurun/pipeline"
)

// lfm2Dir holds the tiny lfm2 (LFM2-VL) text model + mmproj pair, its
// image and llama.cpp mtmd's outputs (testdata/vision/lfm2/README.md).
var lfm2Dir = filepath.Join("..", "testdata", "vision", "lfm2")

func loadLFM2(t *testing.T) (*gguf.Clip, []byte, visionGolden) {
	t.Helper()
	clip, err := gguf.OpenClip(filepath.Join(lfm2Dir, "mmproj-lfm2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(filepath.Join(lfm2Dir, "image.png"))
	if err != nil {
		t.Fatal(err)
	}
	var g visionGolden
	testmodels.DecodeJSON(t, filepath.Join(lfm2Dir, "golden.json"), &g)
	return clip, png, g
}

// lfm2Tol bounds the largest difference from llama.cpp's lfm2 image
// embeddings (values up to ~8). Both sides evaluate GELU through ggml's
// fp16 table; an input that ggml's other summation order puts across an
// fp16 rounding step moves that GELU output by one fp16 ulp (~2e-3 near
// 3), which the projector's mm.2 (weights N(0, 0.2)) carries into the
// embedding. Tokens without such a flip agree within 1e-6; the largest
// flip here is 2.6e-3. Every convention ablation moves them by > 4.
const lfm2Tol = 5e-3

// TestLFM2EmbeddingsGolden: the lfm2 projector's embeddings of the
// 72x44 image (smart-resized to 88x56: 22x14 patches, 11x7 = 77 tokens)
// on the CPU backend equal llama.cpp mtmd's within lfm2Tol.
func TestVisionLFM2EmbeddingsGolden(t *testing.T) {
	clip, png, g := loadLFM2(t)
	if clip.Projector != gguf.ProjectorLFM2 || clip.PosSide != 8 || clip.PoolKernel != 2 || !clip.PostLN || !clip.InputNorm || clip.ProjHidden != 96 {
		t.Fatalf("clip %s: pos side %d, merge %d, post_ln %v, input norm %v, hidden %d", clip.Projector, clip.PosSide, clip.PoolKernel, clip.PostLN, clip.InputNorm, clip.ProjHidden)
	}
	enc, err := pipeline.NewVisionEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	got, err := enc.EncodeFile(context.Background(), png, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := g.imageEmbd(t)
	if len(got) != 77*32 || len(want) != len(got) {
		t.Fatalf("%d values, golden %d, want 77x32", len(got), len(want))
	}
	if d := testmodels.MaxAbsDiff(got, want); d > lfm2Tol {
		t.Fatalf("image embeddings differ from llama.cpp's by %g (tolerance %g)", d, lfm2Tol)
	} else {
		t.Logf("max |diff| from llama.cpp: %.3g", d)
	}
}

// TestLFM2ConventionsMatter: each of lfm2's conventions moves the
// embeddings far past lfm2Tol when done otherwise: the pixel-unshuffle
// grouping (row-major patch order in place of vision.MergeOrder), the
// NaFlex position resampling (nearest cell in place of antialiased
// bilinear), the smart resize's bilinear filter (nearest), and the
// file's mean/std (ImageNet's).
func TestVisionLFM2ConventionsMatter(t *testing.T) {
	clip, png, g := loadLFM2(t)
	enc, err := pipeline.NewVisionEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	img, err := vision.Decode(png, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := g.imageEmbd(t)
	ctx := context.Background()
	right, err := enc.PrepareLFM2(img)
	if err != nil {
		t.Fatal(err)
	}
	got, err := enc.EncodeLFM2(ctx, right)
	if err != nil {
		t.Fatal(err)
	}
	if d := testmodels.MaxAbsDiff(got, want); d > lfm2Tol {
		t.Fatalf("the right input is off by %g", d)
	}
	run := func(name string, in *pipeline.LFM2Input) {
		t.Helper()
		got, err := enc.EncodeLFM2(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		d := testmodels.MaxAbsDiff(got, want)
		if !(d > 100*lfm2Tol) {
			t.Errorf("%s: embeddings within %g of llama.cpp's (tolerance %g): the convention is not tested", name, d, lfm2Tol)
		}
		t.Logf("%s moves the embeddings by %.3g", name, d)
	}
	const P, W, M = 4, 32, 2
	gw, gh := right.GridW, right.GridH
	resized, err := vision.LFM2Resize(img, P, M)
	if err != nil {
		t.Fatal(err)
	}
	table := posTable(t, clip)
	order := vision.MergeOrder(gw, gh, M)
	with := func(r *vision.RGB, mean, std [3]float32, order []int, pos []float32) *pipeline.LFM2Input {
		p, err := vision.PatchRows(vision.Normalize(r, mean, std), r.W, r.H, P, order)
		if err != nil {
			t.Fatal(err)
		}
		return &pipeline.LFM2Input{GridW: gw, GridH: gh, Patches: p, Positions: pos}
	}
	// Pixel unshuffle: token t's blocks taken as 4 consecutive row-major patches.
	rowMajor := make([]int, gw*gh)
	for i := range rowMajor {
		rowMajor[i] = i
	}
	run("merge order", with(resized, clip.Mean, clip.Std, rowMajor, vision.ResizePositions(table, 8, W, gw, gh, rowMajor)))
	// Position table: the nearest cell of the 8x8 table for each patch.
	near := make([]float32, gw*gh*W)
	for r, idx := range order {
		y, x := idx/gw*8/gh, idx%gw*8/gw
		copy(near[r*W:(r+1)*W], table[(y*8+x)*W:])
	}
	run("position resampling", with(resized, clip.Mean, clip.Std, order, near))
	// Resize filter: nearest-neighbour to 88x56.
	nr := &vision.RGB{W: resized.W, H: resized.H, Pix: make([]uint8, len(resized.Pix))}
	for y := range nr.H {
		for x := range nr.W {
			copy(nr.Pix[(y*nr.W+x)*3:][:3], img.Pix[(y*img.H/nr.H*img.W+x*img.W/nr.W)*3:])
		}
	}
	run("resize filter", with(nr, clip.Mean, clip.Std, order, right.Positions))
	run("mean/std", with(resized, [3]float32{0.485, 0.456, 0.406}, [3]float32{0.229, 0.224, 0.225}, order, right.Positions))
}

func posTable(t *testing.T, clip *gguf.Clip) []float32 {
	t.Helper()
	for _, w := range clip.Tensors {
		if w.Name == "v.position_embd.weight" {
			xs, err := w.Float32()
			if err != nil {
				t.Fatal(err)
			}
			return xs
		}
	}
	t.Fatal("no position table")
	return nil
}
