package model

import (
	"fmt"
	"slices"
)

// ArchQwen35 is Qwen3.5 (dense): Gated DeltaNet layers beside gated full
// attention (../shared/models/arch3/README.md, llama.cpp's
// src/models/qwen35.cpp and delta-net-base.cpp).
const ArchQwen35 = "qwen35"

// ArchQwen35MoE is Qwen3.5's mixture of experts: qwen35's layers with
// every FFN a mixture (Experts, NormTopK) plus a shared expert gated by a
// sigmoid (SharedExpertHidden).
const ArchQwen35MoE = "qwen35moe"

// The tensors of a Gated DeltaNet layer (Config.DeltaLayers), in place of
// the attention ones; K = DeltaKeyHeads, V = DeltaValueHeads, D =
// DeltaHeadDim.
const (
	DeltaQKV    = "delta_net.qkv.w"      // [2*K*D + V*D, dim]: q, k, v rows
	DeltaZ      = "delta_net.z.w"        // [V*D, dim]: the output gate z
	DeltaBeta   = "delta_net.beta.w"     // [V, dim]
	DeltaAlpha  = "delta_net.alpha.w"    // [V, dim]
	DeltaConv   = "delta_net.conv.w"     // [2*K*D + V*D, delta_conv_width]
	DeltaDtBias = "delta_net.dt_bias"    // [V]
	DeltaA      = "delta_net.a"          // [V]: -exp(A_log), negative
	DeltaNorm   = "delta_net.norm.scale" // [D], shared by every head
	DeltaOut    = "delta_net.out.w"      // [dim, V*D]
	// WQGate is the output gate of an attention layer with
	// Config.AttnOutputGate, one row per query row: [heads*head_dim, dim].
	WQGate = "self_attention.q_gate.w"
	// A shared expert (Config.SharedExpertHidden = S): a gated FFN beside
	// the routed experts, its output scaled by sigmoid(SharedRouter·x).
	SharedGate   = "ff_layer.shared.gate.w"   // [S, dim]
	SharedUp     = "ff_layer.shared.up.w"     // [S, dim]
	SharedDown   = "ff_layer.shared.down.w"   // [dim, S]
	SharedRouter = "ff_layer.shared.router.w" // [1, dim]
)

// DeltaLayer reports whether layer l's mixer is a Gated DeltaNet
// (DeltaLayers) rather than attention.
func (c *Config) DeltaLayer(l int) bool { return slices.Contains(c.DeltaLayers, l) }

// RecurrentLayer reports whether layer l keeps a recurrent state (a short
// convolution, a Gated DeltaNet or a Mamba-2 layer) rather than keys and
// values.
func (c *Config) RecurrentLayer(l int) bool {
	return c.ConvLayer(l) || c.DeltaLayer(l) || c.SSMLayer(l)
}

// DeltaChannels is the width of a Gated DeltaNet layer's convolution: its
// q, k and v, 2*K*D + V*D.
func (c *Config) DeltaChannels() int {
	return (2*c.DeltaKeyHeads + c.DeltaValueHeads) * c.DeltaHeadDim
}

// validateDelta checks the Gated DeltaNet fields: all zero without delta
// layers; otherwise positive, V a multiple of K (value head j reads key
// head j mod K), a convolution of 2 to 1024 taps, layers in range and not
// also short-convolution layers.
func (c *Config) validateDelta() error {
	if c.SharedExpertHidden < 0 || c.SharedExpertHidden > 1<<24 || c.SharedExpertHidden > 0 && c.Experts == 0 {
		return fmt.Errorf("%w: shared expert of %d units with %d experts", ErrConfig, c.SharedExpertHidden, c.Experts)
	}
	if len(c.DeltaLayers) == 0 {
		if c.DeltaConvWidth != 0 || c.DeltaKeyHeads != 0 || c.DeltaValueHeads != 0 || c.DeltaHeadDim != 0 {
			return fmt.Errorf("%w: delta net sizes without delta layers", ErrConfig)
		}
		return nil
	}
	const limit = 1 << 16
	k, v, d := c.DeltaKeyHeads, c.DeltaValueHeads, c.DeltaHeadDim
	if c.DeltaConvWidth < 2 || c.DeltaConvWidth > 1<<10 || k <= 0 || v <= 0 || d <= 0 || k > limit || v > limit || d > limit || v%k != 0 {
		return fmt.Errorf("%w: delta net of conv width %d, %d key heads, %d value heads of %d", ErrConfig, c.DeltaConvWidth, k, v, d)
	}
	for _, l := range c.DeltaLayers {
		if l < 0 || l >= c.Layers || c.ConvLayer(l) {
			return fmt.Errorf("%w: delta_layers names layer %d of %d", ErrConfig, l, c.Layers)
		}
	}
	return nil
}
