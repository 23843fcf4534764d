package arch

import (
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors/model"
)

// mamba2State is the recurrent state of a Mamba-2 layer of cfg: the last
// conv-1 inputs of the convolution over x, B and C, and a head dim x
// d_state matrix per SSM head (fusion.Mamba2Op).
func mamba2State(cfg *model.Config) fusion.LayerState {
	s := cfg.SSM
	return fusion.LayerState{ConvChannels: s.ConvChannels(), ConvWindow: s.Conv - 1,
		MatrixHeads: s.Heads, MatrixRows: s.HeadDim(), MatrixCols: s.State}
}

// mamba2 emits the Mamba-2 mixer of layer l (Granite 4.0 H, llama.cpp's
// src/models/mamba-base.cpp) on input h into b.proj: [z | x | B | C | dt]
// = in_proj·h, the convolution, scan and gated norm with the layer's state
// (fusion.Mamba2Op), then out_proj.
func (b *builder) mamba2(l int, h fusion.Buf) {
	s := b.cfg.SSM
	b.linear(b.ssmIn, h, model.Layer(l, model.SSMIn), "", false)
	b.g.Add(&fusion.Mamba2Op{Out: b.ssmY, In: b.ssmIn,
		Conv: model.Layer(l, model.SSMConv), ConvBias: model.Layer(l, model.SSMConvBias), DtBias: model.Layer(l, model.SSMDtBias),
		A: model.Layer(l, model.SSMA), D: model.Layer(l, model.SSMD), Norm: model.Layer(l, model.SSMNorm),
		Layer: l, Inner: s.Inner, Heads: s.Heads, Groups: s.Groups, State: s.State, Width: s.Conv, Eps: b.cfg.NormEps})
	b.linear(b.proj, b.ssmY, model.Layer(l, model.SSMOut), "", false)
}

// RecurrentOps are the ops of cfg's recurrent layers, the ops a backend
// must run for the model beside attention (gpu.Caps.RecurrentState), for
// the errors that refuse them.
func RecurrentOps(cfg *model.Config) []fusion.Kind {
	var ops []fusion.Kind
	if len(cfg.ConvLayers) > 0 {
		ops = append(ops, fusion.ShortConv)
	}
	if len(cfg.DeltaLayers) > 0 {
		ops = append(ops, fusion.DeltaNet)
	}
	if len(cfg.SSM.Layers) > 0 {
		ops = append(ops, fusion.Mamba2)
	}
	return ops
}

// residualScale scales a block's output before its residual add by the
// config's ResidualScale (Granite), when set.
func (b *builder) residualScale(out fusion.Buf) {
	if r := b.cfg.ResidualScale; r != 0 && r != 1 {
		b.g.Add(&fusion.ScaleOp{Out: out, In: out, Scale: r})
	}
}
