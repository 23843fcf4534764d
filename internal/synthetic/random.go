package synthetic

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/gpurun/gpurun/tensors"
)

// stream is a fast deterministic byte source: PCG words written eight bytes
// at a time, so filling a gigabyte of codes costs a few hundred
// milliseconds.
type stream struct {
	pcg *rand.PCG
}

// newStream seeds a stream from the checkpoint seed and a tensor name.
func newStream(seed uint64, name string) *stream {
	h := fnv.New64a()
	h.Write([]byte(name))
	return &stream{pcg: rand.NewPCG(seed, h.Sum64())}
}

// fill writes random bytes mapped through lut (nil: unmapped).
func (s *stream) fill(dst []byte, lut *[256]byte) {
	var w [8]byte
	for len(dst) > 0 {
		binary.LittleEndian.PutUint64(w[:], s.pcg.Uint64())
		n := copy(dst, w[:])
		if lut != nil {
			for i := range n {
				dst[i] = lut[dst[i]]
			}
		}
		dst = dst[n:]
	}
}

// unit returns a uniform float64 in [0, 1).
func (s *stream) unit() float64 { return float64(s.pcg.Uint64()>>11) / (1 << 53) }

// uniformF32 fills dst with little-endian f32 values uniform in [lo, hi).
func (s *stream) uniformF32(dst []byte, lo, hi float64) {
	for i := 0; i+4 <= len(dst); i += 4 {
		v := float32(lo + (hi-lo)*s.unit())
		binary.LittleEndian.PutUint32(dst[i:], math.Float32bits(v))
	}
}

// codeSet maps random bytes to stored quantized codes and knows the RMS of
// the decoded code values, so that scales can be chosen for a target
// standard deviation.
type codeSet struct {
	lut *[256]byte
	rms float64
}

// codesI8 keeps int8 codes symmetric: -128, which symmetric quantization
// never produces, becomes 0 (not -127, which would bias the mean).
var codesI8 = func() codeSet {
	var lut [256]byte
	var sum float64
	for b := range 256 {
		q := int8(b)
		if q == -128 {
			q = 0
		}
		lut[b] = byte(q)
		sum += float64(q) * float64(q)
	}
	return codeSet{lut: &lut, rms: math.Sqrt(sum / 256)}
}()

// codesI4 does the same per nibble (-8 becomes 0); both nibbles of a byte
// are independent and uniform, so one nibble's RMS is the element RMS.
var codesI4 = func() codeSet {
	var nib [16]byte
	var sum float64
	for v := range 16 {
		q := int8(byte(v)<<4) >> 4
		if q == -8 {
			q = 0
		}
		nib[v] = byte(q) & 0x0f
		sum += float64(q) * float64(q)
	}
	var lut [256]byte
	for b := range 256 {
		lut[b] = nib[b&0x0f] | nib[b>>4]<<4
	}
	return codeSet{lut: &lut, rms: math.Sqrt(sum / 16)}
}()

// codes fills dst with stored codes of set c.
func (s *stream) codes(dst []byte, c codeSet) { s.fill(dst, c.lut) }

// Scales vary by a factor in [0.75, 1.25] around their base so that blocks
// differ, as they do in real checkpoints.
const scaleSpread = 0.5

// scaleLevels are the 256 multipliers a random byte selects, and their RMS.
var scaleLevels, scaleLevelsRMS = func() ([256]float64, float64) {
	var l [256]float64
	var sum float64
	for k := range l {
		l[k] = 1 - scaleSpread/2 + scaleSpread*float64(k)/255
		sum += l[k] * l[k]
	}
	return l, math.Sqrt(sum / 256)
}()

// scales fills dst with scales (f16 or f32) whose RMS is base, so that
// codes times scales have the standard deviation the caller chose.
func (s *stream) scales(dst []byte, dt tensors.DType, base float64) {
	base /= scaleLevelsRMS
	size := dt.ByteSize(1)
	var table [256][4]byte
	for k, m := range scaleLevels {
		v := float32(base * m)
		if dt == tensors.F16 {
			binary.LittleEndian.PutUint16(table[k][:], tensors.F16Bits(v))
		} else {
			binary.LittleEndian.PutUint32(table[k][:], math.Float32bits(v))
		}
	}
	s.fromTable(dst, &table, size)
}

// floatValues fills dst with f16 or f32 values uniform over 256 levels in
// [-a, a], with a chosen so that their standard deviation is std.
func (s *stream) floatValues(dst []byte, std float64, dt tensors.DType) {
	// Mean square of the levels for a = 1.
	var sum float64
	for k := range 256 {
		x := float64(2*k-255) / 255
		sum += x * x
	}
	a := std / math.Sqrt(sum/256)
	var table [256][4]byte
	for k := range 256 {
		v := float32(a * float64(2*k-255) / 255)
		if dt == tensors.F32 {
			binary.LittleEndian.PutUint32(table[k][:], math.Float32bits(v))
		} else {
			binary.LittleEndian.PutUint16(table[k][:], tensors.F16Bits(v))
		}
	}
	s.fromTable(dst, &table, dt.ByteSize(1))
}

// fromTable writes size-byte (2 or 4) entries of table chosen by random
// bytes: one random word picks eight entries, assembled into words so that
// the stores are whole words.
func (s *stream) fromTable(dst []byte, table *[256][4]byte, size int) {
	var t [256]uint64
	for k := range table {
		t[k] = uint64(binary.LittleEndian.Uint32(table[k][:]))
	}
	per := 8 / size // entries per 64-bit store
	shift := uint(8 * size)
	chunk := 8 * size // the bytes of the eight entries one word picks
	for len(dst) >= chunk {
		w := s.pcg.Uint64()
		for o := 0; o < chunk; o += 8 {
			var v uint64
			for e := range per {
				v |= t[byte(w)] << (shift * uint(e))
				w >>= 8
			}
			binary.LittleEndian.PutUint64(dst[o:], v)
		}
		dst = dst[chunk:]
	}
	for len(dst) >= size {
		w := s.pcg.Uint64()
		for range min(8, len(dst)/size) {
			copy(dst, table[byte(w)][:size])
			w >>= 8
			dst = dst[size:]
		}
	}
}
