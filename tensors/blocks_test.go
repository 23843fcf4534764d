package tensors

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// refValue decodes element i of one block straight from the block layouts
// (ggml's block definitions: field order and sizes, how values, high bits,
// scales and mins are packed), element by element and independently of
// blocks.go: f16 through math.Ldexp, fields read with encoding/binary.
func refValue(dt DType, blk []byte, i int) float32 {
	half := func(off int) float32 { return refHalf(binary.LittleEndian.Uint16(blk[off:])) }
	nibble := func(qs []byte, i int) int { // 32-element nibble layout: low nibbles first
		if i < 16 {
			return int(qs[i] & 15)
		}
		return int(qs[i-16] >> 4)
	}
	switch dt {
	case Q4_1:
		return float32(float32(nibble(blk[4:], i))*half(0)) + half(2)
	case Q8_0:
		return float32(int8(blk[2+i])) * half(0)
	case MXFP4:
		// E2M1 code: sign bit 3, exponent bits 1..2 (bias 1), mantissa
		// bit 0; exponent 0 is subnormal (0 or 0.5). Scale 2^(e-127).
		q := nibble(blk[1:], i)
		m, ex := float64(q&1), (q>>1)&3
		v := math.Ldexp(m, -1) // subnormal: m/2
		if ex > 0 {
			v = math.Ldexp(1+m/2, ex-1)
		}
		if q&8 != 0 {
			v = -v + 0 // ggml's table holds code 8 as 0, not -0
		}
		return float32(v * math.Ldexp(1, int(blk[0])-127))
	case Q5_0:
		hb := int(binary.LittleEndian.Uint32(blk[2:])>>uint(i)) & 1
		return float32(nibble(blk[6:], i)+16*hb-16) * half(0)
	case Q5_1:
		hb := int(binary.LittleEndian.Uint32(blk[4:])>>uint(i)) & 1
		return float32(float32(nibble(blk[8:], i)+16*hb)*half(0)) + half(2)
	case Q4K, Q5K:
		sub := i / 32
		sc, mn := refScaleMin(blk[4:16], sub)
		qs := blk[16:]
		if dt == Q5K {
			qs = blk[48:]
		}
		c := qs[32*(sub/2)+i%32]
		q := int(c & 15)
		if sub%2 == 1 {
			q = int(c >> 4)
		}
		if dt == Q5K && blk[16+i%32]&(1<<uint(sub)) != 0 {
			q += 16
		}
		d := half(0) * float32(sc)
		return float32(d*float32(q)) - half(2)*float32(mn)
	case Q2K, Q3K:
		// Element i: half h, 2-bit plane j, sub-block s = 8h + 2j + u.
		h, j, u, l := i/128, i%128/32, i%32/16, i%16
		s := 8*h + 2*j + u
		qs := blk[16:80]
		if dt == Q3K {
			qs = blk[32:96]
		}
		q := int(qs[32*h+16*u+l]>>uint(2*j)) % 4
		if dt == Q2K {
			sc, mn := int(blk[s]%16), int(blk[s]/16)
			d := half(80) * float32(sc)
			return float32(d*float32(q)) - half(82)*float32(mn)
		}
		if blk[16*u+l]&(1<<uint(4*h+j)) == 0 {
			q -= 4
		}
		sbytes := blk[96:108]
		low := int(sbytes[s%8])
		if s >= 8 {
			low /= 16
		}
		sc := low%16 + 16*(int(sbytes[8+s%4]>>uint(2*(s/4)))%4) - 32
		return half(108) * float32(sc) * float32(q)
	case Q6K:
		h, r := i/128, i%128
		k, l := r/32, r%32
		low := blk[64*h+l+32*(k%2)]
		if k >= 2 {
			low >>= 4
		}
		high := (blk[128+32*h+l] >> uint(2*k)) & 3
		q := int(low&15) + 16*int(high) - 32
		sc := float32(int8(blk[192+8*h+2*k+l/16]))
		return half(208) * sc * float32(q)
	}
	panic("not a block type")
}

// refScaleMin reads the 6-bit scale and min of sub-block j from the 12
// scale bytes: the first four sub-blocks' live in bits 0..5 of bytes j and
// j+4; the last four take bits 0..3 (scale) and 4..7 (min) of byte j+4 and
// get bits 4..5 from bits 6..7 of bytes j-4 (scale) and j (min).
func refScaleMin(s []byte, j int) (sc, mn int) {
	if j < 4 {
		return int(s[j]) % 64, int(s[j+4]) % 64
	}
	return int(s[j+4]%16) + 16*int(s[j-4]/64), int(s[j+4]/16) + 16*int(s[j]/64)
}

func refHalf(h uint16) float32 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, f := int(h>>10)&31, float64(h&1023)
	switch e {
	case 0:
		return float32(sign * math.Ldexp(f, -24))
	case 31:
		if f != 0 {
			return float32(math.NaN())
		}
		return float32(sign * math.Inf(1))
	}
	return float32(sign * math.Ldexp(1+f/1024, e-15))
}

var blockTypes = []DType{Q4_1, Q5_0, Q5_1, Q4K, Q5K, Q6K, Q2K, Q3K, Q8_0, MXFP4}

// randomBlocks fills n blocks with random bytes, keeping f16 fields finite
// unless wild is set.
func randomBlocks(rng *rand.Rand, dt DType, n int, wild bool) []byte {
	b := make([]byte, n*dt.BlockBytes())
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	if wild {
		return b
	}
	halves := map[DType][]int{Q4_1: {0, 2}, Q5_0: {0}, Q5_1: {0, 2}, Q4K: {0, 2}, Q5K: {0, 2}, Q6K: {208}, Q2K: {80, 82}, Q3K: {108}, Q8_0: {0}}[dt]
	for k := range n {
		for _, off := range halves {
			p := k*dt.BlockBytes() + off
			binary.LittleEndian.PutUint16(b[p:], uint16(rng.IntN(0x7800))|uint16(rng.IntN(2))<<15)
		}
	}
	return b
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

func TestDecodeBlocksMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range blockTypes {
		t.Run(dt.String(), func(t *testing.T) {
			const n = 64
			for _, wild := range []bool{false, true} {
				src := randomBlocks(rng, dt, n, wild)
				dst := make([]float32, n*dt.BlockLen())
				if err := DecodeBlocks(dt, src, dst); err != nil {
					t.Fatal(err)
				}
				for i, v := range dst {
					b := i / dt.BlockLen()
					want := refValue(dt, src[b*dt.BlockBytes():(b+1)*dt.BlockBytes()], i%dt.BlockLen())
					if !sameBits(v, want) {
						t.Fatalf("block %d element %d = %g, reference %g", b, i%dt.BlockLen(), v, want)
					}
				}
			}
		})
	}
}

func TestBlockTensorChecks(t *testing.T) {
	for _, dt := range blockTypes {
		good := &Tensor{Name: "w", DType: dt, Shape: []int{3, 2 * dt.BlockLen()}, Data: make([]byte, 6*dt.BlockBytes())}
		if err := good.Check(); err != nil {
			t.Errorf("%s: %v", dt, err)
		}
		vals, err := good.Float32()
		if err != nil || len(vals) != 6*dt.BlockLen() {
			t.Errorf("%s: Float32: %v", dt, err)
		}
		for _, bad := range []*Tensor{
			{Name: "w", DType: dt, Shape: []int{2, dt.BlockLen() / 2}, Data: make([]byte, dt.BlockBytes())},
			{Name: "w", DType: dt, Shape: []int{1, dt.BlockLen()}, Data: make([]byte, dt.BlockBytes()-1)},
			{Name: "w", DType: dt, Shape: []int{1, dt.BlockLen()}, Data: make([]byte, dt.BlockBytes()), Scales: good},
		} {
			if err := bad.Check(); err == nil {
				t.Errorf("%s %v with %d bytes passes Check", dt, bad.Shape, len(bad.Data))
			}
		}
		if err := DecodeBlocks(dt, make([]byte, dt.BlockBytes()), make([]float32, dt.BlockLen()+1)); err == nil {
			t.Errorf("%s: DecodeBlocks of a partial block succeeds", dt)
		}
	}
	if err := DecodeBlocks(I8, nil, nil); err == nil {
		t.Error("DecodeBlocks(int8) succeeds")
	}
}

// FuzzDecodeBlocks: any bytes decode without panicking, bit for bit like
// the reference decoder.
func FuzzDecodeBlocks(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i, dt := range blockTypes {
		f.Add(uint8(i), randomBlocks(rng, dt, 1, false))
	}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		dt := blockTypes[int(kind)%len(blockTypes)]
		n := len(data) / dt.BlockBytes()
		dst := make([]float32, n*dt.BlockLen())
		if err := DecodeBlocks(dt, data, dst); (err == nil) != (len(data)%dt.BlockBytes() == 0) {
			t.Fatalf("%d bytes of %s: err = %v", len(data), dt, err)
		}
		if len(data)%dt.BlockBytes() != 0 {
			return
		}
		for i, v := range dst {
			b := i / dt.BlockLen()
			if want := refValue(dt, data[b*dt.BlockBytes():], i%dt.BlockLen()); !sameBits(v, want) {
				t.Fatalf("element %d = %g, reference %g", i, v, want)
			}
		}
	})
}

// TestMXFP4MatchesLlamaCpp: DecodeBlocks gives llama.cpp's own
// dequantize_row_mxfp4 values bit for bit (testdata/mxfp4.golden.json,
// written by scripts/mxfp4-golden.py from a llama.cpp build: every
// exponent byte, random codes).
func TestMXFP4MatchesLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "mxfp4.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		LlamaCpp       string `json:"llama_cpp"`
		Blocks, Values string
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	blocks, err := hex.DecodeString(g.Blocks)
	if err != nil {
		t.Fatal(err)
	}
	want, err := hex.DecodeString(g.Values)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 || len(blocks)%17 != 0 || len(want) != len(blocks)/17*32*4 {
		t.Fatalf("golden of %d block bytes and %d value bytes", len(blocks), len(want))
	}
	got := make([]float32, len(want)/4)
	if err := DecodeBlocks(MXFP4, blocks, got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if w := binary.LittleEndian.Uint32(want[4*i:]); math.Float32bits(v) != w {
			t.Fatalf("block %d (e = %d) element %d = %g (%#08x), llama.cpp %s gives %g (%#08x)",
				i/32, blocks[i/32*17], i%32, v, math.Float32bits(v), g.LlamaCpp, math.Float32frombits(w), w)
		}
	}
}
