package tensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// FromF32 builds an F32, F16 or BF16 tensor from float32 values, rounding to
// nearest even for the 16-bit types. data must hold exactly the shape's
// element count.
func FromF32(name string, shape []int, data []float32, dt DType) (*Tensor, error) {
	n, err := checkedElements(shape)
	if err != nil || n != len(data) || hasNegative(shape) {
		return nil, fmt.Errorf("%w: %s: %d values for shape %v", ErrShape, name, len(data), shape)
	}
	var b []byte
	switch dt {
	case F32:
		b = make([]byte, 4*n)
		for i, v := range data {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
	case F16, BF16:
		conv := F16Bits
		if dt == BF16 {
			conv = BF16Bits
		}
		b = make([]byte, 2*n)
		for i, v := range data {
			binary.LittleEndian.PutUint16(b[2*i:], conv(v))
		}
	default:
		return nil, fmt.Errorf("%w: %s: FromF32 cannot produce %s (use Quantize)", ErrDType, name, dt)
	}
	return &Tensor{Name: name, DType: dt, Shape: append([]int(nil), shape...), Data: b}, nil
}

// FromI32 builds an I32 tensor.
func FromI32(name string, shape []int, data []int32) (*Tensor, error) {
	n, err := checkedElements(shape)
	if err != nil || n != len(data) || hasNegative(shape) {
		return nil, fmt.Errorf("%w: %s: %d values for shape %v", ErrShape, name, len(data), shape)
	}
	b := make([]byte, 4*n)
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return &Tensor{Name: name, DType: I32, Shape: append([]int(nil), shape...), Data: b}, nil
}

func hasNegative(shape []int) bool {
	for _, d := range shape {
		if d < 0 {
			return true
		}
	}
	return false
}

// Float32 returns all values of t as float32, dequantizing I8 and I4
// tensors with their scales (value = q * scale) and converting I32 exactly
// where float32 can represent it.
func (t *Tensor) Float32() ([]float32, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	rows, cols := t.Rows(), t.Cols()
	out := make([]float32, rows*cols)
	for r := range rows {
		t.row(r, out[r*cols:(r+1)*cols])
	}
	return out, nil
}

// RowFloat32 writes row r of the tensor viewed as a [Rows, Cols] matrix into
// dst, which must hold Cols values. Only that row is decoded.
func (t *Tensor) RowFloat32(r int, dst []float32) error {
	if err := t.Check(); err != nil {
		return err
	}
	if r < 0 || r >= t.Rows() {
		return fmt.Errorf("%w: %s: row %d of %d", ErrShape, t.Name, r, t.Rows())
	}
	if len(dst) != t.Cols() {
		return fmt.Errorf("%w: %s: row has %d values, dst %d", ErrShape, t.Name, t.Cols(), len(dst))
	}
	t.row(r, dst)
	return nil
}

// row decodes row r into dst; t has passed Check and r is in range.
func (t *Tensor) row(r int, dst []float32) {
	cols := len(dst)
	switch t.DType {
	case F32:
		b := t.Data[4*r*cols:]
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case I32:
		b := t.Data[4*r*cols:]
		for i := range dst {
			dst[i] = float32(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
	case F16, BF16:
		conv := F16Float
		if t.DType == BF16 {
			conv = BF16Float
		}
		b := t.Data[2*r*cols:]
		for i := range dst {
			dst[i] = conv(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case I8:
		b := t.Data[r*cols:]
		for i := range dst {
			dst[i] = float32(int8(b[i]))
		}
		t.applyScales(r, dst)
	case I4:
		b := t.Data[r*cols/2:]
		for i := 0; i < cols; i += 2 {
			dst[i], dst[i+1] = unpackI4(b[i/2])
		}
		t.applyScales(r, dst)
	default:
		if t.DType.Block() {
			rb := t.DType.ByteSize(cols)
			DecodeBlocks(t.DType, t.Data[r*rb:(r+1)*rb], dst)
		}
	}
}

// unpackI4 splits a byte into its two signed nibbles, low nibble first. The
// full two's complement range -8..7 is accepted (GGUF Q4_0 uses -8).
func unpackI4(b byte) (lo, hi float32) {
	return float32(int8(b<<4) >> 4), float32(int8(b) >> 4)
}

// applyScales multiplies the integer values of row r by their scales.
func (t *Tensor) applyScales(r int, dst []float32) {
	block := t.BlockSize()
	nb := len(dst) / block
	for j := range nb {
		s := t.Scales.scaleAt(r*nb + j)
		for i := j * block; i < (j+1)*block; i++ {
			dst[i] *= s
		}
	}
}

// scaleAt reads element i of an F32 or F16 scales tensor.
func (t *Tensor) scaleAt(i int) float32 {
	if t.DType == F16 {
		return F16Float(binary.LittleEndian.Uint16(t.Data[2*i:]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
}
