// Package safetensors reads and writes the safetensors format: an 8-byte
// little-endian header length, a JSON header mapping tensor names to dtype,
// shape and [begin, end) byte offsets into the data that follows, and an
// optional "__metadata__" string map.
package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strings"

	"github.com/gpurun/gpurun/internal/mmap"
	"github.com/gpurun/gpurun/tensors"
)

var (
	// ErrFormat reports a malformed safetensors file.
	ErrFormat = errors.New("safetensors: malformed file")
	// ErrUnsupported reports a dtype that cannot become a tensors.Tensor.
	ErrUnsupported = errors.New("safetensors: unsupported")
)

// maxHeader bounds the JSON header (the reference implementation uses 100 MB).
const maxHeader = 100 << 20

// metadataKey is the reserved header entry holding free-form metadata.
const metadataKey = "__metadata__"

// dtypeSizes are the element sizes of the safetensors dtypes.
var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
	"U16": 2, "I16": 2, "F16": 2, "BF16": 2,
	"U32": 4, "I32": 4, "F32": 4,
	"U64": 8, "I64": 8, "F64": 8,
}

// Our dtypes for the safetensors dtypes we import.
var dtypes = map[string]tensors.DType{"F32": tensors.F32, "F16": tensors.F16, "BF16": tensors.BF16, "I32": tensors.I32}

// TensorInfo is one header entry.
type TensorInfo struct {
	Name  string
	DType string // as in the file: "F32", "BF16", ...
	Shape []int
	Begin int64 // offsets relative to the data section
	End   int64
}

// File is a parsed safetensors file; tensor data aliases the input.
type File struct {
	Metadata map[string]string
	Tensors  []TensorInfo // in data order
	data     []byte       // the data section
}

// Open memory-maps and parses a safetensors file. The mapping stays open for
// the life of the process because tensors alias it.
func Open(path string) (*File, error) {
	m, err := mmap.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := Parse(m.Bytes())
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// headerEntry is the JSON form of a tensor entry.
type headerEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// Parse decodes a whole safetensors file held in data.
func Parse(data []byte) (*File, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%w: %w: %d bytes, no header length", ErrFormat, io.ErrUnexpectedEOF, len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > maxHeader || n > uint64(len(data)-8) {
		return nil, fmt.Errorf("%w: %w: header length %d with %d bytes after it", ErrFormat, io.ErrUnexpectedEOF, n, len(data)-8)
	}
	header := data[8 : 8+n]
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(header))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: header JSON: %w", ErrFormat, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: header is not a JSON object", ErrFormat)
	}
	// Only padding spaces may follow the object.
	if rest := strings.TrimRight(string(header[dec.InputOffset():]), " \t\r\n"); rest != "" {
		return nil, fmt.Errorf("%w: %d bytes after the header object", ErrFormat, len(rest))
	}
	f := &File{data: data[8+n:]}
	for name, msg := range raw {
		if name == metadataKey {
			if err := json.Unmarshal(msg, &f.Metadata); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrFormat, metadataKey, err)
			}
			continue
		}
		var e headerEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %w", ErrFormat, name, err)
		}
		t, err := f.check(name, e)
		if err != nil {
			return nil, err
		}
		f.Tensors = append(f.Tensors, t)
	}
	slices.SortFunc(f.Tensors, func(a, b TensorInfo) int {
		return cmp.Or(cmp.Compare(a.Begin, b.Begin), cmp.Compare(a.End, b.End), strings.Compare(a.Name, b.Name))
	})
	// Tensors must not overlap (and so cannot alias one another's bytes).
	for i := 1; i < len(f.Tensors); i++ {
		if prev := f.Tensors[i-1]; f.Tensors[i].Begin < prev.End {
			return nil, fmt.Errorf("%w: tensors %q and %q overlap", ErrFormat, prev.Name, f.Tensors[i].Name)
		}
	}
	return f, nil
}

// check validates one entry against the data section.
func (f *File) check(name string, e headerEntry) (TensorInfo, error) {
	t := TensorInfo{Name: name, DType: e.DType}
	size, ok := dtypeSizes[e.DType]
	if !ok {
		return t, fmt.Errorf("%w: tensor %q has unknown dtype %q", ErrFormat, name, e.DType)
	}
	if len(e.DataOffsets) != 2 {
		return t, fmt.Errorf("%w: tensor %q needs 2 data_offsets, has %d", ErrFormat, name, len(e.DataOffsets))
	}
	t.Begin, t.End = e.DataOffsets[0], e.DataOffsets[1]
	if t.Begin < 0 || t.End < t.Begin || t.End > int64(len(f.data)) {
		return t, fmt.Errorf("%w: %w: tensor %q bytes [%d, %d) outside the %d-byte data section", ErrFormat, io.ErrUnexpectedEOF, name, t.Begin, t.End, len(f.data))
	}
	// The element count must match the byte range, checked without overflow.
	count := uint64(1)
	t.Shape = make([]int, len(e.Shape))
	for i, d := range e.Shape {
		if d < 0 || d > 1<<40 {
			return t, fmt.Errorf("%w: tensor %q dimension %d", ErrFormat, name, d)
		}
		hi, lo := bits.Mul64(count, uint64(d))
		if hi != 0 || lo > uint64(len(f.data)) {
			return t, fmt.Errorf("%w: tensor %q shape %v larger than the file", ErrFormat, name, e.Shape)
		}
		count = lo
		t.Shape[i] = int(d)
	}
	if count*uint64(size) != uint64(t.End-t.Begin) {
		return t, fmt.Errorf("%w: tensor %q: %s%v needs %d bytes, offsets give %d", ErrFormat, name, e.DType, e.Shape, count*uint64(size), t.End-t.Begin)
	}
	return t, nil
}

// Tensor returns the entry with the given name, or nil.
func (f *File) Tensor(name string) *TensorInfo {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			return &f.Tensors[i]
		}
	}
	return nil
}

// Data returns the bytes of t, aliasing the file.
func (f *File) Data(t *TensorInfo) []byte {
	return f.data[t.Begin:t.End:t.End]
}

// ToTensor returns t as a tensors.Tensor named name whose data aliases the
// file. F32, F16, BF16 and I32 map directly; other dtypes are ErrUnsupported.
func (f *File) ToTensor(t *TensorInfo, name string) (*tensors.Tensor, error) {
	dt, ok := dtypes[t.DType]
	if !ok {
		return nil, fmt.Errorf("%w: tensor %q has dtype %s", ErrUnsupported, t.Name, t.DType)
	}
	return &tensors.Tensor{Name: name, DType: dt, Shape: slices.Clone(t.Shape), Data: f.Data(t)}, nil
}
