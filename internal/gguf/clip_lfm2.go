package gguf

import (
	"fmt"
	"math"
)

// clipLFM2Tensors reads an lfm2 projector's tensors (LFM2-VL: llama.cpp's
// clip_graph_siglip with PROJECTOR_TYPE_LFM2), checking each shape (ggml
// order) against the hyperparameters:
//
//	v.patch_embd.{weight [P,P,3,W], bias [W]}, v.position_embd.weight [W, s*s]
//	v.blk.i.{ln1,ln2,attn_q,attn_k,attn_v,attn_out,ffn_up,ffn_down}.*  (as gemma3's)
//	v.post_ln.{weight,bias} [W]                 (optional)
//	mm.input_norm.{weight,bias} [4W]           (optional; LayerNorm, eps 1e-5)
//	mm.1.{weight [4W, HID], bias [HID]}, mm.2.{weight [HID, E], bias [E]}
//
// The position table's side s is its own (SigLIP2 NaFlex interpolates it
// to each image's patch grid), not ImageSize/PatchSize; ffn_up/ffn_down
// are never swapped (clip.cpp's fix-up does not list lfm2).
func (f *File) clipLFM2Tensors(c *Clip) error {
	W, FF, P, k := c.Width, c.FF, c.PatchSize, c.PoolKernel
	pos := f.Tensor("v.position_embd.weight")
	if pos == nil || len(pos.Dims) != 2 {
		return fmt.Errorf("%w: clip lfm2 projector without a 2-D v.position_embd.weight", ErrFormat)
	}
	c.PosSide = int(math.Sqrt(float64(pos.Dims[1])))
	if c.PosSide < 1 || c.PosSide*c.PosSide != pos.Dims[1] || c.PosSide > 1<<10 {
		return fmt.Errorf("%w: clip lfm2 position table of %d rows, want a square count", ErrFormat, pos.Dims[1])
	}
	m1 := f.Tensor("mm.1.weight")
	if m1 == nil || len(m1.Dims) != 2 {
		return fmt.Errorf("%w: clip lfm2 projector without a 2-D mm.1.weight", ErrFormat)
	}
	c.ProjHidden = m1.Dims[1]
	if c.ProjHidden < 1 || c.ProjHidden > 1<<18 {
		return fmt.Errorf("%w: clip lfm2 mm.1.weight dims %v", ErrFormat, m1.Dims)
	}
	K := W * k * k
	type want struct {
		name string
		dims []int
	}
	ws := []want{
		{"v.patch_embd.weight", []int{P, P, 3, W}}, {"v.patch_embd.bias", []int{W}},
		{"v.position_embd.weight", []int{W, c.PosSide * c.PosSide}},
	}
	for l := range c.Layers {
		b := fmt.Sprintf("v.blk.%d.", l)
		for _, s := range []string{"ln1", "ln2"} {
			ws = append(ws, want{b + s + ".weight", []int{W}}, want{b + s + ".bias", []int{W}})
		}
		for _, s := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			ws = append(ws, want{b + s + ".weight", []int{W, W}}, want{b + s + ".bias", []int{W}})
		}
		ws = append(ws, want{b + "ffn_up.weight", []int{W, FF}}, want{b + "ffn_up.bias", []int{FF}},
			want{b + "ffn_down.weight", []int{FF, W}}, want{b + "ffn_down.bias", []int{W}})
	}
	c.PostLN = f.Tensor("v.post_ln.weight") != nil
	if c.PostLN {
		ws = append(ws, want{"v.post_ln.weight", []int{W}}, want{"v.post_ln.bias", []int{W}})
	}
	c.InputNorm = f.Tensor("mm.input_norm.weight") != nil
	if c.InputNorm != (f.Tensor("mm.input_norm.bias") != nil) {
		return fmt.Errorf("%w: clip lfm2 mm.input_norm has a weight or a bias alone (gpurun reads both or neither)", ErrUnsupported)
	}
	if c.InputNorm {
		ws = append(ws, want{"mm.input_norm.weight", []int{K}}, want{"mm.input_norm.bias", []int{K}})
	}
	ws = append(ws, want{"mm.1.weight", []int{K, c.ProjHidden}}, want{"mm.1.bias", []int{c.ProjHidden}},
		want{"mm.2.weight", []int{c.ProjHidden, c.ProjectionDim}}, want{"mm.2.bias", []int{c.ProjectionDim}})
	for _, w := range ws {
		info := f.Tensor(w.name)
		if info == nil {
			return fmt.Errorf("%w: clip %s projector without tensor %q", ErrFormat, c.Projector, w.name)
		}
		if !equalDims(info.Dims, w.dims) {
			return fmt.Errorf("%w: clip tensor %q has dims %v, want %v (from the file's keys)", ErrFormat, w.name, info.Dims, w.dims)
		}
		t, err := f.readTensor(info, w.name)
		if err != nil {
			return err
		}
		if w.name == "v.patch_embd.weight" {
			t.Shape = []int{W, 3 * P * P}
		}
		if len(t.Shape) == 1 || w.name == "v.position_embd.weight" {
			if t, err = toF32(t); err != nil {
				return err
			}
		}
		c.Tensors = append(c.Tensors, t)
	}
	return nil
}
