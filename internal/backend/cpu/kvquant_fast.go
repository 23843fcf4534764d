package cpu

import (
	"encoding/binary"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
)

// dequantRows writes the n rows of hd values of type t starting at block
// byte offset row0 of vq, rows apart by stride values, into y (n*hd): the
// values dequantBlock gives (the same float32 operations: d*q, d*q + m,
// d*kvalues_iq4nl[q]; for the 4- and 5-bit types each block's 16 or 32
// levels are computed once into a table, with the same products), one
// type switch per call rather than per block.
func dequantRows(t fusion.KVType, vq []byte, off, stride, n, hd int, y []float32) {
	bs := t.BlockBytes()
	nb := hd / qk
	var lut [32]float32
	for r := range n {
		row := vq[(off+r*stride)/qk*bs:]
		row = row[:nb*bs]
		yr := y[r*hd : (r+1)*hd]
		for b := range nb {
			blk := row[b*bs : (b+1)*bs]
			o := (*[qk]float32)(yr[b*qk:])
			d := getF16(blk)
			switch t {
			case fusion.KVQ8_0:
				q := (*[qk]byte)(blk[2:])
				for j := range o {
					o[j] = float32(int8(q[j])) * d
				}
			case fusion.KVQ4_0:
				for i := range 16 {
					lut[i] = float32(i-8) * d
				}
				q := (*[16]byte)(blk[2:])
				for j, v := range q {
					o[j], o[j+16] = lut[v&15], lut[v>>4]
				}
			case fusion.KVIQ4NL:
				for i := range 16 {
					lut[i] = d * float32(iq4nlValues[i])
				}
				q := (*[16]byte)(blk[2:])
				for j, v := range q {
					o[j], o[j+16] = lut[v&15], lut[v>>4]
				}
			case fusion.KVQ4_1:
				m := getF16(blk[2:])
				for i := range 16 {
					lut[i] = float32(i)*d + m
				}
				q := (*[16]byte)(blk[4:])
				for j, v := range q {
					o[j], o[j+16] = lut[v&15], lut[v>>4]
				}
			case fusion.KVQ5_0:
				for i := range 32 {
					lut[i] = float32(i-16) * d
				}
				qh := binary.LittleEndian.Uint32(blk[2:])
				q := (*[16]byte)(blk[6:])
				for j, v := range q {
					o[j] = lut[v&15|byte(qh>>j&1)<<4]
					o[j+16] = lut[v>>4|byte(qh>>(j+16)&1)<<4]
				}
			case fusion.KVQ5_1:
				m := getF16(blk[2:])
				for i := range 32 {
					lut[i] = float32(i)*d + m
				}
				qh := binary.LittleEndian.Uint32(blk[4:])
				q := (*[16]byte)(blk[8:])
				for j, v := range q {
					o[j] = lut[v&15|byte(qh>>j&1)<<4]
					o[j+16] = lut[v>>4|byte(qh>>(j+16)&1)<<4]
				}
			}
		}
	}
}

// groupedAttention turns groupRows on (tests turn it off to hold it to
// row's bits).
var groupedAttention = true

// groupTile is the number of prompt rows one grouped attention job
// (attnTask.grouped) takes.
const groupTile = 64

// groupRows is attention for prompt rows t0..t1-1 and every query head of
// KV head kh, with quantized values, causal and without a window, the
// cache not a ring: each row's and head's scores and softmax as row makes
// them, then each run of valueRun value rows dequantized once and summed
// into every row and head that attends to it (the runs and their partial
// sums are weightedValues', so the outputs are row's bits).
func (a *attnTask) groupRows(wk, t0, t1, kh int) {
	ap, c := a.ap, a.c
	cols := ap.heads * ap.headDim
	hd := ap.headDim
	g := ap.heads / ap.kvHeads
	span := a.pos + t1 // the last row's positions 0..pos+t1-1
	sc := &a.p.scratch[wk]
	nw := (t1 - t0) * g * span
	if len(sc.gw) < nw {
		sc.gw = make([]float32, max(nw, 2*len(sc.gw))) // decode grows it by one position a step
	}
	sc.growValues(hd)
	for t := t0; t < t1; t++ {
		n := a.pos + t + 1
		for j := range g {
			h := kh*g + j
			w := sc.gw[((t-t0)*g+j)*span:][:n]
			c.scores(sc, a.q[t*cols+h*hd:t*cols+(h+1)*hd], kh, 0, w)
			ap.softmax(w, h)
			clear(a.out[t*cols+h*hd : t*cols+(h+1)*hd])
		}
	}
	part := sc.vsum[:hd]
	for i := 0; i < span; i += valueRun {
		n := min(valueRun, span-i)
		rows := sc.vrows[:n*hd]
		dequantRows(c.vt, c.vq, c.at(kh, i), hd, n, hd, rows)
		for t := max(t0, i-a.pos); t < t1; t++ {
			m := min(n, a.pos+t+1-i)
			for j := range g {
				h := kh*g + j
				w := sc.gw[((t-t0)*g+j)*span+i:][:m]
				simd.WeightedSum(part, rows, hd, w)
				o := a.out[t*cols+h*hd : t*cols+(h+1)*hd]
				for x, v := range part {
					o[x] += v
				}
			}
		}
	}
	if c.vrot > 0 {
		// The values were stored rotated: the sums are too; H is its
		// own inverse.
		for t := t0; t < t1; t++ {
			for j := range g {
				h := kh*g + j
				hadamard(a.out[t*cols+h*hd:t*cols+(h+1)*hd], c.vrot)
			}
		}
	}
}

// scoreRowsQ4_0 is scoreRows for q4_0 keys through simd.DotQ4, the weight
// matvec's int4 kernel: a q4_0 block's nibbles pair element j (low) and
// j+16 (high), DotQ4's layout against a query in natural order, and
// n-8 as a signed nibble is n^8, so each run of rows is gathered into
// the query's scratch with every byte xor 0x88 and the scales beside
// them; DotQ4 then sums per block d_k*d_q*Σ(n-8)·q in dotBlocks' order.
func scoreRowsQ4_0(k []byte, hd int, qq *q8Query, out []float32) {
	const bs = 18
	nb := hd / qk
	const run = 64
	if len(qq.nib) < run*hd/2 {
		qq.nib, qq.ws = make([]byte, run*hd/2), make([]uint16, run*nb)
	}
	for r0 := 0; r0 < len(out); r0 += run {
		n := min(run, len(out)-r0)
		for r := range n {
			row := k[(r0+r)*nb*bs : (r0+r+1)*nb*bs]
			for b := range nb {
				blk := row[b*bs : (b+1)*bs]
				qq.ws[r*nb+b] = binary.LittleEndian.Uint16(blk)
				dst := qq.nib[(r*nb+b)*qk/2:]
				binary.LittleEndian.PutUint64(dst, binary.LittleEndian.Uint64(blk[2:])^0x8888888888888888)
				binary.LittleEndian.PutUint64(dst[8:], binary.LittleEndian.Uint64(blk[10:])^0x8888888888888888)
			}
		}
		for r := range n {
			out[r0+r] = simd.DotQ4(qq.nib[r*hd/2:(r+1)*hd/2], qq.ws[r*nb:(r+1)*nb], 1, qq.q[:hd], qq.d[:nb])
		}
	}
}
