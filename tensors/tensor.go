package tensors

import (
	"errors"
	"fmt"
)

// ErrShape reports a tensor whose shape, type and byte size disagree.
var ErrShape = errors.New("tensors: bad shape")

// Tensor is a named host tensor. Data is little-endian and may alias a
// memory-mapped file, so it must be treated as read-only.
//
// Matrices are stored row-major as [out, in] (the PyTorch nn.Linear and GGUF
// order): row r holds the weights of output channel r, so per-channel scales
// index rows and quantization blocks run along the contiguous input dimension.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte

	// Scales is set for I8 and I4 tensors: symmetric quantization, value =
	// q * scale. Its shape is [rows] for per-output-channel scales or
	// [rows, cols/block] for block-wise scales; its DType is F32 or F16.
	Scales *Tensor

	// Source, when set on a tensor whose Data is nil, produces Data (and
	// Scales): a loader that streams weights (gpurun-web reading the page's
	// file) defers each tensor's bytes until a backend takes it. Backends
	// call Fill before they read Data; a GPU backend drops the bytes again
	// once they are on the device, so the file never sits whole in host
	// memory.
	Source func(*Tensor) error
}

// Deferred reports a tensor whose Source has yet to produce its Data.
func (t *Tensor) Deferred() bool { return t.Data == nil && t.Source != nil }

// Fill runs Source when the tensor is deferred, then checks the result.
func (t *Tensor) Fill() error {
	if !t.Deferred() {
		return nil
	}
	if err := t.Source(t); err != nil {
		return fmt.Errorf("tensors: reading %s: %w", t.Name, err)
	}
	if t.Data == nil {
		return fmt.Errorf("%w: %s: its source produced no data", ErrShape, t.Name)
	}
	return t.Check()
}

// Drop releases the bytes Fill read (Data and Scales) of a tensor with a
// Source, leaving it deferred again; it does nothing to other tensors.
func (t *Tensor) Drop() {
	if t.Source != nil {
		t.Data, t.Scales = nil, nil
	}
}

// NumElements is the product of the shape (1 for a scalar).
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Rows and Cols view the tensor as a matrix: the last dimension is Cols and
// all leading dimensions fold into Rows.
func (t *Tensor) Rows() int {
	if len(t.Shape) == 0 {
		return 1
	}
	return t.NumElements() / max(t.Shape[len(t.Shape)-1], 1)
}

// Cols is the size of the last (contiguous) dimension.
func (t *Tensor) Cols() int {
	if len(t.Shape) == 0 {
		return 1
	}
	return t.Shape[len(t.Shape)-1]
}

// BlockSize is the number of consecutive elements of a row that share one
// scale: Cols for per-channel quantization, 0 for unquantized tensors.
func (t *Tensor) BlockSize() int {
	if t.Scales == nil {
		return 0
	}
	if len(t.Scales.Shape) == 2 && t.Scales.Shape[1] > 0 {
		return t.Cols() / t.Scales.Shape[1]
	}
	return t.Cols()
}

// Check verifies that shape, type, byte size and scales agree.
func (t *Tensor) Check() error {
	if !t.DType.Valid() {
		return fmt.Errorf("%w: %s: invalid dtype %d", ErrShape, t.Name, t.DType)
	}
	for _, d := range t.Shape {
		if d < 0 || d > 1<<40 {
			return fmt.Errorf("%w: %s: dimension %d", ErrShape, t.Name, d)
		}
	}
	n, err := checkedElements(t.Shape)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrShape, t.Name, err)
	}
	if want := t.DType.ByteSize(n); len(t.Data) != want {
		return fmt.Errorf("%w: %s: %s%v needs %d bytes, have %d", ErrShape, t.Name, t.DType, t.Shape, want, len(t.Data))
	}
	if t.DType.Quantized() != (t.Scales != nil) {
		return fmt.Errorf("%w: %s: %s tensor with scales=%v", ErrShape, t.Name, t.DType, t.Scales != nil)
	}
	if bl := t.DType.BlockLen(); bl > 0 && t.Cols()%bl != 0 {
		return fmt.Errorf("%w: %s: %s rows of %d are not whole blocks of %d", ErrShape, t.Name, t.DType, t.Cols(), bl)
	}
	if t.Scales == nil {
		return nil
	}
	s := t.Scales
	if s.DType != F32 && s.DType != F16 {
		return fmt.Errorf("%w: %s: scales must be f32 or f16, not %s", ErrShape, t.Name, s.DType)
	}
	if err := s.Check(); err != nil {
		return err
	}
	rows, cols := t.Rows(), t.Cols()
	switch {
	case len(s.Shape) == 1 && s.Shape[0] == rows:
	case len(s.Shape) == 2 && s.Shape[0] == rows && s.Shape[1] > 0 && cols%s.Shape[1] == 0:
		if t.DType == I4 && (cols/s.Shape[1])%2 != 0 {
			return fmt.Errorf("%w: %s: int4 block size must be even", ErrShape, t.Name)
		}
	default:
		return fmt.Errorf("%w: %s: scales shape %v does not fit %v", ErrShape, t.Name, s.Shape, t.Shape)
	}
	if t.DType == I4 && cols%2 != 0 {
		return fmt.Errorf("%w: %s: int4 rows must have an even length", ErrShape, t.Name)
	}
	return nil
}

// checkedElements multiplies dims, failing on overflow past 2^48 elements.
func checkedElements(shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d != 0 && n > (1<<48)/d {
			return 0, errors.New("too many elements")
		}
		n *= d
	}
	return n, nil
}
