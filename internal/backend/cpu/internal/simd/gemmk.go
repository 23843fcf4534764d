package simd

import (
	"fmt"
	"runtime"
	"sync"
)

// The K-quant GEMM: Q2_K ... Q6_K weight rows repacked once,
// at load, into groups of GemmRows rows whose blocks lie side by side,
// times activations quantized by QuantizeQ8K. One packed block of a group
// (256 values of each of its rows) holds, lane l being the group's row l:
//
//	Q4_K: d[8] f16, dmin[8] f16, the 6-bit scales and mins in 96 bytes
//	      (kq4ScaleMin), then 32 chunks of 32 bytes: chunk v, lane l =
//	      bytes 4v..4v+3 of row l's 128 bytes of 4-bit values (low
//	      nibbles values 64g+4j.., high ones 64g+32+4j.., v = 8g+j);
//	      1152 bytes, the GGUF size of the eight rows' blocks (decode
//	      streams the packed copy: a byte more per row is a byte more
//	      read per token)
//	Q5_K: Q4_K, then 8 chunks of the rows' fifth bits (chunk j, lane l =
//	      bytes 4j..4j+3 of row l's 32 bytes of high bits)
//	Q6_K: d[8] f32, scales[8 pairs][8 lanes][2] i8 (sub-blocks 2k, 2k+1),
//	      32 chunks of the rows' low 4 bits and 16 of their high 2 bits,
//	      each chunk the rows' dwords of the GGUF byte arrays in turn
//	Q2_K: d[8] f32, dmin[8] f32, the GGUF scale/min bytes in pairs as
//	      Q6_K's scales, 16 chunks of the rows' 2-bit values
//	Q3_K: d[8] f32, the 6-bit scales less 32 as Q6_K's, 16 chunks of the
//	      rows' 2-bit values and 8 of their high bits
//
// so that one 32-byte load gives every row of the group four values of
// the same activations. The values stay unsigned; a kernel (gen/gemmk.go)
// sums each sub-block exactly in int32 per lane, scales it, and ends each
// block with blockSum, so every lane gets DotK's bits for its row.

// kgemmBlockBytes is the packed block size of a K-quant type (0: no GEMM).
var kgemmBlockBytes = [NumKQuant]int{Q4K: 1152, Q5K: 1408, Q6K: 1696, Q2K: 704, Q3K: 928}

// Offsets in a packed block.
const (
	kq4D, kq4Min, kq4SM, kq4Q = 0, 16, 32, 128
	kq5QH                     = 1152
	kq6D, kq6Sc, kq6QL, kq6QH = 0, 32, 160, 1184
	kq2D, kq2Min, kq2Sc, kq2Q = 0, 32, 64, 192
	kq3D, kq3Sc, kq3Q, kq3H   = 0, 32, 160, 672
)

// HasGemmLayout reports whether t has a packed GEMM layout.
func (t KQuant) HasGemmLayout() bool { return t >= 0 && t < NumKQuant && kgemmBlockBytes[t] != 0 }

// GemmGroupBytes is the size of one packed group of GemmRows rows of cols
// values (cols a multiple of QK).
func (t KQuant) GemmGroupBytes(cols int) int { return cols / QK * kgemmBlockBytes[t] }

// GemmPackedBytes is the size of a packed matrix of rows rows (the last
// group padded with zero rows).
func (t KQuant) GemmPackedBytes(rows, cols int) int {
	return (rows + GemmRows - 1) / GemmRows * t.GemmGroupBytes(cols)
}

// PackK packs rows × cols weights of type t (rows of whole GGUF blocks,
// consecutive in w) into dst (t.GemmPackedBytes(rows, cols)).
func PackK(t KQuant, dst, w []byte, rows, cols int) error {
	if !t.HasGemmLayout() {
		return fmt.Errorf("simd: packing K-quant type %d: no GEMM layout", int(t))
	}
	if cols%QK != 0 || rows < 0 || len(w) < rows*cols/QK*t.BlockBytes() || len(dst) < t.GemmPackedBytes(rows, cols) {
		return fmt.Errorf("simd: packing %d×%d %v weights: sizes do not match", rows, cols, t)
	}
	nb := cols / QK
	rb, gb := nb*t.BlockBytes(), t.GemmGroupBytes(cols)
	groups := (rows + GemmRows - 1) / GemmRows
	workers := min(runtime.GOMAXPROCS(0), max(1, groups/64))
	var wg sync.WaitGroup
	for k := range workers {
		wg.Go(func() {
			for g := k * groups / workers; g < (k+1)*groups/workers; g++ {
				grp := dst[g*gb : (g+1)*gb]
				clear(grp)
				for l := range GemmRows {
					r := g*GemmRows + l
					if r >= rows {
						break // zero rows: scales 0
					}
					for b := range nb {
						packKBlock(t, grp[b*kgemmBlockBytes[t]:], l, w[r*rb+b*t.BlockBytes():])
					}
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// packKBlock puts block src (GGUF layout) into lane l of the packed block
// dst.
func packKBlock(t KQuant, dst []byte, l int, src []byte) {
	// chunks copies n dwords of src into lane l of n consecutive chunks.
	chunks := func(off int, s []byte, n int) {
		for v := range n {
			copy(dst[off+32*v+4*l:off+32*v+4*l+4], s[4*v:4*v+4])
		}
	}
	switch t {
	case Q4K, Q5K:
		copy(dst[kq4D+2*l:kq4D+2*l+2], src[0:2])
		copy(dst[kq4Min+2*l:kq4Min+2*l+2], src[2:4])
		sc, m := scaleMinK((*[12]byte)(src[4:]))
		for s := range 8 {
			dst[kq4SM+8*s+l] = byte(sc[s]&15 | m[s]&15<<4)
		}
		for s := range 4 {
			dst[kq4SM+64+8*s+l] = byte(sc[s]>>4 | sc[s+4]>>4<<2 | m[s]>>4<<4 | m[s+4]>>4<<6)
		}
		if t == Q4K {
			chunks(kq4Q, src[16:144], 32)
			return
		}
		chunks(kq5QH, src[16:48], 8)
		chunks(kq4Q, src[48:176], 32)
	case Q2K:
		putF32(dst[kq2D+4*l:], f16Scale(src[80:]))
		putF32(dst[kq2Min+4*l:], f16Scale(src[82:]))
		for s := range 16 {
			dst[kq2Sc+16*(s/2)+2*l+s%2] = src[s]
		}
		chunks(kq2Q, src[16:80], 16)
	case Q3K:
		putF32(dst[kq3D+4*l:], f16Scale(src[108:]))
		sc := src[96:108]
		for s := range 16 {
			lo := sc[s%8] >> (4 * (s / 8)) & 0xf
			hi := sc[8+s%4] >> (2 * (s / 4)) & 3
			dst[kq3Sc+16*(s/2)+2*l+s%2] = byte(int8(lo|hi<<4) - 32)
		}
		chunks(kq3Q, src[32:96], 16)
		chunks(kq3H, src[0:32], 8)
	case Q6K:
		putF32(dst[kq6D+4*l:], f16Scale(src[208:]))
		for s := range 16 {
			dst[kq6Sc+16*(s/2)+2*l+s%2] = src[192+s]
		}
		chunks(kq6QL, src[0:128], 32)
		chunks(kq6QH, src[128:192], 16)
	}
}

// kq4ScaleMin is lane l's scale and min of sub-block s of a packed Q4_K
// or Q5_K block. The 128 six-bit values v (v[8s+l] the scales, v[64+8s+l]
// the mins) are kept as 64 bytes of low nibbles (byte j: v[j] low, v[64+j]
// high) and 32 of high bit pairs (byte i: bits 2k, 2k+1 the top bits of
// v[i+32k]), so that a kernel unpacks all of them with a few byte masks
// and shifts of four 32-byte vectors, v[32k..32k+31] each.
func kq4ScaleMin(blk []byte, s, l int) (sc, m int32) {
	j := 8*s + l
	lo, hi := blk[kq4SM+j], blk[kq4SM+64+j%32]
	sc = int32(lo&15 | hi>>(2*(j/32))&3<<4)
	m = int32(lo>>4 | hi>>(2*(2+j/32))&3<<4)
	return sc, m
}

// kgemmValue is lane l's value e (unsigned) of packed block blk.
func kgemmValue(t KQuant, blk []byte, l, e int) int32 {
	switch t {
	case Q4K, Q5K:
		g, hi, c := e/64, e%64/32, e%32
		q := blk[kq4Q+32*(8*g+c/4)+4*l+c%4]
		v := int32(q & 15)
		if hi == 1 {
			v = int32(q >> 4)
		}
		if t == Q5K {
			v |= int32(blk[kq5QH+32*(c/4)+4*l+c%4]>>(2*g+hi)&1) << 4
		}
		return v
	case Q2K, Q3K:
		h, j, c := e/128, e%128/32, e%32
		off := kq2Q
		if t == Q3K {
			off = kq3Q
		}
		v := int32(blk[off+32*(8*h+c/4)+4*l+c%4] >> (2 * j) & 3)
		if t == Q3K {
			v |= int32(blk[kq3H+32*(c/4)+4*l+c%4]>>(4*h+j)&1) << 2
		}
		return v
	}
	h, q, c := e/128, e%128/32, e%32
	b := blk[kq6QL+32*(16*h+8*(q%2)+c/4)+4*l+c%4]
	v := int32(b & 15)
	if q >= 2 {
		v = int32(b >> 4)
	}
	return v | int32(blk[kq6QH+32*(8*h+c/4)+4*l+c%4]>>(2*q)&3)<<4
}

// GemmK sets out[t*ostride+l] = DotK(t, row l of the packed group w, token
// t's activations) for tokens t < ntok (1..4) and the GemmRows rows l of
// the group (nb = len(w)/packed block blocks): token t's QuantizeQ8K
// output at x[t*xstride:], xd[t*xstride/QK:] and xs[t*xstride/QKSum:]
// (xstride a multiple of QK).
func (k *Impl) GemmK(t KQuant, w []byte, x []int8, xd []float32, xs []int16, xstride, ntok int, out []float32, ostride int) {
	if !t.HasGemmLayout() {
		panic("simd: GemmK: no layout for " + t.String())
	}
	nb := len(w) / kgemmBlockBytes[t]
	if ntok < 1 || ntok > 4 || xstride%QK != 0 || nb*QK > xstride && ntok > 1 {
		panic("simd: GemmK: bad token count or stride")
	}
	last := (ntok-1)*xstride + nb*QK
	_ = out[(ntok-1)*ostride+GemmRows-1]
	if nb == 0 {
		for i := range ntok {
			clear(out[i*ostride : i*ostride+GemmRows])
		}
		return
	}
	_, _, _ = x[last-1], xd[last/QK-1], xs[last/QKSum-1]
	if g := k.gemmK[t]; g != nil {
		g(w, x, xd, xs, nb, xstride, ntok, out, ostride)
		return
	}
	gemmKGo(t, w, x, xd, xs, nb, xstride, ntok, out, ostride)
}

// HasGemmK reports whether the fastest implementation has an assembly
// GEMM for t.
func HasGemmK(t KQuant) bool { return t.HasGemmLayout() && best.gemmK[t] != nil }

// GemmK runs the fastest implementation's K-quant GEMM.
func GemmK(t KQuant, w []byte, x []int8, xd []float32, xs []int16, xstride, ntok int, out []float32, ostride int) {
	best.GemmK(t, w, x, xd, xs, xstride, ntok, out, ostride)
}

type gemmKFunc func(w []byte, x []int8, xd []float32, xs []int16, nb, xstride, ntok int, out []float32, ostride int)

// gemmKGo is the reference K-quant GEMM, read straight from the packed
// layout.
func gemmKGo(t KQuant, w []byte, x []int8, xd []float32, xs []int16, nb, xstride, ntok int, out []float32, ostride int) {
	bb := kgemmBlockBytes[t]
	for tok := range ntok {
		xt, dt, st := x[tok*xstride:], xd[tok*xstride/QK:], xs[tok*xstride/QKSum:]
		var acc [GemmRows]float32
		for b := range nb {
			blk := w[b*bb : (b+1)*bb]
			xb, sb := xt[b*QK:(b+1)*QK], st[b*QK/QKSum:(b+1)*QK/QKSum]
			for l := range GemmRows {
				var sumi, summ int32
				var d, dmin float32
				switch t {
				case Q2K:
					for s := range 16 {
						var p int32
						for i := 16 * s; i < 16*s+16; i++ {
							p += kgemmValue(t, blk, l, i) * int32(xb[i])
						}
						sm := blk[kq2Sc+16*(s/2)+2*l+s%2]
						sumi += int32(sm&15) * p
						summ += int32(sm>>4) * int32(sb[s])
					}
					d = getF32(blk[kq2D+4*l:]) * dt[b]
					dmin = getF32(blk[kq2Min+4*l:]) * dt[b]
				case Q3K:
					for s := range 16 {
						var p int32
						for i := 16 * s; i < 16*s+16; i++ {
							p += kgemmValue(t, blk, l, i) * int32(xb[i])
						}
						sumi += int32(int8(blk[kq3Sc+16*(s/2)+2*l+s%2])) * (p - 4*int32(sb[s]))
					}
					d = getF32(blk[kq3D+4*l:]) * dt[b]
				case Q6K:
					for s := range 16 {
						var p int32
						for i := 16 * s; i < 16*s+16; i++ {
							p += kgemmValue(t, blk, l, i) * int32(xb[i])
						}
						sumi += int32(int8(blk[kq6Sc+16*(s/2)+2*l+s%2])) * (p - 32*int32(sb[s]))
					}
					d = getF32(blk[kq6D+4*l:]) * dt[b]
				default:
					for s := range 8 {
						var p int32
						for i := 32 * s; i < 32*s+32; i++ {
							p += kgemmValue(t, blk, l, i) * int32(xb[i])
						}
						sc, m := kq4ScaleMin(blk, s, l)
						sumi += sc * p
						summ += m * (int32(sb[2*s]) + int32(sb[2*s+1]))
					}
					d = f16Scale(blk[kq4D+2*l:]) * dt[b]
					dmin = f16Scale(blk[kq4Min+2*l:]) * dt[b]
				}
				acc[l] = blockSum(acc[l], d, dmin, sumi, summ)
			}
		}
		copy(out[tok*ostride:], acc[:])
	}
}
