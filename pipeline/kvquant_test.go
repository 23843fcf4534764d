package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
)

// kvrotPath is the head-dim-128 Qwen3 of the CPU backend's quantized-cache
// goldens (its README).
const kvrotPath = "../internal/backend/cpu/testdata/kvquant/kvrot-qwen3.gguf"

// TestQuantizedKVCache: a model loaded with quantized, rotated caches
// (q4_0 keys, q8_0 values) keeps the pipeline's contracts: a prefix from
// the prefix cache gives the logits of a cold prefill bit for bit, sessions
// batched together give each one's ids alone, and the cache's bytes are
// the blocks' (18 and 34 bytes per 32 values). The GPU backends refuse
// q4_0 caches (gpu.Caps.QuantKVTypes: ErrOptions), tested where they run.
func TestQuantizedKVCache(t *testing.T) {
	ck, err := gguf.Load(kvrotPath)
	if err != nil {
		t.Fatal(err)
	}
	base := pipeline.Options{MaxCache: 128, CacheTypeK: fusion.KVQ4_0, CacheTypeV: fusion.KVQ8_0}
	m := load(t, ck, base)
	vals := int64(128 * ck.Config.Layers * ck.Config.KVHeads * ck.Config.HeadDim)
	if got, want := m.KVCacheBytes(), vals/32*(18+34); got != want {
		t.Errorf("KVCacheBytes %d, want %d", got, want)
	}
	if got := m.KVCacheTypes(); got != "k q4_0, v q8_0" {
		t.Errorf("KVCacheTypes %q", got)
	}

	t.Run("prefix", func(t *testing.T) {
		prefix := ids(1, 45)
		a, other, c := cat([]int{1}, prefix, ids(2, 11)), cat([]int{1}, ids(3, 30)), cat([]int{1}, prefix, ids(4, 7))
		opts := base
		opts.PrefillSizes = []int{1}
		want, _, err := pipeline.PrefillLogits(load(t, ck, opts), c)
		if err != nil {
			t.Fatal(err)
		}
		opts.PrefixCacheBytes = 64 << 20
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
		if want := len(c) - 1 - len(prefix); ran != want {
			t.Errorf("warm prefill ran %d tokens, want %d", ran, want)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("logit %d: %v, cold prefill %v", i, got[i], want[i])
			}
		}
	})

	t.Run("batched", func(t *testing.T) {
		single := load(t, ck, base)
		type job struct {
			prompt []int
			opts   pipeline.GenerateOptions
			want   []int
		}
		var jobs []job
		for i := range 4 {
			o := pipeline.GenerateOptions{MaxTokens: 16 + 2*i, Temperature: 0.8, TopK: 20, Seed: uint64(3 + i), IgnoreStopTokens: true}
			p := cat([]int{1}, ids(10+i, 5+3*i))
			jobs = append(jobs, job{p, o, collect(t, single.NewSession(), pipeline.Prompt{IDs: p}, o)})
		}
		opts := base
		opts.Slots = 4
		m := load(t, ck, opts.WithTuning(tuning.Options{AlwaysBatch: true}))
		var wg sync.WaitGroup
		errs := make([]error, len(jobs))
		for i, j := range jobs {
			wg.Go(func() {
				var got []int
				for tok, err := range m.NewSession().Generate(context.Background(), pipeline.Prompt{IDs: j.prompt}, j.opts) {
					if err != nil {
						errs[i] = err
						return
					}
					got = append(got, tok.ID)
				}
				if !slices.Equal(got, j.want) {
					errs[i] = fmt.Errorf("ids\n got %v\nwant %v", got, j.want)
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("session %d: %v", i, err)
			}
		}
		rounds, rows := pipeline.BatchStats(m)
		t.Logf("%d batched rounds, %d rows", rounds, rows)
	})
}

// TestQuantizedKVCacheRefused: the GPU backends keep every block type
// (gpu.Caps.QuantKVTypes) but refuse a quantized cache whose heads exceed
// their kernels' 256 dims at load with an error wrapping
// gpu.ErrUnsupported.
func TestQuantizedKVCacheRefused(t *testing.T) {
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			be := openBackend(t, backend)
			if c := be.Caps(); !c.QuantKV || c.QuantKVTypes != fusion.AllKVTypes() {
				t.Fatalf("%s reports QuantKV %v, types %v: want every block type", backend, c.QuantKV, c.QuantKVTypes)
			}
			_, err := be.NewKVCache(fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 512, MaxLen: 8, K: fusion.KVQ8_0})
			if !errors.Is(err, gpu.ErrUnsupported) {
				t.Fatalf("a q8_0 cache of 512-dim heads: %v, want gpu.ErrUnsupported", err)
			}
		})
	}
}
