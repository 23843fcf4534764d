package modelfile

import (
	"fmt"
	"strings"

	"github.com/gpurun/gpurun/internal/modelfile/internal/tflite"
	"github.com/gpurun/gpurun/tensors"
)

// tfliteType maps a gpurun element type to its TFLite tensor type.
func tfliteType(d tensors.DType) (tflite.TensorType, error) {
	switch d {
	case tensors.F32:
		return tflite.TensorTypeFLOAT32, nil
	case tensors.F16:
		return tflite.TensorTypeFLOAT16, nil
	case tensors.BF16:
		return tflite.TensorTypeBFLOAT16, nil
	case tensors.I8:
		return tflite.TensorTypeINT8, nil
	case tensors.I4:
		return tflite.TensorTypeINT4, nil
	case tensors.I32:
		return tflite.TensorTypeINT32, nil
	}
	if d.Block() {
		return tflite.TensorTypeUINT8, nil
	}
	return 0, fmt.Errorf("%w: dtype %s", ErrInvalid, d)
}

// BlockQuantization is the prefix of the CustomQuantization bytes that mark a
// UINT8 tensor as holding the blocks of a tensors block type (llama.cpp's
// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, kept bit for bit): the bytes are this
// prefix followed by the type's name, e.g. "gpurun.blocks:q4_k". The
// tensor's shape is the logical [out, in] shape; its buffer holds each row's
// blocks in order, so its size is rows * (in/block length) * block bytes.
const BlockQuantization = "gpurun.blocks:"

// blockType reads the block type named by CustomQuantization bytes.
func blockType(custom []byte) (tensors.DType, error) {
	name, ok := strings.CutPrefix(string(custom), BlockQuantization)
	if ok {
		if dt, err := tensors.ParseDType(name); err == nil && dt.Block() {
			return dt, nil
		}
	}
	return 0, fmt.Errorf("%w: custom quantization %q", ErrUnsupported, custom)
}

// gpurunType maps a TFLite tensor type back; types without a gpurun
// counterpart are ErrUnsupported.
func gpurunType(t int8) (tensors.DType, error) {
	switch tflite.TensorType(t) {
	case tflite.TensorTypeFLOAT32:
		return tensors.F32, nil
	case tflite.TensorTypeFLOAT16:
		return tensors.F16, nil
	case tflite.TensorTypeBFLOAT16:
		return tensors.BF16, nil
	case tflite.TensorTypeINT8:
		return tensors.I8, nil
	case tflite.TensorTypeINT4:
		return tensors.I4, nil
	case tflite.TensorTypeINT32:
		return tensors.I32, nil
	}
	name, ok := tflite.EnumNamesTensorType[tflite.TensorType(t)]
	if !ok {
		name = fmt.Sprintf("unknown type %d", t)
	}
	return 0, fmt.Errorf("%w: tensor type %s", ErrUnsupported, name)
}
