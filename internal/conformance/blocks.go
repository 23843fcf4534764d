package conformance

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// BlockTypes are llama.cpp's block types the backends run (tensors.Q4_1 ...
// Q3K, Q8_0, MXFP4, IQ4_NL, IQ4_XS, NVFP4, TQ1_0 and TQ2_0, kept bit for bit).
var BlockTypes = []tensors.DType{tensors.Q4_1, tensors.Q5_0, tensors.Q5_1, tensors.Q4K, tensors.Q5K, tensors.Q6K, tensors.Q2K, tensors.Q3K, tensors.Q8_0, tensors.MXFP4,
	tensors.IQ4_NL, tensors.IQ4_XS, tensors.NVFP4, tensors.TQ1_0, tensors.TQ2_0,
	tensors.IQ2_XXS, tensors.IQ2_XS, tensors.IQ2_S, tensors.IQ3_XXS, tensors.IQ3_S, tensors.IQ1_S, tensors.IQ1_M}

// GridTypes are the block types whose values come from the I-quant grids:
// the GPU backends run them as matrices but not as MoE experts.
var GridTypes = []tensors.DType{tensors.IQ2_XXS, tensors.IQ2_XS, tensors.IQ2_S, tensors.IQ3_XXS, tensors.IQ3_S, tensors.IQ1_S, tensors.IQ1_M}

// blockHalves lists, per block type, the byte offsets of its f16 fields and
// the largest magnitude each may take so that weights stay within about
// [-1, 1] (d times the largest scale and value, mins below one).
var blockHalves = map[tensors.DType][][2]float32{
	tensors.Q4_1: {{0, 1.0 / 16}, {2, 1}},
	tensors.Q5_0: {{0, 1.0 / 16}},
	tensors.Q5_1: {{0, 1.0 / 32}, {2, 1}},
	tensors.Q4K:  {{0, 1.0 / (63 * 15)}, {2, 1.0 / 63}},
	tensors.Q5K:  {{0, 1.0 / (63 * 31)}, {2, 1.0 / 63}},
	tensors.Q6K:  {{208, 1.0 / (127 * 32)}},
	tensors.Q2K:  {{80, 1.0 / (15 * 3)}, {82, 1.0 / 15}},
	tensors.Q3K:  {{108, 1.0 / (32 * 4)}},
	tensors.Q8_0: {{0, 1.0 / 128}},
	// IQ4_NL's values reach 127; IQ4_XS's scales ls-32 reach 32 in size.
	tensors.IQ4_NL: {{0, 1.0 / 128}},
	tensors.IQ4_XS: {{0, 1.0 / (128 * 32)}},
	// The ternary values are -1, 0, 1 (TQ2_0: and 2).
	tensors.TQ1_0: {{52, 1}},
	tensors.TQ2_0: {{64, 0.5}},
	// The grid I-quants: grid values up to 0x3e (62) times scales up to
	// 15.5/4 (IQ2) or 31 (IQ3_S), ternary ones up to 1.125 times 15 (IQ1).
	tensors.IQ2_XXS: {{0, 1.0 / 256}},
	tensors.IQ2_XS:  {{0, 1.0 / 256}},
	tensors.IQ2_S:   {{0, 1.0 / 256}},
	tensors.IQ3_XXS: {{0, 1.0 / 512}},
	tensors.IQ3_S:   {{0, 1.0 / 2048}},
	tensors.IQ1_S:   {{0, 1.0 / 16}},
}

// blockScaleBytes sets, per block type whose scales are not f16 fields,
// the scale bytes of one block blk so that weights stay within about
// [-1, 1]: MXFP4's E8M0 exponent byte (weights up to 6*2^(e-127)) from
// 118 ... 124, at most 0.75.
var blockScaleBytes = map[tensors.DType]func(r *rand.Rand, blk []byte){
	tensors.MXFP4: func(r *rand.Rand, blk []byte) { blk[0] = byte(118 + r.IntN(7)) },
	// IQ1_M's f16 d lives in the top nibbles of its four scale words.
	tensors.IQ1_M: func(r *rand.Rand, blk []byte) {
		h := tensors.F16Bits((r.Float32()*2 - 1) / 16)
		for k := range 4 {
			blk[49+2*k] = blk[49+2*k]&0x0f | byte(h>>(4*k)&15)<<4
		}
	},
	// NVFP4's four UE4M3 bytes (exponent 1 ... 4: half scales up to
	// 1.875*2^-4, weights up to 1.4), now and then 0x7f (a zero scale) or
	// a subnormal one.
	tensors.NVFP4: func(r *rand.Rand, blk []byte) {
		for s := range 4 {
			blk[s] = byte((1+r.IntN(4))<<3 | r.IntN(8))
			switch r.IntN(16) {
			case 0:
				blk[s] = 0x7f
			case 1:
				blk[s] = byte(r.IntN(8))
			}
		}
	},
}

// BlockMatrix is a [rows, cols] tensor of block type dt: random values,
// scales and mins with f16 fields of either sign within blockHalves (or
// scale bytes from blockScaleBytes).
func BlockMatrix(r *rand.Rand, name string, rows, cols int, dt tensors.DType) *tensors.Tensor {
	data := make([]byte, dt.ByteSize(rows*cols))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for b := 0; b < len(data); b += dt.BlockBytes() {
		for _, h := range blockHalves[dt] {
			v := (r.Float32()*2 - 1) * h[1]
			binary.LittleEndian.PutUint16(data[b+int(h[0]):], tensors.F16Bits(v))
		}
		if set := blockScaleBytes[dt]; set != nil {
			set(r, data[b:b+dt.BlockBytes()])
		}
	}
	t := &tensors.Tensor{Name: name, DType: dt, Shape: []int{rows, cols}, Data: data}
	return mustTensor(t, t.Check())
}

// blockCols is a row length of a few blocks of dt.
func blockCols(dt tensors.DType, blocks int) int { return blocks * dt.BlockLen() }

// BlockCases: Embed, MatMul (decode, one prefill tile, two tiles; with and
// without bias; accumulating) and MatMulGLU with weights of every block
// type. The weights are dequantized bit-identically; the sums of 256 to 512
// products run in another order than the CPU's.
func BlockCases() []Case {
	tol := Tolerance{Abs: 1e-4, Rel: 1e-4}
	var cs []Case
	for ti, dt := range BlockTypes {
		cs = append(cs, Case{
			Name: fmt.Sprintf("embed/%s", dt),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(21, uint64(ti)))
				g := &fusion.Graph{Tokens: 3}
				g.Logits = g.Add(&fusion.EmbedOp{Out: g.NewBuf("x", 3, blockCols(dt, 2)), Weight: "tok", Scale: 1.5})
				return g, []*tensors.Tensor{BlockMatrix(r, "tok", vocab, blockCols(dt, 2), dt)}
			},
			Steps: []Step{{[]int32{3, 0, 12}, 0}, {[]int32{5}, 3}},
			Tol:   exact,
		})
		for _, tokens := range fusedTokens {
			for _, accum := range []bool{false, true} {
				bias := (tokens+ti)%2 == 0
				cs = append(cs, Case{
					Name: fmt.Sprintf("matmul/%s_t%d_bias%v_acc%v", dt, tokens, bias, accum),
					Build: func() (*fusion.Graph, []*tensors.Tensor) {
						r := rand.New(rand.NewPCG(22, uint64(100*ti+tokens)))
						in, out := blockCols(dt, 2), 37
						if dt.BlockLen() == 32 {
							in = blockCols(dt, 5)
						}
						g := &fusion.Graph{Tokens: tokens}
						x := input(g, "x", in)
						op := &fusion.MatMulOp{Out: g.NewBuf("y", tokens, out), In: x, Projection: fusion.Projection{Weight: "w"}}
						ws := []*tensors.Tensor{matrix(r, "x", vocab, in, tensors.F32, 0, 0), BlockMatrix(r, "w", out, in, dt)}
						if accum {
							op.Out, op.Accumulate = input(g, "res", out), true
							ws = append(ws, matrix(r, "res", vocab, out, tensors.F32, 0, 0))
						}
						if bias {
							op.Bias = "b"
							ws = append(ws, vector(r, "b", out, 1, 0))
						}
						g.Logits = g.Add(op)
						return g, ws
					},
					Steps: []Step{{seq(tokens), 0}, {seq(1), 0}},
					Tol:   tol,
				})
			}
		}
	}
	// MatMulGLU with block-type gate and up, of one type and of two.
	for i, pair := range [][2]tensors.DType{{tensors.Q4K, tensors.Q4K}, {tensors.Q6K, tensors.Q5K}, {tensors.Q5_0, tensors.Q5_1}} {
		for _, tokens := range fusedTokens {
			cs = append(cs, Case{
				Name: fmt.Sprintf("matmul_glu/%s_%s_t%d", pair[0], pair[1], tokens),
				Build: func() (*fusion.Graph, []*tensors.Tensor) {
					r := rand.New(rand.NewPCG(23, uint64(10*i+tokens)))
					const in, out = 256, 45
					g := &fusion.Graph{Tokens: tokens}
					x := input(g, "x", in)
					op := &fusion.MatMulGLUOp{Out: g.NewBuf("y", tokens, out), In: x, Gate: fusion.Projection{Weight: "gate", Bias: "gb"},
						Up: fusion.Projection{Weight: "up"}, Act: fusion.ActSiLU}
					ws := []*tensors.Tensor{matrix(r, "x", vocab, in, tensors.F32, 0, 0),
						BlockMatrix(r, "gate", out, in, pair[0]), BlockMatrix(r, "up", out, in, pair[1]), vector(r, "gb", out, 1, 0)}
					g.Logits = g.Add(op)
					return g, ws
				},
				Steps: []Step{{seq(tokens), 0}, {seq(1), 0}},
				Tol:   tol,
			})
		}
	}
	return cs
}
