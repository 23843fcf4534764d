package arch

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
)

// VisionConfig is the shape of a gemma3 clip projector (package gguf's
// Clip holds it as read from an mmproj file).
type VisionConfig struct {
	ImageSize, PatchSize int
	Width, FF            int
	Layers, Heads        int
	Eps                  float32
	PoolKernel           int
	ProjectionDim        int
}

// VisionGraph builds the encoder of a gemma3 clip projector
// (llama.cpp's clip_graph::build_vit and models/siglip.cpp) as one step over
// the image's n*n patches: the step's input rows (fusion.InputOp,
// gpu.Program.SetInput) are the patches, one row of 3*patch*patch values
// per patch (package vision's Patches), and it runs with tokens 0 .. n*n-1
// (each row's token is its patch index: the position table is an
// embedding table), so one program encodes every image:
//
//	x = patches · patch_embd + bias + position_embd   (no class token, no pre-norm)
//	per layer: x += out(SelfAttn(q, k, v of LN1(x)));  x += down(GELU_tanh(up(LN2(x))))
//	x = post_ln(x);  AvgPool(n, kernel);  RMSNorm(soft_emb_norm);  · input_projection
//
// The step's output rows 0 .. m*m-1 (m = n/kernel) are the image's
// embeddings in the text model's width, row-major over the pooled grid;
// the rows after them are not embeddings.
func VisionGraph(c VisionConfig) (*fusion.Graph, error) {
	if c.PatchSize <= 0 || c.ImageSize%c.PatchSize != 0 || c.PoolKernel <= 0 || (c.ImageSize/c.PatchSize)%c.PoolKernel != 0 ||
		c.Heads <= 0 || c.Width%c.Heads != 0 || c.Layers <= 0 || c.FF <= 0 || c.ProjectionDim <= 0 {
		return nil, fmt.Errorf("%w: vision config %+v", ErrOptions, c)
	}
	n := c.ImageSize / c.PatchSize
	N, W, FF, P := n*n, c.Width, c.FF, c.PatchSize
	g := &fusion.Graph{Tokens: N}
	buf := func(name string, cols int) fusion.Buf { return g.NewBuf(name, N, cols) }
	px := g.Add(&fusion.InputOp{Out: buf("patches", 3*P*P)})
	x := g.Add(&fusion.MatMulOp{Out: buf("x", W), In: px, Projection: fusion.Projection{Weight: "v.patch_embd.weight", Bias: "v.patch_embd.bias"}})
	pos := g.Add(&fusion.EmbedOp{Out: buf("pos", W), Weight: "v.position_embd.weight"})
	g.Add(&fusion.AddOp{Out: x, A: x, B: pos})
	h := vitBlocks(g, x, N, W, FF, c.Heads, c.Layers, c.Eps)
	layerNorm(g, h, x, "v.post_ln", c.Eps)
	pooled := g.Add(&fusion.AvgPoolOp{Out: buf("pooled", W), In: h, Side: n, Kernel: c.PoolKernel})
	g.Add(&fusion.NormOp{Out: pooled, In: pooled, Norm: fusion.NormRMS, Weight: "mm.soft_emb_norm.weight", Eps: c.Eps})
	g.Logits = g.Add(&fusion.MatMulOp{Out: g.NewBuf("embd", N, c.ProjectionDim), In: pooled, Projection: fusion.Projection{Weight: "mm.input_projection.weight"}})
	return g, nil
}

// vitBlocks adds the layers "v.blk.L." of a pre-LN ViT encoder (SigLIP's,
// as clip.cpp runs it for gemma3 and lfm2) over x's rows, x a [rows, width]
// buffer updated in place:
//
//	x += attn_out(SelfAttn(attn_q(h), attn_k(h), attn_v(h))),  h = ln1(x)
//	x += ffn_down(GELU_tanh(ffn_up(ln2(x))))
//
// and returns the [rows, width] scratch buffer h, free after the last
// layer, for the caller's final norm.
func vitBlocks(g *fusion.Graph, x fusion.Buf, rows, width, ff, heads, layers int, eps float32) fusion.Buf {
	return encoderBlocks(g, x, rows, blockShape{prefix: "v.blk.", width: width, ff: ff, heads: heads, layers: layers,
		eps: eps, act: fusion.ActGELUTanh})
}

// layerNorm adds a LayerNorm with weight and bias name.weight, name.bias.
func layerNorm(g *fusion.Graph, out, in fusion.Buf, name string, eps float32) {
	g.Add(&fusion.NormOp{Out: out, In: in, Norm: fusion.NormLayer, Weight: name + ".weight", Bias: name + ".bias", Eps: eps})
}
