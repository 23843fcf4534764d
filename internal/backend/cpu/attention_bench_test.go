package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// BenchmarkAttentionDecode times one decode step of StoreKV + Attention
// over a cache of 1024 positions, at TinyLlama's attention shape (32
// heads, 4 kv heads of 64 dims) and the 110M llama shape (12 heads of 64
// dims), with an f32 and an f16 cache; GB/s counts the cache read.
func BenchmarkAttentionDecode(b *testing.B) {
	const maxLen = 1024
	for _, shape := range []struct {
		name               string
		heads, kvHeads, hd int
	}{{"tinyllama", 32, 4, 64}, {"110m", 12, 12, 64}} {
		heads, kvHeads, hd := shape.heads, shape.kvHeads, shape.hd
		for _, f16 := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/f16=%v", shape.name, f16), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(11, 11))
				g := &fusion.Graph{Tokens: 1, KV: fusion.KVSpec{Layers: 1, KVHeads: kvHeads, HeadDim: hd, MaxLen: maxLen, F16: f16}}
				q, k, v := g.NewBuf("q", 1, heads*hd), g.NewBuf("k", 1, kvHeads*hd), g.NewBuf("v", 1, kvHeads*hd)
				for _, in := range []struct {
					buf  fusion.Buf
					name string
				}{{q, "q"}, {k, "k"}, {v, "v"}} {
					g.Add(&fusion.EmbedOp{Out: in.buf, Weight: in.name})
				}
				g.Add(&fusion.StoreKVOp{K: k, V: v, KVHeads: kvHeads, HeadDim: hd})
				g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", 1, heads*hd), Q: q,
					HeadShape: fusion.HeadShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd}, Scale: 0.125})
				ws := []*tensors.Tensor{f32Tensor(b, "q", []int{1, heads * hd}, randVals(rng, heads*hd, 1)),
					f32Tensor(b, "k", []int{1, kvHeads * hd}, randVals(rng, kvHeads*hd, 1)),
					f32Tensor(b, "v", []int{1, kvHeads * hd}, randVals(rng, kvHeads*hd, 1))}
				h := compile(b, g, ws, 0)
				b.ResetTimer()
				for range b.N {
					h.run(b, []int32{0}, maxLen-1)
				}
				elem := 4.0
				if f16 {
					elem = 2
				}
				b.ReportMetric(2*maxLen*float64(kvHeads*hd)*elem*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
