package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/tensors"
)

// file assembles a safetensors file from a literal JSON header and data.
func file(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// sample is a hand-written two-tensor file with metadata: "b" (BF16 [2])
// stored before "a" (F32 [2, 1]).
func sample() []byte {
	data := []byte{1, 2, 3, 4, 0, 0, 128, 63, 0, 0, 0, 64}
	return file(`{"a":{"dtype":"F32","shape":[2,1],"data_offsets":[4,12]},"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}  `, data)
}

func TestParse(t *testing.T) {
	f, err := Parse(sample())
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["format"] != "pt" || len(f.Metadata) != 1 {
		t.Errorf("metadata = %v", f.Metadata)
	}
	if len(f.Tensors) != 2 || f.Tensors[0].Name != "b" || f.Tensors[1].Name != "a" {
		t.Fatalf("tensors = %+v, want b then a (data order)", f.Tensors)
	}
	for _, tc := range []struct {
		name  string
		dtype tensors.DType
		shape []int
		data  []byte
	}{
		{"a", tensors.F32, []int{2, 1}, []byte{0, 0, 128, 63, 0, 0, 0, 64}},
		{"b", tensors.BF16, []int{2}, []byte{1, 2, 3, 4}},
	} {
		info := f.Tensor(tc.name)
		if info == nil {
			t.Fatalf("no tensor %s", tc.name)
		}
		tt, err := f.ToTensor(info, "x."+tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if tt.Name != "x."+tc.name || tt.DType != tc.dtype || !slices.Equal(tt.Shape, tc.shape) || !bytes.Equal(tt.Data, tc.data) {
			t.Errorf("%s = %s %s%v %v", tc.name, tt.Name, tt.DType, tt.Shape, tt.Data)
		}
		if err := tt.Check(); err != nil {
			t.Error(err)
		}
	}
}

func TestParseBad(t *testing.T) {
	d8 := make([]byte, 8)
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrFormat},
		{"short length", []byte{1, 0, 0}, ErrFormat},
		{"header past end", file(`{}`, nil)[:9], ErrFormat},
		{"huge header length", binary.LittleEndian.AppendUint64(nil, 1<<62), ErrFormat},
		{"not json", file(`{"a":`, d8), ErrFormat},
		{"json array", file(`[]`, d8), ErrFormat},
		{"trailing garbage", file(`{}x`, d8), ErrFormat},
		{"unknown dtype", file(`{"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}}`, d8), ErrFormat},
		{"size mismatch", file(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, d8), ErrFormat},
		{"past end", file(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, d8), ErrFormat},
		{"negative offset", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, d8), ErrFormat},
		{"reversed offsets", file(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}}`, d8), ErrFormat},
		{"one offset", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`, d8), ErrFormat},
		{"negative dim", file(`{"a":{"dtype":"F32","shape":[-1,-2],"data_offsets":[0,8]}}`, d8), ErrFormat},
		{"overflowing shape", file(`{"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}}`, d8), ErrFormat},
		{"overlap", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, d8), ErrFormat},
		{"bad metadata", file(`{"__metadata__":{"a":1}}`, nil), ErrFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.data); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	f, err := Parse(file(`{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, d8))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ToTensor(&f.Tensors[0], "a"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("F64 import: err = %v, want ErrUnsupported", err)
	}
}

func TestTruncationsFail(t *testing.T) {
	good := sample()
	for n := range len(good) {
		if _, err := Parse(good[:n]); !errors.Is(err, ErrFormat) {
			t.Fatalf("truncated to %d bytes: err = %v", n, err)
		}
	}
}

func TestWriteRoundTrip(t *testing.T) {
	in := []*tensors.Tensor{
		{Name: "w", DType: tensors.F16, Shape: []int{2, 3}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{Name: "s", DType: tensors.F32, Shape: []int{}, Data: []byte{0, 0, 128, 63}},
	}
	var buf bytes.Buffer
	if err := Write(&buf, in, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if hl := binary.LittleEndian.Uint64(buf.Bytes()); hl%8 != 0 {
		t.Errorf("header length %d not padded to 8", hl)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["k"] != "v" {
		t.Errorf("metadata %v", f.Metadata)
	}
	for _, want := range in {
		info := f.Tensor(want.Name)
		if info == nil {
			t.Fatalf("missing %s", want.Name)
		}
		got, _ := f.ToTensor(info, want.Name)
		if got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("%s round trip: %+v", want.Name, got)
		}
	}
	q := &tensors.Tensor{Name: "q", DType: tensors.I8, Shape: []int{1}, Data: []byte{1}}
	if err := Write(&bytes.Buffer{}, []*tensors.Tensor{q}, nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("writing int8: err = %v, want ErrUnsupported", err)
	}
}

func FuzzSafetensors(f *testing.F) {
	f.Add(sample())
	f.Add(sample()[:20])
	f.Add(file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("unwrapped error %v", err)
			}
			return
		}
		for i := range sf.Tensors {
			info := &sf.Tensors[i]
			if tt, err := sf.ToTensor(info, info.Name); err == nil {
				if err := tt.Check(); err != nil {
					t.Fatalf("parsed tensor does not check: %v", err)
				}
			}
		}
	})
}

// TestWriteSeedCorpus regenerates testdata/fuzz/FuzzSafetensors when
// GPURUN_WRITE_CORPUS=1; the committed files are its output.
func TestWriteSeedCorpus(t *testing.T) {
	if os.Getenv("GPURUN_WRITE_CORPUS") != "1" {
		t.Skip("set GPURUN_WRITE_CORPUS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzSafetensors")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"sample": sample(), "sample_truncated": sample()[:30], "empty_header": file(`{}`, nil)} {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBitFlips flips every bit of the sample: parsing never panics, and
// whatever fails wraps ErrFormat; whatever parses still checks.
func TestBitFlips(t *testing.T) {
	good := sample()
	for i := range good {
		for bit := range 8 {
			b := append([]byte(nil), good...)
			b[i] ^= 1 << bit
			f, err := Parse(b)
			if err != nil {
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("flip %d.%d: unwrapped error %v", i, bit, err)
				}
				continue
			}
			for j := range f.Tensors {
				if tt, err := f.ToTensor(&f.Tensors[j], "x"); err == nil && tt.Check() != nil {
					t.Fatalf("flip %d.%d: %v", i, bit, tt.Check())
				}
			}
		}
	}
}
