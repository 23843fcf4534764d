package gpurun

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/synthetic"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestMemoryLimit: WithMemoryLimit refuses, before anything is allocated,
// a model whose weights and cache need more than the limit, saying what
// it needs and what there is; a model within it loads. A cache past the
// model's trained context is refused unless WithCacheBeyondContext.
func TestMemoryLimit(t *testing.T) {
	path := testmodels.Path(t, "stories260K.bin")
	dev := &smallDevice{Backend: cpu.New(cpu.Options{}), memory: 1 << 30}
	// stories260K: 1015.8 KiB of weights; 4096 positions of an f16
	// cache: 5 layers x K,V x 4 heads x 8 dims x 2 bytes = 640 bytes each.
	_, err := Open(context.Background(), path, WithGPUBackend(dev), WithMaxCache(4096), WithCacheBeyondContext(), WithMemoryLimit(3<<20))
	if !errors.Is(err, ErrTooBig) || dev.loaded {
		t.Fatalf("3 MiB limit: %v (allocated: %v)", err, dev.loaded)
	}
	for _, want := range []string{"it needs ", "weights 1015.8 KiB", "KV cache 2.5 MiB", "the memory limit has 3.0 MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	m, err := Open(context.Background(), path, WithGPUBackend(dev), WithMaxCache(4096), WithCacheBeyondContext(), WithMemoryLimit(64<<20))
	if err != nil {
		t.Fatalf("64 MiB limit: %v", err)
	}
	if m.Pipeline().MaxCache() != 4096 {
		t.Errorf("cache %d, want 4096", m.Pipeline().MaxCache())
	}
	m.Close()
	// The limit is not the device's memory when that is less.
	dev.memory = 1 << 20
	_, err = Open(context.Background(), path, WithGPUBackend(dev), WithMemoryLimit(1<<30))
	if !errors.Is(err, ErrTooBig) || !strings.Contains(err.Error(), "tiny GPU has 1.0 MiB") {
		t.Errorf("1 MiB device, 1 GiB limit: %v", err)
	}
	if _, err := Open(context.Background(), path, WithMaxCache(4096)); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "exceeds the model's context length 512") {
		t.Errorf("a cache past the context without WithCacheBeyondContext: %v", err)
	}
}

// TestLargestContext: the KV cache EstimateMemory counts is the cache
// types' bytes (TinyLlama 1.1B: 22 layers x K,V x 4 heads x 64 dims, at 2
// bytes in f16, 34 bytes a block of 32 in q8_0, 18 in q4_0), and
// LargestContext is the longest cache whose estimate fits the budget.
func TestLargestContext(t *testing.T) {
	cfg, ok := synthetic.ByName("tinyllama-1.1b")
	if !ok {
		t.Fatal("no tinyllama-1.1b shape")
	}
	const weights, budget = 600 << 20, 2 << 30
	for _, tc := range []struct {
		cache   string
		perPosK int64 // bytes of the keys of one position
	}{{"f16", 22 * 4 * 64 * 2}, {"q8_0", 22 * 4 * 64 / 32 * 34}, {"q4_0", 22 * 4 * 64 / 32 * 18}, {"f32", 22 * 4 * 64 * 4}} {
		e, err := EstimateMemory(&cfg, weights, 32768, tc.cache, tc.cache)
		if err != nil {
			t.Fatal(err)
		}
		if e.KVCache != 2*tc.perPosK*32768 || e.Weights != weights || e.Activations <= 0 {
			t.Errorf("%s: estimate %+v, want a KV cache of %d", tc.cache, e, 2*tc.perPosK*32768)
		}
		n, err := LargestContext(&cfg, weights, budget, tc.cache, tc.cache)
		if err != nil {
			t.Fatal(err)
		}
		at, _ := EstimateMemory(&cfg, weights, n, tc.cache, tc.cache)
		past, _ := EstimateMemory(&cfg, weights, n+1, tc.cache, tc.cache)
		if n < 1 || at.Total() > budget || past.Total() <= budget {
			t.Errorf("%s: largest context %d: %d bytes there, %d one position on, budget %d", tc.cache, n, at.Total(), past.Total(), budget)
		}
		if kvOnly := (budget - weights) / (2 * tc.perPosK); int64(n) > kvOnly {
			t.Errorf("%s: largest context %d past what the KV cache alone leaves room for, %d", tc.cache, n, kvOnly)
		}
	}
	if n, err := LargestContext(&cfg, 3<<30, budget, "f16", "f16"); err != nil || n != 0 {
		t.Errorf("weights past the budget: %d, %v, want 0", n, err)
	}
	if _, err := EstimateMemory(&cfg, weights, 16, "q3_k", "f16"); !errors.Is(err, ErrOptions) {
		t.Errorf("an unknown cache type: %v", err)
	}
	if _, err := EstimateMemory(&cfg, weights, 16, "f32", "f16"); !errors.Is(err, ErrOptions) {
		t.Errorf("float caches of two precisions: %v", err)
	}
}
