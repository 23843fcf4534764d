package gguf

import (
	"fmt"
	"math"
	"strings"

	"github.com/gpurun/gpurun/tensors"
)

// Projector types of llama.cpp's clip format (clip.projector_type) that
// this package reads.
const (
	ProjectorGemma3 = "gemma3"
	ProjectorLFM2   = "lfm2" // LFM2-VL: SigLIP2 NaFlex + pixel unshuffle + MLP (clip_lfm2.go)
)

// Clip is a vision projector file of llama.cpp's clip format (an
// "mmproj": general.architecture clip, general.type mmproj): the
// hyperparameters of its vision encoder and projector and its tensors,
// named as in the file. ProjectorGemma3 (SigLIP + Gemma 3's pooling,
// soft-embedding norm and input projection) and ProjectorLFM2 (LFM2-VL,
// clip_lfm2.go) are read.
//
// Tensors are [out, in] row-major as a fusion graph takes them:
// v.patch_embd.weight is [Width, 3*Patch*Patch] (a conv kernel row per
// output channel, in (channel, y, x) order), v.position_embd.weight
// [Patches, Width], and mm.input_projection.weight, stored as the (W, E)
// matrix that multiplies from the right, is transposed to [E, W].
type Clip struct {
	Projector     string
	ImageSize     int // the side the image is resized and padded to
	PatchSize     int
	Width         int // the ViT's embedding width
	FF            int // the ViT's feed-forward width
	Layers        int
	Heads         int
	Eps           float32 // LayerNorm (and the soft-embedding RMS norm) epsilon
	Mean, Std     [3]float32
	PoolKernel    int // Gemma 3: average pooling kernel = stride over the patch grid
	ProjectionDim int // the text model's embedding width the projector writes
	Tensors       []*tensors.Tensor

	// ProjectorLFM2 only (PoolKernel is its pixel-unshuffle factor):
	PosSide    int  // the learned position table's side (its rows are PosSide^2)
	ProjHidden int  // the MLP projector's hidden width
	PostLN     bool // v.post_ln is present
	InputNorm  bool // mm.input_norm.{weight,bias} are present
}

// PatchesPerSide is ImageSize / PatchSize.
func (c *Clip) PatchesPerSide() int { return c.ImageSize / c.PatchSize }

// TokensPerSide is the side of the pooled grid; its square is the image's
// token count in the text sequence.
func (c *Clip) TokensPerSide() int { return c.PatchesPerSide() / c.PoolKernel }

// ImageTokens is the count of embeddings one image gives.
func (c *Clip) ImageTokens() int { return c.TokensPerSide() * c.TokensPerSide() }

// OpenClip memory-maps the mmproj file at path and reads it (File.Clip).
func OpenClip(path string) (*Clip, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	c, err := f.Clip()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Clip reads the file as a vision projector. A file that is not of the
// clip architecture, a projector type other than gemma3 and lfm2, a missing or
// out-of-range key and a tensor of the wrong shape are errors
// (ErrFormat, ErrUnsupported).
func (f *File) Clip() (*Clip, error) {
	if a := f.Architecture(); a != "clip" {
		return nil, fmt.Errorf("%w: general.architecture %q, want clip (a vision projector, --mmproj)", ErrFormat, a)
	}
	str := func(k string) string { v, _ := f.Get(k); s, _ := v.Str(); return s }
	if hv, ok := f.Get("clip.has_vision_encoder"); ok {
		if b, _ := hv.Bool(); !b {
			return nil, fmt.Errorf("%w: clip file without a vision encoder (clip.has_vision_encoder false)", ErrUnsupported)
		}
	}
	c := &Clip{Projector: str("clip.projector_type")}
	if c.Projector == "" {
		c.Projector = str("clip.vision.projector_type")
	}
	if c.Projector != ProjectorGemma3 && c.Projector != ProjectorLFM2 {
		return nil, fmt.Errorf("%w: clip projector type %q (gpurun reads %q and %q)", ErrUnsupported, c.Projector, ProjectorGemma3, ProjectorLFM2)
	}
	var err error
	geti := func(k string, def int, lo, hi int) int {
		if err != nil {
			return 0
		}
		v, ok := f.Get(k)
		if !ok {
			if def >= 0 {
				return def
			}
			err = fmt.Errorf("%w: missing key %s", ErrFormat, k)
			return 0
		}
		n, ok := v.Int()
		if !ok || n < int64(lo) || n > int64(hi) {
			err = fmt.Errorf("%w: key %s = %v, want an integer in [%d, %d]", ErrFormat, k, v, lo, hi)
			return 0
		}
		return int(n)
	}
	const p = "clip.vision."
	c.ImageSize = geti(p+"image_size", -1, 1, 1<<14)
	c.PatchSize = geti(p+"patch_size", -1, 1, 1<<10)
	c.Width = geti(p+"embedding_length", -1, 1, 1<<16)
	c.FF = geti(p+"feed_forward_length", -1, 1, 1<<18)
	c.Layers = geti(p+"block_count", -1, 1, 1<<10)
	c.Heads = geti(p+"attention.head_count", -1, 1, 1<<10)
	c.ProjectionDim = geti(p+"projection_dim", -1, 1, 1<<18)
	// clip.cpp: gemma3's n_merge is the scale factor, 4 when absent; lfm2's
	// pixel unshuffle needs it (> 1; the converter writes 2 by default).
	if c.Projector == ProjectorLFM2 {
		c.PoolKernel = geti(p+"projector.scale_factor", -1, 2, 64)
	} else {
		c.PoolKernel = geti(p+"projector.scale_factor", 4, 1, 1<<10)
	}
	if err != nil {
		return nil, err
	}
	if v, ok := f.Get(p + "attention.layer_norm_epsilon"); ok {
		e, ok := v.Float()
		if !ok || !(e > 0 && e < 1) {
			return nil, fmt.Errorf("%w: key %sattention.layer_norm_epsilon = %v", ErrFormat, p, v)
		}
		c.Eps = float32(e)
	} else {
		return nil, fmt.Errorf("%w: missing key %sattention.layer_norm_epsilon", ErrFormat, p)
	}
	for i, k := range []string{"image_mean", "image_std"} {
		v, ok := f.Get(p + k)
		if !ok {
			return nil, fmt.Errorf("%w: missing key %s%s", ErrFormat, p, k)
		}
		xs, e := v.Float32s()
		if e != nil || len(xs) != 3 {
			return nil, fmt.Errorf("%w: key %s%s = %v, want 3 floats", ErrFormat, p, k, v)
		}
		for j, x := range xs {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || (i == 1 && !(x > 0)) {
				return nil, fmt.Errorf("%w: key %s%s = %v", ErrFormat, p, k, xs)
			}
			if i == 0 {
				c.Mean[j] = x
			} else {
				c.Std[j] = x
			}
		}
	}
	if c.ImageSize%c.PatchSize != 0 || c.PatchesPerSide()%c.PoolKernel != 0 {
		return nil, fmt.Errorf("%w: image size %d, patch %d, pool kernel %d: the patch grid does not divide", ErrFormat, c.ImageSize, c.PatchSize, c.PoolKernel)
	}
	if c.Width%c.Heads != 0 {
		return nil, fmt.Errorf("%w: width %d is not a multiple of %d heads", ErrFormat, c.Width, c.Heads)
	}
	if c.Projector == ProjectorLFM2 {
		if err := f.clipLFM2Tensors(c); err != nil {
			return nil, err
		}
		return c, nil
	}
	if err := f.clipTensors(c); err != nil {
		return nil, err
	}
	return c, nil
}

// clipTensors reads the gemma3 projector's tensors, checking each shape
// (ggml order) against the hyperparameters.
func (f *File) clipTensors(c *Clip) error {
	W, FF, P, n := c.Width, c.FF, c.PatchSize, c.PatchesPerSide()
	type want struct {
		name string
		dims []int
	}
	ws := []want{
		{"v.patch_embd.weight", []int{P, P, 3, W}}, {"v.patch_embd.bias", []int{W}},
		{"v.position_embd.weight", []int{W, n * n}},
	}
	up, down := "ffn_up", "ffn_down"
	// clip.cpp's legacy fix-up for gemma3: ffn_down with ne0 == n_embd
	// (and FF != W) means the two were written swapped.
	if t := f.Tensor("v.blk.0.ffn_down.weight"); t != nil && len(t.Dims) == 2 && t.Dims[0] == W && FF != W {
		up, down = down, up
	}
	for l := range c.Layers {
		b := fmt.Sprintf("v.blk.%d.", l)
		for _, s := range []string{"ln1", "ln2"} {
			ws = append(ws, want{b + s + ".weight", []int{W}}, want{b + s + ".bias", []int{W}})
		}
		for _, s := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			ws = append(ws, want{b + s + ".weight", []int{W, W}}, want{b + s + ".bias", []int{W}})
		}
		ws = append(ws, want{b + up + ".weight", []int{W, FF}}, want{b + up + ".bias", []int{FF}},
			want{b + down + ".weight", []int{FF, W}}, want{b + down + ".bias", []int{W}})
	}
	ws = append(ws, want{"v.post_ln.weight", []int{W}}, want{"v.post_ln.bias", []int{W}},
		want{"mm.soft_emb_norm.weight", []int{W}}, want{"mm.input_projection.weight", []int{c.ProjectionDim, W}})
	for _, w := range ws {
		info := f.Tensor(w.name)
		if info == nil {
			return fmt.Errorf("%w: clip %s projector without tensor %q", ErrFormat, c.Projector, w.name)
		}
		if !equalDims(info.Dims, w.dims) {
			return fmt.Errorf("%w: clip tensor %q has dims %v, want %v (from the file's keys)", ErrFormat, w.name, info.Dims, w.dims)
		}
		name := w.name
		if up != "ffn_up" { // swapped back to their meaning
			switch {
			case strings.Contains(name, ".ffn_up."):
				name = strings.Replace(name, ".ffn_up.", ".ffn_down.", 1)
			case strings.Contains(name, ".ffn_down."):
				name = strings.Replace(name, ".ffn_down.", ".ffn_up.", 1)
			}
		}
		t, err := f.readTensor(info, name)
		if err != nil {
			return err
		}
		switch name {
		case "v.patch_embd.weight":
			t.Shape = []int{W, 3 * P * P}
		case "mm.input_projection.weight":
			if t, err = transpose(t); err != nil {
				return err
			}
		}
		if len(t.Shape) == 1 || name == "v.position_embd.weight" {
			if t, err = toF32(t); err != nil {
				return err
			}
		}
		c.Tensors = append(c.Tensors, t)
	}
	return nil
}

func equalDims(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// toF32 converts an f32, f16 or bf16 tensor to f32 (vectors and the
// position table, which the CPU reads as f32).
func toF32(t *tensors.Tensor) (*tensors.Tensor, error) {
	if t.DType == tensors.F32 {
		return t, nil
	}
	xs, err := floats(t)
	if err != nil {
		return nil, err
	}
	return tensors.FromF32(t.Name, t.Shape, xs, tensors.F32)
}

// transpose turns a 2-D f32/f16/bf16 tensor [r, c] into [c, r] (f32).
func transpose(t *tensors.Tensor) (*tensors.Tensor, error) {
	xs, err := floats(t)
	if err != nil {
		return nil, err
	}
	r, c := t.Shape[0], t.Shape[1]
	out := make([]float32, len(xs))
	for i := range r {
		for j := range c {
			out[j*r+i] = xs[i*c+j]
		}
	}
	return tensors.FromF32(t.Name, []int{c, r}, out, tensors.F32)
}

func floats(t *tensors.Tensor) ([]float32, error) {
	switch t.DType {
	case tensors.F32, tensors.F16, tensors.BF16:
		return t.Float32()
	}
	return nil, fmt.Errorf("%w: clip tensor %q is %s (f32, f16 or bf16 here)", ErrUnsupported, t.Name, t.DType)
}
