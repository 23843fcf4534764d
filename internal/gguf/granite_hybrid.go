package gguf

import (
	"fmt"

	"github.com/gpurun/gpurun/tensors/model"
)

// graniteHybridLayers reads Granite 4.0 H's layer pattern and Mamba-2 sizes
// as llama.cpp 81ff7abe5 loads them (llama-model.cpp; src/models/
// granite-hybrid.cpp, mamba-base.cpp): the zeros of the per-layer
// attention.head_count_kv are the Mamba-2 layers; ssm.inner_size is
// d_inner, ssm.time_step_rank the SSM heads, ssm.group_count the groups of
// B and C, ssm.state_size d_state and ssm.conv_kernel the convolution's
// width.
func (f *File) graniteHybridLayers(m *meta, c *model.Config) error {
	layers, err := f.recurrentLayers(m, c)
	if err != nil {
		return err
	}
	c.SSM = model.SSM{Layers: layers,
		Inner:  m.int(".ssm.inner_size", 0, true),
		Heads:  m.int(".ssm.time_step_rank", 0, true),
		Groups: m.int(".ssm.group_count", 0, true),
		State:  m.int(".ssm.state_size", 0, true),
		Conv:   m.int(".ssm.conv_kernel", 0, true),
	}
	if m.err != nil {
		return m.err
	}
	if len(layers) == 0 {
		c.SSM = model.SSM{}
		return nil
	}
	s := c.SSM
	if s.Heads == 0 || s.Groups == 0 || s.Inner%s.Heads != 0 || s.Heads%s.Groups != 0 || s.Conv < 2 || s.State == 0 {
		return fmt.Errorf("%w: metadata %s: ssm of inner %d, %d heads, %d groups, state %d, conv %d", ErrFormat, m.arch, s.Inner, s.Heads, s.Groups, s.State, s.Conv)
	}
	return nil
}

// graniteHybrid reads Granite's multipliers and its RoPE switch:
// embedding_scale multiplies the embeddings, residual_scale every mixer and
// FFN output before its residual add, logit_scale divides the logits
// (each 0 or absent: none), attention.scale is the kq scale (0 or absent:
// 1/√head_dim), and rope.scaling.finetuned (true when absent) turns RoPE
// on: Granite 4.0 H's converter writes false, its attention is NoPE.
func (f *File) graniteHybrid(m *meta, c *model.Config) error {
	c.EmbedScale = m.float(".embedding_scale", 0)
	c.ResidualScale = m.float(".residual_scale", 0)
	c.LogitScale = m.float(".logit_scale", 0)
	if s := m.float(".attention.scale", 0); s != 0 {
		c.AttnScale = s
	}
	if !m.bool(".rope.scaling.finetuned", true) {
		c.RopeDims = 0
	}
	if m.err == nil && (c.EmbedScale < 0 || c.ResidualScale < 0 || c.LogitScale < 0) {
		return fmt.Errorf("%w: granitehybrid multipliers: embedding %g, residual %g, logit %g", ErrFormat, c.EmbedScale, c.ResidualScale, c.LogitScale)
	}
	return m.err
}
