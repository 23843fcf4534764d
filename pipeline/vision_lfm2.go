package pipeline

import (
	"context"
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/vision"
)

// An lfm2 (LFM2-VL) projector runs in two steps whose sizes follow the
// image: the SigLIP2 ViT over the image's patches, fed in
// vision.MergeOrder so that llama.cpp's pixel unshuffle is a reshape of
// its output ([patches, W] read as [patches/m², W·m²], no data moved),
// then the projector (LayerNorm + MLP) over the merged tokens.

// lfm2Encoder is an lfm2 VisionEncoder's state: the projector's weights,
// loaded on the first image, and the programs of its two steps by their
// row counts (images of the same size share them).
type lfm2Encoder struct {
	cfg  lfm2Config
	w    gpu.Weights
	vit  map[int]gpu.Program // by patches
	proj map[int]gpu.Program // by tokens
}

type lfm2Config struct{ arch.LFM2VisionConfig }

// lfm2Programs bounds the programs kept per step; past it all are
// released (an image of another size compiles its own).
const lfm2Programs = 8

func newLFM2Encoder(be gpu.Backend, clip *gguf.Clip) (*VisionEncoder, error) {
	c := arch.LFM2VisionConfig{PatchSize: clip.PatchSize, Width: clip.Width, FF: clip.FF, Layers: clip.Layers, Heads: clip.Heads,
		Eps: clip.Eps, PostLN: clip.PostLN, Merge: clip.PoolKernel, InputNorm: clip.InputNorm, ProjHidden: clip.ProjHidden,
		ProjectionDim: clip.ProjectionDim}
	// Check the config once (a 1-token projector graph is cheap to build).
	if _, err := arch.LFM2ProjectorGraph(c, 1); err != nil {
		return nil, err
	}
	return &VisionEncoder{be: be, clip: clip, lfm2: &lfm2Encoder{cfg: lfm2Config{c}, vit: map[int]gpu.Program{}, proj: map[int]gpu.Program{}}}, nil
}

func (l *lfm2Encoder) release() {
	for _, m := range []map[int]gpu.Program{l.vit, l.proj} {
		for k, p := range m {
			p.Release()
			delete(m, k)
		}
	}
	if l.w != nil {
		l.w.Release()
		l.w = nil
	}
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

// PrepareLFM2 is an lfm2 projector's preprocessing of a decoded image
// as one encoder run: the smart resize (bilinear), normalization, the
// patches and the position table resampled to the patch grid, in merge
// order. For an image llama.cpp tiles this is its thumbnail
// (PrepareLFM2Tiles prepares the tiles too).
func (e *VisionEncoder) PrepareLFM2(img *vision.RGB) (*LFM2Input, error) {
	if e.lfm2 == nil {
		return nil, fmt.Errorf("%w: PrepareLFM2 of a %s projector", gguf.ErrUnsupported, e.clip.Projector)
	}
	c := &e.lfm2.cfg
	r, err := vision.LFM2Resize(img, c.PatchSize, c.Merge)
	if err != nil {
		return nil, err
	}
	return e.prepareLFM2Run(r)
}

// lfm2MaxTileTokens bounds the positions of one lfm2 tile (a projector
// with small patches would make tiles of thousands of patches): real
// LFM2-VL projectors (patch 16, merge 2) make 256.
const lfm2MaxTileTokens = 4 * vision.LFM2MaxTokens

// tileTokens is the count of embeddings of one lfm2 tile.
func (c *lfm2Config) tileTokens() int {
	side := vision.LFM2TileSize / c.PatchSize
	return side * side / (c.Merge * c.Merge)
}

// LFM2Inputs is an image prepared for an lfm2 encoder as llama.cpp
// splits it: its tiles row by row (none when it is not tiled), then its
// thumbnail, each one encoder run.
type LFM2Inputs struct {
	Cols, Rows int // the tile grid; 0, 0 when not tiled
	Runs       []*LFM2Input
}

// PrepareLFM2Tiles is an lfm2 projector's preprocessing of a decoded
// image: vision.SplitLFM2's tiles and thumbnail, each prepared as
// PrepareLFM2 prepares a run.
func (e *VisionEncoder) PrepareLFM2Tiles(img *vision.RGB) (*LFM2Inputs, error) {
	if e.lfm2 == nil {
		return nil, fmt.Errorf("%w: PrepareLFM2Tiles of a %s projector", gguf.ErrUnsupported, e.clip.Projector)
	}
	c := &e.lfm2.cfg
	if vision.LFM2Tiled(img.W, img.H) {
		// Refuse before any work: a tile must fit an image run's
		// positions and the encoder's attention.
		if n := c.tileTokens(); n > lfm2MaxTileTokens {
			return nil, fmt.Errorf("%w: a %dx%d image is cut in %d-pixel tiles, %d positions each with this projector's %d-pixel patches (at most %d)",
				vision.ErrImage, img.W, img.H, vision.LFM2TileSize, n, c.PatchSize, lfm2MaxTileTokens)
		}
	}
	split, err := vision.SplitLFM2(img, c.PatchSize, c.Merge)
	if err != nil {
		return nil, err
	}
	out := &LFM2Inputs{Cols: split.Cols, Rows: split.Rows}
	for _, r := range append(split.Tiles, split.Thumbnail) {
		in, err := e.prepareLFM2Run(r)
		if err != nil {
			return nil, err
		}
		out.Runs = append(out.Runs, in)
	}
	return out, nil
}

// prepareLFM2Run prepares an image already of its run's size (multiples
// of patch * merge).
func (e *VisionEncoder) prepareLFM2Run(r *vision.RGB) (*LFM2Input, error) {
	clip := e.clip
	c := &e.lfm2.cfg
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

// encodeLFM2 encodes an image's runs (tiles, then the thumbnail).
func (e *VisionEncoder) encodeLFM2(ctx context.Context, img *vision.RGB) (*ImageRuns, error) {
	in, err := e.PrepareLFM2Tiles(img)
	if err != nil {
		return nil, err
	}
	out := &ImageRuns{Cols: in.Cols, Rows: in.Rows}
	for _, r := range in.Runs {
		embd, err := e.EncodeLFM2(ctx, r)
		if err != nil {
			return nil, err
		}
		out.Runs = append(out.Runs, embd)
	}
	return out, nil
}

// EncodeLFM2 runs an lfm2 encoder on a prepared image: its
// in.Tokens(merge) embeddings of Width() values, row by row.
func (e *VisionEncoder) EncodeLFM2(ctx context.Context, in *LFM2Input) ([]float32, error) {
	if e.lfm2 == nil {
		return nil, fmt.Errorf("%w: EncodeLFM2 of a %s projector", gguf.ErrUnsupported, e.clip.Projector)
	}
	c := &e.lfm2.cfg
	n, k := in.GridW*in.GridH, 3*c.PatchSize*c.PatchSize
	mm := c.Merge * c.Merge
	if n <= 0 || in.GridW%c.Merge != 0 || in.GridH%c.Merge != 0 || len(in.Patches) != n*k || len(in.Positions) != n*c.Width {
		return nil, fmt.Errorf("pipeline: vision: lfm2 input of a %dx%d grid with %d patch and %d position values", in.GridW, in.GridH, len(in.Patches), len(in.Positions))
	}
	rows := make([]float32, 0, n*(k+c.Width))
	for r := range n {
		rows = append(rows, in.Patches[r*k:(r+1)*k]...)
		rows = append(rows, in.Positions[r*c.Width:(r+1)*c.Width]...)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.lfm2
	if l.w == nil {
		w, err := e.be.LoadWeights(ctx, e.clip.Tensors)
		if err != nil {
			return nil, fmt.Errorf("pipeline: vision: %w", err)
		}
		l.w = w
	}
	vit, err := l.program(e.be, l.vit, n, func() (*fusion.Graph, error) { return arch.LFM2ViTGraph(c.LFM2VisionConfig, n) })
	if err != nil {
		return nil, err
	}
	x, err := runRows(ctx, vit, rows, n, n*c.Width)
	if err != nil {
		return nil, err
	}
	// The pixel unshuffle: rows t*mm .. t*mm+mm-1 are token t's blocks, so
	// x read as [n/mm, Width*mm] is the merged features.
	tok := n / mm
	proj, err := l.program(e.be, l.proj, tok, func() (*fusion.Graph, error) { return arch.LFM2ProjectorGraph(c.LFM2VisionConfig, tok) })
	if err != nil {
		return nil, err
	}
	return runRows(ctx, proj, x, tok, tok*c.ProjectionDim)
}

// program returns the program of m for a step of n rows, compiling it
// (build's graph) on first use.
func (l *lfm2Encoder) program(be gpu.Backend, m map[int]gpu.Program, n int, build func() (*fusion.Graph, error)) (gpu.Program, error) {
	if p, ok := m[n]; ok {
		return p, nil
	}
	g, err := build()
	if err != nil {
		return nil, err
	}
	p, err := be.Compile(g, l.w, nil)
	if err != nil {
		return nil, fmt.Errorf("pipeline: vision encoder: %w", err)
	}
	if len(m) >= lfm2Programs {
		for k, q := range m {
			q.Release()
			delete(m, k)
		}
	}
	m[n] = p
	return p, nil
}

// runRows runs a step of n rows (tokens 0 .. n-1) over the input rows and
// returns its outN output values.
func runRows(ctx context.Context, p gpu.Program, rows []float32, n, outN int) ([]float32, error) {
	if err := p.SetInput(rows); err != nil {
		return nil, fmt.Errorf("pipeline: vision encoder: %w", err)
	}
	ids := make([]int32, n)
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
