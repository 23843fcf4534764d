package arch

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
)

// LFM2VisionConfig is the shape of an lfm2 (LFM2-VL) clip projector.
type LFM2VisionConfig struct {
	PatchSize     int
	Width, FF     int
	Layers, Heads int
	Eps           float32
	PostLN        bool // v.post_ln after the last layer
	Merge         int  // the pixel-unshuffle factor
	InputNorm     bool // mm.input_norm before the MLP
	ProjHidden    int
	ProjectionDim int
}

func (c LFM2VisionConfig) check() error {
	if c.PatchSize <= 0 || c.Merge < 2 || c.Heads <= 0 || c.Width%c.Heads != 0 || c.Layers <= 0 || c.FF <= 0 ||
		c.ProjHidden <= 0 || c.ProjectionDim <= 0 {
		return fmt.Errorf("%w: lfm2 vision config %+v", ErrOptions, c)
	}
	return nil
}

// LFM2ViTGraph builds the SigLIP2 ViT of an lfm2 projector (llama.cpp's
// clip_graph::build_vit as clip_graph_siglip runs it) as one step over an
// image's patches in any order: its input rows (fusion.InputOp) are each
// patch's 3*PatchSize² values followed by its row of the position table
// resampled to the image's grid (Width values), in the same order
// (attention is over all rows, so the order carries through):
//
//	x = patches · patch_embd + bias + positions
//	per layer: x += out(SelfAttn(q, k, v of LN1(x)));  x += down(GELU_tanh(up(LN2(x))))
//	x = post_ln(x)   (when the file has it)
//
// The step's output ([patches, Width]) is x, row for row.
func LFM2ViTGraph(c LFM2VisionConfig, patches int) (*fusion.Graph, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if patches <= 0 || patches%(c.Merge*c.Merge) != 0 {
		return nil, fmt.Errorf("%w: lfm2 vision step of %d patches (a multiple of %d)", ErrOptions, patches, c.Merge*c.Merge)
	}
	N, W, FF, P := patches, c.Width, c.FF, c.PatchSize
	g := &fusion.Graph{Tokens: N}
	buf := func(name string, cols int) fusion.Buf { return g.NewBuf(name, N, cols) }
	in := g.Add(&fusion.InputOp{Out: buf("input", 3*P*P+W)})
	px := g.Add(&fusion.ColumnsOp{Out: buf("patches", 3*P*P), In: in})
	pos := g.Add(&fusion.ColumnsOp{Out: buf("pos", W), In: in, Offset: 3 * P * P})
	x := g.Add(&fusion.MatMulOp{Out: buf("x", W), In: px, Projection: fusion.Projection{Weight: "v.patch_embd.weight", Bias: "v.patch_embd.bias"}})
	g.Add(&fusion.AddOp{Out: x, A: x, B: pos})
	h := vitBlocks(g, x, N, W, FF, c.Heads, c.Layers, c.Eps)
	if c.PostLN {
		layerNorm(g, h, x, "v.post_ln", c.Eps)
		g.Logits = h
	} else {
		g.Logits = x
	}
	return g, nil
}

// LFM2ProjectorGraph builds the lfm2 projector over an image's tokens
// (llama.cpp's models/siglip.cpp, PROJECTOR_TYPE_LFM2, after the pixel
// unshuffle): one step whose input rows (fusion.InputOp) are the tokens'
// merged features ([tokens, Width*Merge²]),
//
//	x = LayerNorm_1e-5(x) · mm.input_norm + bias   (when the file has it)
//	x = mm.2(GELU_tanh(mm.1(x)))                   (both with biases)
//
// Its output ([tokens, ProjectionDim]) is the image's embeddings.
func LFM2ProjectorGraph(c LFM2VisionConfig, tokens int) (*fusion.Graph, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if tokens <= 0 {
		return nil, fmt.Errorf("%w: lfm2 projector step of %d tokens", ErrOptions, tokens)
	}
	K := c.Width * c.Merge * c.Merge
	g := &fusion.Graph{Tokens: tokens}
	x := g.Add(&fusion.InputOp{Out: g.NewBuf("merged", tokens, K)})
	if c.InputNorm {
		// clip.cpp: ggml_norm(cur, 1e-5), "default nn.LayerNorm", whatever the file's eps.
		layerNorm(g, x, x, "mm.input_norm", 1e-5)
	}
	h := g.Add(&fusion.MatMulOp{Out: g.NewBuf("hidden", tokens, c.ProjHidden), In: x, Projection: fusion.Projection{Weight: "mm.1.weight", Bias: "mm.1.bias"}})
	g.Add(&fusion.ActivationOp{Out: h, In: h, Act: fusion.ActGELUTanh})
	g.Logits = g.Add(&fusion.MatMulOp{Out: g.NewBuf("embd", tokens, c.ProjectionDim), In: h, Projection: fusion.Projection{Weight: "mm.2.weight", Bias: "mm.2.bias"}})
	return g, nil
}
