package compute

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors"
)

// wtCodes maps stored dtypes to the kernels' weight type codes.
var wtCodes = map[tensors.DType]shaders.WeightType{
	tensors.F32: shaders.WeightF32, tensors.F16: shaders.WeightF16, tensors.BF16: shaders.WeightBF16,
	tensors.I8: shaders.WeightI8, tensors.I4: shaders.WeightI4,
}

// chunk is a block of consecutive rows of a weight in one buffer, small
// enough for one binding.
type chunk struct {
	rowBase, rows int
	// w holds the rows and, for a quantized weight, their scales after
	// them: sLen bytes (whole 16-byte chunks) from sOff, a multiple of the
	// device's binding offset alignment. One buffer a chunk keeps the
	// fused kernels within the storage bindings a stage may have
	// (lanes_rope_kv reads the scales of Wq, Wk and Wv from their rows'
	// bindings); kernels with a scale binding bind scales().
	w          gpu.Buffer
	sOff, sLen int64
}

// scales is the binding of a quantized chunk's scales.
func (c chunk) scales() gpu.Binding { return gpu.Binding{Buf: c.w, Offset: c.sOff, Size: c.sLen} }

// weight is one uploaded tensor viewed as a matrix. Vectors (one row: norm
// weights, biases) are widened to f32 on upload, since kernels read them
// directly; matrices keep their stored type and are dequantized in the
// kernels.
type weight struct {
	name        string
	shape       []int
	wt          shaders.WeightType
	qt          shaders.BlockType // llama.cpp block type (qblocks.go); BlockNone for the other types
	st          shaders.ScaleType
	quant       bool
	rows, cols  int
	block, nblk int // elements per scale and scales per row (cols, 1 unquantized)
	chunks      []chunk
}

type weights struct {
	byName map[string]*weight
	// grid holds the I-quant lookup tables (gridWords) once a weight of a
	// grid type is loaded; nil otherwise.
	grid gpu.Buffer
}

func (w *weights) Release() {
	if w.grid != nil {
		w.grid.Release()
		w.grid = nil
	}
	for _, t := range w.byName {
		for _, c := range t.chunks {
			c.w.Release()
		}
	}
	w.byName = nil
}

// LoadWeights uploads every tensor once.
func (b *backend) LoadWeights(ctx context.Context, ts []*tensors.Tensor) (gpu.Weights, error) {
	ws := &weights{byName: map[string]*weight{}}
	for _, t := range ts {
		if err := ctx.Err(); err != nil {
			ws.Release()
			return nil, err
		}
		if t == nil {
			ws.Release()
			return nil, fmt.Errorf("compute: nil tensor")
		}
		if _, dup := ws.byName[t.Name]; dup {
			ws.Release()
			return nil, fmt.Errorf("compute: tensor %q given twice", t.Name)
		}
		w, err := b.upload(t)
		if err != nil {
			ws.Release()
			return nil, fmt.Errorf("compute: load %q: %w", t.Name, err)
		}
		ws.byName[t.Name] = w
		if gridTypes[w.qt] && ws.grid == nil {
			words, err := gridWords()
			if err == nil {
				ws.grid, err = b.newFilled(words)
			}
			if err != nil {
				ws.Release()
				return nil, fmt.Errorf("compute: the I-quant tables for %q: %w", t.Name, err)
			}
		}
	}
	return ws, nil
}

func (b *backend) upload(t *tensors.Tensor) (*weight, error) {
	if t.Deferred() {
		// A streamed tensor: read it now, and let its bytes go once they
		// are in device buffers.
		if err := t.Fill(); err != nil {
			return nil, err
		}
		defer t.Drop()
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	if t.DType == tensors.I32 {
		return nil, fmt.Errorf("int32 weights: %w", gpu.ErrUnsupported)
	}
	w := &weight{name: t.Name, shape: append([]int(nil), t.Shape...), rows: t.Rows(), cols: t.Cols()}
	if w.rows == 0 || w.cols == 0 {
		return nil, fmt.Errorf("empty tensor %v: %w", t.Shape, gpu.ErrUnsupported)
	}
	if w.rows == 1 {
		vals, err := t.Float32()
		if err != nil {
			return nil, err
		}
		buf, err := b.newFilled(f32Bytes(vals))
		if err != nil {
			return nil, err
		}
		w.wt, w.block, w.nblk = shaders.WeightF32, w.cols, 1
		w.chunks = []chunk{{rowBase: 0, rows: 1, w: buf}}
		return w, nil
	}
	wt, ok := wtCodes[t.DType]
	qt, isBlock := qtCodes[t.DType]
	if !ok && !isBlock {
		return nil, fmt.Errorf("%s weights: %w", t.DType, gpu.ErrUnsupported)
	}
	w.wt, w.qt = wt, qt
	w.block, w.nblk = w.cols, 1
	if t.Scales != nil {
		w.quant = true
		w.block = t.BlockSize()
		w.nblk = w.cols / w.block
		if t.Scales.DType == tensors.F16 {
			w.st = shaders.ScaleF16
		}
	}
	rowBytes := int64(t.DType.ByteSize(w.cols))
	if t.DType == tensors.I4 && w.cols%2 != 0 {
		return nil, fmt.Errorf("int4 rows of odd length: %w", gpu.ErrUnsupported)
	}
	// Rows per chunk: as many as fit one binding, a multiple of the rows
	// that end on a 4-byte boundary so each chunk starts on a word.
	step := int64(1)
	if rowBytes%4 != 0 {
		step = int64(4 / gcd(int(rowBytes%4), 4))
	}
	per := b.maxBinding / rowBytes / step * step
	// A quantized chunk's scales follow its rows in its buffer, which the
	// rows' binding covers whole: rows, padding to the scales' aligned
	// offset and scales within the device's binding limit.
	align := b.offsetAlign()
	if w.quant {
		scaleRow := int64(w.nblk * t.Scales.DType.ByteSize(1))
		per = min(per, max(b.devBinding-align-32, 0)/(rowBytes+scaleRow)/step*step)
	}
	// And few enough rows that the decode kernels' row groups (as few as
	// shaders.MatMulShape.LanesRows rows each) fit one dispatch dimension:
	// a 262144-row int4 embedding (Gemma 3) fits a 128 MiB binding but
	// not 65535 groups of 4 rows.
	per = min(per, int64(maxDispatch*shaders.MatMulVariant{}.Shape().LanesRows)/step*step)
	if per == 0 {
		return nil, fmt.Errorf("a row of %d bytes exceeds the binding limit %d: %w", rowBytes, b.maxBinding, gpu.ErrUnsupported)
	}
	for r0 := 0; r0 < w.rows; r0 += int(per) {
		n := min(int(per), w.rows-r0)
		rows := t.Data[int64(r0)*rowBytes : int64(r0+n)*rowBytes]
		c := chunk{rowBase: r0, rows: n}
		var err error
		if w.quant {
			sc := scaleBytes(t.Scales, r0*w.nblk, n*w.nblk)
			c.sOff = (align16(int64(len(rows))) + align - 1) / align * align
			c.sLen = max(align16(int64(len(sc))), 16)
			c.w, err = b.newFilledParts(c.sOff+c.sLen, rows, c.sOff, sc)
		} else {
			c.w, err = b.newFilled(rows)
		}
		if err != nil {
			w.release()
			return nil, err
		}
		w.chunks = append(w.chunks, c)
	}
	return w, nil
}

func (w *weight) release() {
	for _, c := range w.chunks {
		c.w.Release()
	}
	w.chunks = nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// scaleBytes returns scales [first, first+n) as their own little-endian
// array, so a chunk's scales start at element 0 of their buffer.
func scaleBytes(s *tensors.Tensor, first, n int) []byte {
	size := s.DType.ByteSize(1)
	return s.Data[first*size : (first+n)*size]
}

// newFilled uploads data into a new buffer (padded to whole 16-byte
// chunks, which the matmul kernels read).
func (b *backend) newFilled(data []byte) (gpu.Buffer, error) {
	return b.newFilledParts(max(align16(int64(len(data))), 16), data, 0, nil)
}

// newFilledParts uploads data at 0 and more at byte off (a multiple of 4
// past data) into a new zeroed buffer of size bytes.
func (b *backend) newFilledParts(size int64, data []byte, off int64, more []byte) (gpu.Buffer, error) {
	buf, err := b.dev.NewBuffer(size)
	if err != nil {
		return nil, err
	}
	if err = b.writeWords(buf, 0, data); err == nil && len(more) > 0 {
		err = b.writeWords(buf, off, more)
	}
	if err != nil {
		buf.Release()
		return nil, err
	}
	return buf, nil
}

// writeWords writes data at byte off of buf, its last partial word
// zero-padded (device writes are of whole words).
func (b *backend) writeWords(buf gpu.Buffer, off int64, data []byte) error {
	whole := int64(len(data)) &^ 3
	if whole > 0 {
		if err := b.dev.Write(buf, off, data[:whole]); err != nil {
			return err
		}
	}
	if tail := data[whole:]; len(tail) > 0 {
		var word [4]byte
		copy(word[:], tail)
		return b.dev.Write(buf, off+whole, word[:])
	}
	return nil
}

// offsetAlign is the device's storage binding offset alignment (256, the
// largest WebGPU allows, when it does not say).
func (b *backend) offsetAlign() int64 {
	if a := int64(b.devCaps.StorageOffsetAlign); a > 0 {
		return a
	}
	return 256
}

func align4(n int64) int64 { return (n + 3) &^ 3 }

func align16(n int64) int64 { return (n + 15) &^ 15 }

func f32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}
