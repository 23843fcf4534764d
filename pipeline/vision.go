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

// VisionEncoder turns images into the embeddings a vision projector (an
// mmproj file of llama.cpp's clip format) gives the text model, running
// the encoder's fusion graph (arch.VisionGraph) on a backend.
type VisionEncoder struct {
	be    gpu.Backend
	clip  *gguf.Clip
	graph *fusion.Graph
	lfm2  *arch.LFM2VisionConfig // gguf.ProjectorLFM2 (vision_lfm2.go); graph is nil
}

// NewVisionEncoder builds the encoder of clip for be.
func NewVisionEncoder(be gpu.Backend, clip *gguf.Clip) (*VisionEncoder, error) {
	if clip.Projector == gguf.ProjectorLFM2 {
		return newLFM2Encoder(be, clip)
	}
	if clip.Projector != gguf.ProjectorGemma3 {
		return nil, fmt.Errorf("%w: clip projector %q", gguf.ErrUnsupported, clip.Projector)
	}
	g, err := arch.VisionGraph(arch.VisionConfig{ImageSize: clip.ImageSize, PatchSize: clip.PatchSize, Width: clip.Width, FF: clip.FF,
		Layers: clip.Layers, Heads: clip.Heads, Eps: clip.Eps, PoolKernel: clip.PoolKernel, ProjectionDim: clip.ProjectionDim})
	if err != nil {
		return nil, err
	}
	return &VisionEncoder{be: be, clip: clip, graph: g}, nil
}

// Tokens is the count of embeddings (text positions) of one image; 0
// when it depends on the image's size (lfm2: len(Encode's result)/Width()).
func (e *VisionEncoder) Tokens() int {
	if e.lfm2 != nil {
		return 0
	}
	return e.clip.ImageTokens()
}

// MaxTokens bounds the count of embeddings of one image.
func (e *VisionEncoder) MaxTokens() int {
	if e.lfm2 != nil {
		return vision.LFM2MaxTokens
	}
	return e.clip.ImageTokens()
}

// Width is the width of each embedding: the text model's.
func (e *VisionEncoder) Width() int { return e.clip.ProjectionDim }

// Preprocess is the projector's preprocessing of a decoded image: the
// fixed-size resize and pad, normalization, and the patches in the
// encoder's row order.
func (e *VisionEncoder) Preprocess(img *vision.RGB) ([]float32, error) {
	c := e.clip
	if e.lfm2 != nil {
		return nil, fmt.Errorf("%w: Preprocess of an lfm2 projector (Encode preprocesses it)", gguf.ErrUnsupported)
	}
	sq := vision.FixedSize(img, c.ImageSize)
	return vision.Patches(vision.Normalize(sq, c.Mean, c.Std), c.ImageSize, c.PatchSize)
}

// EncodeFile decodes an image file (PNG, JPEG, GIF, WebP; at most
// maxPixels pixels, 0: vision.DefaultMaxPixels) and encodes it.
func (e *VisionEncoder) EncodeFile(ctx context.Context, data []byte, maxPixels int) ([]float32, error) {
	img, err := vision.Decode(data, maxPixels)
	if err != nil {
		return nil, err
	}
	return e.Encode(ctx, img)
}

// Encode returns the image's Tokens() embeddings of Width() values, row
// by row.
func (e *VisionEncoder) Encode(ctx context.Context, img *vision.RGB) ([]float32, error) {
	if e.lfm2 != nil {
		return e.encodeLFM2(ctx, img)
	}
	patches, err := e.Preprocess(img)
	if err != nil {
		return nil, err
	}
	return e.EncodePatches(ctx, patches)
}

// EncodePatches runs the encoder on preprocessed patches (Preprocess's
// rows).
func (e *VisionEncoder) EncodePatches(ctx context.Context, patches []float32) ([]float32, error) {
	if e.lfm2 != nil {
		return nil, fmt.Errorf("%w: EncodePatches of an lfm2 projector (EncodeLFM2 takes its input)", gguf.ErrUnsupported)
	}
	n := e.graph.Tokens
	pt, err := tensors.FromF32(arch.PatchesWeight, []int{n, len(patches) / max(n, 1)}, patches, tensors.F32)
	if err != nil {
		return nil, fmt.Errorf("pipeline: vision: %w", err)
	}
	// The image is a weight of the encoder's step: loaded with the
	// projector's tensors (the CPU backend views them, uncopied).
	w, err := e.be.LoadWeights(ctx, append(slices.Clip(e.clip.Tensors), pt))
	if err != nil {
		return nil, fmt.Errorf("pipeline: vision: %w", err)
	}
	defer w.Release()
	p, err := e.be.Compile(e.graph, w, nil)
	if err != nil {
		return nil, fmt.Errorf("pipeline: vision encoder: %w", err)
	}
	defer p.Release()
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i)
	}
	if err := p.Run(ctx, ids, 0); err != nil {
		return nil, fmt.Errorf("pipeline: vision encoder: %w", err)
	}
	out := make([]float32, n*e.clip.ProjectionDim)
	if _, err := p.Logits(out); err != nil {
		return nil, fmt.Errorf("pipeline: vision encoder: %w", err)
	}
	return out[:e.Tokens()*e.Width()], nil
}
