package tensors

import (
	"errors"
	"fmt"
	"math"
)

var (
	// ErrDType reports an element type an operation does not support.
	ErrDType = errors.New("tensors: unsupported dtype")
	// ErrRange reports values that cannot be represented: NaN, infinities, or
	// scales beyond the scale type's range.
	ErrRange = errors.New("tensors: value out of range")
)

// Largest quantized magnitude: symmetric, so -128 and -8 are never produced
// (dequantization still accepts them).
const (
	maxI8 = 127
	maxI4 = 7
)

// Quantize stores data (shape's element count, row-major [rows, cols]) as
// symmetric I8 or I4 with one scale per row (block = 0) or per block of
// `block` consecutive elements of a row. Scales are F32 or F16; each is
// maxabs/127 (I8) or maxabs/7 (I4) of its group, rounded up to the scale type
// so that no value clips, and an all-zero group gets scale 0. The returned
// tensor carries its scales named ScaleName(name) by the caller's convention
// (name + "_quantized_scale").
func Quantize(name string, shape []int, data []float32, dt DType, block int, scaleType DType) (*Tensor, error) {
	var qmax int
	switch dt {
	case I8:
		qmax = maxI8
	case I4:
		qmax = maxI4
	default:
		return nil, fmt.Errorf("%w: %s: cannot quantize to %s", ErrDType, name, dt)
	}
	if scaleType != F32 && scaleType != F16 {
		return nil, fmt.Errorf("%w: %s: scale type %s (want f32 or f16)", ErrDType, name, scaleType)
	}
	n, err := checkedElements(shape)
	if err != nil || n != len(data) || hasNegative(shape) {
		return nil, fmt.Errorf("%w: %s: %d values for shape %v", ErrShape, name, len(data), shape)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: %s: nothing to quantize in shape %v", ErrShape, name, shape)
	}
	t := &Tensor{Name: name, DType: dt, Shape: append([]int(nil), shape...)}
	rows, cols := t.Rows(), t.Cols()
	if dt == I4 && cols%2 != 0 {
		return nil, fmt.Errorf("%w: %s: int4 rows must have an even length, have %d", ErrShape, name, cols)
	}
	perRow := block == 0
	if perRow {
		block = cols
	}
	if !perRow && (block < 0 || block > cols || cols%block != 0 || (dt == I4 && block%2 != 0)) {
		return nil, fmt.Errorf("%w: %s: block %d does not divide rows of %d (int4 needs even blocks)", ErrShape, name, block, cols)
	}
	nb := 1
	if block > 0 {
		nb = cols / block
	}
	scaleShape := []int{rows}
	if !perRow {
		scaleShape = []int{rows, nb}
	}
	scales := make([]float32, rows*nb)
	t.Data = make([]byte, dt.ByteSize(n))
	for g := range scales {
		vals := data[g*block : (g+1)*block]
		s, err := groupScale(vals, qmax, scaleType)
		if err != nil {
			return nil, fmt.Errorf("%s: group %d: %w", name, g, err)
		}
		scales[g] = s
		quantizeGroup(t.Data, g*block, vals, s, qmax, dt)
	}
	sc, err := FromF32(name+"_quantized_scale", scaleShape, scales, scaleType)
	if err != nil {
		return nil, err
	}
	t.Scales = sc
	return t, nil
}

// groupScale returns the stored scale of one group: maxabs/qmax rounded up to
// a scaleType value, so that round(v/scale) never exceeds qmax.
func groupScale(vals []float32, qmax int, scaleType DType) (float32, error) {
	var maxabs float32
	for _, v := range vals {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return 0, fmt.Errorf("%w: %v", ErrRange, v)
		}
		maxabs = max(maxabs, float32(math.Abs(float64(v))))
	}
	if maxabs == 0 {
		return 0, nil
	}
	s := maxabs / float32(qmax)
	if s == 0 { // maxabs is a tiny subnormal
		s = math.SmallestNonzeroFloat32
	}
	if scaleType == F16 {
		h := F16Bits(s)
		if F16Float(h) < s {
			h++ // positive f16 bit patterns order like their values
		}
		if h >= 0x7c00 {
			return 0, fmt.Errorf("%w: scale %g exceeds f16", ErrRange, s)
		}
		if h == 0 {
			h = 1
		}
		s = F16Float(h)
	}
	// Guard against v/s rounding past qmax when s itself was rounded down by
	// the float32 division.
	for maxabs/s > float32(qmax)+0.5 {
		s = math.Nextafter32(s, float32(math.Inf(1)))
	}
	return s, nil
}

// quantizeGroup writes round(v/s) for the values of one group, starting at
// element index first of dst.
func quantizeGroup(dst []byte, first int, vals []float32, s float32, qmax int, dt DType) {
	for i, v := range vals {
		var q int
		if s != 0 {
			q = int(math.Round(float64(v / s)))
			q = min(max(q, -qmax), qmax)
		}
		e := first + i
		if dt == I8 {
			dst[e] = byte(int8(q))
			continue
		}
		nib := byte(q) & 0x0f
		if e%2 == 0 {
			dst[e/2] = dst[e/2]&0xf0 | nib
		} else {
			dst[e/2] = dst[e/2]&0x0f | nib<<4
		}
	}
}
