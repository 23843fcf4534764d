package pipeline

import (
	"context"
	"fmt"
	"slices"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/vision"
	"github.com/gpurun/gpurun/tensors"
)

// An lfm2 (LFM2-VL) projector runs in two steps whose sizes follow the
// image: the SigLIP2 ViT over the image's patches, fed in
// vision.MergeOrder so that llama.cpp's pixel unshuffle is a reshape of
// its output ([patches, W] read as [patches/m², W·m²], no data moved),
// then the projector (LayerNorm + MLP) over the merged tokens.

func newLFM2Encoder(be gpu.Backend, clip *gguf.Clip) (*VisionEncoder, error) {
	c := &arch.LFM2VisionConfig{PatchSize: clip.PatchSize, Width: clip.Width, FF: clip.FF, Layers: clip.Layers, Heads: clip.Heads,
		Eps: clip.Eps, PostLN: clip.PostLN, Merge: clip.PoolKernel, InputNorm: clip.InputNorm, ProjHidden: clip.ProjHidden,
		ProjectionDim: clip.ProjectionDim}
	// Check the config once (a 1-token projector graph is cheap to build).
	if _, err := arch.LFM2ProjectorGraph(*c, 1); err != nil {
		return nil, err
	}
	return &VisionEncoder{be: be, clip: clip, lfm2: c}, nil
}

// LFM2Input is an image prepared for an lfm2 encoder: its patch grid and
// the rows of its patches and of its resampled position table, both in
// vision.MergeOrder.
type LFM2Input struct {
	GridW, GridH int
	Patches      []float32 // [GridW*GridH, 3*patch*patch]
	Positions    []float32 // [GridW*GridH, width]
}

// Tokens is the count of the image's embeddings.
func (in *LFM2Input) Tokens(merge int) int { return in.GridW * in.GridH / (merge * merge) }

// PrepareLFM2 is an lfm2 projector's preprocessing of a decoded image:
// the smart resize (bilinear), normalization, the patches and the
// position table resampled to the patch grid, in merge order.
func (e *VisionEncoder) PrepareLFM2(img *vision.RGB) (*LFM2Input, error) {
	c, clip := e.lfm2, e.clip
	if c == nil {
		return nil, fmt.Errorf("%w: PrepareLFM2 of a %s projector", gguf.ErrUnsupported, clip.Projector)
	}
	r, err := vision.LFM2Resize(img, c.PatchSize, c.Merge)
	if err != nil {
		return nil, err
	}
	gw, gh := r.W/c.PatchSize, r.H/c.PatchSize
	order := vision.MergeOrder(gw, gh, c.Merge)
	patches, err := vision.PatchRows(vision.Normalize(r, clip.Mean, clip.Std), r.W, r.H, c.PatchSize, order)
	if err != nil {
		return nil, err
	}
	var table []float32
	for _, t := range clip.Tensors {
		if t.Name == "v.position_embd.weight" {
			if table, err = t.Float32(); err != nil {
				return nil, err
			}
		}
	}
	if len(table) != clip.PosSide*clip.PosSide*c.Width {
		return nil, fmt.Errorf("%w: lfm2 position table of %d values", gguf.ErrFormat, len(table))
	}
	pos := vision.ResizePositions(table, clip.PosSide, c.Width, gw, gh, order)
	return &LFM2Input{GridW: gw, GridH: gh, Patches: patches, Positions: pos}, nil
}

func (e *VisionEncoder) encodeLFM2(ctx context.Context, img *vision.RGB) ([]float32, error) {
	in, err := e.PrepareLFM2(img)
	if err != nil {
		return nil, err
	}
	return e.EncodeLFM2(ctx, in)
}

// EncodeLFM2 runs an lfm2 encoder on a prepared image: its
// in.Tokens(merge) embeddings of Width() values, row by row.
func (e *VisionEncoder) EncodeLFM2(ctx context.Context, in *LFM2Input) ([]float32, error) {
	c := e.lfm2
	if c == nil {
		return nil, fmt.Errorf("%w: EncodeLFM2 of a %s projector", gguf.ErrUnsupported, e.clip.Projector)
	}
	n := in.GridW * in.GridH
	mm := c.Merge * c.Merge
	if n <= 0 || in.GridW%c.Merge != 0 || in.GridH%c.Merge != 0 || len(in.Patches) != n*3*c.PatchSize*c.PatchSize || len(in.Positions) != n*c.Width {
		return nil, fmt.Errorf("pipeline: vision: lfm2 input of a %dx%d grid with %d patch and %d position values", in.GridW, in.GridH, len(in.Patches), len(in.Positions))
	}
	vit, err := arch.LFM2ViTGraph(*c, n)
	if err != nil {
		return nil, err
	}
	var vitW []*tensors.Tensor
	for _, t := range e.clip.Tensors {
		if t.Name[0] == 'v' {
			vitW = append(vitW, t)
		}
	}
	pt, err1 := tensors.FromF32(arch.PatchesWeight, []int{n, 3 * c.PatchSize * c.PatchSize}, in.Patches, tensors.F32)
	ps, err2 := tensors.FromF32(arch.PositionsWeight, []int{n, c.Width}, in.Positions, tensors.F32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pipeline: vision: %w", firstError(err1, err2))
	}
	x, err := e.runStep(ctx, vit, append(slices.Clip(vitW), pt, ps), n*c.Width)
	if err != nil {
		return nil, err
	}
	// The pixel unshuffle: rows t*mm .. t*mm+mm-1 are token t's blocks.
	var mmW []*tensors.Tensor
	for _, t := range e.clip.Tensors {
		if t.Name[0] == 'm' {
			mmW = append(mmW, t)
		}
	}
	tok := n / mm
	mt, err := tensors.FromF32(arch.MergedWeight, []int{tok, c.Width * mm}, x, tensors.F32)
	if err != nil {
		return nil, fmt.Errorf("pipeline: vision: %w", err)
	}
	proj, err := arch.LFM2ProjectorGraph(*c, tok)
	if err != nil {
		return nil, err
	}
	return e.runStep(ctx, proj, append(mmW, mt), tok*c.ProjectionDim)
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// runStep runs one encoder step (tokens 0 .. Tokens-1) over ws and returns
// its first outN output values.
func (e *VisionEncoder) runStep(ctx context.Context, g *fusion.Graph, ws []*tensors.Tensor, outN int) ([]float32, error) {
	w, err := e.be.LoadWeights(ctx, ws)
	if err != nil {
		return nil, fmt.Errorf("pipeline: vision: %w", err)
	}
	defer w.Release()
	p, err := e.be.Compile(g, w, nil)
	if err != nil {
		return nil, fmt.Errorf("pipeline: vision encoder: %w", err)
	}
	defer p.Release()
	ids := make([]int32, g.Tokens)
	for i := range ids {
		ids[i] = int32(i)
	}
	if err := p.Run(ctx, ids, 0); err != nil {
		return nil, fmt.Errorf("pipeline: vision encoder: %w", err)
	}
	out := make([]float32, outN)
	if _, err := p.Logits(out); err != nil {
		return nil, fmt.Errorf("pipeline: vision encoder: %w", err)
	}
	return out, nil
}
