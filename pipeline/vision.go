package pipeline

import (
	"context"
	"fmt"
	"sync"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/vision"
)

// VisionEncoder turns images into the embeddings a vision projector (an
// mmproj file of llama.cpp's clip format) gives the text model, running
// the encoder's fusion graph (arch.VisionGraph) on a backend. The
// projector's weights are loaded and the graph compiled on the first
// image, once; each image is then the program's input rows and one run.
// Safe for concurrent use (the images are encoded one at a time).
type VisionEncoder struct {
	be    gpu.Backend
	clip  *gguf.Clip
	graph *fusion.Graph

	mu sync.Mutex
	w  gpu.Weights // nil until the first image
	p  gpu.Program

	lfm2 *lfm2Encoder // gguf.ProjectorLFM2 (vision_lfm2.go); graph and p are nil
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

// MaxTokens bounds the count of embeddings of one run of an image (an
// lfm2 tile or thumbnail; the whole image otherwise).
func (e *VisionEncoder) MaxTokens() int {
	if e.lfm2 != nil {
		// One run: a tile or the thumbnail.
		return max(vision.LFM2MaxTokens, min(e.lfm2.cfg.tileTokens(), lfm2MaxTileTokens))
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
		return nil, fmt.Errorf("%w: Preprocess of an lfm2 projector (PrepareLFM2 prepares its images)", gguf.ErrUnsupported)
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

// ImageRuns is an encoded image as a prompt takes it: its runs of
// embeddings (Width() values each, row by row) in prompt order, each run
// one encoder run and one stretch of positions. An lfm2 image that
// llama.cpp tiles has its Cols*Rows tiles row by row, then its thumbnail;
// every other image one run.
type ImageRuns struct {
	Cols, Rows int // the lfm2 tile grid; 0, 0 when not tiled
	Runs       [][]float32
}

// EncodeFileRuns decodes an image file as EncodeFile does and encodes it
// into its runs.
func (e *VisionEncoder) EncodeFileRuns(ctx context.Context, data []byte, maxPixels int) (*ImageRuns, error) {
	img, err := vision.Decode(data, maxPixels)
	if err != nil {
		return nil, err
	}
	return e.EncodeRuns(ctx, img)
}

// EncodeRuns encodes an image into its runs (lfm2 tiles and thumbnail).
func (e *VisionEncoder) EncodeRuns(ctx context.Context, img *vision.RGB) (*ImageRuns, error) {
	if e.lfm2 != nil {
		return e.encodeLFM2(ctx, img)
	}
	embd, err := e.Encode(ctx, img)
	if err != nil {
		return nil, err
	}
	return &ImageRuns{Runs: [][]float32{embd}}, nil
}

// Encode returns the image's embeddings of Width() values, row by row:
// Tokens() of them, or for lfm2 all its runs' in prompt order (tiles,
// then the thumbnail).
func (e *VisionEncoder) Encode(ctx context.Context, img *vision.RGB) ([]float32, error) {
	if e.lfm2 != nil {
		r, err := e.encodeLFM2(ctx, img)
		if err != nil {
			return nil, err
		}
		var all []float32
		for _, run := range r.Runs {
			all = append(all, run...)
		}
		return all, nil
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
	if cols := e.graph.InputCols(); len(patches) != n*cols {
		return nil, fmt.Errorf("pipeline: vision encoder: %d patch values, want %d patches of %d", len(patches), n, cols)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.prepare(ctx); err != nil {
		return nil, err
	}
	if err := e.p.SetInput(patches); err != nil {
		return nil, fmt.Errorf("pipeline: vision encoder: %w", err)
	}
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i)
	}
	if err := e.p.Run(ctx, ids, 0); err != nil {
		return nil, fmt.Errorf("pipeline: vision encoder: %w", err)
	}
	out := make([]float32, n*e.clip.ProjectionDim)
	if _, err := e.p.Logits(out); err != nil {
		return nil, fmt.Errorf("pipeline: vision encoder: %w", err)
	}
	return out[:e.Tokens()*e.Width()], nil
}

// prepare loads the projector's weights (the CPU backend views them,
// uncopied) and compiles the encoder, once.
func (e *VisionEncoder) prepare(ctx context.Context) error {
	if e.p != nil {
		return nil
	}
	w, err := e.be.LoadWeights(ctx, e.clip.Tensors)
	if err != nil {
		return fmt.Errorf("pipeline: vision: %w", err)
	}
	p, err := e.be.Compile(e.graph, w, nil)
	if err != nil {
		w.Release()
		return fmt.Errorf("pipeline: vision encoder: %w", err)
	}
	e.w, e.p = w, p
	return nil
}

// Close releases the encoder's program and weights (a later image loads
// and compiles them again).
func (e *VisionEncoder) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lfm2 != nil {
		e.lfm2.release()
	}
	if e.p != nil {
		e.p.Release()
		e.w.Release()
		e.p, e.w = nil, nil
	}
}
