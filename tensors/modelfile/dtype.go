package modelfile

import (
	"fmt"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/modelfile/internal/tflite"
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
	return 0, fmt.Errorf("%w: dtype %s", ErrInvalid, d)
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
