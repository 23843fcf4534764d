package model

import (
	"fmt"
	"slices"
)

// SSM sizes the Mamba-2 mixers of a hybrid model (Granite 4.0 H), which
// take the place of attention in the layers of Layers. For a token's
// normed input h (see fusion.Mamba2Op for the whole computation):
//
//	[z | x | B | C | dt] = SSMIn·h   (Inner, Inner, Groups*State, Groups*State, Heads)
//	xBC = SiLU(conv(x | B | C) + SSMConvBias)   (causal, depthwise, Conv taps)
//	y = scan(x, B, C, softplus(dt + SSMDtBias), SSMA) + SSMD·x
//	out = SSMOut·(RMSNorm_per_group(y ⊙ SiLU(z)) ⊙ SSMNorm)
//
// Such a layer has no attention tensors and keeps a recurrent state: the
// last Conv-1 convolution inputs and a Inner/Heads x State matrix per head.
type SSM struct {
	Layers []int `json:"layers,omitempty"`
	Inner  int   `json:"inner,omitempty"`  // d_inner: x and z widths
	Heads  int   `json:"heads,omitempty"`  // SSM heads (head dim Inner/Heads)
	Groups int   `json:"groups,omitempty"` // groups of B and C (and of the gated norm)
	State  int   `json:"state,omitempty"`  // d_state
	Conv   int   `json:"conv,omitempty"`   // convolution width
}

// IsZero reports an unset SSM (a model without Mamba-2 layers).
func (s SSM) IsZero() bool {
	return s.Layers == nil && s.Inner == 0 && s.Heads == 0 && s.Groups == 0 && s.State == 0 && s.Conv == 0
}

// HeadDim is the values of x (and of y) per SSM head.
func (s SSM) HeadDim() int { return s.Inner / s.Heads }

// ConvChannels is the convolution's channel count: x, B and C.
func (s SSM) ConvChannels() int { return s.Inner + 2*s.Groups*s.State }

// InProjCols is the width of the input projection: z, x, B, C and dt.
func (s SSM) InProjCols() int { return 2*s.Inner + 2*s.Groups*s.State + s.Heads }

// SSMLayer reports whether layer l's mixer is Mamba-2 (SSM.Layers).
func (c *Config) SSMLayer(l int) bool { return slices.Contains(c.SSM.Layers, l) }

// validateSSM checks the Mamba-2 sizes and Granite's multipliers.
func (c *Config) validateSSM() error {
	s := c.SSM
	for _, f := range []struct {
		name string
		v    float32
	}{{"residual_scale", c.ResidualScale}, {"logit_scale", c.LogitScale}} {
		if !(f.v >= 0) || f.v > 1e30 {
			return fmt.Errorf("%w: %s %g", ErrConfig, f.name, f.v)
		}
	}
	if len(s.Layers) == 0 {
		if s.Inner != 0 || s.Heads != 0 || s.Groups != 0 || s.State != 0 || s.Conv != 0 {
			return fmt.Errorf("%w: ssm sizes %+v without ssm layers", ErrConfig, s)
		}
		return nil
	}
	const limit = 1 << 16
	for _, l := range s.Layers {
		if l < 0 || l >= c.Layers || slices.Contains(c.ConvLayers, l) {
			return fmt.Errorf("%w: ssm layer %d of %d (or a conv layer)", ErrConfig, l, c.Layers)
		}
	}
	if s.Inner <= 0 || s.Inner > 1<<20 || s.Heads <= 0 || s.Heads > limit || s.Groups <= 0 || s.Groups > limit ||
		s.State <= 0 || s.State > limit || s.Conv < 2 || s.Conv > 1<<10 ||
		s.Inner%s.Heads != 0 || s.Heads%s.Groups != 0 || s.HeadDim() > limit || s.Groups*s.State > 1<<20 {
		return fmt.Errorf("%w: ssm of inner %d, %d heads, %d groups, state %d, conv %d (heads must divide inner, groups heads)",
			ErrConfig, s.Inner, s.Heads, s.Groups, s.State, s.Conv)
	}
	return nil
}
