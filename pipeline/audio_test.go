package pipeline_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/audio"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// qwen2aDir holds the tiny qwen2a (Whisper encoder) audio mmproj, its
// text model, a WAV file and llama.cpp mtmd's outputs
// (testdata/audio/qwen2a/README.md).
var qwen2aDir = filepath.Join("..", "testdata", "audio", "qwen2a")

// audioTol bounds the largest difference from llama.cpp's audio
// embeddings (values up to ~4.9): see the README's tolerances.
const audioTol = 1e-3

func loadQwen2A(t *testing.T) (*gguf.AudioClip, []byte, []float64) {
	t.Helper()
	clip, err := gguf.OpenAudioClip(filepath.Join(qwen2aDir, "mmproj-qwen2a.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	wav, err := os.ReadFile(filepath.Join(qwen2aDir, "tones.wav"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(qwen2aDir, "audio-embd.f32"))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float64, len(raw)/4)
	for i := range want {
		want[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
	}
	return clip, wav, want
}

func audioEmbd(t *testing.T, enc *pipeline.AudioEncoder, wav []byte) []float32 {
	t.Helper()
	runs, err := enc.EncodeWAV(context.Background(), wav)
	if err != nil {
		t.Fatal(err)
	}
	var all []float32
	for _, r := range runs {
		if len(r) != enc.ChunkTokens()*enc.Width() {
			t.Fatalf("a chunk of %d values, want %d x %d", len(r), enc.ChunkTokens(), enc.Width())
		}
		all = append(all, r...)
	}
	return all
}

// TestAudioQwen2AEmbeddingsGolden: the qwen2a projector's embeddings of
// tones.wav (1.5 s, padded by mtmd to two 30 s chunks of 750 tokens) on
// the CPU backend equal llama.cpp mtmd's within audioTol.
func TestAudioQwen2AEmbeddingsGolden(t *testing.T) {
	clip, wav, want := loadQwen2A(t)
	if clip.MelBins != 128 || clip.Width != 32 || clip.Layers != 2 || clip.Positions != 1500 || clip.ProjectionDim != 32 {
		t.Fatalf("clip %+v", clip)
	}
	enc, err := pipeline.NewAudioEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	got := audioEmbd(t, enc, wav)
	if len(want) != 2*750*32 || len(got) != len(want) {
		t.Fatalf("%d values, golden %d, want 2x750x32", len(got), len(want))
	}
	if d := testmodels.MaxAbsDiff(got, want); d > audioTol {
		t.Fatalf("audio embeddings differ from llama.cpp's by %g (tolerance %g)", d, audioTol)
	} else {
		t.Logf("max |diff| from llama.cpp: %.3g", d)
	}
}

// TestAudioQwen2AConventionsMatter: each convention of mtmd's log-mel
// preprocessing moves the embeddings past audioTol when done otherwise
// (a symmetric Hann window, HTK mel filters without area normalization,
// the natural log, no clamp and (x+4)/4 scaling), and so does ggml's f16
// rounding of the convs' inputs (im2col).
func TestAudioQwen2AConventionsMatter(t *testing.T) {
	clip, wav, want := loadQwen2A(t)
	for name, v := range map[string]audio.Variant{
		"symmetric window": {SymmetricWindow: true},
		"HTK mel":          {HTKMel: true},
		"natural log":      {NaturalLog: true},
		"no clamp/scale":   {NoClamp: true},
		"f32 convs":        {},
	} {
		enc, err := pipeline.NewAudioEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
		if err != nil {
			t.Fatal(err)
		}
		enc.Variant, enc.F32Convs = v, name == "f32 convs"
		limit := 10 * audioTol
		if enc.F32Convs {
			limit = audioTol
		}
		samples, err := audio.DecodeWAV(wav)
		if err != nil {
			t.Fatal(err)
		}
		mels, err := enc.Mel(samples)
		if err != nil {
			t.Fatal(err)
		}
		got, err := enc.EncodeMel(context.Background(), mels[0]) // the chunk with the tones
		if err != nil {
			t.Fatal(err)
		}
		if d := testmodels.MaxAbsDiff(got, want[:len(got)]); d < limit {
			t.Errorf("%s: the embeddings move by only %g", name, d)
		} else {
			t.Logf("%s: %.3g", name, d)
		}
	}
}
