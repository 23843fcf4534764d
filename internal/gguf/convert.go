package gguf

import (
	"fmt"
	"slices"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// toTensor converts a GGUF tensor into ours, named name. Shapes reverse ggml's
// [ne0=in, ne1=out] into row-major [out, in]. F32, F16 and BF16 data alias the
// file. Q8_0 and Q4_0 matrices become I8 / I4 with block-32 F16 scales; the
// values are regrouped (blocks interleave scales and values) but not
// changed. Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4, the
// I-quants (IQ1_S ... IQ4_XS), NVFP4, TQ1_0 and TQ2_0 keep their
// blocks as they are (tensors block types), aliasing the file, and so do
// Q8_0 tensors of three dimensions (stacked experts, tensors.Q8_0): a
// regrouped copy of them would hold a mixture of experts in memory, where
// the mapped file lets the OS page in only the experts a token uses.
func (f *File) toTensor(info *TensorInfo, name string) (*tensors.Tensor, error) {
	if f.read == nil {
		return f.readTensor(info, name)
	}
	// A header-only parse: the tensor is read and converted when a backend
	// takes it.
	var dt tensors.DType
	switch info.Type {
	case GGMLF32:
		dt = tensors.F32
	case GGMLF16:
		dt = tensors.F16
	case GGMLBF16:
		dt = tensors.BF16
	case GGMLQ8_0:
		dt = tensors.I8
		if len(info.Dims) == 3 {
			dt = tensors.Q8_0
		}
	case GGMLQ4_0:
		dt = tensors.I4
	default:
		if dt = ggmlTypes[info.Type].dtype; !dt.Block() {
			return nil, fmt.Errorf("%w: tensor %q has ggml type %s", ErrUnsupported, info.Name, info.Type)
		}
	}
	shape := slices.Clone(info.Dims)
	slices.Reverse(shape)
	return &tensors.Tensor{Name: name, DType: dt, Shape: shape, Source: func(t *tensors.Tensor) error {
		r, err := f.readTensor(info, t.Name)
		if err != nil {
			return err
		}
		t.Data, t.Scales = r.Data, r.Scales
		return nil
	}}, nil
}

// readTensor reads and converts one tensor now.
func (f *File) readTensor(info *TensorInfo, name string) (*tensors.Tensor, error) {
	data, err := f.TensorData(info)
	if err != nil {
		return nil, err
	}
	shape := slices.Clone(info.Dims)
	slices.Reverse(shape)
	t := &tensors.Tensor{Name: name, Shape: shape}
	switch info.Type {
	case GGMLF32:
		t.DType, t.Data = tensors.F32, data
	case GGMLF16:
		t.DType, t.Data = tensors.F16, data
	case GGMLBF16:
		t.DType, t.Data = tensors.BF16, data
	case GGMLQ8_0:
		if len(info.Dims) == 3 {
			t.DType, t.Data = tensors.Q8_0, data // stacked experts: kept mapped
			break
		}
		t.DType = tensors.I8
		t.Data, t.Scales = splitQ8_0(data, info.Dims[0])
	case GGMLQ4_0:
		t.DType = tensors.I4
		t.Data, t.Scales = splitQ4_0(data, info.Dims[0])
	default:
		dt := ggmlTypes[info.Type].dtype
		if !dt.Block() {
			return nil, fmt.Errorf("%w: tensor %q has ggml type %s", ErrUnsupported, info.Name, info.Type)
		}
		t.DType, t.Data = dt, data // blocks kept bit for bit
	}
	if t.Scales != nil {
		t.Scales.Name = model.ScaleName(name)
	}
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("%w: tensor %q: %w", ErrFormat, info.Name, err)
	}
	return t, nil
}

// blockScales allocates the [rows, cols/QK] F16 scales tensor of n blocks.
func blockScales(nBlocks, cols int) *tensors.Tensor {
	return &tensors.Tensor{
		DType: tensors.F16,
		Shape: []int{nBlocks * QK / cols, cols / QK},
		Data:  make([]byte, 2*nBlocks),
	}
}

// splitQ8_0 separates Q8_0 blocks (f16 d, then 32 int8) into the int8 values
// and their F16 scales; both are byte copies, so the import is lossless.
func splitQ8_0(data []byte, cols int) ([]byte, *tensors.Tensor) {
	const bs = 2 + QK
	n := len(data) / bs
	q := make([]byte, n*QK)
	s := blockScales(n, cols)
	for b := range n {
		blk := data[b*bs : (b+1)*bs]
		copy(s.Data[2*b:], blk[:2])
		copy(q[b*QK:], blk[2:])
	}
	return q, s
}

// splitQ4_0 separates Q4_0 blocks (f16 d, then 16 bytes where byte j holds
// element j in its low nibble and element j+16 in its high nibble, value
// (n-8)*d) into our int4 packing: element 2k in the low nibble of byte k,
// 2k+1 in the high nibble, as signed two's complement nibbles. n-8 taken
// modulo 16 is n^8, so each nibble is flipped in its top bit and moved.
func splitQ4_0(data []byte, cols int) ([]byte, *tensors.Tensor) {
	const bs = 2 + QK/2
	n := len(data) / bs
	q := make([]byte, n*QK/2)
	s := blockScales(n, cols)
	var vals [QK]byte
	for b := range n {
		blk := data[b*bs : (b+1)*bs]
		copy(s.Data[2*b:], blk[:2])
		for j, c := range blk[2:] {
			vals[j] = (c & 0xf) ^ 8
			vals[j+QK/2] = (c >> 4) ^ 8
		}
		out := q[b*QK/2:]
		for k := range QK / 2 {
			out[k] = vals[2*k] | vals[2*k+1]<<4
		}
	}
	return q, s
}

// ImportTensor converts one tensor of the file as Checkpoint would, under
// its GGUF name: the element type the runtime uses for its ggml type and
// the data aliasing the file (fused QKV tensors are not split).
func (f *File) ImportTensor(info *TensorInfo) (*tensors.Tensor, error) {
	return f.toTensor(info, info.Name)
}
