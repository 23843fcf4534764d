package arch

import (
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors/model"
)

// deltaBufs are the buffers of a Gated DeltaNet layer: the projections of
// its input (q, k, v before the convolution; the output gate z; beta and
// alpha) and the recurrence's output.
type deltaBufs struct {
	qkv, z, beta, alpha, out fusion.Buf
}

func newDeltaBufs(g *fusion.Graph, c *model.Config) deltaBufs {
	T, v := g.Tokens, c.DeltaValueHeads
	return deltaBufs{
		qkv:   g.NewBuf("delta_qkv", T, c.DeltaChannels()),
		z:     g.NewBuf("delta_z", T, v*c.DeltaHeadDim),
		beta:  g.NewBuf("delta_beta", T, v),
		alpha: g.NewBuf("delta_alpha", T, v),
		out:   g.NewBuf("delta_out", T, v*c.DeltaHeadDim),
	}
}

// deltaNetOp is layer l's fusion.DeltaNetOp over the given buffers.
func deltaNetOp(c *model.Config, l int, out, qkv, beta, alpha fusion.Buf) *fusion.DeltaNetOp {
	return &fusion.DeltaNetOp{Out: out, QKV: qkv, Beta: beta, Alpha: alpha,
		Conv: model.Layer(l, model.DeltaConv), DtBias: model.Layer(l, model.DeltaDtBias), A: model.Layer(l, model.DeltaA),
		Layer: l, KeyHeads: c.DeltaKeyHeads, ValueHeads: c.DeltaValueHeads, HeadDim: c.DeltaHeadDim,
		Width: c.DeltaConvWidth, Eps: c.NormEps}
}

// deltaNet emits the Gated DeltaNet block of layer l (Qwen3.5,
// llama.cpp's src/models/qwen35.cpp) on input h into b.proj:
//
//	qkv, z, b, a = DeltaQKV·h, DeltaZ·h, DeltaBeta·h, DeltaAlpha·h
//	o            = the recurrence with its state (fusion.DeltaNetOp)
//	proj         = DeltaOut · (RMSNorm_head(o) · DeltaNorm ⊙ SiLU(z))
//
// the norm over each head's DeltaHeadDim values with one shared weight:
// norm, then gate.
func (b *builder) deltaNet(l int, h fusion.Buf) {
	c, g, d := b.cfg, b.g, b.delta
	b.linears(h, false,
		proj{d.qkv, model.Layer(l, model.DeltaQKV), ""}, proj{d.z, model.Layer(l, model.DeltaZ), ""},
		proj{d.beta, model.Layer(l, model.DeltaBeta), ""}, proj{d.alpha, model.Layer(l, model.DeltaAlpha), ""})
	g.Add(deltaNetOp(c, l, d.out, d.qkv, d.beta, d.alpha))
	g.Add(&fusion.NormOp{Out: d.out, In: d.out, Norm: fusion.NormRMS, Weight: model.Layer(l, model.DeltaNorm), Eps: c.NormEps, HeadDim: c.DeltaHeadDim})
	g.Add(&fusion.GLUOp{Out: d.out, Gate: d.z, Up: d.out, Act: fusion.ActSiLU})
	b.linear(b.proj, d.out, model.Layer(l, model.DeltaOut), "", false)
}

// sharedExpert adds layer l's shared expert to b.ffn (Qwen3.5 MoE,
// llama.cpp's build_layer_ffn of qwen35moe):
//
//	ffn += SharedDown·(SiLU(SharedGate·h) ⊙ SharedUp·h) · sigmoid(SharedRouter·h)
func (b *builder) sharedExpert(l int, h fusion.Buf) {
	c, g := b.cfg, b.g
	up, gate := b.hiddenOf(c.SharedExpertHidden)
	if b.shared < 0 {
		b.shared = g.NewBuf("shared_expert", g.Tokens, c.Dim)
		b.sharedGate = g.NewBuf("shared_expert_gate", g.Tokens, 1)
	}
	b.linears(h, false, proj{up, model.Layer(l, model.SharedUp), ""}, proj{gate, model.Layer(l, model.SharedGate), ""},
		proj{b.sharedGate, model.Layer(l, model.SharedRouter), ""})
	g.Add(&fusion.GLUOp{Out: up, Gate: gate, Up: up, Act: b.act})
	b.linear(b.shared, up, model.Layer(l, model.SharedDown), "", false)
	g.Add(&fusion.SigmoidGateOp{Out: b.shared, In: b.shared, Gate: b.sharedGate})
	g.Add(&fusion.AddOp{Out: b.ffn, A: b.ffn, B: b.shared})
}
