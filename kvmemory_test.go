package gpurun

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/synthetic"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestEstimateMemoryKVTypes: the memory check counts a quantized cache at
// its blocks' size (TinyLlama-1.1B's shape, 22 layers of 4 kv heads of 64:
// 22528 bytes a position in f16, 11968 in q8_0, 6336 in q4_0), and
// WithCacheTypes' names are parsed with clear errors.
func TestEstimateMemoryKVTypes(t *testing.T) {
	cfg, ok := synthetic.ByName("tinyllama-1.1b")
	if !ok {
		t.Fatal("no tinyllama-1.1b shape")
	}
	for _, c := range []struct {
		k, v fusion.KVType
		f16  bool
		per  int64
	}{
		{fusion.KVFloat, fusion.KVFloat, false, 45056},
		{fusion.KVFloat, fusion.KVFloat, true, 22528},
		{fusion.KVQ8_0, fusion.KVQ8_0, false, 11968},
		{fusion.KVQ4_0, fusion.KVQ4_0, false, 6336},
		{fusion.KVQ8_0, fusion.KVQ4_0, true, 5984 + 3168},
		{fusion.KVFloat, fusion.KVQ4_0, true, 11264 + 3168},
	} {
		if got := estimateMemory(&cfg, 0, 4096, c.f16, c.k, c.v).KVCache; got != 4096*c.per {
			t.Errorf("%v/%v f16 %v: KV %d bytes at 4096 positions, want %d", c.k, c.v, c.f16, got, 4096*c.per)
		}
	}
	if k, v, err := cacheTypes("q8_0", "", false); err != nil || k != fusion.KVQ8_0 || v != fusion.KVFloat {
		t.Errorf("cacheTypes(q8_0, \"\") = %v, %v, %v", k, v, err)
	}
	if _, _, err := cacheTypes("q4_0", "f32", false); err != nil {
		t.Errorf("cacheTypes(q4_0, f32) on an f32 policy: %v", err)
	}
	for _, bad := range [][2]string{{"q3_k", ""}, {"", "f16"}, {"Q8_0", ""}} {
		if _, _, err := cacheTypes(bad[0], bad[1], false); !errors.Is(err, ErrOptions) {
			t.Errorf("cacheTypes(%q, %q) on an f32 policy: %v, want ErrOptions", bad[0], bad[1], err)
		}
	}
}

// TestOpenCacheTypes: WithCacheTypes loads a model with a quantized cache
// (the CPU backend) that generates, and a model whose head dim is not a
// multiple of 32 (stories260K: 8) is refused with a clear error.
func TestOpenCacheTypes(t *testing.T) {
	ctx := context.Background()
	m, err := Open(ctx, "internal/backend/cpu/testdata/kvquant/kvrot-qwen3.gguf", WithBackend("cpu"), WithCacheTypes("q4_0", "q8_0"), WithMaxCache(64))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.KVCacheTypes(); got != "k q4_0, v q8_0" {
		t.Errorf("KVCacheTypes %q", got)
	}
	_, err = Open(ctx, testmodels.Path(t, "stories260K.bin"), WithTokenizer(testmodels.Path(t, "tok512.bin")), WithBackend("cpu"), WithCacheTypes("q8_0", "q8_0"))
	if err == nil || !strings.Contains(err.Error(), "head dim 8 is not a multiple of 32") {
		t.Errorf("stories260K with a q8_0 cache: %v", err)
	}
}
