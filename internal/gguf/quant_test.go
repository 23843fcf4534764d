package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/tensors"
)

// dequantRaw decodes ggml Q8_0 (type 8) or Q4_0 (type 2) blocks straight from
// the file bytes, following the ggml block definitions.
func dequantRaw(typ uint32, raw []byte, n int) (vals []float32, scales []byte) {
	vals = make([]float32, n)
	switch typ {
	case 8: // f16 d, int8 qs[32]: x = qs[j]*d
		for b := 0; b < n/32; b++ {
			blk := raw[b*34 : (b+1)*34]
			scales = append(scales, blk[:2]...)
			d := halfToFloat(binary.LittleEndian.Uint16(blk))
			for j := range 32 {
				vals[b*32+j] = float32(int8(blk[2+j])) * d
			}
		}
	case 2: // f16 d, uint8 qs[16]: x[j] = (qs[j]&15 - 8)*d, x[j+16] = (qs[j]>>4 - 8)*d
		for b := 0; b < n/32; b++ {
			blk := raw[b*18 : (b+1)*18]
			scales = append(scales, blk[:2]...)
			d := halfToFloat(binary.LittleEndian.Uint16(blk))
			for j := range 16 {
				vals[b*32+j] = float32(int(blk[2+j]&15)-8) * d
				vals[b*32+j+16] = float32(int(blk[2+j]>>4)-8) * d
			}
		}
	}
	return vals, scales
}

// dequantOurs decodes one of our I8/I4 tensors with block F16 scales: value =
// q * scale[row][col/block], int4 element 2k in the low nibble of byte k.
func dequantOurs(t *testing.T, tt *tensors.Tensor) []float32 {
	rows, cols := tt.Rows(), tt.Cols()
	s := tt.Scales
	if s == nil || s.DType != tensors.F16 || len(s.Shape) != 2 || s.Shape[0] != rows || s.Shape[1]*32 != cols {
		t.Fatalf("%s: scales %v, want f16 [%d %d]", tt.Name, s, rows, cols/32)
	}
	out := make([]float32, rows*cols)
	for i := range out {
		var q int
		switch tt.DType {
		case tensors.I8:
			q = int(int8(tt.Data[i]))
		case tensors.I4:
			nib := tt.Data[i/2] >> (4 * (i % 2)) & 15
			q = int(nib)
			if q >= 8 {
				q -= 16
			}
		default:
			t.Fatalf("%s: dtype %s", tt.Name, tt.DType)
		}
		r, c := i/cols, i%cols
		si := r*(cols/32) + c/32
		out[i] = float32(q) * halfToFloat(binary.LittleEndian.Uint16(s.Data[2*si:]))
	}
	return out
}

func TestLoadQuantized(t *testing.T) {
	for _, tc := range []struct {
		file      string
		wantTypes map[uint32]int // ggml type -> tensor count expected in the file
	}{
		// Every 2-D weight quantized; output.weight falls back to Q8_0 (README).
		{"llama-q8_0", map[uint32]int{0: 5, 8: 16}},
		{"llama-q4_0", map[uint32]int{0: 5, 2: 15, 8: 1}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join(archDir(t), tc.file+".gguf")
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ck, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := Load(filepath.Join(archDir(t), "llama.gguf"))
			if err != nil {
				t.Fatal(err)
			}
			walked, _ := walkGGUF(t, raw)
			types := map[uint32]int{}
			for _, rt := range walked {
				types[rt.typ]++
				tt := ck.Tensor(ourName(rt.name))
				if tt == nil {
					t.Fatalf("missing %s", rt.name)
				}
				if err := tt.Check(); err != nil {
					t.Error(err)
				}
				want := toInts(rt.dims)
				slices.Reverse(want)
				if !slices.Equal(tt.Shape, want) {
					t.Errorf("%s: shape %v, want %v", rt.name, tt.Shape, want)
				}
				n := tt.NumElements()
				if rt.typ == 0 {
					if !bytes.Equal(tt.Data, raw[rt.start:rt.start+int64(4*n)]) {
						t.Errorf("%s: f32 bytes differ", rt.name)
					}
					continue
				}
				blockBytes := map[uint32]int{8: 34, 2: 18}[rt.typ]
				wantVals, wantScales := dequantRaw(rt.typ, raw[rt.start:rt.start+int64(n/32*blockBytes)], n)
				if !bytes.Equal(tt.Scales.Data, wantScales) {
					t.Errorf("%s: scales are not the block d bytes", rt.name)
				}
				got := dequantOurs(t, tt)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(wantVals[i]) {
						t.Fatalf("%s[%d] = %v, ggml block gives %v", rt.name, i, got[i], wantVals[i])
					}
				}
				// Sanity against the unquantized model: within one step.
				orig := ref.Tensor(tt.Name)
				for i := range got {
					d := math.Abs(float64(halfToFloat(binary.LittleEndian.Uint16(tt.Scales.Data[2*(i/32):]))))
					o := math.Float32frombits(binary.LittleEndian.Uint32(orig.Data[4*i:]))
					if diff := math.Abs(float64(got[i] - o)); diff > d*1.0001+1e-9 {
						t.Fatalf("%s[%d] = %v, f32 model has %v (step %v)", rt.name, i, got[i], o, d)
					}
				}
			}
			for typ, n := range tc.wantTypes {
				if types[typ] != n {
					t.Errorf("file has %d tensors of ggml type %d, want %d", types[typ], typ, n)
				}
			}
		})
	}
}

// TestBlockTypesImportBitForBit: Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K and MXFP4
// tensors become the tensors block types with the file's bytes unchanged
// and the shape reversed into [rows, cols].
func TestBlockTypesImportBitForBit(t *testing.T) {
	f, err := Parse(blockTensors())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]tensors.DType{"Q4_1": tensors.Q4_1, "Q5_0": tensors.Q5_0, "Q5_1": tensors.Q5_1, "Q4_K": tensors.Q4K, "Q5_K": tensors.Q5K, "Q6_K": tensors.Q6K,
		"Q2_K": tensors.Q2K, "Q3_K": tensors.Q3K, "MXFP4": tensors.MXFP4}
	for i := range f.Tensors {
		info := &f.Tensors[i]
		raw, err := f.TensorData(info)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.toTensor(info, info.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.DType != want[info.Name] || !slices.Equal(got.Shape, []int{2, info.Dims[0]}) || !bytes.Equal(got.Data, raw) || got.Scales != nil {
			t.Errorf("%s: %s%v", info.Name, got.DType, got.Shape)
		}
	}
}

// TestMXFP4AnyRank: MXFP4 tensors of one, two and three dimensions (a
// bias-like vector, a matrix, stacked experts) keep their 17-byte blocks,
// aliasing the file, read whole and streamed.
func TestMXFP4AnyRank(t *testing.T) {
	w := &ggufWriter{}
	w.string("general.architecture", "llama")
	dims := map[string][]uint64{"v": {64}, "m": {32, 3}, "e": {64, 2, 3}}
	for _, name := range []string{"v", "m", "e"} {
		n := 1
		for _, d := range dims[name] {
			n *= int(d)
		}
		data := make([]byte, n/32*17)
		for j := range data {
			data[j] = byte(j*13 + len(name))
		}
		w.tensor(name, GGMLMXFP4, dims[name], data)
	}
	b := w.bytes()
	whole, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := ParseHead(b, int64(len(b)), func(off, n int64) ([]byte, error) { return b[off : off+n], nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*File{whole, streamed} {
		for i := range f.Tensors {
			info := &f.Tensors[i]
			raw, err := f.TensorData(info)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.toTensor(info, info.Name)
			if err != nil {
				t.Fatalf("%s: %v", info.Name, err)
			}
			if err := got.Fill(); err != nil {
				t.Fatalf("%s: %v", info.Name, err)
			}
			want := slices.Clone(info.Dims)
			slices.Reverse(want)
			if got.DType != tensors.MXFP4 || !slices.Equal(got.Shape, want) || !bytes.Equal(got.Data, raw) || got.Scales != nil {
				t.Errorf("%s: %s%v, want mxfp4%v with the file's bytes", info.Name, got.DType, got.Shape, want)
			}
		}
	}
}

// TestUnknownTypeErrorNamesTypeAndFile: a model with a tensor of a ggml
// type the runtime does not run fails to load with ErrUnsupported naming
// the type, the tensor and the file.
func TestUnknownTypeErrorNamesTypeAndFile(t *testing.T) {
	b := tinyLlama()
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	// Retype blk.0.ffn_up.weight (Q4_0) as Q8_1 in its tensor info.
	info := f.Tensor("blk.0.ffn_up.weight")
	name := []byte("blk.0.ffn_up.weight")
	at := bytes.Index(b, name) + len(name) + 4 + 8*len(info.Dims)
	if binary.LittleEndian.Uint32(b[at:]) != uint32(GGMLQ4_0) {
		t.Fatal("test bug: type field not found")
	}
	binary.LittleEndian.PutUint32(b[at:], 9)
	path := filepath.Join(t.TempDir(), "q8_1.gguf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
	for _, want := range []string{"Q8_1", "blk.0.ffn_up.weight", path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
