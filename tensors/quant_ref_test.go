package tensors_test

import (
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
)

// GGML tensor types used by the reference models.
const (
	ggmlF32  = 0
	ggmlQ4_0 = 2
	ggmlQ8_0 = 8
)

// ggufTensor returns the raw bytes, ggml type and ggml dims (contiguous
// dimension first) of a tensor in one of the shared llama.cpp test models.
// It reads just enough of GGUF v3 to find tensor data, independently of the
// project's importer.
func ggufTensor(t *testing.T, file, name string) ([]byte, uint32, []int) {
	t.Helper()
	path := testmodels.Path(t, "arch", file)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reference model missing: %v", err)
	}
	r := &ggufReader{t: t, b: data}
	if string(r.next(4)) != "GGUF" || r.u32() != 3 {
		t.Fatalf("%s: not a GGUF v3 file", file)
	}
	nTensors, nKV := r.u64(), r.u64()
	align := uint64(32)
	for range nKV {
		key := r.str()
		typ := r.u32()
		if key == "general.alignment" && typ == 4 {
			align = uint64(r.u32())
			continue
		}
		r.skipValue(typ)
	}
	type info struct {
		dims []int
		typ  uint32
		off  uint64
	}
	var found *info
	for range nTensors {
		n := r.str()
		in := info{}
		for range r.u32() {
			in.dims = append(in.dims, int(r.u64()))
		}
		in.typ, in.off = r.u32(), r.u64()
		if n == name {
			found = &in
		}
	}
	if found == nil {
		t.Fatalf("%s: no tensor %s", file, name)
	}
	dataStart := (uint64(r.pos) + align - 1) / align * align
	n := uint64(1)
	for _, d := range found.dims {
		n *= uint64(d)
	}
	var size uint64
	switch found.typ {
	case ggmlF32:
		size = 4 * n
	case ggmlQ8_0:
		size = n / 32 * (2 + 32)
	case ggmlQ4_0:
		size = n / 32 * (2 + 16)
	default:
		t.Skipf("%s: %s has ggml type %d", file, name, found.typ)
	}
	start := dataStart + found.off
	if start+size > uint64(len(data)) {
		t.Fatalf("%s: %s past the end", file, name)
	}
	return data[start : start+size], found.typ, found.dims
}

type ggufReader struct {
	t   *testing.T
	b   []byte
	pos int
}

func (r *ggufReader) next(n int) []byte {
	if n < 0 || r.pos+n > len(r.b) {
		r.t.Fatalf("GGUF truncated at %d", r.pos)
	}
	r.pos += n
	return r.b[r.pos-n : r.pos]
}

func (r *ggufReader) u32() uint32 { return binary.LittleEndian.Uint32(r.next(4)) }
func (r *ggufReader) u64() uint64 { return binary.LittleEndian.Uint64(r.next(8)) }
func (r *ggufReader) str() string { return string(r.next(int(r.u64()))) }

// skipValue skips a metadata value of GGUF value type typ.
func (r *ggufReader) skipValue(typ uint32) {
	sizes := map[uint32]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
	switch typ {
	case 8: // string
		r.str()
	case 9: // array: element type, count, elements
		et, n := r.u32(), r.u64()
		for range n {
			r.skipValue(et)
		}
	default:
		size, ok := sizes[typ]
		if !ok {
			r.t.Fatalf("GGUF value type %d", typ)
		}
		r.next(size)
	}
}

func f16At(b []byte) float32 { return tensors.F16Float(binary.LittleEndian.Uint16(b)) }

// The shared llama-q8_0.gguf was made by llama.cpp's llama-quantize from the
// F32 weights in llama.gguf. Quantizing those F32 weights ourselves as int8
// with f16 scales per block of 32 must give llama.cpp's block scales (ours
// round up in f16, theirs to nearest: at most one f16 step apart) and the
// same integers up to one step where that scale difference tips a rounding.
func TestQuantizeMatchesLlamaCppQ8_0(t *testing.T) {
	for _, name := range []string{"blk.0.attn_q.weight", "blk.1.ffn_down.weight", "token_embd.weight"} {
		t.Run(name, func(t *testing.T) {
			raw, typ, dims := ggufTensor(t, "llama.gguf", name)
			ref, refTyp, _ := ggufTensor(t, "llama-q8_0.gguf", name)
			if typ != ggmlF32 || refTyp != ggmlQ8_0 {
				t.Skipf("types %v/%v, want F32 and Q8_0", typ, refTyp)
			}
			cols, rows := dims[0], len(raw)/4/dims[0]
			vals := make([]float32, rows*cols)
			for i := range vals {
				vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			q, err := tensors.Quantize(name, []int{rows, cols}, vals, tensors.I8, 32, tensors.F16)
			if err != nil {
				t.Fatal(err)
			}
			scales, err := q.Scales.Float32()
			if err != nil {
				t.Fatal(err)
			}
			const blockBytes = 2 + 32 // f16 d, then 32 int8
			if len(ref) != len(scales)*blockBytes {
				t.Fatalf("reference has %d bytes for %d blocks", len(ref), len(scales))
			}
			diffs := 0
			for b, s := range scales {
				blk := ref[b*blockBytes:]
				d := f16At(blk)
				if s < d || tensors.F16Bits(s)-tensors.F16Bits(d) > 1 {
					t.Fatalf("block %d: scale %g, llama.cpp %g", b, s, d)
				}
				for i := range 32 {
					ours, theirs := int(int8(q.Data[b*32+i])), int(int8(blk[2+i]))
					if ours != theirs {
						diffs++
						if ours-theirs > 1 || theirs-ours > 1 {
							t.Fatalf("block %d elem %d: q %d, llama.cpp %d", b, i, ours, theirs)
						}
					}
				}
			}
			// A one-step disagreement needs a value near a rounding boundary;
			// it must stay rare.
			if diffs > len(q.Data)/20 {
				t.Errorf("%d of %d integers differ from llama.cpp", diffs, len(q.Data))
			}
		})
	}
}

// llama-q4_0.gguf holds llama.cpp's Q4_0 blocks (f16 d, 16 bytes: element i
// in the low nibble of byte i, element i+16 in the high one, value q-8).
// Repacked into our int4 layout, our dequantization must reproduce the
// original F32 weights within llama.cpp's rounding error, including the -8
// code Q4_0 uses for each block's extreme value (d = extreme / -8, so d may
// be negative).
func TestDequantizeLlamaCppQ4_0(t *testing.T) {
	name := "blk.0.ffn_gate.weight"
	raw, typ, dims := ggufTensor(t, "llama.gguf", name)
	ref, refTyp, _ := ggufTensor(t, "llama-q4_0.gguf", name)
	if typ != ggmlF32 || refTyp != ggmlQ4_0 {
		t.Skipf("types %v/%v, want F32 and Q4_0", typ, refTyp)
	}
	cols, rows := dims[0], len(raw)/4/dims[0]
	const blockBytes = 2 + 16
	nb := rows * cols / 32
	if len(ref) != nb*blockBytes {
		t.Fatalf("reference has %d bytes for %d blocks", len(ref), nb)
	}
	data := make([]byte, rows*cols/2)
	scaleBytes := make([]byte, 2*nb)
	minus8 := 0
	for b := range nb {
		blk := ref[b*blockBytes:]
		copy(scaleBytes[2*b:], blk[:2])
		for i := range 32 {
			nib := blk[2+i%16] & 0x0f
			if i >= 16 {
				nib = blk[2+i%16] >> 4
			}
			signed := byte(int8(nib)-8) & 0x0f
			if signed == 8 {
				minus8++
			}
			e := b*32 + i
			data[e/2] |= signed << (4 * (e % 2))
		}
	}
	q := &tensors.Tensor{Name: name, DType: tensors.I4, Shape: []int{rows, cols}, Data: data,
		Scales: &tensors.Tensor{Name: name + "_quantized_scale", DType: tensors.F16, Shape: []int{rows, cols / 32}, Data: scaleBytes}}
	deq, err := q.Float32()
	if err != nil {
		t.Fatal(err)
	}
	if minus8 == 0 {
		t.Fatal("no -8 codes in the reference: the test would not cover them")
	}
	for e := range deq {
		d := float64(f16At(scaleBytes[2*(e/32):]))
		orig := float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*e:])))
		// Half a step, plus the f16 rounding of d applied to |q| <= 8. Q4_0
		// maps the block's extreme to -8, so values of the other sign up to
		// 8|d| clip at +7: a whole step there.
		bound := math.Abs(d) * (0.5 + 8.0/2048 + 1e-6)
		if d != 0 && math.Round(float64(deq[e])/d) == 7 {
			bound = math.Abs(d) * (1 + 8.0/2048 + 1e-6)
		}
		if diff := math.Abs(float64(deq[e]) - orig); diff > bound {
			t.Fatalf("element %d: %g, original %g (diff %g > %g)", e, deq[e], orig, diff, bound)
		}
	}
}
