package tensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Block layouts of the block types, as llama.cpp's GGUF files store them
// (all multi-byte fields little-endian, f16 fields IEEE binary16):
//
//	Q4_1 (32 elements, 20 bytes): d f16, m f16, qs[16]. Element j < 16 is the
//	     low nibble of qs[j], element j+16 its high nibble; value d*q + m.
//	Q5_0 (32, 22): d f16, qh u32, qs[16]. The nibbles as in Q4_1 gain a fifth
//	     bit: bit j of qh for element j; value d*(q - 16).
//	Q5_1 (32, 24): d f16, m f16, qh u32, qs[16]; value d*q + m.
//	Q4K  (256, 144): d f16, dmin f16, scales[12], qs[128]. Eight sub-blocks
//	     of 32 with a 6-bit scale sc and min m each (packed as sixScaleMin
//	     reads them); 64-element group g uses qs[32g:32g+32], its first 32
//	     elements the low nibbles (sub-block 2g), the next 32 the high
//	     nibbles (sub-block 2g+1); value (d*sc)*q - dmin*m.
//	Q5K  (256, 176): d, dmin, scales[12], qh[32], qs[128]: Q4K plus a fifth
//	     bit, bit 2g of qh[l] for element l of sub-block 2g and bit 2g+1 for
//	     sub-block 2g+1.
//	Q6K  (256, 210): ql[128], qh[64], scales[16] int8, d f16. Two halves of
//	     128; in half h, element l (< 32) of each quarter k (0..3) takes its
//	     low four bits from ql[64h + l + 32*(k&1)] (low nibble for k < 2, high
//	     for k >= 2) and two high bits from qh[32h + l] bits 2k..2k+1; value
//	     (d*scales[8h + 2k + l/16]) * (q - 32).
//	Q2K  (256, 84): scales[16], qs[64], d f16, dmin f16. Sixteen sub-blocks of
//	     16, sub-block s with scale scales[s]&15 and min scales[s]>>4. In
//	     half h (128 elements), element l (< 16) of sub-block 8h + 2j + u
//	     (j = 0..3, u = 0..1) is bits 2j..2j+1 of qs[32h + 16u + l]; value
//	     (d*sc)*q - dmin*m.
//	Q3K  (256, 110): hmask[32], qs[64], scales[12], d f16. Sub-blocks as in
//	     Q2K, with two low bits in qs and a high bit in bit 4h + j of
//	     hmask[16u + l] (set: +0, clear: -4); 6-bit scales, sub-block s
//	     taking its low four bits from the nibble s/8 of byte s%8 and its
//	     top two bits from bits 2(s/4)..2(s/4)+1 of byte 8 + s%4; value
//	     (d*(sc-32))*(q - 4 if the high bit is clear).
//	Q8_0 (32, 34): d f16, qs[32] int8; value d*q.
//	MXFP4 (32, 17): e u8 (E8M0), qs[16]; element j < 16 is the low nibble of
//	     qs[j], element j+16 its high nibble, each a code of the E2M1 table
//	     (held doubled, as the integers of mxfp4Values); value
//	     mxfp4Values[q]*h with h = 2^(e-128), the half of e's scale
//	     (ggml_e8m0_to_fp32_half: subnormal for e < 2).
//
// The arithmetic (products in this order, rounded to float32 after each
// operation) reproduces llama.cpp's own dequantization to F32 exactly.

type geometry struct{ len, bytes int }

var blockGeometry = map[DType]geometry{
	Q4_1:  {32, 20},
	Q5_0:  {32, 22},
	Q5_1:  {32, 24},
	Q4K:   {256, 144},
	Q5K:   {256, 176},
	Q6K:   {256, 210},
	Q2K:   {256, 84},
	Q3K:   {256, 110},
	Q8_0:  {32, 34},
	MXFP4: {32, 17},
}

// DecodeBlocks dequantizes whole blocks of type dt from src into dst:
// len(dst) must be a multiple of dt's block length and src exactly the
// bytes of those blocks.
func DecodeBlocks(dt DType, src []byte, dst []float32) error {
	g, ok := blockGeometry[dt]
	if !ok {
		return fmt.Errorf("%w: %s is not a block type", ErrDType, dt)
	}
	if len(dst)%g.len != 0 || len(src) != len(dst)/g.len*g.bytes {
		return fmt.Errorf("%w: %d %s bytes for %d values", ErrShape, len(src), dt, len(dst))
	}
	decode := blockDecoders[dt]
	for len(dst) > 0 {
		decode(src[:g.bytes], dst[:g.len])
		src, dst = src[g.bytes:], dst[g.len:]
	}
	return nil
}

var blockDecoders = map[DType]func([]byte, []float32){
	Q4_1:  decodeQ4_1,
	Q5_0:  decodeQ5_0,
	Q5_1:  decodeQ5_1,
	Q4K:   decodeQ4K,
	Q5K:   decodeQ5K,
	Q6K:   decodeQ6K,
	Q2K:   decodeQ2K,
	Q3K:   decodeQ3K,
	Q8_0:  decodeQ8_0,
	MXFP4: decodeMXFP4,
}

// mxfp4Values are the E2M1 (FP4) values, doubled so that they are
// integers: code q is sign bit 3, exponent bits 1..2, mantissa bit 0.
var mxfp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// MXFP4Values returns the doubled E2M1 values of the 16 MXFP4 codes: an
// MXFP4 weight is MXFP4Values()[q]*MXFP4Half(e).
func MXFP4Values() [16]int8 { return mxfp4Values }

// MXFP4Half is half the scale of the E8M0 exponent byte e, 2^(e-128), as
// llama.cpp's ggml_e8m0_to_fp32_half computes it: the float32 with
// exponent field e-1 for e >= 2, and the subnormals 2^-128 and 2^-127 for
// e = 0 and 1. (e = 255 gives 2^127, not a NaN.)
func MXFP4Half(e byte) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func decodeMXFP4(b []byte, y []float32) {
	d := MXFP4Half(b[0])
	y = y[:32]
	for j, c := range (*[16]byte)(b[1:]) {
		y[j] = float32(mxfp4Values[c&0xf]) * d
		y[j+16] = float32(mxfp4Values[c>>4]) * d
	}
}

func decodeQ8_0(b []byte, y []float32) {
	d := f16At(b)
	for j, c := range (*[32]byte)(b[2:]) {
		y[j] = float32(int8(c)) * d
	}
}

func f16At(b []byte) float32 { return F16Float(binary.LittleEndian.Uint16(b)) }

func decodeQ4_1(b []byte, y []float32) {
	d, m := f16At(b), f16At(b[2:])
	qs := (*[16]byte)(b[4:])
	y = y[:32]
	for j, c := range qs {
		y[j] = float32(float32(c&0xf)*d) + m
		y[j+16] = float32(float32(c>>4)*d) + m
	}
}

func decodeQ5_0(b []byte, y []float32) {
	d := f16At(b)
	qh := binary.LittleEndian.Uint32(b[2:])
	qs := (*[16]byte)(b[6:])
	y = y[:32]
	for j, c := range qs {
		lo := int32(c&0xf) | int32(qh>>j&1)<<4
		hi := int32(c>>4) | int32(qh>>(j+16)&1)<<4
		y[j] = float32(lo-16) * d
		y[j+16] = float32(hi-16) * d
	}
}

func decodeQ5_1(b []byte, y []float32) {
	d, m := f16At(b), f16At(b[2:])
	qh := binary.LittleEndian.Uint32(b[4:])
	qs := (*[16]byte)(b[8:])
	y = y[:32]
	for j, c := range qs {
		lo := uint32(c&0xf) | (qh>>j&1)<<4
		hi := uint32(c>>4) | (qh>>(j+16)&1)<<4
		y[j] = float32(float32(lo)*d) + m
		y[j+16] = float32(float32(hi)*d) + m
	}
}

// sixScaleMin unpacks the 6-bit scale and min of sub-block j (0..7) from the
// 12 scale bytes of a Q4K or Q5K block: sub-blocks 0..3 keep theirs in the
// low six bits of bytes j (scale) and j+4 (min); sub-blocks 4..7 in the
// nibbles of byte j+4 (scale low, min high) with their top two bits in the
// top bits of bytes j-4 (scale) and j (min).
func sixScaleMin(s *[12]byte, j int) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xf | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

func decodeQ4K(b []byte, y []float32) {
	d, dmin := f16At(b), f16At(b[2:])
	sc := (*[12]byte)(b[4:])
	qs := (*[128]byte)(b[16:])
	y = y[:256]
	for g := range 4 {
		s1, m1 := sixScaleMin(sc, 2*g)
		s2, m2 := sixScaleMin(sc, 2*g+1)
		d1, o1 := d*float32(s1), dmin*float32(m1)
		d2, o2 := d*float32(s2), dmin*float32(m2)
		q := (*[32]byte)(qs[32*g:])
		out := (*[64]float32)(y[64*g:])
		for l, c := range q {
			out[l] = float32(d1*float32(c&0xf)) - o1
			out[l+32] = float32(d2*float32(c>>4)) - o2
		}
	}
}

func decodeQ5K(b []byte, y []float32) {
	d, dmin := f16At(b), f16At(b[2:])
	sc := (*[12]byte)(b[4:])
	qh := (*[32]byte)(b[16:])
	qs := (*[128]byte)(b[48:])
	y = y[:256]
	for g := range 4 {
		s1, m1 := sixScaleMin(sc, 2*g)
		s2, m2 := sixScaleMin(sc, 2*g+1)
		d1, o1 := d*float32(s1), dmin*float32(m1)
		d2, o2 := d*float32(s2), dmin*float32(m2)
		q := (*[32]byte)(qs[32*g:])
		out := (*[64]float32)(y[64*g:])
		for l, c := range q {
			h := qh[l] >> (2 * g)
			out[l] = float32(d1*float32(c&0xf|(h&1)<<4)) - o1
			out[l+32] = float32(d2*float32(c>>4|(h>>1&1)<<4)) - o2
		}
	}
}

func decodeQ6K(b []byte, y []float32) {
	ql := (*[128]byte)(b)
	qh := (*[64]byte)(b[128:])
	sc := (*[16]byte)(b[192:])
	d := f16At(b[208:])
	y = y[:256]
	for h := range 2 {
		out := (*[128]float32)(y[128*h:])
		for l := range 32 {
			lo, hi, bits := ql[64*h+l], ql[64*h+l+32], qh[32*h+l]
			is := 8*h + l/16
			out[l] = d * float32(int8(sc[is])) * float32(int32(lo&0xf|(bits&3)<<4)-32)
			out[l+32] = d * float32(int8(sc[is+2])) * float32(int32(hi&0xf|(bits>>2&3)<<4)-32)
			out[l+64] = d * float32(int8(sc[is+4])) * float32(int32(lo>>4|(bits>>4&3)<<4)-32)
			out[l+96] = d * float32(int8(sc[is+6])) * float32(int32(hi>>4|(bits>>6&3)<<4)-32)
		}
	}
}

func decodeQ2K(b []byte, y []float32) {
	sc := (*[16]byte)(b)
	qs := (*[64]byte)(b[16:])
	d, dmin := f16At(b[80:]), f16At(b[82:])
	y = y[:256]
	for h := range 2 {
		for j := range 4 {
			for u := range 2 {
				s := sc[8*h+2*j+u]
				dl, ml := d*float32(s&0xf), dmin*float32(s>>4)
				q := (*[16]byte)(qs[32*h+16*u:])
				out := (*[16]float32)(y[128*h+32*j+16*u:])
				for l, c := range q {
					out[l] = float32(dl*float32(c>>(2*j)&3)) - ml
				}
			}
		}
	}
}

// q3Scales unpacks the sixteen 6-bit scales of a Q3K block.
func q3Scales(s *[12]byte) (out [16]int32) {
	for k := range 16 {
		lo := s[k%8] >> (4 * (k / 8)) & 0xf
		hi := s[8+k%4] >> (2 * (k / 4)) & 3
		out[k] = int32(lo|hi<<4) - 32
	}
	return out
}

func decodeQ3K(b []byte, y []float32) {
	hm := (*[32]byte)(b)
	qs := (*[64]byte)(b[32:])
	scales := q3Scales((*[12]byte)(b[96:]))
	d := f16At(b[108:])
	y = y[:256]
	for h := range 2 {
		for j := range 4 {
			bit := byte(1) << (4*h + j)
			for u := range 2 {
				dl := d * float32(scales[8*h+2*j+u])
				q := (*[16]byte)(qs[32*h+16*u:])
				m := (*[16]byte)(hm[16*u:])
				out := (*[16]float32)(y[128*h+32*j+16*u:])
				for l, c := range q {
					v := int32(c >> (2 * j) & 3)
					if m[l]&bit == 0 {
						v -= 4
					}
					out[l] = dl * float32(v)
				}
			}
		}
	}
}
