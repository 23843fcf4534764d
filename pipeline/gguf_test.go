package pipeline_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
	"github.com/gpurun/gpurun/tensors/gguf"
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
// (window 8) keep rings of 8+8-1 positions on the CPU backend; the session
// still generates llama.cpp's greedy ids, and the cache is smaller than
// with tuning.Options.FullKVCache (which gives the same ids).
func TestRingKVSessions(t *testing.T) {
	g := testmodels.Arch2(t, "gemma3")
	ck, err := gguf.Load(testmodels.Path(t, "arch2", "gemma3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	var bytes [2]int64
	for i, full := range []bool{false, true} {
		m := load(t, ck, pipeline.Options{MaxCache: 64, PrefillSizes: []int{4, 8}}.WithTuning(tuning.Options{FullKVCache: full}))
		got := collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs)})
		if !slices.Equal(got, g.GreedyIDs) {
			t.Errorf("full cache %v: ids\n got %v\nwant %v", full, got, g.GreedyIDs)
		}
		bytes[i] = m.KVCacheBytes()
	}
	// 6 layers of 1 kv head of 16 f32 values, keys and values: 128 bytes
	// a position; five rings of 2*15 slots and one layer of 64.
	if want := int64(128 * (5*2*15 + 64)); bytes[0] != want || bytes[1] != 128*6*64 {
		t.Errorf("KV cache bytes %d with rings, %d full; want %d and %d", bytes[0], bytes[1], want, 128*6*64)
	}
}
