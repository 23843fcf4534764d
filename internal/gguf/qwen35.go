package gguf

import (
	"fmt"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// qwen35 reads Qwen3.5's conventions (llama.cpp's src/models/qwen35.cpp,
// delta-net-base.cpp, llama-model.cpp; ../shared/models/arch3/README.md):
// layer il is full attention iff (il+1) % full_attention_interval == 0,
// every other layer a Gated DeltaNet of ssm.conv_kernel taps,
// ssm.group_count key heads and ssm.time_step_rank value heads of
// ssm.state_size (ssm.inner_size = value heads x state size); the
// attention layers gate their output (attn_q holds a gate row per query
// row) and rotate the first rope.dimension_count dims of each head with
// IMROPE, which for text (every position stream p, the fourth 0) is NEOX
// rotation of those dims as long as every rotated pair falls in one of
// the first three sections (checked: a pair of the fourth would rotate by
// position 0).
func (f *File) qwen35(m *meta, c *model.Config) error {
	interval := m.int(".full_attention_interval", 4, false)
	c.DeltaConvWidth = m.int(".ssm.conv_kernel", 0, true)
	c.DeltaHeadDim = m.int(".ssm.state_size", 0, true)
	c.DeltaKeyHeads = m.int(".ssm.group_count", 0, true)
	c.DeltaValueHeads = m.int(".ssm.time_step_rank", 0, true)
	inner := m.int(".ssm.inner_size", 0, true)
	if m.err != nil {
		return m.err
	}
	if k, v := c.DeltaKeyHeads, c.DeltaValueHeads; k == 0 || v%k != 0 || c.DeltaHeadDim == 0 || c.DeltaConvWidth < 2 {
		// llama.cpp tiles value heads over key heads (h mod K).
		return fmt.Errorf("%w: metadata %s = %d (conv width), %s = %d, %s = %d (key and value heads of a delta net), %s = %d",
			ErrFormat, m.key(".ssm.conv_kernel"), c.DeltaConvWidth, m.key(".ssm.group_count"), k, m.key(".ssm.time_step_rank"), v,
			m.key(".ssm.state_size"), c.DeltaHeadDim)
	}
	if interval == 0 {
		return fmt.Errorf("%w: metadata %s = 0", ErrFormat, m.key(".full_attention_interval"))
	}
	if inner != c.DeltaValueHeads*c.DeltaHeadDim {
		return fmt.Errorf("%w: metadata %s = %d, want time_step_rank x state_size = %d", ErrFormat, m.key(".ssm.inner_size"), inner, c.DeltaValueHeads*c.DeltaHeadDim)
	}
	for l := range c.Layers {
		if (l+1)%interval != 0 {
			c.DeltaLayers = append(c.DeltaLayers, l)
		}
	}
	c.AttnOutputGate = true
	return f.imropeSections(m, c)
}

// qwen35moe reads Qwen3.5 MoE's conventions: qwen35's, with every FFN a
// mixture of expert_count experts of expert_feed_forward_length units,
// expert_used_count per token by softmax gating renormalized (llama.cpp's
// build_moe_ffn with norm_w, as qwen3moe), plus a shared expert of
// expert_shared_feed_forward_length units scaled by the sigmoid of
// ffn_gate_inp_shexp·x (src/models/qwen35moe.cpp). feed_forward_length is
// unused and may be absent.
func (f *File) qwen35moe(m *meta, c *model.Config) error {
	if err := f.qwen35(m, c); err != nil {
		return err
	}
	c.Experts = m.int(".expert_count", 0, true)
	c.ExpertsUsed = m.int(".expert_used_count", 0, true)
	c.ExpertHidden = m.int(".expert_feed_forward_length", 0, true)
	c.SharedExpertHidden = m.int(".expert_shared_feed_forward_length", 0, false)
	c.NormTopK = true
	if m.err != nil {
		return m.err
	}
	if c.Experts == 0 || c.ExpertsUsed == 0 || c.ExpertsUsed > c.Experts {
		return fmt.Errorf("%w: metadata %s = %d with %s = %d", ErrFormat, m.key(".expert_used_count"), c.ExpertsUsed, m.key(".expert_count"), c.Experts)
	}
	if c.HiddenDim == 0 {
		c.HiddenDim = c.ExpertHidden
	}
	return nil
}

// imropeSections checks rope.dimension_sections (required) against
// ggml's IMROPE assignment of rotated pair i (sector s = i mod the
// sections' sum): stream 1 when s%3 == 1 and s < 3*sections[1], stream 2
// when s%3 == 2 and s < 3*sections[2], stream 0 when s%3 == 0 and s <
// 3*sections[0], stream 3 otherwise (ggml-cpu ops.cpp, rope_multi). A text
// token's streams are (p, p, p, 0) (llama-graph.cpp), so the rotation is
// NEOX over the rotated dims iff no pair falls to stream 3.
func (f *File) imropeSections(m *meta, c *model.Config) error {
	key := m.key(".rope.dimension_sections")
	secs, err := f.perLayerInts(key)
	if err != nil {
		return err
	}
	if len(secs) != 4 {
		return fmt.Errorf("%w: metadata %s = %v: want 4 sections", ErrFormat, key, secs)
	}
	sum := secs[0] + secs[1] + secs[2] + secs[3]
	if sum == 0 {
		return fmt.Errorf("%w: metadata %s = %v", ErrFormat, key, secs)
	}
	for i := range c.RopeDims / 2 {
		s := i % sum
		if !(s%3 == 1 && s < 3*secs[1] || s%3 == 2 && s < 3*secs[2] || s%3 == 0 && s < 3*secs[0]) {
			return fmt.Errorf("%w: metadata %s = %v: rotated pair %d takes the fourth position stream", ErrUnsupported, key, secs, i)
		}
	}
	return nil
}

// qwen35Layer names Qwen3.5's per-layer tensors that differ from the
// common table: a Gated DeltaNet layer's (its attn_qkv is the fused q, k,
// v of the convolution, not attention's), the pre-FFN norm stored as
// post_attention_norm, and the interleaved query and gate rows of attn_q,
// split per head into WQ and WQGate. ok is false for the others.
// qwen35SharedNames are Qwen3.5 MoE's shared expert tensors.
var qwen35SharedNames = map[string]string{
	"ffn_gate_shexp.weight":     model.SharedGate,
	"ffn_up_shexp.weight":       model.SharedUp,
	"ffn_down_shexp.weight":     model.SharedDown,
	"ffn_gate_inp_shexp.weight": model.SharedRouter,
}

var qwen35DeltaNames = map[string]string{
	fusedQKV:            model.DeltaQKV,
	"attn_gate.weight":  model.DeltaZ,
	"ssm_beta.weight":   model.DeltaBeta,
	"ssm_alpha.weight":  model.DeltaAlpha,
	"ssm_conv1d.weight": model.DeltaConv,
	"ssm_dt.bias":       model.DeltaDtBias,
	"ssm_a":             model.DeltaA,
	"ssm_norm.weight":   model.DeltaNorm,
	"ssm_out.weight":    model.DeltaOut,
}

func (f *File) qwen35Layer(info *TensorInfo, layer int, suffix string, c *model.Config) (ts []*tensors.Tensor, ok bool, err error) {
	name := ""
	switch {
	case c.DeltaLayer(layer) && qwen35DeltaNames[suffix] != "":
		name = qwen35DeltaNames[suffix]
	case suffix == "post_attention_norm.weight":
		name = model.FFNNorm
	case c.SharedExpertHidden > 0 && qwen35SharedNames[suffix] != "":
		name = qwen35SharedNames[suffix]
	case suffix == "attn_q.weight" && !c.DeltaLayer(layer):
		t, err := f.toTensor(info, info.Name)
		if err != nil {
			return nil, true, err
		}
		q, gate, err := splitHeads(t, c.HeadDim)
		if err != nil {
			return nil, true, err
		}
		q.Name, gate.Name = model.Layer(layer, model.WQ), model.Layer(layer, model.WQGate)
		for _, p := range []*tensors.Tensor{q, gate} {
			if p.Scales != nil {
				p.Scales.Name = model.ScaleName(p.Name)
			}
		}
		return []*tensors.Tensor{q, gate}, true, nil
	default:
		return nil, false, nil
	}
	t, err := f.toTensor(info, model.Layer(layer, name))
	if err == nil && name == model.SharedRouter && len(t.Shape) == 1 {
		// ffn_gate_inp_shexp is one row of dim values: a [1, dim] matrix.
		t.Shape = []int{1, t.Shape[0]}
	}
	return []*tensors.Tensor{t}, true, err
}

// splitHeads splits the rows of t, runs of hd rows alternating between
// two tensors ([a_0 | b_0 | a_1 | b_1 ...], Qwen3.5's per-head query and
// gate rows), into a = [a_0 | a_1 ...] and b; a deferred t stays deferred.
func splitHeads(t *tensors.Tensor, hd int) (a, b *tensors.Tensor, err error) {
	if hd <= 0 || len(t.Shape) != 2 || t.Shape[0]%(2*hd) != 0 {
		return nil, nil, fmt.Errorf("%w: tensor %q %v does not split into query and gate rows of %d per head", ErrFormat, t.Name, t.Shape, hd)
	}
	half := t.Shape[0] / 2
	rows := func(odd int) []int {
		var rs []int
		for r := 0; r < t.Shape[0]; r++ {
			if (r/hd)%2 == odd {
				rs = append(rs, r)
			}
		}
		return rs
	}
	if !t.Deferred() {
		a, err = gatherRows(t, rows(0))
		if err != nil {
			return nil, nil, err
		}
		b, err = gatherRows(t, rows(1))
		return a, b, err
	}
	parts := make([]*tensors.Tensor, 2)
	for i := range parts {
		p := &tensors.Tensor{DType: t.DType, Shape: []int{half, t.Shape[1]}}
		p.Source = func(p *tensors.Tensor) error {
			whole := &tensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Source: t.Source}
			if err := whole.Fill(); err != nil {
				return err
			}
			g, err := gatherRows(whole, rows(i))
			if err != nil {
				return err
			}
			p.Data, p.Scales = g.Data, g.Scales
			if p.Scales != nil {
				p.Scales.Name = model.ScaleName(p.Name)
			}
			return nil
		}
		parts[i] = p
	}
	return parts[0], parts[1], nil
}

// gatherRows copies the given rows of the 2-D tensor t (and of its
// per-row or per-block scales) into a new tensor.
func gatherRows(t *tensors.Tensor, rows []int) (*tensors.Tensor, error) {
	total, cols := t.Shape[0], t.Shape[1]
	if !t.DType.Block() && t.DType.Bits()*cols%8 != 0 {
		return nil, fmt.Errorf("%w: tensor %q rows are not whole bytes", ErrUnsupported, t.Name)
	}
	rb := t.DType.ByteSize(cols)
	if len(t.Data) != total*rb {
		return nil, fmt.Errorf("%w: tensor %q has %d bytes for %d rows of %d", ErrFormat, t.Name, len(t.Data), total, rb)
	}
	out := &tensors.Tensor{Name: t.Name, DType: t.DType, Shape: []int{len(rows), cols}, Data: make([]byte, 0, len(rows)*rb)}
	for _, r := range rows {
		out.Data = append(out.Data, t.Data[r*rb:(r+1)*rb]...)
	}
	if s := t.Scales; s != nil {
		sb := len(s.Data) / total
		sc := &tensors.Tensor{DType: s.DType, Shape: append([]int{len(rows)}, s.Shape[1:]...), Data: make([]byte, 0, len(rows)*sb)}
		for _, r := range rows {
			sc.Data = append(sc.Data, s.Data[r*sb:(r+1)*sb]...)
		}
		out.Scales = sc
	}
	return out, nil
}
