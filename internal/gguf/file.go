// Package gguf reads llama.cpp's GGUF files (versions 2 and 3): a header,
// typed metadata, tensor infos and aligned tensor data. The parser checks
// every length and offset against the file size before using or allocating
// for it, so malformed input yields an error wrapping ErrFormat.
package gguf

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"unicode/utf8"

	"github.com/gpurun/gpurun/internal/mmap"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment applies when general.alignment is absent.
const DefaultAlignment = 32

// maxDims is ggml's GGML_MAX_DIMS.
const maxDims = 4

var (
	// ErrFormat reports a malformed GGUF file.
	ErrFormat = errors.New("gguf: malformed file")
	// ErrUnsupported reports a well-formed file using something this package
	// does not implement (a version, tensor type, architecture or tensor).
	ErrUnsupported = errors.New("gguf: unsupported")
)

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor. Dims are in ggml order: Dims[0] (ne0) is
// the contiguous dimension, so a matrix is [in, out].
type TensorInfo struct {
	Name   string
	Dims   []int
	Type   GGMLType
	Offset int64 // relative to the start of the data section
	Size   int64 // bytes; 0 for types the package does not know
}

// Elements is the number of elements.
func (t *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// File is a parsed GGUF file. Its values and tensor data alias the input.
type File struct {
	Version    uint32
	KV         []KV
	Tensors    []TensorInfo
	Alignment  int
	DataOffset int64 // absolute offset of the data section

	data  []byte
	size  int64    // the file's size: len(data), or more for a header-only parse
	read  ReadFunc // a header-only parse's source of tensor bytes
	index map[string]int
}

// ReadFunc reads n bytes of the file from offset off into a new slice.
type ReadFunc func(off, n int64) ([]byte, error)

// Open memory-maps and parses the file at path. The mapping stays open for
// the life of the process because tensors alias it.
func Open(path string) (*File, error) {
	m, err := mmap.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := Parse(m.Bytes())
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Parse decodes a whole GGUF file held in data.
func Parse(data []byte) (*File, error) {
	return parse(data, int64(len(data)), nil)
}

// ParseHead decodes a GGUF file of size bytes from its head, which must
// reach the data section (a shorter head fails with an error wrapping
// io.ErrUnexpectedEOF: read more and retry), and reads tensor bytes with
// read when they are needed. Its checkpoint's tensors are deferred
// (tensors.Tensor.Source): each is read, and converted, when a backend
// takes it, so a loader can stream a file larger than it could hold.
func ParseHead(head []byte, size int64, read ReadFunc) (*File, error) {
	if read == nil {
		return nil, fmt.Errorf("gguf: ParseHead without a read function")
	}
	if int64(len(head)) > size {
		return nil, fmt.Errorf("%w: a %d-byte head of a %d-byte file", ErrFormat, len(head), size)
	}
	return parse(head, size, read)
}

func parse(data []byte, size int64, read ReadFunc) (*File, error) {
	r := &reader{data: data}
	magic, err := r.bytes(4, "magic")
	if err != nil {
		return nil, err
	}
	if string(magic) != Magic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrFormat, magic)
	}
	f := &File{data: data, size: size, read: read, Alignment: DefaultAlignment}
	if f.Version, err = r.u32("version"); err != nil {
		return nil, err
	}
	if f.Version != 2 && f.Version != 3 {
		return nil, fmt.Errorf("%w: GGUF version %d (want 2 or 3)", ErrUnsupported, f.Version)
	}
	// A tensor info takes at least 8 (name length) + 4 (n_dims) + 4 (type) + 8
	// (offset) bytes, a KV at least 8 (key length) + 4 (type) + 1.
	nTensors, err := r.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := r.count("metadata count", 13)
	if err != nil {
		return nil, err
	}
	if err := f.readKV(r, nKV); err != nil {
		return nil, err
	}
	if nTensors > uint64(r.remaining()/24) {
		return nil, fmt.Errorf("%w: %w: %d tensor infos cannot fit in the %d bytes left", ErrFormat, io.ErrUnexpectedEOF, nTensors, r.remaining())
	}
	if err := f.readTensorInfos(r, int(nTensors)); err != nil {
		return nil, err
	}
	if v, ok := f.Get("general.alignment"); ok {
		a, ok := v.Int()
		if !ok || a <= 0 || a > 1<<20 || a&(a-1) != 0 {
			return nil, fmt.Errorf("%w: general.alignment %s is not a power of two", ErrFormat, v)
		}
		f.Alignment = int(a)
	}
	// The data section starts at the next multiple of the alignment.
	f.DataOffset = alignUp(int64(r.off), int64(f.Alignment))
	if f.DataOffset > size && len(f.Tensors) > 0 {
		return nil, fmt.Errorf("%w: %w: data section at %d beyond the %d-byte file", ErrFormat, io.ErrUnexpectedEOF, f.DataOffset, size)
	}
	return f, f.checkTensors()
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

func (f *File) readKV(r *reader, n int) error {
	// Capacity is capped: the count is bounded by the bytes left, but each
	// entry costs more memory than its minimal encoding.
	f.KV = make([]KV, 0, min(n, 1024))
	f.index = make(map[string]int, min(n, 1024))
	for i := range n {
		key, err := r.str("metadata key")
		if err != nil {
			return fmt.Errorf("metadata %d: %w", i, err)
		}
		if !utf8.Valid(key) {
			return fmt.Errorf("%w: metadata %d: key is not UTF-8", ErrFormat, i)
		}
		t, err := r.u32("metadata value type")
		if err != nil {
			return fmt.Errorf("metadata %q: %w", key, err)
		}
		v, err := readValue(r, ValueType(t), 0)
		if err != nil {
			return fmt.Errorf("metadata %q: %w", key, err)
		}
		k := string(key)
		if _, dup := f.index[k]; dup {
			return fmt.Errorf("%w: duplicate metadata key %q", ErrFormat, k)
		}
		f.index[k] = len(f.KV)
		f.KV = append(f.KV, KV{Key: k, Value: v})
	}
	return nil
}

func (f *File) readTensorInfos(r *reader, n int) error {
	f.Tensors = make([]TensorInfo, 0, min(n, 1024))
	seen := make(map[string]bool, min(n, 1024))
	for i := range n {
		f.Tensors = append(f.Tensors, TensorInfo{})
		t := &f.Tensors[i]
		name, err := r.str("tensor name")
		if err != nil {
			return fmt.Errorf("tensor %d: %w", i, err)
		}
		t.Name = string(name)
		if seen[t.Name] {
			return fmt.Errorf("%w: duplicate tensor %q", ErrFormat, t.Name)
		}
		seen[t.Name] = true
		nd, err := r.u32("tensor n_dims")
		if err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if nd == 0 || nd > maxDims {
			return fmt.Errorf("%w: tensor %q has %d dims", ErrFormat, t.Name, nd)
		}
		t.Dims = make([]int, nd)
		for d := range t.Dims {
			v, err := r.u64("tensor dim")
			if err != nil {
				return fmt.Errorf("tensor %q: %w", t.Name, err)
			}
			// No dimension can exceed the file's byte count (every type
			// takes at least 2 bytes per block of at most 32 elements).
			if v == 0 || v > uint64(f.size)*QK {
				return fmt.Errorf("%w: tensor %q dim %d = %d", ErrFormat, t.Name, d, v)
			}
			t.Dims[d] = int(v)
		}
		typ, err := r.u32("tensor type")
		if err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		t.Type = GGMLType(typ)
		off, err := r.u64("tensor offset")
		if err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if off > uint64(f.size) {
			return fmt.Errorf("%w: tensor %q offset %d beyond the file", ErrFormat, t.Name, off)
		}
		t.Offset = int64(off)
	}
	return nil
}

// checkTensors sizes every tensor of a known type and checks that it lies,
// aligned, inside the data section.
func (f *File) checkTensors() error {
	avail := f.size - f.DataOffset
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset%int64(f.Alignment) != 0 {
			return fmt.Errorf("%w: tensor %q offset %d not aligned to %d", ErrFormat, t.Name, t.Offset, f.Alignment)
		}
		ti, ok := ggmlTypes[t.Type]
		if !ok {
			continue // sized lazily: importing it reports ErrUnsupported
		}
		n := int64(1)
		for _, d := range t.Dims {
			hi, lo := bits.Mul64(uint64(n), uint64(d))
			if hi != 0 || lo > uint64(avail)*QK {
				return fmt.Errorf("%w: %w: tensor %q %v does not fit in the file", ErrFormat, io.ErrUnexpectedEOF, t.Name, t.Dims)
			}
			n = int64(lo)
		}
		if t.Dims[0]%ti.blockLen != 0 {
			return fmt.Errorf("%w: tensor %q: %s rows of %d are not whole blocks of %d", ErrFormat, t.Name, ti.name, t.Dims[0], ti.blockLen)
		}
		t.Size = n / int64(ti.blockLen) * int64(ti.blockBytes)
		if t.Offset > avail || t.Size > avail-t.Offset {
			return fmt.Errorf("%w: %w: tensor %q needs bytes [%d, %d) of a %d-byte data section", ErrFormat, io.ErrUnexpectedEOF, t.Name, t.Offset, t.Offset+t.Size, avail)
		}
	}
	return nil
}

// Get returns the metadata value for key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.index[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// Architecture is general.architecture.
func (f *File) Architecture() string {
	v, _ := f.Get("general.architecture")
	s, _ := v.Str()
	return s
}

// TensorData returns the bytes of tensor t (aliasing the file).
func (f *File) TensorData(t *TensorInfo) ([]byte, error) {
	if !t.Type.Known() {
		return nil, fmt.Errorf("%w: tensor %q has ggml type %s", ErrUnsupported, t.Name, t.Type)
	}
	start := f.DataOffset + t.Offset
	if f.read != nil {
		b, err := f.read(start, t.Size)
		if err != nil {
			return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
		}
		if int64(len(b)) != t.Size {
			return nil, fmt.Errorf("%w: %w: tensor %q: read %d of %d bytes", ErrFormat, io.ErrUnexpectedEOF, t.Name, len(b), t.Size)
		}
		return b, nil
	}
	return f.data[start : start+t.Size : start+t.Size], nil
}

// Tensor returns the info of the tensor with the given name.
func (f *File) Tensor(name string) *TensorInfo {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			return &f.Tensors[i]
		}
	}
	return nil
}
