package simd

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// The prefill GEMM: int8 or int4 weights with one binary16 scale per
// 32-value block (GGUF Q8_0 and Q4_0) repacked once, at load, into groups
// of GemmRows rows whose blocks lie side by side, times activations
// quantized by QuantizeQ8 (natural order) with their block sums
// (BlockSums). A group's block b holds its GemmRows scales as binary16 (as
// in the GGUF block, so a packed block is GemmRows GGUF blocks' bytes:
// decode streams no more than the file holds), then the weights as unsigned bytes (int8 + 128, or int4 + 8 in nibbles),
// interleaved so that one 32-byte load gives every row of the group four
// consecutive weights of the block: lane r of chunk j holds row r's
// weights 4j..4j+3 (Q8), or row r's weights 4j..4j+3 in the low nibbles
// and 16+4j..16+4j+3 in the high ones (Q4). A kernel multiplies a chunk by
// four activations broadcast to every lane, so each lane accumulates one
// row's dot product and no horizontal sum is needed; the weights' offset
// is taken out by starting each block's integer sum at -offset·Σx.

// GemmRows is the number of weight rows a packed group interleaves.
const GemmRows = 8

// gemmScaleBytes is the size of a packed block's scales (binary16, one per
// row), before its weights.
const gemmScaleBytes = 2 * GemmRows

// GemmKind is a packed weight format.
type GemmKind int

const (
	GemmQ8 GemmKind = iota // int8 weights, binary16 scale per 32
	GemmQ4                 // int4 weights (DotI4 packing), binary16 scale per 32
	NumGemmKinds
)

// blockBytes is the size of one packed block of a group (scales and
// weights).
func (k GemmKind) blockBytes() int {
	if k == GemmQ4 {
		return gemmScaleBytes + 16*GemmRows
	}
	return gemmScaleBytes + 32*GemmRows
}

// offset is what packing adds to each weight to make it unsigned.
func (k GemmKind) offset() int32 {
	if k == GemmQ4 {
		return 8
	}
	return 128
}

// GroupBytes is the size of one packed group of GemmRows rows of cols
// values (cols a multiple of QBlock).
func (k GemmKind) GroupBytes(cols int) int { return cols / QBlock * k.blockBytes() }

// PackedBytes is the size of a packed matrix of rows rows (the last group
// padded with zero rows).
func (k GemmKind) PackedBytes(rows, cols int) int {
	return (rows + GemmRows - 1) / GemmRows * k.GroupBytes(cols)
}

// PackQ8 packs rows × cols int8 weights (row-major) with one binary16
// scale per QBlock values (ws, row-major) into dst (GemmQ8.PackedBytes).
func PackQ8(dst []byte, w []int8, ws []uint16, rows, cols int) error {
	if err := checkPack(GemmQ8, dst, rows, cols, len(w) >= rows*cols, ws); err != nil {
		return err
	}
	packRows(GemmQ8, dst, rows, cols, ws, func(blk []byte, r, b int) {
		src := w[r*cols+b*QBlock : r*cols+(b+1)*QBlock]
		for j := range QBlock / 4 {
			c := blk[4*GemmRows*j:]
			for i := range 4 {
				c[i] = byte(src[4*j+i]) ^ 0x80 // + 128
			}
		}
	})
	return nil
}

// PackQ4 packs rows × cols int4 weights (two per byte, element 2i in the
// low nibble, two's complement) with one binary16 scale per QBlock values
// into dst (GemmQ4.PackedBytes).
func PackQ4(dst []byte, w []byte, ws []uint16, rows, cols int) error {
	if err := checkPack(GemmQ4, dst, rows, cols, len(w)*2 >= rows*cols, ws); err != nil {
		return err
	}
	packRows(GemmQ4, dst, rows, cols, ws, func(blk []byte, r, b int) {
		src := w[(r*cols+b*QBlock)/2 : (r*cols+(b+1)*QBlock)/2]
		// Element e is nibble e&1 of src[e/2]; + 8 flips a nibble's sign bit.
		nib := func(e int) byte { return (src[e/2] >> (4 * (e & 1)) & 15) ^ 8 }
		for j := range 4 {
			c := blk[4*GemmRows*j:]
			for i := range 4 {
				c[i] = nib(4*j+i) | nib(16+4*j+i)<<4
			}
		}
	})
	return nil
}

func checkPack(k GemmKind, dst []byte, rows, cols int, okW bool, ws []uint16) error {
	if cols%QBlock != 0 || rows < 0 || !okW || len(ws) < rows*(cols/QBlock) || len(dst) < k.PackedBytes(rows, cols) {
		return fmt.Errorf("simd: packing %d×%d weights: sizes do not match", rows, cols)
	}
	return nil
}

// packRows fills every packed block: the lanes' scales, then put for each
// row (blk at the row's lane of the block's first chunk); padding lanes get
// scale 0 and weights at the offset (zero).
func packRows(k GemmKind, dst []byte, rows, cols int, ws []uint16, put func(blk []byte, r, b int)) {
	nb := cols / QBlock
	gb, bb := k.GroupBytes(cols), k.blockBytes()
	zero := byte(k.offset())
	if k == GemmQ4 {
		zero = 0x88
	}
	groups := (rows + GemmRows - 1) / GemmRows
	// Large matrices pack on every CPU (at load, once).
	workers := min(runtime.GOMAXPROCS(0), max(1, groups/64))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for g := w * groups / workers; g < (w+1)*groups/workers; g++ {
				packGroup(dst[g*gb:(g+1)*gb], g, rows, nb, bb, zero, ws, put)
			}
		})
	}
	wg.Wait()
}

// packGroup packs group g into dst.
func packGroup(dst []byte, g, rows, nb, bb int, zero byte, ws []uint16, put func(blk []byte, r, b int)) {
	for b := range nb {
		blk := dst[b*bb : (b+1)*bb]
		for l := range GemmRows {
			r := g*GemmRows + l
			if r >= rows {
				blk[2*l], blk[2*l+1] = 0, 0
				for j := gemmScaleBytes; j < bb; j += 4 * GemmRows {
					c := blk[j+4*l : j+4*l+4]
					c[0], c[1], c[2], c[3] = zero, zero, zero, zero
				}
				continue
			}
			h := ws[r*nb+b]
			blk[2*l], blk[2*l+1] = byte(h), byte(h>>8)
			put(blk[gemmScaleBytes+4*l:], r, b)
		}
	}
}

// packedWeight is the unsigned weight of lane l, element i (the packing's
// inverse).
func packedWeight(k GemmKind, blk []byte, l, i int) int32 {
	if k == GemmQ8 {
		return int32(blk[(i/4)*4*GemmRows+4*l+i%4])
	}
	j := i % 16
	v := blk[(j/4)*4*GemmRows+4*l+j%4]
	if i >= 16 {
		return int32(v >> 4)
	}
	return int32(v & 15)
}

func putF32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

func getF32(b []byte) float32 {
	return math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}

// packedScale is lane l's scale of the packed block blk.
func packedScale(blk []byte, l int) float32 {
	return F16ToF32[uint16(blk[2*l])|uint16(blk[2*l+1])<<8]
}

// BlockSums sets s[b] = -Σ q[32b+i] for every block of q (the correction
// the GEMM kernels start each block's sum from).
func BlockSums(s []int32, q []int8) {
	nb := len(q) / QBlock
	s = s[:nb]
	for b := range nb {
		var v int32
		for _, x := range q[b*QBlock : (b+1)*QBlock] {
			v += int32(x)
		}
		s[b] = -v
	}
}

// Gemm sets out[t*ostride+l] = Σ_b scale(l,b)·xd[t][b]·Σ_i w(l,b,i)·x[t][32b+i]
// for tokens t < ntok (1..4) and the GemmRows rows l of the packed group w
// (kind k, nb = len(w)/blockBytes blocks): token t's quantized activations
// at x[t*xstride:], its scales and BlockSums at xd[t*xstride/QBlock:] and
// xs[t*xstride/QBlock:] (xstride a multiple of QBlock). The blocks are
// summed in order, each as one fused multiply-add.
func (k *Impl) Gemm(kind GemmKind, w []byte, x []int8, xd []float32, xs []int32, xstride, ntok int, out []float32, ostride int) {
	nb := len(w) / kind.blockBytes()
	if ntok < 1 || ntok > 4 || xstride%QBlock != 0 || nb*QBlock > xstride && ntok > 1 {
		panic("simd: Gemm: bad token count or stride")
	}
	n := nb * QBlock
	last := (ntok-1)*xstride + n
	_, _, _ = x[last-1], xd[last/QBlock-1], xs[last/QBlock-1]
	_ = out[(ntok-1)*ostride+GemmRows-1]
	if nb == 0 {
		for t := range ntok {
			clear(out[t*ostride : t*ostride+GemmRows])
		}
		return
	}
	g := k.gemm[kind]
	if g == nil {
		g = gemmGo(kind)
	}
	g(w, x, xd, xs, nb, xstride, ntok, out, ostride)
}

// HasGemm reports whether the package's fastest implementation has an
// assembly GEMM for kind (the pure-Go one being slower than the row
// kernels).
func HasGemm(kind GemmKind) bool { return best.gemm[kind] != nil }

// Gemm runs the fastest implementation's GEMM.
func Gemm(kind GemmKind, w []byte, x []int8, xd []float32, xs []int32, xstride, ntok int, out []float32, ostride int) {
	best.Gemm(kind, w, x, xd, xs, xstride, ntok, out, ostride)
}

type gemmFunc func(w []byte, x []int8, xd []float32, xs []int32, nb, xstride, ntok int, out []float32, ostride int)

// gemmGo is the reference GEMM, in the assembly's order of operations.
func gemmGo(kind GemmKind) gemmFunc {
	return func(w []byte, x []int8, xd []float32, xs []int32, nb, xstride, ntok int, out []float32, ostride int) {
		bb, off := kind.blockBytes(), kind.offset()
		for t := range ntok {
			xt, dt, st := x[t*xstride:], xd[t*xstride/QBlock:], xs[t*xstride/QBlock:]
			var acc [GemmRows]float32
			for b := range nb {
				blk := w[b*bb : (b+1)*bb]
				for l := range GemmRows {
					s := off * st[b]
					for i := range QBlock {
						s += packedWeight(kind, blk[gemmScaleBytes:], l, i) * int32(xt[b*QBlock+i])
					}
					sc := packedScale(blk, l) * dt[b]
					acc[l] = float32(math.FMA(float64(s), float64(sc), float64(acc[l])))
				}
			}
			copy(out[t*ostride:], acc[:])
		}
	}
}
