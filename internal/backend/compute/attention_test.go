package compute_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/conformance"
)

// TestAttentionConformance runs the attention parity cases against internal/backend/cpu
// on WebGPU and Vulkan with each attention variant forced: per (head,
// token), and split over the sequence (attn_split + attn_combine) for
// every graph, prefill included, so both variants see every geometry.
func TestAttentionConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, kind := range []compute.AttentionKind{compute.AttentionPerHead, compute.AttentionSplit, compute.AttentionTiled} {
			t.Run(fmt.Sprint(kind), func(t *testing.T) {
				opts := compute.Options{Attention: kind}
				conformance.RunCases(t, conformance.AttentionCases(), func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, opts)}
				})
			})
		}
	})
}

// TestRingConformance runs the ring-cache cases (conformance.RingCases:
// sliding-window layers keeping 2*ring mirrored slots, read well past
// several wraps) against internal/backend/cpu with full caches, on WebGPU and
// Vulkan, with each attention variant forced.
func TestRingConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, kind := range []compute.AttentionKind{compute.AttentionPerHead, compute.AttentionSplit, compute.AttentionTiled} {
			t.Run(fmt.Sprint(kind), func(t *testing.T) {
				opts := compute.Options{Attention: kind}
				conformance.RunCases(t, conformance.RingCases(), func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, opts)}
				})
			})
		}
	})
}

// TestAttentionVariantChosen: AttentionAuto splits decode steps over the
// sequence (attn_split, attn_combine) and tiles prefills (attn_tiled), for
// f32 and f16 caches, GQA groups and odd head dims alike, on every device;
// the kernels a profiled step names are the ones that ran.
// TestAttentionConformance forces each kind and checks results only, so
// without this a planner that stopped choosing them would still pass.
func TestAttentionVariantChosen(t *testing.T) {
	cases := []struct {
		tokens, heads, kvHeads, hd, maxLen int
		f16                                bool
		want                               []string
	}{
		{1, 12, 12, 64, 1280, true, []string{"attn_split_f16", "attn_combine"}},
		{1, 32, 4, 64, 1280, false, []string{"attn_split", "attn_combine"}},
		{1, 3, 3, 7, 64, true, []string{"attn_split_f16", "attn_combine"}},
		{4, 8, 4, 8, 512, true, []string{"attn_split_f16", "attn_combine"}},
		{5, 8, 4, 8, 512, true, []string{"attn_tiled_f16"}},
		{16, 12, 12, 64, 64, false, []string{"attn_tiled"}},
	}
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		if !dev.Caps().Timestamps {
			t.Fatalf("%s: no timestamps to profile with (lavapipe and SwiftShader have them)", dev.Info().Name)
		}
		be := backendOn(t, dev, compute.Options{})
		for _, c := range cases {
			t.Run(fmt.Sprintf("t%d_h%d_kv%d_d%d_max%d_f16%v", c.tokens, c.heads, c.kvHeads, c.hd, c.maxLen, c.f16), func(t *testing.T) {
				p := attentionProgram(t, be, c.tokens, c.heads, c.kvHeads, c.hd, c.maxLen, c.f16)
				ops, err := p.Profile(context.Background(), make([]int32, c.tokens), 5)
				if err != nil {
					t.Fatal(err)
				}
				var ran []string
				for _, op := range ops {
					if op.Kind == fusion.Attention {
						ran = append(ran, op.Kernels...)
					}
				}
				if !slices.Equal(ran, c.want) {
					t.Errorf("attention kernels %v, want %v", ran, c.want)
				}
			})
		}
	})
}

// TestKVQuantConformance runs the quantized-cache cases
// (conformance.KVQuantCases: every llama.cpp block type for keys and
// values, rotated and not, each store path, a ring) on WebGPU and Vulkan:
// the types Caps.QuantKVTypes names held to the CPU, the others refused
// with gpu.ErrUnsupported naming their types. The planner reads a
// quantized cache with the per-head kernel whatever Options.Attention
// says (chooseAttention), so the default options cover it.
func TestKVQuantConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		conformance.RunKVQuantCases(t, conformance.KVQuantCases(), func(t testing.TB) gpu.Backend {
			return sharedBackend{backendOn(t, dev, compute.Options{})}
		})
	})
}
