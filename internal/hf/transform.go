package hf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/tensors"
	"github.com/x448/float16"
)

// rowBytes is the byte size of one row of t; a 1-D tensor (a bias) has
// one-element rows.
func rowBytes(t *tensors.Tensor) int {
	if len(t.Shape) == 1 {
		return t.DType.ByteSize(1)
	}
	return t.DType.ByteSize(t.Cols())
}

// unpermuteRows undoes the row permutation HF's Llama converter applies to
// q_proj and k_proj. Per head of headDim rows, Meta row 2i+j (pair i, j in
// {0,1}) was moved to row j*headDim/2 + i so rotate-half RoPE pairs the same
// values; moving it back restores the interleaved pairing.
func unpermuteRows(t *tensors.Tensor, heads, headDim int) (*tensors.Tensor, error) {
	rows := t.Shape[0]
	if heads <= 0 || headDim%2 != 0 || rows != heads*headDim {
		return nil, fmt.Errorf("%w: %s has %d rows, not %d heads of %d", ErrFormat, t.Name, rows, heads, headDim)
	}
	rb := rowBytes(t)
	out := make([]byte, len(t.Data))
	half := headDim / 2
	for h := range heads {
		base := h * headDim
		for i := range half {
			for j := range 2 {
				dst := base + 2*i + j
				src := base + j*half + i
				copy(out[dst*rb:(dst+1)*rb], t.Data[src*rb:(src+1)*rb])
			}
		}
	}
	return &tensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Data: out}, nil
}

// addOne returns 1+w as an F32 tensor. Gemma's HF checkpoints store RMSNorm
// weights w and multiply by 1+w at run time; our files hold the multiplier.
func addOne(t *tensors.Tensor) (*tensors.Tensor, error) {
	n := t.NumElements()
	out := make([]byte, 4*n)
	for i := range n {
		var w float32
		switch t.DType {
		case tensors.F32:
			w = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		case tensors.F16:
			w = float16.Frombits(binary.LittleEndian.Uint16(t.Data[2*i:])).Float32()
		case tensors.BF16:
			w = math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.Data[2*i:])) << 16)
		default:
			return nil, fmt.Errorf("%w: norm %s has dtype %s", ErrUnsupported, t.Name, t.DType)
		}
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(1+w))
	}
	return &tensors.Tensor{Name: t.Name, DType: tensors.F32, Shape: t.Shape, Data: out}, nil
}

// splitFusedQKV separates Falcon's query_key_value rows. HF Falcon groups
// them per KV head: for each of kvHeads groups, heads/kvHeads query heads,
// then one key head, then one value head (multi-query is one group: all Q,
// then K, then V; classic multi-head is [q k v] per head).
func splitFusedQKV(t *tensors.Tensor, heads, kvHeads, headDim int) (q, k, v *tensors.Tensor, err error) {
	if kvHeads <= 0 || heads%kvHeads != 0 || t.Shape[0] != (heads+2*kvHeads)*headDim {
		return nil, nil, nil, fmt.Errorf("%w: %s has %d rows, not (%d+2*%d)*%d", ErrFormat, t.Name, t.Shape[0], heads, kvHeads, headDim)
	}
	rb := rowBytes(t)
	head := headDim * rb
	perGroup := heads / kvHeads
	part := func(n int) *tensors.Tensor {
		shape := append([]int{n * headDim}, t.Shape[1:]...)
		return &tensors.Tensor{DType: t.DType, Shape: shape, Data: make([]byte, 0, n*head)}
	}
	q, k, v = part(heads), part(kvHeads), part(kvHeads)
	src := t.Data
	for range kvHeads {
		q.Data = append(q.Data, src[:perGroup*head]...)
		src = src[perGroup*head:]
		k.Data = append(k.Data, src[:head]...)
		v.Data = append(v.Data, src[head:2*head]...)
		src = src[2*head:]
	}
	return q, k, v, nil
}

// splitRows cuts t into consecutive runs of the given row counts (copies,
// so the parts own their bytes like the other transforms' outputs).
func splitRows(t *tensors.Tensor, rows []int) ([]*tensors.Tensor, error) {
	total := 0
	for _, r := range rows {
		total += r
	}
	if len(t.Shape) != 2 || t.Shape[0] != total {
		return nil, fmt.Errorf("%w: %s has shape %v, not %d rows", ErrFormat, t.Name, t.Shape, total)
	}
	rb := rowBytes(t)
	var out []*tensors.Tensor
	start := 0
	for _, r := range rows {
		out = append(out, &tensors.Tensor{DType: t.DType, Shape: []int{r, t.Shape[1]},
			Data: append([]byte(nil), t.Data[start*rb:(start+r)*rb]...)})
		start += r
	}
	return out, nil
}
