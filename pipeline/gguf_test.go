package pipeline_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
)

// TestGGUFSessions: a session over each GGUF architecture model, fed the
// golden prompt ids as given (no BOS), generates llama.cpp's 24 greedy ids;
// the GGUF vocabulary becomes the model's tokenizer. Both with the fused
// graphs (the default) and with Options.NoFusion.
func TestGGUFSessions(t *testing.T) {
	dir := testmodels.Path(t, "arch")
	for _, tc := range []struct {
		name     string
		noFusion bool
	}{
		{"llama", false}, {"gemma", false}, {"gemma2", false}, {"phi2", false}, {"phi2_fusedqkv", false},
		{"falcon", false}, {"stablelm", false}, {"llama-q8_0", false},
		{"llama", true}, {"gemma2", true}, {"phi2", true}, {"llama-q8_0", true},
		// Today's architectures (arch2): a 64-position cache is past phi3's
		// original 32, so its long factors apply, as in llama.cpp's run.
		{"arch2/llama3", false}, {"arch2/qwen2", false}, {"arch2/qwen3", false}, {"arch2/gemma3", false},
		{"arch2/phi3", false}, {"arch2/smollm3", false}, {"arch2/gemma3", true}, {"arch2/phi3", true},
		{"arch2/qwen3moe", false}, {"arch2/qwen3moe", true},
		// The project's own (testdata/*/gen.sh, llama.cpp's logits): gpt-oss
		// (its sliding layers on rings of the window plus the prefill), and
		// its MXFP4 twin.
		{"testdata/gptoss/gpt-oss", false}, {"testdata/gptoss/gpt-oss", true},
		{"testdata/gptoss/gpt-oss-mxfp4", false},
	} {
		name := tc.name
		label := name
		if tc.noFusion {
			label += "/nofusion"
		}
		t.Run(label, func(t *testing.T) {
			var g testmodels.ArchGolden
			path := filepath.Join(dir, name+".gguf")
			if base, ok := strings.CutPrefix(name, "arch2/"); ok {
				g, path = testmodels.Arch2(t, base).ArchGolden, testmodels.Path(t, "arch2", base+".gguf")
			} else if strings.HasPrefix(name, "testdata/") {
				path = filepath.Join(testmodels.Root(t), name+".gguf")
				testmodels.DecodeJSON(t, filepath.Join(testmodels.Root(t), name+".golden.json"), &g)
			} else {
				g = testmodels.Arch(t, name)
			}
			ck, err := gguf.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			m := load(t, ck, pipeline.Options{MaxCache: 64, NoFusion: tc.noFusion})
			if !m.HasTokenizer() {
				t.Error("no tokenizer from the GGUF vocabulary")
			}
			got := collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs)})
			if !slices.Equal(got, g.GreedyIDs) {
				t.Errorf("ids\n got %v\nwant %v", got, g.GreedyIDs)
			}
		})
	}
}

// TestRingKVSessions: with small prefill sizes, gemma3's five local layers
// (window 8) keep rings of 8+8-1 positions, on the CPU backend and on the
// GPU ones alike; the session still generates llama.cpp's greedy ids, the
// cache is smaller than with tuning.Options.FullKVCache (which gives the same
// ids), and a generation running far past the rings (12 prompt positions
// and 100 generated, the rings of 15 wrapped 7 times) gives, on every
// backend, the ids of a full cache and of the CPU backend's rings.
func TestRingKVSessions(t *testing.T) {
	g := testmodels.Arch2(t, "gemma3")
	ck, err := gguf.Load(testmodels.Path(t, "arch2", "gemma3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	const long = 100
	var cpuLong []int
	for _, backend := range []string{"cpu", "webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			if backend != "cpu" && cpuLong == nil {
				t.Fatal("no CPU ids to compare with")
			}
			var be gpu.Backend // nil: the model's own CPU backend
			if backend != "cpu" {
				be = openBackend(t, backend)
			}
			var bytes [2]int64
			var longIDs [2][]int
			for i, full := range []bool{false, true} {
				m := load(t, ck, pipeline.Options{Backend: be, MaxCache: 128, PrefillSizes: []int{4, 8}}.WithTuning(tuning.Options{FullKVCache: full}))
				got := collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs)})
				if !slices.Equal(got, g.GreedyIDs) {
					t.Errorf("full cache %v: ids\n got %v\nwant %v", full, got, g.GreedyIDs)
				}
				longIDs[i] = collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, pipeline.GenerateOptions{MaxTokens: long})
				// Keys and values of 1 kv head of 16 values (f32 on the
				// CPU, binary16 on the GPUs) per layer and slot: five
				// rings of 2*15 slots and one layer of 128.
				bytes[i] = m.KVCacheBytes() / int64(2*16*m.KVDType().Bits()/8)
			}
			if bytes[0] != 5*2*15+128 || bytes[1] != 6*128 {
				t.Errorf("KV cache positions %d with rings, %d full; want %d and %d", bytes[0], bytes[1], 5*2*15+128, 6*128)
			}
			if len(longIDs[0]) < 2*15 {
				t.Fatalf("%d ids generated: the rings do not wrap twice", len(longIDs[0]))
			}
			if !slices.Equal(longIDs[0], longIDs[1]) {
				t.Errorf("long generation: ids with rings\n%v\nwith full caches\n%v", longIDs[0], longIDs[1])
			}
			if backend == "cpu" {
				cpuLong = longIDs[0]
			} else if !slices.Equal(longIDs[0], cpuLong) {
				t.Errorf("long generation: ids with rings\n%v\non the CPU backend\n%v", longIDs[0], cpuLong)
			}
		})
	}
}
