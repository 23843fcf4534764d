package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// gpuLike is the CPU backend presenting itself as a GPU backend, recording
// the cache spec it is asked for and the caches the compiled graphs expect,
// so the policy's effect is checked where it lands, not only as reported.
type gpuLike struct {
	gpu.Backend
	name     string
	caches   []fusion.KVSpec
	compiled []fusion.KVSpec
	half     []bool // per compiled graph: has f16 activations
}

func (b *gpuLike) Info() gpu.Info {
	info := b.Backend.Info()
	info.Backend = b.name
	return info
}

// Caps are the CPU backend's but for a GPU name: a device backend whose
// device reports f16 storage and arithmetic.
func (b *gpuLike) Caps() gpu.Caps {
	c := b.Backend.Caps()
	if b.name != "cpu" {
		c.Host, c.F16Storage, c.F16Math = false, true, true
	}
	return c
}

func (b *gpuLike) NewKVCache(spec fusion.KVSpec) (gpu.KVCache, error) {
	b.caches = append(b.caches, spec)
	return b.Backend.NewKVCache(spec)
}

func (b *gpuLike) Compile(g *fusion.Graph, w gpu.Weights, kv gpu.KVCache) (gpu.Program, error) {
	b.compiled = append(b.compiled, g.KV)
	b.half = append(b.half, g.HasHalfActivations())
	return b.Backend.Compile(g, w, kv)
}

// TestActivationPolicy: the KV cache type follows Options.Activations, else
// the file's policy; auto is f16 on GPU backends and f32 on the CPU one.
// The activations between kernels (act) follow it too, except that only
// --activations f16 gives them to the CPU backend (TestActF16 has the
// whole table), and every compiled graph has them.
func TestActivationPolicy(t *testing.T) {
	tests := []struct {
		file, override, backend string
		want, act               tensors.DType
	}{
		{model.PolicyAuto, "", "cpu", tensors.F32, tensors.F32},
		{model.PolicyAuto, "", "vulkan", tensors.F16, tensors.F16},
		{model.PolicyAuto, "", "webgpu", tensors.F16, tensors.F16},
		{"", "", "cpu", tensors.F32, tensors.F32},
		{"", "", "webgpu", tensors.F16, tensors.F16},
		{model.PolicyF32, "", "vulkan", tensors.F32, tensors.F32},
		{model.PolicyF16, "", "cpu", tensors.F16, tensors.F32},
		{model.PolicyF16, model.PolicyF32, "vulkan", tensors.F32, tensors.F32},
		{model.PolicyF32, model.PolicyF16, "cpu", tensors.F16, tensors.F16},
		{model.PolicyF32, model.PolicyAuto, "webgpu", tensors.F16, tensors.F16},
		{model.PolicyF16, model.PolicyAuto, "cpu", tensors.F32, tensors.F32},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("file=%q/override=%q/%s", tc.file, tc.override, tc.backend), func(t *testing.T) {
			ck := storiesCheckpoint(t)
			ck.Config.Activations = tc.file
			be := &gpuLike{Backend: cpu.New(cpu.Options{Threads: 1}), name: tc.backend}
			m := load(t, ck, pipeline.Options{Backend: be, MaxCache: 32, PrefillSizes: []int{8}, Activations: tc.override})
			if got := m.KVDType(); got != tc.want {
				t.Errorf("KVDType %s, want %s", got, tc.want)
			}
			if got := m.ActivationDType(); got != tc.act {
				t.Errorf("ActivationDType %s, want %s", got, tc.act)
			}
			for i, h := range be.half {
				if h != (tc.act == tensors.F16) {
					t.Errorf("graph %d compiled with f16 activations %v, want %s", i, h, tc.act)
				}
			}
			wantF16 := tc.want == tensors.F16
			if len(be.caches) != 1 || be.caches[0].F16 != wantF16 {
				t.Errorf("caches allocated %+v, want one with F16 %v", be.caches, wantF16)
			}
			if len(be.compiled) == 0 {
				t.Fatal("no graph compiled")
			}
			for _, spec := range be.compiled {
				if !spec.Equal(be.caches[0]) {
					t.Errorf("graph compiled for cache %+v, cache is %+v", spec, be.caches[0])
				}
			}
		})
	}
}

func TestActivationPolicyErrors(t *testing.T) {
	for _, policy := range []string{"bf16", "F16", "fp16", " auto"} {
		t.Run(policy, func(t *testing.T) {
			_, err := pipeline.FromCheckpoint(context.Background(), storiesCheckpoint(t), pipeline.Options{Backend: cpuBackend(t), MaxCache: 32, Activations: policy})
			if !errors.Is(err, pipeline.ErrActivations) {
				t.Errorf("Activations %q: error %v, want ErrActivations", policy, err)
			}
		})
	}
}

// TestF16CacheGolden: with an f16 cache the greedy continuation of every
// golden prompt is still llama.cpp's, whose ids were made with an f16
// cache (its top-1/top-2 margins are at least 0.067 on these cases; the
// logits themselves are checked against llama.cpp's in
// internal/conformance).
func TestF16CacheGolden(t *testing.T) {
	m := load(t, storiesCheckpoint(t), pipeline.Options{MaxCache: 128, Activations: model.PolicyF16})
	if m.KVDType() != tensors.F16 {
		t.Fatalf("KVDType %s, want f16", m.KVDType())
	}
	for _, tc := range testmodels.StoriesCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			got := collect(t, m.NewSession(), pipeline.Prompt{IDs: tc.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(tc.GeneratedIDs)})
			if !slices.Equal(got, tc.GeneratedIDs) {
				t.Errorf("ids\n got %v\nwant %v", got, tc.GeneratedIDs)
			}
		})
	}
}
