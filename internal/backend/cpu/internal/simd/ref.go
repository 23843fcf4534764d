package simd

import "math"

// The pure-Go kernels: the reference every assembly form is tested
// against, and the fallback. The float ones keep several accumulators so
// the additions overlap; integers become floats by table lookup.

func dotF32Go(a, x []float32) float32 {
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

func dotF32x4Go(a, x []float32, stride int, out *[4]float32) {
	n := len(a)
	x0, x1, x2, x3 := x[:n], x[stride:stride+n], x[2*stride:2*stride+n], x[3*stride:3*stride+n]
	var s0, s1, s2, s3 float32
	for i, w := range a {
		s0 += w * x0[i]
		s1 += w * x1[i]
		s2 += w * x2[i]
		s3 += w * x3[i]
	}
	*out = [4]float32{s0, s1, s2, s3}
}

func dotF16Go(a []uint16, x []float32) float32 {
	x = x[:len(a)]
	tab := F16ToF32
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

func dotBF16Go(a []uint16, x []float32) float32 {
	x = x[:len(a)]
	var s0, s1 float32
	i := 0
	for ; i+2 <= len(a); i += 2 {
		s0 += math.Float32frombits(uint32(a[i])<<16) * x[i]
		s1 += math.Float32frombits(uint32(a[i+1])<<16) * x[i+1]
	}
	for ; i < len(a); i++ {
		s0 += math.Float32frombits(uint32(a[i])<<16) * x[i]
	}
	return s0 + s1
}

// dotI8Go sums each block through fixed-size views of 32 elements into
// eight accumulators and applies the block's scale once.
func dotI8Go(q []int8, scales []float32, block int, x []float32) float32 {
	x = x[:len(q)]
	tab := i8ToF32
	var s float32
	for _, sc := range scales {
		qb, xb := q[:block], x[:block]
		q, x = q[block:], x[block:]
		var a [8]float32
		for len(qb) >= 32 {
			c, y := (*[32]int8)(qb), (*[32]float32)(xb)
			for j := 0; j < 32; j += 8 {
				a[0] += tab[uint8(c[j])] * y[j]
				a[1] += tab[uint8(c[j+1])] * y[j+1]
				a[2] += tab[uint8(c[j+2])] * y[j+2]
				a[3] += tab[uint8(c[j+3])] * y[j+3]
				a[4] += tab[uint8(c[j+4])] * y[j+4]
				a[5] += tab[uint8(c[j+5])] * y[j+5]
				a[6] += tab[uint8(c[j+6])] * y[j+6]
				a[7] += tab[uint8(c[j+7])] * y[j+7]
			}
			qb, xb = qb[32:], xb[32:]
		}
		xb = xb[:len(qb)]
		for i, v := range qb {
			a[0] += tab[uint8(v)] * xb[i]
		}
		s += (((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))) * sc
	}
	return s
}

// dotI4Go is dotI8Go for nibble pairs: each byte is one lookup in i4Pairs.
func dotI4Go(q []byte, scales []float32, block int, x []float32) float32 {
	x = x[:2*len(q)]
	tab := I4Pairs
	half := block / 2
	var s float32
	for _, sc := range scales {
		qb, xb := q[:half], x[:block]
		q, x = q[half:], x[block:]
		var a [8]float32
		for len(qb) >= 16 {
			c, y := (*[16]byte)(qb), (*[32]float32)(xb)
			for j := 0; j < 16; j += 4 {
				p0, p1, p2, p3 := &tab[c[j]], &tab[c[j+1]], &tab[c[j+2]], &tab[c[j+3]]
				a[0] += p0[0] * y[2*j]
				a[1] += p0[1] * y[2*j+1]
				a[2] += p1[0] * y[2*j+2]
				a[3] += p1[1] * y[2*j+3]
				a[4] += p2[0] * y[2*j+4]
				a[5] += p2[1] * y[2*j+5]
				a[6] += p3[0] * y[2*j+6]
				a[7] += p3[1] * y[2*j+7]
			}
			qb, xb = qb[16:], xb[32:]
		}
		xb = xb[:2*len(qb)]
		for i, v := range qb {
			p := &tab[v]
			a[0] += p[0] * xb[2*i]
			a[1] += p[1] * xb[2*i+1]
		}
		s += (((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))) * sc
	}
	return s
}

// dotQ8Go: exact integer sums per block, then scaled.
func dotQ8Go(w []int8, ws []uint16, per int, x []int8, xd []float32) float32 {
	var s float32
	for g, h := range ws {
		dw := F16ToF32[h]
		for j := range per {
			b := g*per + j
			wb, xb := (*[QBlock]int8)(w[b*QBlock:]), (*[QBlock]int8)(x[b*QBlock:])
			var sum int32
			for i := range wb {
				sum += int32(wb[i]) * int32(xb[i])
			}
			s += dw * xd[b] * float32(sum)
		}
	}
	return s
}

// nib sign-extends the low nibble of c.
func nib(c byte) int32 { return int32(int8(c<<4) >> 4) }

func dotQ4Go(w []byte, ws []uint16, per int, x []int8, xd []float32) float32 {
	var s float32
	for g, h := range ws {
		dw := F16ToF32[h]
		for j := range per {
			b := g*per + j
			s += dw * xd[b] * float32(q4Block(w[b*QBlock/2:], x[b*QBlock:]))
		}
	}
	return s
}

// q4Block is the integer dot product of one block of nibble pairs with one
// evens-first block of activations.
func q4Block(w []byte, x []int8) int32 {
	wb, xb := (*[QBlock / 2]byte)(w), (*[QBlock]int8)(x)
	var sum int32
	for i, c := range wb {
		sum += nib(c)*int32(xb[i]) + nib(c>>4)*int32(xb[QBlock/2+i])
	}
	return sum
}

func dotQ4x4Go(w []byte, ws []uint16, per int, x []int8, xd []float32, xstride int, out *[4]float32) {
	ds := xstride / QBlock
	for j := range out {
		out[j] = dotQ4Go(w, ws, per, x[j*xstride:], xd[j*ds:])
	}
}

// I4Pairs holds the two sign-extended nibbles of every byte as floats, low
// nibble (the even element) first.
var I4Pairs = func() *[256][2]float32 {
	var t [256][2]float32
	for i := range t {
		b := uint8(i)
		t[i] = [2]float32{float32(int8(b<<4) >> 4), float32(int8(b) >> 4)}
	}
	return &t
}()

// i8ToF32 converts an int8 (indexed by its bit pattern) to float.
var i8ToF32 = func() *[256]float32 {
	var t [256]float32
	for i := range t {
		t[i] = float32(int8(uint8(i)))
	}
	return &t
}()

func dotQ8x4Go(w []int8, ws []uint16, per int, x []int8, xd []float32, xstride int, out *[4]float32) {
	ds := xstride / QBlock
	for j := range out {
		out[j] = dotQ8Go(w, ws, per, x[j*xstride:], xd[j*ds:])
	}
}

// wsumF32Go adds the rows in order, each column on its own.
func wsumF32Go(out, v []float32, stride int, w []float32) {
	clear(out)
	for i, wi := range w {
		row := v[i*stride : i*stride+len(out)]
		for j, x := range row {
			out[j] += wi * x
		}
	}
}

func wsumF16Go(out []float32, v []uint16, stride int, w []float32) {
	clear(out)
	tab := F16ToF32
	for i, wi := range w {
		row := v[i*stride : i*stride+len(out)]
		for j, h := range row {
			out[j] += wi * tab[h]
		}
	}
}
