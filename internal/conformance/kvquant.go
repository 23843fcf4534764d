package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// KVQuantCases are quantized K/V caches (fusion.KVSpec.K, V: llama.cpp's
// block types) written through each of the three store paths (StoreKV,
// RopeStoreKV, MatMulRopeKV) and read by Attention over prefill chunks
// and decode steps: every block type for keys and for values, rotated
// (head dim 64: fusion.KVSpec.KRotation 64, VRotation 64) and not (head
// dim 32, or NoRotation), a mixed cache (quantized keys, f16 values) and
// a sliding-window layer on a ring cache. Each case's Ablate takes away
// what it is for (the rotation where the cache rotates, else the
// quantization), so a backend that skipped it misses by far more than the
// tolerance.
//
// Tolerances: the backend must store the same blocks as the CPU (bit for
// bit: the same float32 operations, llama.cpp's rounding) and score with
// the query quantized to q8_0 (q8_1) as the CPU does, whose block sums are
// exact integers; what remains is the order of the softmax's and the
// weighted sum's additions (kvQuantExact). Where rope runs on the device
// (rope_kv, matmul_rope_kv) a key or query value within an ulp of a
// rounding boundary of its block may quantize one step apart, which moves
// one score by d_q*d_k*|k| (about 1e-4 here) or one value component by a
// block's d times its weight (kvQuantRope).
func KVQuantCases() []Case {
	type tc struct {
		store          string // "kv", "rope_kv" or "matmul_rope_kv"
		k, v           fusion.KVType
		vf16           bool // float values: binary16 (fusion.KVSpec.F16)
		heads, kvHeads int
		hd             int
		noRot          bool
		window         int // > 0: a sliding window on a ring of window + tokens - 1
		tokens         int
		prefill        int
		decode         int
	}
	q8, q4, q41, q50, q51, nl := fusion.KVQ8_0, fusion.KVQ4_0, fusion.KVQ4_1, fusion.KVQ5_0, fusion.KVQ5_1, fusion.KVIQ4NL
	table := []tc{
		{"kv", q8, q8, false, 4, 2, 64, false, 0, 4, 12, 3},            // rotated by H_64 (keys) and H_64 (values)
		{"kv", q8, q8, false, 4, 2, 64, true, 0, 4, 12, 3},             // the same unrotated (NoRotation)
		{"kv", q4, q4, false, 4, 2, 64, false, 0, 4, 12, 3},            // q4_0 rotated
		{"kv", q4, q4, false, 2, 1, 32, false, 0, 5, 10, 3},            // q4_0, head dim 32: no rotation
		{"kv", q41, q50, false, 4, 2, 64, false, 0, 4, 8, 2},           // q4_1 keys (q8_1 query sums), q5_0 values
		{"kv", q51, nl, false, 4, 2, 32, false, 0, 3, 6, 2},            // q5_1 keys, iq4_nl values
		{"kv", nl, q41, false, 2, 2, 64, false, 0, 4, 8, 2},            // iq4_nl keys, q4_1 values, rotated
		{"kv", q50, q51, false, 2, 1, 32, false, 0, 4, 8, 2},           // q5_0 keys, q5_1 values
		{"kv", q8, 0, true, 4, 2, 64, false, 0, 4, 8, 2},               // q8_0 keys, f16 values
		{"kv", q8, q4, false, 4, 2, 64, false, 5, 4, 40, 10},           // ring cache of 8, wrapping
		{"kv", q8, q8, false, 2, 1, 32, false, 5, 4, 40, 10},           // q8_0 on a ring, head dim 32: no rotation
		{"kv", 0, q8, true, 4, 2, 64, false, 0, 4, 8, 2},               // f16 keys, q8_0 values (rotated)
		{"kv", q8, q8, false, 2, 1, 64, false, 0, 8, 136, 2},           // past two chunks of 64 positions
		{"rope_kv", q8, q8, false, 4, 2, 64, false, 0, 4, 12, 3},       // RopeStoreKV, rotated
		{"rope_kv", q4, q4, false, 2, 1, 32, false, 6, 3, 24, 6},       // RopeStoreKV on a ring, unrotated
		{"matmul_rope_kv", q8, q8, false, 4, 2, 64, false, 0, 3, 9, 4}, // MatMulRopeKV (lanes_rope_kv), rotated
		{"matmul_rope_kv", q4, q4, false, 4, 2, 32, false, 0, 3, 6, 4}, // MatMulRopeKV, unrotated
	}
	var cs []Case
	for _, c := range table {
		maxLen := c.prefill + c.decode + 1
		ring := 0
		if c.window > 0 {
			ring = c.window + c.tokens - 1
		}
		tol := kvQuantExact
		if c.store != "kv" {
			tol = kvQuantRope
		}
		vname := c.v.String()
		if !c.v.Quantized() {
			vname = "f16"
		}
		spec := fusion.KVSpec{Layers: 2, KVHeads: c.kvHeads, HeadDim: c.hd, MaxLen: maxLen, F16: c.vf16,
			K: c.k, V: c.v, NoRotation: c.noRot, Ring: []int{0, ring}}
		rotated := spec.KRotation(1) > 0 || spec.VRotation(1) > 0
		cs = append(cs, Case{
			Name: fmt.Sprintf("kvquant/%s_k%v_v%s_h%d_kv%d_d%d_rot%v_w%d_t%d_p%d_d%d", c.store, c.k, vname, c.heads, c.kvHeads, c.hd, rotated, c.window, c.tokens, c.prefill, c.decode),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(23, uint64(c.hd*1000+int(c.k)*100+int(c.v)*10+c.tokens)))
				g := &fusion.Graph{Tokens: c.tokens}
				g.KV = spec
				g.KV.Ring = []int{0, ring}
				qc, kc := c.heads*c.hd, c.kvHeads*c.hd
				shape := fusion.HeadShape{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd}
				rp := fusion.RopeParams{Dims: c.hd, Base: 10000, Style: fusion.RopeHalves}
				var q fusion.Buf
				var ws []*tensors.Tensor
				switch c.store {
				case "matmul_rope_kv":
					const in = 64
					x := input(g, "x", in)
					q = g.NewBuf("q", c.tokens, qc)
					ws = []*tensors.Tensor{matrix(r, "x", vocab, in, tensors.F32, 0, 0),
						matrix(r, "wq", qc, in, tensors.F32, 0, 0), matrix(r, "wk", kc, in, tensors.F32, 0, 0), matrix(r, "wv", kc, in, tensors.F32, 0, 0)}
					g.Add(&fusion.MatMulRopeKVOp{Out: q, In: x, Q: fusion.Projection{Weight: "wq"}, K: fusion.Projection{Weight: "wk"},
						V: fusion.Projection{Weight: "wv"}, Layer: 1, HeadShape: shape, RopeParams: rp})
				default:
					q = input(g, "q", qc)
					k, v := input(g, "k", kc), input(g, "v", kc)
					scaled := func(name string, cols int) *tensors.Tensor {
						return mustTensor(tensors.FromF32(name, []int{vocab, cols}, uniform(r, vocab*cols, 2), tensors.F32))
					}
					ws = []*tensors.Tensor{scaled("q", qc), scaled("k", kc), scaled("v", kc)}
					if c.store == "kv" {
						g.Add(&fusion.StoreKVOp{K: k, V: v, Layer: 1, KVHeads: c.kvHeads, HeadDim: c.hd})
					} else {
						g.Add(&fusion.RopeStoreKVOp{Q: q, K: k, V: v, Layer: 1, HeadShape: shape, RopeParams: rp})
					}
				}
				g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", c.tokens, qc), Q: q, Layer: 1,
					HeadShape: shape, Scale: 0.9, Window: c.window})
				return g, ws
			},
			Steps: chunkedSteps(c.prefill, c.tokens, c.decode),
			Tol:   tol,
			Ablate: func(g *fusion.Graph) {
				if rotated {
					g.KV.NoRotation = true
					return
				}
				g.KV.K, g.KV.V = fusion.KVFloat, fusion.KVFloat
			},
		})
	}
	return cs
}

var (
	// kvQuantExact: the same blocks and integer block sums as the CPU;
	// attention's sums in another order.
	kvQuantExact = Tolerance{Abs: 2e-5, Rel: 1e-4}
	// kvQuantRope: device rope values an ulp across a quantization
	// boundary (see KVQuantCases).
	kvQuantRope = Tolerance{Abs: 1e-3, Rel: 5e-3}
)

// RunKVQuantCases holds a backend to the CPU on the quantized-cache cases
// (KVQuantCases) whose types its Caps say its caches keep
// (gpu.Caps.QuantKV, QuantKVTypes); each other case's cache it must refuse
// with gpu.ErrUnsupported naming the types, while the CPU reference still
// runs that case (so the cases stay valid until the backend takes them).
func RunKVQuantCases(t *testing.T, cases []Case, newBackend Factory) {
	be := newBackend(t)
	caps := be.Caps()
	be.Close()
	var kept []Case
	for _, c := range cases {
		g, _ := c.Build()
		if caps.QuantKV && caps.QuantKVTypes.Keeps(g.KV.K, g.KV.V) {
			kept = append(kept, c)
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			g, ws := c.Build()
			runSteps(t, cpu.New(cpu.Options{Threads: 1}), g, ws, c.Steps, nil)
			be := newBackend(t)
			defer be.Close()
			kv, err := be.NewKVCache(g.KV)
			if err == nil {
				kv.Release()
				t.Fatalf("%s: a %v/%v cache accepted, but its Caps do not keep it", be.Info().Backend, g.KV.K, g.KV.V)
			}
			if !errors.Is(err, gpu.ErrUnsupported) || !strings.Contains(err.Error(), g.KV.K.String()+"/"+g.KV.V.String()) {
				t.Fatalf("%s: a %v/%v cache refused with %v: want gpu.ErrUnsupported naming the types", be.Info().Backend, g.KV.K, g.KV.V, err)
			}
		})
	}
	RunCases(t, kept, newBackend)
}
