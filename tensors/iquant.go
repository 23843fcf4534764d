package tensors

import (
	"encoding/binary"
	"math"
)

// Layouts of the I-quant, NVFP4 and ternary blocks as llama.cpp's GGUF
// files store them (multi-byte fields little-endian, f16 fields binary16).
// The grids and tables are llama.cpp's (iqtables_gen.go); a grid entry
// holds its 8 (or 4) values in its bytes, value j in byte j. A "sign code"
// s (7 bits) selects ksignsIQ2XS[s], whose bit j negates value j of the
// group of 8; a 32-element sub-block is four such groups.
//
//	IQ4_NL  (32, 18): d f16, qs[16]; element j < 16 is the low nibble of
//	        qs[j], element j+16 its high nibble; value d*kvaluesIQ4NL[q].
//	IQ4_XS  (256, 136): d f16, scales_h u16, scales_l[4], qs[128]. Sub-block
//	        ib (32 elements) has the 6-bit scale ls from nibble ib%2 of
//	        scales_l[ib/2] and bits 2ib..2ib+1 of scales_h; it is IQ4_NL's
//	        nibble layout over qs[16ib:16ib+16] with value
//	        (d*(ls-32))*kvaluesIQ4NL[q].
//	IQ2_XXS (256, 66): d f16, qs[32] u16. Sub-block ib reads two u32 words
//	        a, b from qs[4ib:4ib+4]: group l's grid index is byte l of a,
//	        its sign code bits 7l..7l+6 of b; scale d*(0.5+(b>>28))*0.25;
//	        value scale*iq2xxsGrid[i][j]*(±1).
//	IQ2_XS  (256, 74): d f16, qs[32] u16, scales[8]. Group l of sub-block ib
//	        is qs[4ib+l]: grid index its low 9 bits, sign code the top 7;
//	        groups 0-1 take scale nibble 0 of scales[ib], groups 2-3 nibble
//	        1, scale d*(0.5+s)*0.25.
//	IQ2_S   (256, 82): d f16, qs[64], qh[8], scales[8]. qs[0:32] hold the
//	        low 8 bits of the grid indices (four per sub-block), bits 2l..2l+1
//	        of qh[ib] their top two bits; qs[32:64] are sign bytes (bit j
//	        negates value j), one per group; scales as IQ2_XS.
//	IQ3_XXS (256, 98): d f16, qs[96]. qs[0:64] are grid indices (eight per
//	        sub-block, two 4-value grid entries per group); sub-block ib's
//	        u32 at qs[64+4ib] holds the four sign codes (7 bits each) and,
//	        in its top 4 bits s, the scale d*(0.5+s)*0.5.
//	IQ3_S   (256, 110): d f16, qs[64], qh[8], signs[32], scales[4]. Grid
//	        index k of sub-block ib is qs[8ib+k] plus bit k of qh[ib] as bit
//	        8; sign byte signs[4ib+l] negates group l's values; sub-blocks
//	        2p and 2p+1 take the low and high nibble s of scales[p]: scale
//	        d*(1+2s).
//	IQ1_S   (256, 50): d f16, qs[32], qh[8] u16. Group l of sub-block ib has
//	        grid index qs[4ib+l] | ((qh[ib]>>3l)&7)<<8 into the ternary grid
//	        (bytes 0xff, 0, 1: -1, 0, 1); scale dl = d*(2*((qh[ib]>>12)&7)+1),
//	        shift delta = ±0.125 (negative when bit 15 of qh[ib] is set);
//	        value dl*(g+delta).
//	IQ1_M   (256, 56): qs[32], qh[16], scales[8] (four u16 sc). The f16 d is
//	        the top nibbles of sc[0..3] (bits 0-3, 4-7, 8-11, 12-15); group l
//	        of sub-block ib: index qs[4ib+l] plus three bits of qh[2ib+l/2]
//	        (bits 0-2 for even l, 4-6 for odd) as bits 8-10, shift bit 3 (even
//	        l) or 7 (odd l); groups 0-1 take the 3-bit scale at bit 6*(ib%2) of
//	        sc[ib/2], groups 2-3 the one at bit 6*(ib%2)+3: dl = d*(2s+1).
//	NVFP4   (64, 36): d[4] UE4M3, qs[32]. Sub-block s (16 elements) is
//	        qs[8s:8s+8], element j < 8 the low nibble of byte j, element j+8
//	        its high nibble; value kvaluesFP4[q]*UE4M3Half(d[s]).
//	TQ1_0   (256, 54): qs[48], qh[4], d f16. Each byte holds 5 ternary
//	        digits as a fixed-point fraction: digit n of byte q is
//	        ((q*3^n mod 256)*3)>>8. Elements 0-159 are digit n of qs[m] for
//	        m < 32 (element 32n+m), 160-239 digit n of qs[32+m] (m < 16,
//	        element 160+16n+m), 240-255 digit n < 4 of qh[m] (element
//	        240+4n+m); value (digit-1)*d.
//	TQ2_0   (256, 66): qs[64], d f16. Element 128h+32l+m is bits 2l..2l+1 of
//	        qs[32h+m]; value (q-1)*d.
//
// As for the other block types, each product is rounded to float32 in
// llama.cpp's order, so decoding reproduces its dequantize_row_* exactly.

func init() {
	for dt, g := range map[DType]geometry{
		IQ4_NL: {32, 18}, IQ4_XS: {256, 136}, IQ3_S: {256, 110}, IQ3_XXS: {256, 98},
		IQ2_XXS: {256, 66}, IQ2_XS: {256, 74}, IQ2_S: {256, 82}, IQ1_S: {256, 50}, IQ1_M: {256, 56},
		NVFP4: {64, 36}, TQ1_0: {256, 54}, TQ2_0: {256, 66},
	} {
		blockGeometry[dt] = g
	}
	for dt, f := range map[DType]func([]byte, []float32){
		IQ4_NL: decodeIQ4NL, IQ4_XS: decodeIQ4XS, IQ3_S: decodeIQ3S, IQ3_XXS: decodeIQ3XXS,
		IQ2_XXS: decodeIQ2XXS, IQ2_XS: decodeIQ2XS, IQ2_S: decodeIQ2S, IQ1_S: decodeIQ1S, IQ1_M: decodeIQ1M,
		NVFP4: decodeNVFP4, TQ1_0: decodeTQ1_0, TQ2_0: decodeTQ2_0,
	} {
		blockDecoders[dt] = f
	}
}

// IQ4NLValues returns llama.cpp's 16 non-linear IQ4_NL values: an IQ4_NL
// weight is d*IQ4NLValues()[q].
func IQ4NLValues() [16]int8 { return kvaluesIQ4NL }

// UE4M3Half is half the value of the unsigned E4M3 scale byte x (4
// exponent bits with bias 7, 3 mantissa bits; the top bit ignored), as
// llama.cpp's ggml_ue4m3_to_fp32 computes it: 0 for x = 0 and x = 0x7f.
func UE4M3Half(x byte) float32 {
	if x == 0 || x == 0x7f {
		return 0
	}
	e, m := int(x>>3&0xf), float32(x&7)
	var raw float32
	if e == 0 {
		raw = m * float32(math.Ldexp(1, -9))
	} else {
		raw = (1 + m/8) * float32(math.Ldexp(1, e-7))
	}
	return raw * 0.5
}

// signed returns v or -v as bit j of the sign byte s says: the sign bit
// flipped without a branch (random signs mispredict half the time; -v is
// that flip, as llama.cpp's multiplication by -1.f is).
func signed(v float32, s byte, j int) float32 {
	return math.Float32frombits(math.Float32bits(v) ^ uint32(s>>j&1)<<31)
}

func decodeIQ4NL(b []byte, y []float32) {
	d := f16At(b)
	y = y[:32]
	for j, c := range (*[16]byte)(b[2:]) {
		y[j] = d * float32(kvaluesIQ4NL[c&0xf])
		y[j+16] = d * float32(kvaluesIQ4NL[c>>4])
	}
}

func decodeIQ4XS(b []byte, y []float32) {
	d := f16At(b)
	sh := binary.LittleEndian.Uint16(b[2:])
	sl := (*[4]byte)(b[4:])
	qs := (*[128]byte)(b[8:])
	y = y[:256]
	for ib := range 8 {
		ls := int32(sl[ib/2]>>(4*(ib%2))&0xf) | int32(sh>>(2*ib)&3)<<4
		dl := d * float32(ls-32)
		out := (*[32]float32)(y[32*ib:])
		for j, c := range (*[16]byte)(qs[16*ib:]) {
			out[j] = dl * float32(kvaluesIQ4NL[c&0xf])
			out[j+16] = dl * float32(kvaluesIQ4NL[c>>4])
		}
	}
}

// gridGroup writes the 8 values of a grid entry times dl, negated where
// the sign byte has its bit set.
func gridGroup(out *[8]float32, g uint64, dl float32, signs byte) {
	for j := range 8 {
		out[j] = signed(dl*float32(byte(g>>(8*j))), signs, j)
	}
}

func decodeIQ2XXS(b []byte, y []float32) {
	d := f16At(b)
	y = y[:256]
	for ib := range 8 {
		a := binary.LittleEndian.Uint32(b[2+8*ib:])
		s := binary.LittleEndian.Uint32(b[6+8*ib:])
		db := float32(d*(0.5+float32(s>>28))) * 0.25
		for l := range 4 {
			gridGroup((*[8]float32)(y[32*ib+8*l:]), iq2xxsGrid[byte(a>>(8*l))], db, ksignsIQ2XS[s>>(7*l)&127])
		}
	}
}

func decodeIQ2XS(b []byte, y []float32) {
	d := f16At(b)
	sc := (*[8]byte)(b[66:])
	y = y[:256]
	for ib := range 8 {
		db := [2]float32{
			float32(d*(0.5+float32(sc[ib]&0xf))) * 0.25,
			float32(d*(0.5+float32(sc[ib]>>4))) * 0.25,
		}
		for l := range 4 {
			q := binary.LittleEndian.Uint16(b[2+8*ib+2*l:])
			gridGroup((*[8]float32)(y[32*ib+8*l:]), iq2xsGrid[q&511], db[l/2], ksignsIQ2XS[q>>9])
		}
	}
}

func decodeIQ2S(b []byte, y []float32) {
	d := f16At(b)
	qs := (*[32]byte)(b[2:])
	signs := (*[32]byte)(b[34:])
	qh := (*[8]byte)(b[66:])
	sc := (*[8]byte)(b[74:])
	y = y[:256]
	for ib := range 8 {
		db := [2]float32{
			float32(d*(0.5+float32(sc[ib]&0xf))) * 0.25,
			float32(d*(0.5+float32(sc[ib]>>4))) * 0.25,
		}
		for l := range 4 {
			i := int(qs[4*ib+l]) | int(qh[ib])<<(8-2*l)&0x300
			gridGroup((*[8]float32)(y[32*ib+8*l:]), iq2sGrid[i], db[l/2], signs[4*ib+l])
		}
	}
}

// gridHalf writes the 4 values of a 4-value grid entry times dl, negated
// where bits from..from+3 of the sign byte are set.
func gridHalf(out []float32, g uint32, dl float32, signs byte, from int) {
	for j := range 4 {
		out[j] = signed(dl*float32(byte(g>>(8*j))), signs, from+j)
	}
}

func decodeIQ3XXS(b []byte, y []float32) {
	d := f16At(b)
	qs := (*[64]byte)(b[2:])
	y = y[:256]
	for ib := range 8 {
		s := binary.LittleEndian.Uint32(b[66+4*ib:])
		db := float32(d*(0.5+float32(s>>28))) * 0.5
		for l := range 4 {
			signs := ksignsIQ2XS[s>>(7*l)&127]
			out := y[32*ib+8*l:]
			gridHalf(out, iq3xxsGrid[qs[8*ib+2*l]], db, signs, 0)
			gridHalf(out[4:], iq3xxsGrid[qs[8*ib+2*l+1]], db, signs, 4)
		}
	}
}

func decodeIQ3S(b []byte, y []float32) {
	d := f16At(b)
	qs := (*[64]byte)(b[2:])
	qh := (*[8]byte)(b[66:])
	signs := (*[32]byte)(b[74:])
	sc := (*[4]byte)(b[106:])
	y = y[:256]
	for ib := range 8 {
		db := d * float32(1+2*int32(sc[ib/2]>>(4*(ib%2))&0xf))
		h := int(qh[ib])
		for l := range 4 {
			out := y[32*ib+8*l:]
			i1 := int(qs[8*ib+2*l]) | h<<(8-2*l)&256
			i2 := int(qs[8*ib+2*l+1]) | h<<(7-2*l)&256
			gridHalf(out, iq3sGrid[i1], db, signs[4*ib+l], 0)
			gridHalf(out[4:], iq3sGrid[i2], db, signs[4*ib+l], 4)
		}
	}
}

// iq1Delta is llama.cpp's IQ1S_DELTA (and IQ1M_DELTA).
const iq1Delta = 0.125

// ternaryGroup writes dl*(g+delta) for the 8 values g (int8) of a ternary
// grid entry.
func ternaryGroup(out *[8]float32, g uint64, dl, delta float32) {
	for j := range 8 {
		out[j] = dl * (float32(int8(g>>(8*j))) + delta)
	}
}

func decodeIQ1S(b []byte, y []float32) {
	d := f16At(b)
	qs := (*[32]byte)(b[2:])
	y = y[:256]
	for ib := range 8 {
		h := binary.LittleEndian.Uint16(b[34+2*ib:])
		dl := d * float32(2*int32(h>>12&7)+1)
		delta := float32(iq1Delta)
		if h&0x8000 != 0 {
			delta = -iq1Delta
		}
		for l := range 4 {
			i := int(qs[4*ib+l]) | int(h>>(3*l)&7)<<8
			ternaryGroup((*[8]float32)(y[32*ib+8*l:]), iq1sGrid[i], dl, delta)
		}
	}
}

func decodeIQ1M(b []byte, y []float32) {
	qs := (*[32]byte)(b)
	qh := (*[16]byte)(b[32:])
	var sc [4]uint16
	for k := range sc {
		sc[k] = binary.LittleEndian.Uint16(b[48+2*k:])
	}
	d := F16Float(sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000)
	y = y[:256]
	for ib := range 8 {
		s := sc[ib/2] >> (6 * (ib % 2))
		dl := [2]float32{d * float32(2*int32(s&7)+1), d * float32(2*int32(s>>3&7)+1)}
		for l := range 4 {
			h := qh[2*ib+l/2] >> (4 * (l % 2))
			i := int(qs[4*ib+l]) | int(h&7)<<8
			delta := float32(iq1Delta)
			if h&8 != 0 {
				delta = -iq1Delta
			}
			ternaryGroup((*[8]float32)(y[32*ib+8*l:]), iq1sGrid[i], dl[l/2], delta)
		}
	}
}

func decodeNVFP4(b []byte, y []float32) {
	qs := (*[32]byte)(b[4:])
	y = y[:64]
	for s := range 4 {
		d := UE4M3Half(b[s])
		out := (*[16]float32)(y[16*s:])
		for j, c := range (*[8]byte)(qs[8*s:]) {
			out[j] = float32(kvaluesFP4[c&0xf]) * d
			out[j+8] = float32(kvaluesFP4[c>>4]) * d
		}
	}
}

// ternaryDigit is digit n (0..4) of the base-3 fraction byte q, as
// TQ1_0 stores five values in a byte.
func ternaryDigit(q byte, n int) float32 {
	p := q * [5]byte{1, 3, 9, 27, 81}[n]
	return float32(int32(uint16(p)*3>>8) - 1)
}

func decodeTQ1_0(b []byte, y []float32) {
	qs := (*[48]byte)(b)
	qh := (*[4]byte)(b[48:])
	d := f16At(b[52:])
	y = y[:256]
	for n := range 5 {
		for m := range 32 {
			y[32*n+m] = ternaryDigit(qs[m], n) * d
		}
		for m := range 16 {
			y[160+16*n+m] = ternaryDigit(qs[32+m], n) * d
		}
	}
	for n := range 4 {
		for m := range 4 {
			y[240+4*n+m] = ternaryDigit(qh[m], n) * d
		}
	}
}

func decodeTQ2_0(b []byte, y []float32) {
	qs := (*[64]byte)(b)
	d := f16At(b[64:])
	y = y[:256]
	for h := range 2 {
		for l := range 4 {
			for m := range 32 {
				y[128*h+32*l+m] = float32(int32(qs[32*h+m]>>(2*l)&3)-1) * d
			}
		}
	}
}

// IQGrid is one of the I-quant lookup tables as little-endian u32 words
// (a table of bytes packed four to a word, a u64 grid entry as two words,
// low word first), for kernels that read them from a buffer.
type IQGrid struct {
	Name  string // ggml-common.h's name
	Words []uint32
}

// IQGrids returns the tables the grid I-quants decode with: ksigns_iq2xs,
// iq2xxs_grid, iq2xs_grid, iq2s_grid, iq3xxs_grid, iq3s_grid and
// iq1s_grid, in that order.
func IQGrids() []IQGrid {
	u64 := func(g []uint64) []uint32 {
		w := make([]uint32, 0, 2*len(g))
		for _, v := range g {
			w = append(w, uint32(v), uint32(v>>32))
		}
		return w
	}
	signs := make([]uint32, len(ksignsIQ2XS)/4)
	for i, s := range ksignsIQ2XS {
		signs[i/4] |= uint32(s) << (8 * (i % 4))
	}
	return []IQGrid{
		{"ksigns_iq2xs", signs},
		{"iq2xxs_grid", u64(iq2xxsGrid[:])},
		{"iq2xs_grid", u64(iq2xsGrid[:])},
		{"iq2s_grid", u64(iq2sGrid[:])},
		{"iq3xxs_grid", append([]uint32(nil), iq3xxsGrid[:]...)},
		{"iq3s_grid", append([]uint32(nil), iq3sGrid[:]...)},
		{"iq1s_grid", u64(iq1sGrid[:])},
	}
}
