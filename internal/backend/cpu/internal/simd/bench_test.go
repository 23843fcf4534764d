package simd

import (
	"fmt"
	"testing"

	"github.com/gpurun/gpurun/tensors"
)

// Kernel benchmarks: one 4096-element row, per implementation.
func BenchmarkKernels(b *testing.B) {
	const n = 4096
	r := rngFor(b)
	a, x := randF32(r, n), randF32(r, 4*n)
	h := make([]uint16, n)
	q8, x8 := randI8(r, n), randI8(r, 4*n)
	q4 := randBytes(r, n/2)
	sc, xd := randF32(r, n/32), randF32(r, 4*n/32)
	ws := make([]uint16, n/32)
	for i := range ws {
		ws[i] = 0x2000
	}
	for _, k := range Impls() {
		run := func(name string, f func()) {
			b.Run(fmt.Sprintf("%s/%s", name, k.Name), func(b *testing.B) {
				b.SetBytes(n)
				for b.Loop() {
					f()
				}
			})
		}
		var out [4]float32
		run("f32", func() { k.DotF32(a, x) })
		run("f32x4", func() { k.DotF32x4(a, x, n, &out) })
		run("f16", func() { k.DotF16(h, x) })
		run("bf16", func() { k.DotBF16(h, x) })
		run("i8-block32", func() { k.DotI8(q8, sc, 32, x) })
		run("i4-block32", func() { k.DotI4(q4, sc, 32, x) })
		run("q8q8-block32", func() { k.DotQ8(q8, ws, 1, x8, xd) })
		run("q4q8-block32", func() { k.DotQ4(q4, ws, 1, x8, xd) })
		run("q4q8x4-block32", func() { k.DotQ4x4(q4, ws, 1, x8, xd, n, &out) })
		run("quantize", func() { QuantizeQ8(x8[:n], xd[:n/32], x[:n], true) })
	}
}

// BenchmarkRows runs the several-rows decode kernels over 768-wide rows
// (the 110M shape): a small matrix that stays in L2 and one of 32000 rows
// that streams from memory, so the two show compute and bandwidth limits.
func BenchmarkRows(b *testing.B) {
	const cols = 768
	r := rngFor(b)
	for _, rows := range []int{64, 32000} {
		w8 := randI8(r, rows*cols)
		w4 := randBytes(r, rows*cols/2)
		ws := make([]uint16, rows*cols/32)
		for i := range ws {
			ws[i] = 0x2000
		}
		x, xd := randI8(r, cols), randF32(r, cols/32)
		out := make([]float32, rows)
		for _, k := range Impls() {
			b.Run(fmt.Sprintf("q4q8/rows=%d/%s", rows, k.Name), func(b *testing.B) {
				b.SetBytes(int64(len(w4) + 2*len(ws)))
				for b.Loop() {
					k.DotQ4Rows(w4, ws, x, xd, out)
				}
			})
			b.Run(fmt.Sprintf("q8q8/rows=%d/%s", rows, k.Name), func(b *testing.B) {
				b.SetBytes(int64(len(w8) + 2*len(ws)))
				for b.Loop() {
					k.DotQ8Rows(w8, ws, x, xd, out)
				}
			})
		}
	}
}

// BenchmarkKQuantRows runs the K-quant decode kernels over 768-wide rows
// (the 110M shape; 3 blocks per row), 64 rows that stay in L2 and 32000
// that stream from memory, per implementation, against the path they
// replace ("decode-f32": each row dequantized by tensors.DecodeBlocks into
// an f32 row, then DotF32). Bytes are the weight bytes streamed.
func BenchmarkKQuantRows(b *testing.B) {
	const cols = 768
	r := rngFor(b)
	x := randF32(r, cols)
	q, d, s := quantK(x)
	row := make([]float32, cols)
	for _, kt := range kTypes {
		for _, rows := range []int{64, 32000} {
			w := randKBlocks(r, kt.t, rows*cols/QK, 0)
			rb := cols / QK * kt.t.BlockBytes()
			out := make([]float32, rows)
			benchDecodeF32(b, fmt.Sprintf("%s/rows=%d/decode-f32", kt.t, rows), kt.dt, w, rb, x, row, out)
			for _, k := range Impls() {
				b.Run(fmt.Sprintf("%s/rows=%d/%s", kt.t, rows, k.Name), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					for b.Loop() {
						k.DotKRows(kt.t, w, q, d, s, out)
					}
				})
			}
		}
	}
}

// BenchmarkQ32Rows is BenchmarkKQuantRows for Q4_1, Q5_0 and Q5_1.
func BenchmarkQ32Rows(b *testing.B) {
	const cols = 768
	r := rngFor(b)
	x := randF32(r, cols)
	q, d := quant32(x)
	row := make([]float32, cols)
	for _, qt := range q32Types {
		for _, rows := range []int{64, 32000} {
			w := randQ32Blocks(r, qt.t, qt.scales, rows*cols/QBlock, 0)
			rb := cols / QBlock * qt.t.BlockBytes()
			out := make([]float32, rows)
			benchDecodeF32(b, fmt.Sprintf("%s/rows=%d/decode-f32", qt.t, rows), qt.dt, w, rb, x, row, out)
			for _, k := range Impls() {
				b.Run(fmt.Sprintf("%s/rows=%d/%s", qt.t, rows, k.Name), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					for b.Loop() {
						k.DotQ32Rows(qt.t, w, q, d, out)
					}
				})
			}
		}
	}
}

// BenchmarkKQuantX4 compares the four-token form of the prefill tiles with
// four one-token calls, per weight row (768 wide, 64 rows), per
// implementation; bytes are weight bytes times four tokens.
func BenchmarkKQuantX4(b *testing.B) {
	const cols, rows = 768, 64
	r := rngFor(b)
	q, d, s := quantK(randF32(r, 4*cols))
	for _, kt := range kTypes {
		w := randKBlocks(r, kt.t, rows*cols/QK, 0)
		rb := cols / QK * kt.t.BlockBytes()
		for _, k := range Impls() {
			var out [4]float32
			b.Run(fmt.Sprintf("%s/x4/%s", kt.t, k.Name), func(b *testing.B) {
				b.SetBytes(int64(4 * len(w)))
				for b.Loop() {
					for i := range rows {
						k.DotKx4(kt.t, w[i*rb:(i+1)*rb], q, d, s, cols, &out)
					}
				}
			})
			b.Run(fmt.Sprintf("%s/4x1/%s", kt.t, k.Name), func(b *testing.B) {
				b.SetBytes(int64(4 * len(w)))
				for b.Loop() {
					for i := range rows {
						for j := range 4 {
							out[j] = k.DotK(kt.t, w[i*rb:(i+1)*rb], q[j*cols:], d[j*cols/QK:(j+1)*cols/QK], s[j*cols/QKSum:])
						}
					}
				}
			})
		}
	}
}

// BenchmarkQuantizeQ8 quantizes a 768-wide row (the 110M shape's inputs
// of a prefill product) in natural order: the Go form block by block, and
// QuantizeQ8 (the vector passes where the CPU has them).
func BenchmarkQuantizeQ8(b *testing.B) {
	const n = 768
	x := randF32(rngFor(b), n)
	q, d := make([]int8, n), make([]float32, n/QBlock)
	b.Run("go", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			for blk := range n / QBlock {
				quantizeQ8Block(q[blk*QBlock:], &d[blk], x[blk*QBlock:], false)
			}
		}
	})
	b.Run("best", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			QuantizeQ8(q, d, x, false)
		}
	})
}

// BenchmarkQuantizeQ8K quantizes a 768-wide row in blocks of QK: the Go
// form block by block, and QuantizeQ8K (the vector passes where the CPU
// has them).
func BenchmarkQuantizeQ8K(b *testing.B) {
	const n = 768
	x := randF32(rngFor(b), n)
	q, d, s := make([]int8, n), make([]float32, n/QK), make([]int16, n/QKSum)
	b.Run("go", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			for blk := range n / QK {
				quantizeQ8KBlock(q[blk*QK:], &d[blk], s[blk*QK/QKSum:], x[blk*QK:])
			}
		}
	})
	b.Run("best", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			QuantizeQ8K(q, d, s, x)
		}
	})
}

// benchDecodeF32 runs the baseline of the rows benchmarks: each row of rb
// bytes of w decoded to f32 (tensors.DecodeBlocks of dt into row) and
// dotted with x.
func benchDecodeF32(b *testing.B, name string, dt tensors.DType, w []byte, rb int, x, row, out []float32) {
	b.Run(name, func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		for b.Loop() {
			for i := range out {
				_ = tensors.DecodeBlocks(dt, w[i*rb:(i+1)*rb], row)
				out[i] = DotF32(row, x)
			}
		}
	})
}
