package pipeline_test

import (
	"context"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/internal/vision"
	"github.com/gpurun/gpurun/pipeline"
)

// visionGPUTol bounds the GPU backends' image embeddings' largest
// difference from llama.cpp's and from the CPU backend's (values of
// magnitude ~1): the ViT's f32 products and attention summed in the
// kernels' orders (conformance's dot and attention tolerances, through 2
// layers, the pooling and the projection).
const visionGPUTol = 1e-5

// TestVisionGPU: the gemma3 projector's encoder runs on WebGPU and Vulkan
// (the same fusion graph as on the CPU: self-attention, LayerNorm with
// bias, GELU, average pooling, the projector's RMSNorm and product) and
// its embeddings of image.png, encoded after another image by the same
// program, are within visionGPUTol of llama.cpp's and of the CPU
// backend's; the golden prompt with the image (the embeddings
// as the step's input rows, decoded non-causally) gives llama.cpp's last
// logits within 1e-4 and its 16 greedy ids (cmd/gpurun's TestRunImage
// runs the same prompt through a session, `run --mmproj --image`, on
// both backends).
func TestVisionGPU(t *testing.T) {
	clip, png, g := loadVision(t)
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
			be := openBackend(t, name)
			enc, err := pipeline.NewVisionEncoder(be, clip)
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Close()
			// Another image first: the program keeps no rows of it.
			other, err := enc.EncodePatches(context.Background(), make([]float32, len(mustPreprocess(t, enc, png))))
			if err != nil {
				t.Fatal(err)
			}
			got, err := enc.EncodeFile(context.Background(), png, 0)
			if err != nil {
				t.Fatal(err)
			}
			if d := testmodels.MaxAbsDiff(got, want); !(d <= visionGPUTol) {
				t.Errorf("image embeddings differ from llama.cpp's by %g (tolerance %g)", d, visionGPUTol)
			} else {
				t.Logf("image embeddings: max |diff| from llama.cpp's %.3g", d)
			}
			if d := testmodels.MaxAbsDiff(other, want); !(d > visionGPUTol) {
				t.Errorf("a blank image's embeddings are within %g of image.png's", d)
			}
			if d := testmodels.MaxAbsDiff(got, f64s(ref)); !(d <= visionGPUTol) {
				t.Errorf("image embeddings differ from the cpu's by %g (tolerance %g)", d, visionGPUTol)
			} else {
				t.Logf("image embeddings: max |diff| from the cpu's %.3g", d)
			}
			ids, d := visionPrompt(t, be, true, 1)
			if !(d <= 1e-4) {
				t.Errorf("last prompt logits differ from llama.cpp's by %g (tolerance 1e-4)", d)
			} else {
				t.Logf("last prompt logits: max |diff| %.3g", d)
			}
			if !slices.Equal(ids, g.GreedyIDs) {
				t.Errorf("greedy ids\n got %v\nwant %v", ids, g.GreedyIDs)
			}
		})
	}
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func mustPreprocess(t *testing.T, enc *pipeline.VisionEncoder, data []byte) []float32 {
	t.Helper()
	img, err := vision.Decode(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	patches, err := enc.Preprocess(img)
	if err != nil {
		t.Fatal(err)
	}
	return patches
}
