// Package convert turns an imported checkpoint into the weights of a model
// file: it applies a quantization recipe tensor by tensor and writes the
// result as a TFLite-flatbuffer model file or a .task bundle.
package convert

import (
	"fmt"
	"strings"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// Recipes, as `gpurun convert --quant` accepts them.
const (
	Keep         = "keep"          // every tensor in its imported type
	F32          = "f32"           // everything f32
	F16          = "f16"           // matrices f16, norms and biases f32
	Int8         = "int8"          // matrices int8 per output channel, f32 scales
	Int4         = "int4"          // linear weights int4 per channel; embedding and LM head int8
	Int4Block32  = "int4-block32"  // linear weights int4 in blocks of 32, f16 scales; embedding int8
	Int4Block128 = "int4-block128" // the same with blocks of 128
	Mixed        = "mixed"         // feed-forward int4 block 32, attention and embedding int8
)

// Recipes lists every recipe name.
var Recipes = []string{Keep, F32, F16, Int8, Int4, Int4Block32, Int4Block128, Mixed}

// target is how one tensor is stored.
type target struct {
	dtype tensors.DType
	block int           // 0: per channel (for I8/I4)
	scale tensors.DType // scale type for I8/I4
}

var keep = target{}

// plan decides the storage of the tensor called name with the given shape.
// Vectors (norms, biases) stay f32 under every recipe but keep: they are tiny
// and precision-critical.
func plan(recipe, name string, shape []int) (target, error) {
	matrix := len(shape) == 2
	if !matrix {
		if recipe == Keep {
			return keep, nil
		}
		return target{dtype: tensors.F32}, nil
	}
	embedding := name == model.TokenEmbedding || name == model.LMHead
	ffn := strings.Contains(name, ".ff_layer.")
	int8PerChannel := target{dtype: tensors.I8, scale: tensors.F32}
	switch recipe {
	case Keep:
		return keep, nil
	case F32:
		return target{dtype: tensors.F32}, nil
	case F16:
		return target{dtype: tensors.F16}, nil
	case Int8:
		return int8PerChannel, nil
	case Int4:
		if embedding {
			return int8PerChannel, nil
		}
		return target{dtype: tensors.I4, scale: tensors.F32}, nil
	case Int4Block32, Int4Block128:
		if embedding {
			return int8PerChannel, nil
		}
		block := 32
		if recipe == Int4Block128 {
			block = 128
		}
		return target{dtype: tensors.I4, block: block, scale: tensors.F16}, nil
	case Mixed:
		if ffn {
			return target{dtype: tensors.I4, block: 32, scale: tensors.F16}, nil
		}
		return int8PerChannel, nil
	}
	return keep, fmt.Errorf("convert: unknown recipe %q (want one of %s)", recipe, strings.Join(Recipes, ", "))
}

// fit adjusts a block size that does not divide the row length: such a
// tensor falls back to per-channel scales, which the caller reports.
func (t target) fit(cols int) (target, bool) {
	if t.block > 0 && cols%t.block != 0 {
		t.block = 0
		t.scale = tensors.F32
		return t, false
	}
	return t, true
}
