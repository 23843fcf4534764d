package compute_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/tensors"
)

// BenchmarkAttentionDecode times one decode step of StoreKV + Attention
// with a 1280-position cache of which 16, 256 or 1000 positions are
// visible, at stories260K's attention shape (8 heads, 4 kv heads of 8
// dims), the 110M llama shape (12 heads of 64 dims) and TinyLlama's (32
// heads, 4 kv heads of 64 dims), with an f16 cache (the GPU default) and an
// f32 one, for each attention variant on each device; GB/s counts the
// cache bytes of the visible positions (K and V).
func BenchmarkAttentionDecode(b *testing.B) {
	const maxLen = 1280
	shapes := []struct {
		name               string
		heads, kvHeads, hd int
	}{{"stories260K", 8, 4, 8}, {"110M", 12, 12, 64}, {"tinyllama", 32, 4, 64}}
	for i, d := range devices {
		for _, sh := range shapes {
			for _, f16 := range []bool{true, false} {
				for _, valid := range []int{16, 256, 1000} {
					for _, kind := range []compute.AttentionKind{compute.AttentionPerHead, compute.AttentionSplit, compute.AttentionTiled} {
						b.Run(fmt.Sprintf("%s/%s/f16=%v/len=%d/%s", d.Name, sh.name, f16, valid, kind), func(b *testing.B) {
							be := backendOn(b, deviceAt(b, i), compute.Options{Attention: kind})
							benchAttention(b, be, sh.heads, sh.kvHeads, sh.hd, maxLen, valid, f16)
						})
					}
				}
			}
		}
	}
}

func benchAttention(b *testing.B, be gpu.Backend, heads, kvHeads, hd, maxLen, valid int, f16 bool) {
	p := attentionProgram(b, be, 1, heads, kvHeads, hd, maxLen, f16)
	sec := timeRuns(b, p, []int32{1}, valid-1, make([]float32, heads*hd))
	elem := 4
	if f16 {
		elem = 2
	}
	b.ReportMetric(float64(2*kvHeads*hd*valid*elem)/sec/1e9, "GB/s")
	reportDeviceTime(b, p, fusion.Attention, valid-1)
}

// reportDeviceTime adds the device time of the step's ops of kind k (GPU
// timestamps; the least and the median of 15 profiled steps at position
// pos) to the benchmark's metrics, when the backend has timestamps: wall
// time per op includes the submission and the wait, which on lavapipe
// vary more than the kernels do.
func reportDeviceTime(b *testing.B, p gpu.Program, k fusion.Kind, pos int) {
	byKind, ok := profiledMs(p, []int32{1}, pos, 15, func(t gpu.OpTime) string {
		if t.Kind == k {
			return "k"
		}
		return ""
	})
	if ms := byKind["k"]; ok && len(ms) > 0 {
		b.ReportMetric(ms[0], "device-ms-min")
		b.ReportMetric(ms[len(ms)/2], "device-ms")
	}
}

// profiledMs profiles p's step (ids at pos) runs times and returns, per
// key that key gives the step's ops ("" leaves an op out), the device
// time a step of the ops of that key in ms, one value a run, sorted; ok
// is false when the device has no timestamps.
func profiledMs(p gpu.Program, ids []int32, pos, runs int, key func(gpu.OpTime) string) (ms map[string][]float64, ok bool) {
	ms = map[string][]float64{}
	for range runs {
		ts, err := p.Profile(context.Background(), ids, pos)
		if err != nil {
			return nil, false
		}
		ns := map[string]uint64{}
		for _, t := range ts {
			if k := key(t); k != "" {
				ns[k] += t.Nanos
			}
		}
		for k, n := range ns {
			ms[k] = append(ms[k], float64(n)/1e6)
		}
	}
	for _, v := range ms {
		slices.Sort(v)
	}
	return ms, true
}

// BenchmarkAttentionPrefill times one 128-token prefill step of StoreKV +
// Attention from position 0 at the 110M llama shape (12 heads of 64 dims,
// f16 cache), for the tiled prefill kernel and the per-head one, on each
// device; GFLOP/s counts the causal score and value products (2*2*hd per
// visible (token, position) pair and head).
func BenchmarkAttentionPrefill(b *testing.B) {
	const tokens, maxLen, heads, kvHeads, hd = 128, 256, 12, 12, 64
	for i, d := range devices {
		for _, kind := range []compute.AttentionKind{compute.AttentionTiled, compute.AttentionPerHead} {
			b.Run(fmt.Sprintf("%s/110M/tokens=%d/%s", d.Name, tokens, kind), func(b *testing.B) {
				be := backendOn(b, deviceAt(b, i), compute.Options{Attention: kind})
				p := attentionProgram(b, be, tokens, heads, kvHeads, hd, maxLen, true)
				ids := make([]int32, tokens)
				for j := range ids {
					ids[j] = int32(j % vocab)
				}
				sec := timeRuns(b, p, ids, 0, make([]float32, tokens*heads*hd))
				pairs := float64(tokens * (tokens + 1) / 2)
				b.ReportMetric(pairs*float64(heads*4*hd)/sec/1e9, "GFLOP/s")
			})
		}
	}
}

// attentionProgram compiles StoreKV + Attention over a one-layer cache of
// maxLen positions for a step of tokens tokens, with random q, k and v
// embeddings; the benchmark releases it with its backend.
func attentionProgram(b testing.TB, be gpu.Backend, tokens, heads, kvHeads, hd, maxLen int, f16 bool) gpu.Program {
	b.Helper()
	r := rand.New(rand.NewPCG(11, uint64(tokens)))
	g := &fusion.Graph{Tokens: tokens, KV: fusion.KVSpec{Layers: 1, KVHeads: kvHeads, HeadDim: hd, MaxLen: maxLen, F16: f16}}
	q := embedInput(g, "q", heads*hd)
	k := embedInput(g, "k", kvHeads*hd)
	v := embedInput(g, "v", kvHeads*hd)
	g.Add(&fusion.StoreKVOp{K: k, V: v, KVHeads: kvHeads, HeadDim: hd})
	g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", tokens, heads*hd), Q: q,
		HeadShape: fusion.HeadShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd}, Scale: 0.125})
	kv, err := be.NewKVCache(g.KV)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(kv.Release)
	return compiled(b, be, g, []*tensors.Tensor{tensorOf(b, r, "q", vocab, heads*hd, tensors.F32, 0, 0),
		tensorOf(b, r, "k", vocab, kvHeads*hd, tensors.F32, 0, 0), tensorOf(b, r, "v", vocab, kvHeads*hd, tensors.F32, 0, 0)}, kv)
}
