package arch

import (
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
)

// WhisperConfig is the shape of a Whisper-encoder audio projector
// (package gguf's AudioClip holds it as read from an mmproj file).
type WhisperConfig struct {
	MelBins       int
	Width, FF     int
	Layers, Heads int
	Eps           float32
	ProjectionDim int
}

func (c WhisperConfig) check() error {
	if c.MelBins <= 0 || c.Heads <= 0 || c.Width%c.Heads != 0 || c.Layers <= 0 || c.FF <= 0 || c.ProjectionDim <= 0 {
		return fmt.Errorf("%w: whisper config %+v", ErrOptions, c)
	}
	return nil
}

// A Whisper-encoder audio projector (llama.cpp's clip_graph_whisper_enc
// with PROJECTOR_TYPE_QWEN2A) runs as three steps over one chunk of F
// mel frames (F even), the host moving rows between them:
//
//	WhisperConv1Graph (F rows):   x = GELU(conv1d_1(mel))             kernel 3, stride 1, padding 1
//	WhisperEncoderGraph (F/2):    x = GELU(conv1d_2(x)) + positions  kernel 3, stride 2, padding 1
//	                              per layer: x += out(SelfAttn(q, k, v of LN1(x)));  x += down(GELU(up(LN2(x))))
//	WhisperProjectorGraph (F/4):  x = post_ln(AvgPool1d(x, 2));  x = fc(x)
//
// Each conv is a matmul over im2col rows the host builds (row t holds
// input channel c's taps t*stride-1+k at c*3+k, zero outside the input),
// rounded to f16 as ggml's conv_1d im2col is; the average pool's pairs of
// rows are the projector step's input rows, 2*Width wide (the encoder's
// output rows taken two at a time). GELU is the erf form throughout.

// WhisperConv1Graph builds the first conv of a Whisper encoder over
// frames im2col rows of 3*MelBins values: [frames, Width].
func WhisperConv1Graph(c WhisperConfig, frames int) (*fusion.Graph, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if frames <= 0 {
		return nil, fmt.Errorf("%w: whisper conv step of %d frames", ErrOptions, frames)
	}
	g := &fusion.Graph{Tokens: frames}
	in := g.Add(&fusion.InputOp{Out: g.NewBuf("im2col", frames, 3*c.MelBins)})
	x := g.Add(&fusion.MatMulOp{Out: g.NewBuf("conv1", frames, c.Width), In: in,
		Projection: fusion.Projection{Weight: "a.conv1d.1.weight", Bias: "a.conv1d.1.bias"}})
	g.Add(&fusion.ActivationOp{Out: x, In: x, Act: fusion.ActGELU})
	g.Logits = x
	return g, nil
}

// WhisperEncoderGraph builds the second conv, the positions and the
// transformer layers over rows im2col rows of 3*Width values, run with
// tokens 0 .. rows-1 (each row's token is its position: the table is an
// embedding table): [rows, Width], before the pool and post_ln.
func WhisperEncoderGraph(c WhisperConfig, rows int) (*fusion.Graph, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if rows <= 0 || rows%2 != 0 {
		return nil, fmt.Errorf("%w: whisper encoder step of %d rows (even)", ErrOptions, rows)
	}
	W := c.Width
	g := &fusion.Graph{Tokens: rows}
	in := g.Add(&fusion.InputOp{Out: g.NewBuf("im2col", rows, 3*W)})
	x := g.Add(&fusion.MatMulOp{Out: g.NewBuf("x", rows, W), In: in,
		Projection: fusion.Projection{Weight: "a.conv1d.2.weight", Bias: "a.conv1d.2.bias"}})
	g.Add(&fusion.ActivationOp{Out: x, In: x, Act: fusion.ActGELU})
	pos := g.Add(&fusion.EmbedOp{Out: g.NewBuf("pos", rows, W), Weight: "a.position_embd.weight"})
	g.Add(&fusion.AddOp{Out: x, A: x, B: pos})
	encoderBlocks(g, x, rows, blockShape{prefix: "a.blk.", width: W, ff: c.FF, heads: c.Heads, layers: c.Layers,
		eps: c.Eps, act: fusion.ActGELU, noKBias: true})
	g.Logits = x
	return g, nil
}

// WhisperProjectorGraph builds the qwen2a projector over tokens pairs of
// encoder rows (each input row 2*Width values: rows 2t and 2t+1):
// (a + b) * 0.5 (ggml's pool_1d average), post_ln, then mm.a.fc with its
// bias: [tokens, ProjectionDim], the chunk's embeddings.
func WhisperProjectorGraph(c WhisperConfig, tokens int) (*fusion.Graph, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if tokens <= 0 {
		return nil, fmt.Errorf("%w: whisper projector step of %d tokens", ErrOptions, tokens)
	}
	W := c.Width
	g := &fusion.Graph{Tokens: tokens}
	buf := func(name string, cols int) fusion.Buf { return g.NewBuf(name, tokens, cols) }
	in := g.Add(&fusion.InputOp{Out: buf("pairs", 2*W)})
	a := g.Add(&fusion.ColumnsOp{Out: buf("a", W), In: in})
	b := g.Add(&fusion.ColumnsOp{Out: buf("b", W), In: in, Offset: W})
	g.Add(&fusion.AddOp{Out: a, A: a, B: b})
	g.Add(&fusion.ScaleOp{Out: a, In: a, Scale: 0.5})
	layerNorm(g, b, a, "a.post_ln", c.Eps)
	g.Logits = g.Add(&fusion.MatMulOp{Out: buf("embd", c.ProjectionDim), In: b,
		Projection: fusion.Projection{Weight: "mm.a.fc.weight", Bias: "mm.a.fc.bias"}})
	return g, nil
}

// blockShape is a pre-LN transformer encoder's layers (encoderBlocks).
type blockShape struct {
	prefix                   string // the layers' tensor prefix: prefix + "L." + name
	width, ff, heads, layers int
	eps                      float32
	act                      fusion.Act
	noKBias                  bool // attn_k has no bias (Whisper)
}

// encoderBlocks adds the layers of a pre-LN encoder, as vitBlocks does
// for the ViTs, with the shape's tensor prefix, FFN activation and key
// bias, over x's rows, x updated in place:
//
//	x += attn_out(SelfAttn(attn_q(h), attn_k(h), attn_v(h))),  h = ln1(x)
//	x += ffn_down(act(ffn_up(ln2(x))))
func encoderBlocks(g *fusion.Graph, x fusion.Buf, rows int, s blockShape) fusion.Buf {
	buf := func(name string, cols int) fusion.Buf { return g.NewBuf(name, rows, cols) }
	W := s.width
	h, q, k, v, a, o := buf("h", W), buf("q", W), buf("k", W), buf("v", W), buf("attn", W), buf("o", W)
	up, d := buf("up", s.ff), buf("down", W)
	hd := W / s.heads
	proj := func(out, in fusion.Buf, name string, bias bool) {
		p := fusion.Projection{Weight: name + ".weight"}
		if bias {
			p.Bias = name + ".bias"
		}
		g.Add(&fusion.MatMulOp{Out: out, In: in, Projection: p})
	}
	for l := range s.layers {
		b := fmt.Sprintf("%s%d.", s.prefix, l)
		layerNorm(g, h, x, b+"ln1", s.eps)
		proj(q, h, b+"attn_q", true)
		proj(k, h, b+"attn_k", !s.noKBias)
		proj(v, h, b+"attn_v", true)
		g.Add(&fusion.SelfAttnOp{Out: a, Q: q, K: k, V: v, HeadShape: fusion.HeadShape{Heads: s.heads, KVHeads: s.heads, HeadDim: hd},
			Scale: float32(1 / math.Sqrt(float64(hd)))})
		proj(o, a, b+"attn_out", true)
		g.Add(&fusion.AddOp{Out: x, A: x, B: o})
		layerNorm(g, h, x, b+"ln2", s.eps)
		proj(up, h, b+"ffn_up", true)
		g.Add(&fusion.ActivationOp{Out: up, In: up, Act: s.act})
		proj(d, up, b+"ffn_down", true)
		g.Add(&fusion.AddOp{Out: x, A: x, B: d})
	}
	return h
}
