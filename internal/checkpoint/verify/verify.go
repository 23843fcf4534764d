// Package verify checks that an imported checkpoint is complete and
// consistent: every tensor its configuration needs, shaped as it says.
package verify

import (
	"errors"
	"fmt"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// ErrIncomplete reports a missing, duplicated or misshapen tensor.
var ErrIncomplete = errors.New("checkpoint: incomplete or inconsistent tensors")

// Complete derives the Config fields the tensors decide (VocabSize from the
// token embedding, Tied from the absence of an LM head, the bias flags from
// layer 0) and checks that every tensor the configuration needs is present
// with the shape it implies. Importers call it after naming the tensors.
func Complete(ck *model.Checkpoint) error {
	c := &ck.Config
	byName := make(map[string]*tensors.Tensor, len(ck.Tensors))
	for _, t := range ck.Tensors {
		if byName[t.Name] != nil {
			return fmt.Errorf("%w: tensor %s given twice (fused and separate?)", ErrIncomplete, t.Name)
		}
		byName[t.Name] = t
	}
	emb := byName[model.TokenEmbedding]
	if emb == nil || len(emb.Shape) != 2 || emb.Shape[1] != c.Dim {
		return fmt.Errorf("%w: token embedding %s missing or not [vocab, %d]", ErrIncomplete, model.TokenEmbedding, c.Dim)
	}
	c.VocabSize = emb.Shape[0]
	c.Tied = byName[model.LMHead] == nil
	c.LMHeadBias = byName[model.LMHeadBiasName] != nil
	// The bias flags come from layer 0, or from the first attention layer
	// for the attention biases.
	first := 0
	for first < c.Layers-1 && c.RecurrentLayer(first) {
		first++
	}
	has := func(suffix string) bool { return byName[model.Layer(first, suffix)] != nil }
	c.QKVBias = has(model.BQ)
	c.OutBias = has(model.BO)
	c.FFNBias = has(model.BUp) || has(model.BDown)
	if c.Experts > 0 {
		c.RouterBias = has(model.RouterBias)
		c.ExpertBias = has(model.ExpertsGateBias) || has(model.ExpertsUpBias) || has(model.ExpertsDownBias)
	}
	c.AttnSinks = has(model.AttnSinks)

	// wantAt is the tensors of layer l and their shapes.
	wantAt := func(l int) map[string][]int {
		hd, hidden := c.LayerHeadDim(l), c.LayerHiddenDim(l)
		q, kv := c.Heads*hd, c.KVHeads*hd
		want := map[string][]int{
			model.AttnNorm: {c.Dim},
			model.WQ:       {q, c.Dim},
			model.WK:       {kv, c.Dim},
			model.WV:       {kv, c.Dim},
			model.WO:       {c.Dim, q},
			model.WUp:      {hidden, c.Dim},
			model.WDown:    {c.Dim, hidden},
		}
		if c.GatedFFN {
			want[model.WGate] = []int{hidden, c.Dim}
		}
		if c.Experts > 0 {
			delete(want, model.WUp)
			delete(want, model.WDown)
			delete(want, model.WGate)
			e, h := c.Experts, c.ExpertHidden
			want[model.Router] = []int{e, c.Dim}
			want[model.ExpertsGate] = []int{e, h, c.Dim}
			want[model.ExpertsUp] = []int{e, h, c.Dim}
			want[model.ExpertsDown] = []int{e, c.Dim, h}
			if c.RouterBias {
				want[model.RouterBias] = []int{e}
			}
			if s := c.SharedExpertHidden; s > 0 {
				want[model.SharedGate] = []int{s, c.Dim}
				want[model.SharedUp] = []int{s, c.Dim}
				want[model.SharedDown] = []int{c.Dim, s}
				want[model.SharedRouter] = []int{1, c.Dim}
			}
			if c.ExpertBias {
				want[model.ExpertsGateBias] = []int{e, h}
				want[model.ExpertsUpBias] = []int{e, h}
				want[model.ExpertsDownBias] = []int{e, c.Dim}
			}
		}
		if c.AttnSinks {
			want[model.AttnSinks] = []int{c.Heads}
		}
		if !c.Parallel {
			want[model.FFNNorm] = []int{c.Dim}
		}
		if c.PostNorms {
			want[model.PostAttnNorm] = []int{c.Dim}
			want[model.PostFFNNorm] = []int{c.Dim}
		}
		if c.QKNorm {
			want[model.QNorm] = []int{hd}
			want[model.KNorm] = []int{hd}
		}
		if c.Norm == model.NormLayer {
			want[model.AttnNormBias] = []int{c.Dim}
			if !c.Parallel {
				want[model.FFNNormBias] = []int{c.Dim}
			}
		}
		optional := map[string]bool{model.BQ: c.QKVBias, model.BK: c.QKVBias, model.BV: c.QKVBias, model.BO: c.OutBias, model.BUp: c.FFNBias, model.BDown: c.FFNBias}
		bias := map[string][]int{model.BQ: {q}, model.BK: {kv}, model.BV: {kv}, model.BO: {c.Dim}, model.BUp: {hidden}, model.BDown: {c.Dim}}
		for name, on := range optional {
			if on {
				want[name] = bias[name]
			}
		}
		if c.KVLayer(l) != l {
			// A layer sharing another's KV has no K/V of its own.
			delete(want, model.WK)
			delete(want, model.WV)
			delete(want, model.KNorm)
			delete(want, model.BK)
			delete(want, model.BV)
		}
		if c.PerLayerDim > 0 {
			want[model.PerLayerGate] = []int{c.PerLayerDim, c.Dim}
			want[model.PerLayerProj] = []int{c.Dim, c.PerLayerDim}
			want[model.PerLayerPostNorm] = []int{c.Dim}
		}
		if c.LayerOutputScale {
			want[model.LayerScale] = []int{1}
		}
		if c.AttnOutputGate {
			want[model.WQGate] = []int{q, c.Dim}
		}
		if c.RecurrentLayer(l) {
			// A short convolution, Gated DeltaNet or Mamba-2 layer has
			// its own tensors in place of the attention ones.
			for _, name := range []string{model.WQ, model.WK, model.WV, model.WO, model.BQ, model.BK, model.BV, model.BO, model.QNorm, model.KNorm, model.AttnSinks, model.WQGate} {
				delete(want, name)
			}
		}
		if c.ConvLayer(l) {
			want[model.ConvInProj] = []int{3 * c.Dim, c.Dim}
			want[model.ConvKernel] = []int{c.Dim, c.ConvWidth}
			want[model.ConvOutProj] = []int{c.Dim, c.Dim}
		}
		if c.DeltaLayer(l) {
			v, d := c.DeltaValueHeads, c.DeltaHeadDim
			want[model.DeltaQKV] = []int{c.DeltaChannels(), c.Dim}
			want[model.DeltaZ] = []int{v * d, c.Dim}
			want[model.DeltaBeta] = []int{v, c.Dim}
			want[model.DeltaAlpha] = []int{v, c.Dim}
			want[model.DeltaConv] = []int{c.DeltaChannels(), c.DeltaConvWidth}
			want[model.DeltaDtBias] = []int{v}
			want[model.DeltaA] = []int{v}
			want[model.DeltaNorm] = []int{d}
			want[model.DeltaOut] = []int{c.Dim, v * d}
		}
		if c.SSMLayer(l) {
			s := c.SSM
			cc := s.ConvChannels()
			want[model.SSMIn] = []int{s.InProjCols(), c.Dim}
			want[model.SSMConv] = []int{cc, s.Conv}
			want[model.SSMConvBias] = []int{cc}
			want[model.SSMDtBias] = []int{s.Heads}
			want[model.SSMA] = []int{s.Heads}
			want[model.SSMD] = []int{s.Heads}
			want[model.SSMNorm] = []int{s.Inner}
			want[model.SSMOut] = []int{c.Dim, s.Inner}
		}
		return want
	}
	for l := range c.Layers {
		want := wantAt(l)
		for suffix, shape := range want {
			if err := checkShape(byName, model.Layer(l, suffix), shape); err != nil {
				return err
			}
		}
	}
	if !c.PostLN {
		if err := checkShape(byName, model.FinalNorm, []int{c.Dim}); err != nil {
			return err
		}
	}
	global := map[string][]int{}
	if c.LearnedPositions {
		global[model.PositionEmbedding] = []int{c.MaxSeqLen, c.Dim}
	}
	if c.EmbedNorm {
		global[model.EmbedNorm] = []int{c.Dim}
		if c.Norm == model.NormLayer {
			global[model.EmbedNormBias] = []int{c.Dim}
		}
	}
	for name, shape := range global {
		if err := checkShape(byName, name, shape); err != nil {
			return err
		}
	}
	if p := c.PerLayerDim; p > 0 {
		for name, shape := range map[string][]int{model.PerLayerEmbedding: {c.VocabSize, c.Layers * p},
			model.PerLayerModelProj: {c.Layers * p, c.Dim}, model.PerLayerProjNorm: {p}} {
			if err := checkShape(byName, name, shape); err != nil {
				return err
			}
		}
	}
	if d := c.DenseDim; d > 0 {
		for name, shape := range map[string][]int{model.DenseIn: {d, c.Dim}, model.DenseOut: {c.Dim, d}} {
			if err := checkShape(byName, name, shape); err != nil {
				return err
			}
		}
	}
	if !c.Tied {
		if err := checkShape(byName, model.LMHead, []int{c.VocabSize, c.Dim}); err != nil {
			return err
		}
	}
	return nil
}

func checkShape(byName map[string]*tensors.Tensor, name string, shape []int) error {
	t := byName[name]
	if t == nil {
		return fmt.Errorf("%w: missing tensor %s", ErrIncomplete, name)
	}
	if len(t.Shape) != len(shape) {
		return fmt.Errorf("%w: %s has shape %v, want %v", ErrIncomplete, name, t.Shape, shape)
	}
	for i := range shape {
		if t.Shape[i] != shape[i] {
			return fmt.Errorf("%w: %s has shape %v, want %v", ErrIncomplete, name, t.Shape, shape)
		}
	}
	return nil
}
