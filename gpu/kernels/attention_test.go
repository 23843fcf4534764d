package kernels_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/internal/conformance"
	"github.com/gpurun/gpurun/gpu/kernels"
)

// TestAttentionConformance runs the attention parity cases against gpu/cpu
// on WebGPU and Vulkan with each attention variant forced: per (head,
// token), and split over the sequence (attn_split + attn_combine) for
// every graph, prefill included, so both variants see every geometry.
func TestAttentionConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, kind := range []kernels.AttentionKind{kernels.AttentionPerHead, kernels.AttentionSplit, kernels.AttentionTiled, kernels.AttentionDecode} {
			t.Run(fmt.Sprint(kind), func(t *testing.T) {
				opts := kernels.Options{Attention: kind}
				conformance.RunCases(t, conformance.AttentionCases(), func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, opts)}
				})
			})
		}
	})
}

// TestDecodeAttentionVariantChosen: the decode kernel (AttentionDecode)
// reads an f16 cache through attn_dec4 exactly where its head dim is a
// multiple of 8 and its length a multiple of 4, and through attn_dec
// elsewhere (f32 caches included), with the variant whose loops cover the
// head dim and, for GQA groups, the batched one; the kernel a profiled
// step names is the one that ran. TestAttentionConformance's attn_dec4
// cases check results only, so without this a planner that stopped
// choosing attn_dec4 would still pass them on attn_dec.
func TestDecodeAttentionVariantChosen(t *testing.T) {
	cases := []struct {
		heads, kvHeads, hd, maxLen int
		f16                        bool
		want                       string
	}{
		{12, 12, 64, 1280, true, "attn_dec4_d64"},
		{32, 4, 64, 1280, true, "attn_dec4_g4_d64"},
		{8, 4, 8, 512, true, "attn_dec4_g4_d8"},
		{2, 1, 8, 264, true, "attn_dec4_g4_d8"},
		{2, 2, 8, 264, true, "attn_dec4_d8"},
		{6, 6, 128, 16, true, "attn_dec4_d128"},
		{4, 4, 36, 64, true, "attn_dec_d64_f16"},     // head dim not a multiple of 8
		{12, 12, 64, 1282, true, "attn_dec_d64_f16"}, // length not a multiple of 4
		{3, 3, 7, 64, true, "attn_dec_d8_f16"},
		{12, 12, 64, 1280, false, "attn_dec_d64"}, // f32 cache
	}
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		if !dev.Info().Timestamps {
			t.Fatalf("%s: no timestamps to profile with (lavapipe and SwiftShader have them)", dev.Info().Name)
		}
		be := backendOn(t, dev, kernels.Options{Attention: kernels.AttentionDecode})
		for _, c := range cases {
			t.Run(fmt.Sprintf("h%d_kv%d_d%d_max%d_f16%v", c.heads, c.kvHeads, c.hd, c.maxLen, c.f16), func(t *testing.T) {
				p := attentionProgram(t, be, 1, c.heads, c.kvHeads, c.hd, c.maxLen, c.f16)
				ops, err := p.(gpu.Profiler).Profile(context.Background(), []int32{1}, 5)
				if err != nil {
					t.Fatal(err)
				}
				var ran []string
				for _, op := range ops {
					if op.Kind == fusion.Attention {
						ran = append(ran, op.Kernels...)
					}
				}
				if !slices.ContainsFunc(ran, func(k string) bool { return k == c.want || strings.HasSuffix(k, "."+c.want) }) {
					t.Errorf("attention kernels %v, want %s", ran, c.want)
				}
			})
		}
	})
}
