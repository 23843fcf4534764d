package pipeline_test

import (
	"context"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
)

// TestGemma4Sessions: a session over arch3/gemma4.gguf on the CPU backend
// generates llama.cpp's 24 greedy ids, fused and not, with its sliding
// layers on rings (prefill chunks of 4: rings of 4+4-1 positions, which
// the shared sliding layer reads through layer 2's) and with full caches;
// a generation of 100 tokens, past the rings many times, gives the same ids
// both ways. The cache holds only the four layers with keys of their own:
// three sliding rings of 16 values per position and one global layer of
// 32.
func TestGemma4Sessions(t *testing.T) {
	g := testmodels.Arch3(t, "gemma4")
	ck, err := gguf.Load(testmodels.Path(t, "arch3", "gemma4.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	var long [2][]int
	for i, full := range []bool{false, true} {
		for _, noFusion := range []bool{false, true} {
			m := load(t, ck, pipeline.Options{MaxCache: 128, PrefillSizes: []int{4}, NoFusion: noFusion}.WithTuning(tuning.Options{FullKVCache: full}))
			got := collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs)})
			if !slices.Equal(got, g.GreedyIDs) {
				t.Errorf("full cache %v, no fusion %v: ids\n got %v\nwant %v", full, noFusion, got, g.GreedyIDs)
			}
			if noFusion {
				continue
			}
			long[i] = collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, pipeline.GenerateOptions{MaxTokens: 100})
			// f32 keys and values: 3 sliding layers × 16 + 1 global × 32
			// values per position.
			want := int64(2 * 4 * (3*16*2*7 + 32*128))
			if full {
				want = int64(2 * 4 * (3*16 + 32) * 128)
			}
			if got := m.KVCacheBytes(); got != want {
				t.Errorf("full cache %v: KV cache of %d bytes, want %d", full, got, want)
			}
		}
	}
	if len(long[0]) < 50 || !slices.Equal(long[0], long[1]) {
		t.Errorf("long generation: ids with rings\n%v\nwith full caches\n%v", long[0], long[1])
	}
}

// TestGemma4GPUSessions: sessions over arch3/gemma4.gguf on WebGPU and
// Vulkan generate llama.cpp's 24 greedy ids (the device's argmax, several
// steps per submission), fused and not, on the sliding layers' rings
// (prefill chunks of 4: rings of 4+4-1 positions, read by the shared
// sliding layer through layer 2's) and on full caches, and a generation of
// 100 tokens gives the same ids on the CPU backend. The GPU cache holds
// what the CPU one holds: only the four layers with keys of their own.
func TestGemma4GPUSessions(t *testing.T) {
	g := testmodels.Arch3(t, "gemma4")
	ck, err := gguf.Load(testmodels.Path(t, "arch3", "gemma4.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	cpuLong := collect(t, load(t, ck, pipeline.Options{MaxCache: 128, PrefillSizes: []int{4}}).NewSession(),
		pipeline.Prompt{IDs: g.PromptIDs}, pipeline.GenerateOptions{MaxTokens: 100})
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			be := openBackend(t, backend)
			for _, full := range []bool{false, true} {
				for _, noFusion := range []bool{false, true} {
					opts := pipeline.Options{Backend: be, MaxCache: 128, PrefillSizes: []int{4}, NoFusion: noFusion}.WithTuning(tuning.Options{FullKVCache: full})
					m, err := pipeline.FromCheckpoint(context.Background(), ck, opts)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { m.Close() })
					got := collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs)})
					if !slices.Equal(got, g.GreedyIDs) {
						t.Errorf("full cache %v, no fusion %v: ids\n got %v\nwant %v", full, noFusion, got, g.GreedyIDs)
					}
					want := int64(2 * 4 * (3*16*2*7 + 32*128))
					if full {
						want = int64(2 * 4 * (3*16 + 32) * 128)
					}
					if got := m.KVCacheBytes(); got != want {
						t.Errorf("full cache %v: KV cache of %d bytes, want %d", full, got, want)
					}
					if full || noFusion {
						continue
					}
					long := collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, pipeline.GenerateOptions{MaxTokens: 100})
					if !slices.Equal(long, cpuLong) {
						t.Errorf("long generation on rings: ids\n%v\non the CPU backend\n%v", long, cpuLong)
					}
				}
			}
		})
	}
}

// TestGemma4PrefixCache: on gemma4, whose cache has layers of two head
// dims and layers with none, a context whose prefix comes from the prefix
// cache runs only the tokens after it and gives the logits of a cold
// prefill bit for bit (one-token steps, full caches: see
// TestPrefixCacheBitwise), on the CPU backend and on WebGPU and Vulkan
// (whose CopyKV copies each layer at its own head dim and skips the
// shared layers, which have no buffers).
func TestGemma4PrefixCache(t *testing.T) {
	ck, err := gguf.Load(testmodels.Path(t, "arch3", "gemma4.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := ids(1, 20)
	a := cat([]int{1}, prefix, ids(2, 5))
	other := cat([]int{1}, ids(3, 9))
	c := cat([]int{1}, prefix, ids(4, 4))
	for _, backend := range []string{"cpu", "webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			opts := pipeline.Options{MaxCache: 64, PrefillSizes: []int{1}}.WithTuning(tuning.Options{FullKVCache: true})
			if backend != "cpu" {
				opts.Backend = openBackend(t, backend)
			}
			want, _, err := pipeline.PrefillLogits(load(t, ck, opts), c)
			if err != nil {
				t.Fatal(err)
			}
			opts.PrefixCacheBytes = 16 << 20
			warm := load(t, ck, opts)
			for _, ctx := range [][]int{a, other} {
				if _, _, err := pipeline.PrefillLogits(warm, ctx); err != nil {
					t.Fatal(err)
				}
			}
			got, ran, err := pipeline.PrefillLogits(warm, c)
			if err != nil {
				t.Fatal(err)
			}
			if w := len(c) - 1 - len(prefix); ran != w {
				t.Errorf("warm prefill ran %d tokens, want %d", ran, w)
			}
			if hits, saves := pipeline.PrefixStats(warm); hits != 1 || saves != 2 {
				t.Errorf("prefix cache: %d hits, %d saves, want 1 and 2", hits, saves)
			}
			if !slices.Equal(got, want) {
				t.Errorf("logits with the prefix cache differ from a cold prefill")
			}
		})
	}
}
