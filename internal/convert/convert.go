package convert

import (
	"context"
	"fmt"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// Options controls a conversion.
type Options struct {
	Recipe string // one of Recipes; "" means Keep
	// Activations overrides the checkpoint's activation policy when set.
	Activations string
	// Progress, if set, is called after each tensor with the number of
	// tensors done and the total.
	Progress func(done, total int)
	// Notef, if set, receives remarks such as block-size fallbacks.
	Notef func(format string, args ...any)
}

// Tensors applies the recipe to every tensor of ck and returns the tensors a
// model file stores. Tensors that already have the target type are passed
// through untouched (their Data still aliases the checkpoint).
func Tensors(ctx context.Context, ck *model.Checkpoint, opts Options) ([]*tensors.Tensor, error) {
	recipe := opts.Recipe
	if recipe == "" {
		recipe = Keep
	}
	if _, err := plan(recipe, "", nil); err != nil {
		return nil, err
	}
	out := make([]*tensors.Tensor, 0, len(ck.Tensors))
	for i, t := range ck.Tensors {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tgt, err := plan(recipe, t.Name, t.Shape)
		if err != nil {
			return nil, err
		}
		ct, err := convertTensor(t, tgt, opts.Notef)
		if err != nil {
			return nil, err
		}
		out = append(out, ct)
		if opts.Progress != nil {
			opts.Progress(i+1, len(ck.Tensors))
		}
	}
	return out, nil
}

func convertTensor(t *tensors.Tensor, tgt target, notef func(string, ...any)) (*tensors.Tensor, error) {
	if tgt == keep || sameStorage(t, tgt) {
		return t, nil
	}
	if tgt.dtype.Quantized() {
		var ok bool
		if tgt, ok = tgt.fit(t.Cols()); !ok && notef != nil {
			notef("%s: row length %d is not a multiple of the block size; using per-channel scales", t.Name, t.Cols())
		}
		if sameStorage(t, tgt) {
			return t, nil
		}
	}
	vals, err := t.Float32()
	if err != nil {
		return nil, fmt.Errorf("convert %s: %w", t.Name, err)
	}
	var ct *tensors.Tensor
	if tgt.dtype.Quantized() {
		ct, err = tensors.Quantize(t.Name, t.Shape, vals, tgt.dtype, tgt.block, tgt.scale)
	} else {
		ct, err = tensors.FromF32(t.Name, t.Shape, vals, tgt.dtype)
	}
	if err != nil {
		return nil, fmt.Errorf("convert %s: %w", t.Name, err)
	}
	return ct, nil
}

// sameStorage reports whether t is already stored as tgt asks, so that a
// lossless pass-through beats a lossy re-quantization (GGUF Q8_0 / Q4_0
// blocks stay bit-exact).
func sameStorage(t *tensors.Tensor, tgt target) bool {
	if t.DType != tgt.dtype {
		return false
	}
	if !t.DType.Quantized() {
		return true
	}
	block := t.BlockSize()
	if tgt.block == 0 {
		return len(t.Scales.Shape) == 1
	}
	return block == tgt.block && t.Scales.DType == tgt.scale
}
