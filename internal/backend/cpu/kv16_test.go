package cpu_test

import (
	"math"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// roundHalf rounds x to the nearest IEEE binary16 value (ties to even),
// saturating at ±65504, computed in float64 from the format's definition:
// 11 significant bits, exponents down to -14, subnormal spacing 2^-24.
func roundHalf(x float64) float64 {
	if x == 0 || math.IsNaN(x) {
		return x
	}
	e := max(math.Floor(math.Log2(math.Abs(x))), -14)
	ulp := math.Ldexp(1, int(e)-10)
	r := math.RoundToEven(x/ulp) * ulp
	return math.Max(-65504, math.Min(65504, r))
}

// TestF16CacheRounding stores values in an f16 cache and reads them back
// through attention over a single position (softmax weight exactly 1, so
// the output is the cached value): ties to even, subnormals, and saturation
// where a plain conversion would give an infinity. Expected values are
// written from the binary16 definition; roundHalf must agree with them.
func TestF16CacheRounding(t *testing.T) {
	tests := []struct {
		name    string
		in, out float64
	}{
		{"zero", 0, 0},
		{"one", 1, 1},
		{"tie to even down", 1 + 1.0/2048, 1},
		{"tie to even up", 1 + 3.0/2048, 1 + 2.0/1024},
		{"above the tie", 1 + 1.0/2048 + 1.0/65536, 1 + 1.0/1024},
		{"minus two", -2, -2},
		{"third", 1.0 / 3, 1365 * math.Ldexp(1, -12)}, // 0x3555
		{"largest finite", 65504, 65504},
		{"rounds down to the largest", 65519, 65504},
		{"would round to infinity", 65520, 65504},
		{"saturates", 1e9, 65504},
		{"saturates negative", -1e9, -65504},
		{"infinity saturates", math.Inf(1), 65504},
		{"smallest normal", 1.0 / 16384, 1.0 / 16384},
		{"smallest subnormal", math.Ldexp(1, -24), math.Ldexp(1, -24)},
		{"half the smallest subnormal ties to zero", math.Ldexp(1, -25), 0},
		{"one and a half subnormals tie to two", 3 * math.Ldexp(1, -25), math.Ldexp(1, -23)},
	}
	n := len(tests)
	vals := make([]float32, n)
	for i, tc := range tests {
		vals[i] = float32(tc.in)
	}
	g := &fusion.Graph{Tokens: 1, KV: fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: n, MaxLen: 1, F16: true}}
	q, kv, o := g.NewBuf("q", 1, n), g.NewBuf("kv", 1, n), g.NewBuf("o", 1, n)
	g.Add(&fusion.EmbedOp{Out: q, Weight: "q"})
	g.Add(&fusion.EmbedOp{Out: kv, Weight: "kv"})
	g.Add(&fusion.StoreKVOp{K: kv, V: kv, KVHeads: 1, HeadDim: n})
	// q = 0: every score is 0 whatever the keys (saturation keeps them finite).
	g.Logits = g.Add(&fusion.AttentionOp{Out: o, Q: q, HeadShape: fusion.HeadShape{Heads: 1, KVHeads: 1, HeadDim: n}, Scale: 1})
	ws := []*tensors.Tensor{f32Tensor(t, "q", []int{1, n}, make([]float32, n)), f32Tensor(t, "kv", []int{1, n}, vals)}
	got := compile(t, g, ws, 1).run(t, []int32{0}, 0)
	for i, tc := range tests {
		if float64(got[i]) != tc.out {
			t.Errorf("%s: %g cached as %g, want %g", tc.name, tc.in, got[i], tc.out)
		}
		if r := roundHalf(tc.in); !math.IsInf(tc.in, 0) && r != tc.out {
			t.Errorf("%s: roundHalf(%g) = %g, want %g", tc.name, tc.in, r, tc.out)
		}
	}
}
