package pipeline_test

import (
	"context"
	"testing"

	"github.com/gpurun/gpurun/internal/audio"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// TestAudioQwen2AGPU: the qwen2a projector's embeddings of tones.wav's
// first chunk (the one with the tones; TestAudioQwen2ASession runs both
// through the GPU encoder) on WebGPU and Vulkan equal llama.cpp's within
// audioTol and the CPU backend's within 1e-3 (every op of the three steps is one the vision
// encoders and language models run on the GPU: input rows, f16 matmuls
// with biases, erf GELU, an embedding table, LayerNorm, self-attention,
// columns, scale).
func TestAudioQwen2AGPU(t *testing.T) {
	clip, wav, want := loadQwen2A(t)
	cpuEnc, err := pipeline.NewAudioEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := audio.DecodeWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	mels, err := cpuEnc.Mel(samples)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := cpuEnc.EncodeMel(context.Background(), mels[0])
	if err != nil {
		t.Fatal(err)
	}
	want = want[:len(ref)]
	for _, name := range []string{"webgpu", "vulkan"} {
		t.Run(name, func(t *testing.T) {
			enc, err := pipeline.NewAudioEncoder(openBackend(t, name), clip)
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Close()
			got, err := enc.EncodeMel(context.Background(), mels[0])
			if err != nil {
				t.Fatal(err)
			}
			if d := testmodels.MaxAbsDiff(got, want); !(d <= audioTol) {
				t.Errorf("audio embeddings differ from llama.cpp's by %g (tolerance %g)", d, audioTol)
			} else {
				t.Logf("audio embeddings: max |diff| from llama.cpp's %.3g", d)
			}
			if d := testmodels.MaxAbsDiff(got, f64s(ref)); !(d <= 1e-3) {
				t.Errorf("audio embeddings differ from the cpu's by %g (tolerance 1e-3)", d)
			} else {
				t.Logf("audio embeddings: max |diff| from the cpu's %.3g", d)
			}
		})
	}
}
