package cpu

import (
	"math"

	"github.com/gpurun/gpurun/tensors"
)

// matMul computes out[t] = W · in[t] + bias for t < n, with W [outCols,
// inCols] in its stored type. Output rows are split across the workers.
func (p *program) matMul(out []float32, outCols int, in []float32, inCols int, n int, w *matrix, bias []float32) {
	p.pool.run(w.rows, w.rows*w.cols*n, func(lo, hi int) {
		rd := newRowDotter(w, n)
		for r := lo; r < hi; r++ {
			d := rd.dots(r, in, inCols)
			for t, v := range d {
				if bias != nil {
					v += bias[r]
				}
				out[t*outCols+r] = v
			}
		}
	})
}

// matMulAcc is MatMul with Accumulate: out[t] = out[t] + (W · in[t] + bias),
// the same additions in the same order as matMul into a temporary followed
// by add.
func (p *program) matMulAcc(out []float32, outCols int, in []float32, inCols int, n int, w *matrix, bias []float32) {
	p.pool.run(w.rows, w.rows*w.cols*n, func(lo, hi int) {
		rd := newRowDotter(w, n)
		for r := lo; r < hi; r++ {
			d := rd.dots(r, in, inCols)
			for t, v := range d {
				if bias != nil {
					v += bias[r]
				}
				out[t*outCols+r] += v
			}
		}
	})
}

// matMulGLU: out[t] = act(G · in[t] + bias) * (U · in[t] + upBias), each
// factor computed exactly as matMul computes it.
func (p *program) matMulGLU(out []float32, outCols int, in []float32, inCols int, n int, s *step) {
	g, u := s.w, s.up
	p.pool.run(g.rows, 2*g.rows*g.cols*n, func(lo, hi int) {
		gd, ud := newRowDotter(g, n), newRowDotter(u, n)
		for r := lo; r < hi; r++ {
			a, b := gd.dots(r, in, inCols), ud.dots(r, in, inCols)
			for t := range a {
				x, y := a[t], b[t]
				if s.bias != nil {
					x += s.bias[r]
				}
				if s.upBias != nil {
					y += s.upBias[r]
				}
				out[t*outCols+r] = s.act(x) * y
			}
		}
	})
}

// rowDotter computes one weight row times n token rows, with per-worker
// scratch. Decode (n small) is bandwidth-bound: each weight row is
// dequantized inside its dot product. Prefill reads each weight row once for
// all n tokens: the row is dequantized into the scratch row and dotted with
// every token, so quantized weights are decoded once per step rather than
// once per token (and never into a dequantized copy of the whole matrix).
// Block types (llama.cpp's Q2_K ... Q6_K, Q4_1, Q5_0, Q5_1) are always dequantized into the
// scratch row and dotted like f32 rows, so their products equal those of the
// f32 weights llama.cpp dequantizes them to, bit for bit.
type rowDotter struct {
	w       *matrix
	scratch []float32 // a dequantized row, prefill of non-f32 weights only
	scales  []float32 // a row's block scales as f32, decode of quantized weights only
	res     []float32 // n dot products
}

func newRowDotter(w *matrix, n int) *rowDotter {
	rd := &rowDotter{w: w, res: make([]float32, n)}
	if (n > 2 || w.dtype.Block()) && w.dtype != tensors.F32 {
		rd.scratch = make([]float32, w.cols)
	}
	if n <= 2 && w.block > 0 {
		rd.scales = make([]float32, w.cols/w.block)
	}
	return rd
}

// dots returns W[r] · in[t] for t < n (valid until the next call).
func (rd *rowDotter) dots(r int, in []float32, inCols int) []float32 {
	w, out := rd.w, rd.res
	n := len(out)
	if n <= 2 && !w.dtype.Block() {
		var sc []float32
		if w.block > 0 {
			sc = w.rowScales(r, rd.scales)
		}
		for t := range n {
			out[t] = w.dot(r, in[t*inCols:(t+1)*inCols], sc)
		}
		return out
	}
	row := w.rowView(r, rd.scratch)
	t := 0
	for ; t+4 <= n; t += 4 {
		x := in[t*inCols : (t+4)*inCols]
		out[t], out[t+1], out[t+2], out[t+3] = dot4(row, x[:inCols], x[inCols:2*inCols], x[2*inCols:3*inCols], x[3*inCols:])
	}
	for ; t < n; t++ {
		out[t] = dotF32(row, in[t*inCols:(t+1)*inCols])
	}
	return out
}

// rowView returns row r as f32: the stored row itself for f32 weights, else
// the row dequantized into scratch.
func (m *matrix) rowView(r int, scratch []float32) []float32 {
	if m.dtype == tensors.F32 {
		return m.f32[r*m.cols : (r+1)*m.cols]
	}
	m.row(r, scratch)
	return scratch
}

// dot is row r of m times x, computed from the stored type; sc holds the
// row's block scales for quantized types.
func (m *matrix) dot(r int, x []float32, sc []float32) float32 {
	base := r * m.cols
	switch m.dtype {
	case tensors.F32:
		return dotF32(m.f32[base:base+m.cols], x)
	case tensors.F16:
		return dotF16(m.u16[base:base+m.cols], x)
	case tensors.BF16:
		return dotBF16(m.u16[base:base+m.cols], x)
	case tensors.I8:
		return dotI8(m.i8[base:base+m.cols], sc, m.block, x)
	case tensors.I4:
		return dotI4(m.u8[base/2:(base+m.cols)/2], sc, m.block, x)
	}
	return float32(math.NaN())
}

// dotF32 uses four accumulators so the additions can overlap.
func dotF32(a, x []float32) float32 {
	x = x[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * x[i]
		s1 += a[i+1] * x[i+1]
		s2 += a[i+2] * x[i+2]
		s3 += a[i+3] * x[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot4 is dotF32 of one row with four token rows at once: each weight is
// loaded once for four products.
func dot4(a, x0, x1, x2, x3 []float32) (s0, s1, s2, s3 float32) {
	n := len(a)
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	for i, w := range a {
		s0 += w * x0[i]
		s1 += w * x1[i]
		s2 += w * x2[i]
		s3 += w * x3[i]
	}
	return
}

func dotF16(a []uint16, x []float32) float32 {
	x = x[:len(a)]
	tab := f16ToF32
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += tab[a[i]] * x[i]
		s1 += tab[a[i+1]] * x[i+1]
		s2 += tab[a[i+2]] * x[i+2]
		s3 += tab[a[i+3]] * x[i+3]
	}
	for ; i < len(a); i++ {
		s0 += tab[a[i]] * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotBF16(a []uint16, x []float32) float32 {
	x = x[:len(a)]
	var s float32
	for i, h := range a {
		s += math.Float32frombits(uint32(h)<<16) * x[i]
	}
	return s
}

// The quantized dot products sum each block's integer-weighted inputs and
// apply the block's scale once. Inside a block they take 32 elements at a
// time through fixed-size array views (no bounds checks) into eight
// accumulators, so the float additions overlap instead of waiting on each
// other; integers become floats by table lookup rather than conversion.

// dotI8 is row q (scales: one per block of `block` elements) times x.
func dotI8(q []int8, scales []float32, block int, x []float32) float32 {
	x = x[:len(q)]
	tab := i8ToF32
	var s float32
	for _, sc := range scales {
		qb, xb := q[:block], x[:block]
		q, x = q[block:], x[block:]
		var a0, a1, a2, a3, a4, a5, a6, a7 float32
		for len(qb) >= 32 {
			c, y := (*[32]int8)(qb), (*[32]float32)(xb)
			a0 += tab[uint8(c[0])] * y[0]
			a1 += tab[uint8(c[1])] * y[1]
			a2 += tab[uint8(c[2])] * y[2]
			a3 += tab[uint8(c[3])] * y[3]
			a4 += tab[uint8(c[4])] * y[4]
			a5 += tab[uint8(c[5])] * y[5]
			a6 += tab[uint8(c[6])] * y[6]
			a7 += tab[uint8(c[7])] * y[7]
			a0 += tab[uint8(c[8])] * y[8]
			a1 += tab[uint8(c[9])] * y[9]
			a2 += tab[uint8(c[10])] * y[10]
			a3 += tab[uint8(c[11])] * y[11]
			a4 += tab[uint8(c[12])] * y[12]
			a5 += tab[uint8(c[13])] * y[13]
			a6 += tab[uint8(c[14])] * y[14]
			a7 += tab[uint8(c[15])] * y[15]
			a0 += tab[uint8(c[16])] * y[16]
			a1 += tab[uint8(c[17])] * y[17]
			a2 += tab[uint8(c[18])] * y[18]
			a3 += tab[uint8(c[19])] * y[19]
			a4 += tab[uint8(c[20])] * y[20]
			a5 += tab[uint8(c[21])] * y[21]
			a6 += tab[uint8(c[22])] * y[22]
			a7 += tab[uint8(c[23])] * y[23]
			a0 += tab[uint8(c[24])] * y[24]
			a1 += tab[uint8(c[25])] * y[25]
			a2 += tab[uint8(c[26])] * y[26]
			a3 += tab[uint8(c[27])] * y[27]
			a4 += tab[uint8(c[28])] * y[28]
			a5 += tab[uint8(c[29])] * y[29]
			a6 += tab[uint8(c[30])] * y[30]
			a7 += tab[uint8(c[31])] * y[31]
			qb, xb = qb[32:], xb[32:]
		}
		xb = xb[:len(qb)]
		for i, v := range qb {
			a0 += tab[uint8(v)] * xb[i]
		}
		s += (((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))) * sc
	}
	return s
}

// dotI4 is dotI8 for two's complement nibbles, element 0 in the low nibble:
// each byte's pair of values is one lookup in i4Pairs.
func dotI4(q []byte, scales []float32, block int, x []float32) float32 {
	x = x[:2*len(q)]
	tab := i4Pairs
	half := block / 2
	var s float32
	for _, sc := range scales {
		qb, xb := q[:half], x[:block]
		q, x = q[half:], x[block:]
		var a0, a1, a2, a3, a4, a5, a6, a7 float32
		for len(qb) >= 16 {
			c, y := (*[16]byte)(qb), (*[32]float32)(xb)
			p := &tab[c[0]]
			a0 += p[0] * y[0]
			a1 += p[1] * y[1]
			p = &tab[c[1]]
			a2 += p[0] * y[2]
			a3 += p[1] * y[3]
			p = &tab[c[2]]
			a4 += p[0] * y[4]
			a5 += p[1] * y[5]
			p = &tab[c[3]]
			a6 += p[0] * y[6]
			a7 += p[1] * y[7]
			p = &tab[c[4]]
			a0 += p[0] * y[8]
			a1 += p[1] * y[9]
			p = &tab[c[5]]
			a2 += p[0] * y[10]
			a3 += p[1] * y[11]
			p = &tab[c[6]]
			a4 += p[0] * y[12]
			a5 += p[1] * y[13]
			p = &tab[c[7]]
			a6 += p[0] * y[14]
			a7 += p[1] * y[15]
			p = &tab[c[8]]
			a0 += p[0] * y[16]
			a1 += p[1] * y[17]
			p = &tab[c[9]]
			a2 += p[0] * y[18]
			a3 += p[1] * y[19]
			p = &tab[c[10]]
			a4 += p[0] * y[20]
			a5 += p[1] * y[21]
			p = &tab[c[11]]
			a6 += p[0] * y[22]
			a7 += p[1] * y[23]
			p = &tab[c[12]]
			a0 += p[0] * y[24]
			a1 += p[1] * y[25]
			p = &tab[c[13]]
			a2 += p[0] * y[26]
			a3 += p[1] * y[27]
			p = &tab[c[14]]
			a4 += p[0] * y[28]
			a5 += p[1] * y[29]
			p = &tab[c[15]]
			a6 += p[0] * y[30]
			a7 += p[1] * y[31]
			qb, xb = qb[16:], xb[32:]
		}
		xb = xb[:2*len(qb)]
		for i, v := range qb {
			p := &tab[v]
			a0 += p[0] * xb[2*i]
			a1 += p[1] * xb[2*i+1]
		}
		s += (((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))) * sc
	}
	return s
}
