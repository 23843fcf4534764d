package synthetic

import "github.com/gpurun/gpurun/tensors/model"

// role says how a tensor is stored and drawn.
type role uint8

const (
	roleMatrix role = iota // linear weight [out, in]: quantized per Options.Quant
	roleEmbed              // token embedding or LM head [vocab, dim]
	roleNorm               // norm scale: f32 near 1
	roleBias               // linear or LayerNorm bias: small f32
)

// entry is one tensor of the checkpoint before its data exists.
type entry struct {
	name  string
	shape []int
	role  role
}

// layout lists every tensor the forward pass of cfg reads, under the names
// of tensors/model, mirroring the knobs pipeline/arch looks at: LayerNorm
// brings bias tensors, parallel blocks share one norm, gated FFNs add the
// gate, the bias flags add their biases, and a tied head reuses the
// embedding.
func layout(cfg *model.Config) []entry {
	layer := model.Layer
	qCols, kvCols := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	layerNorm := cfg.Norm == model.NormLayer
	var es []entry
	add := func(name string, r role, shape ...int) {
		es = append(es, entry{name: name, shape: shape, role: r})
	}
	norm := func(scale, bias string) {
		add(scale, roleNorm, cfg.Dim)
		if layerNorm {
			add(bias, roleBias, cfg.Dim)
		}
	}
	linear := func(w, b string, hasBias bool, out, in int) {
		add(w, roleMatrix, out, in)
		if hasBias {
			add(b, roleBias, out)
		}
	}

	add(model.TokenEmbedding, roleEmbed, cfg.VocabSize, cfg.Dim)
	for l := range cfg.Layers {
		norm(layer(l, model.AttnNorm), layer(l, model.AttnNormBias))
		linear(layer(l, model.WQ), layer(l, model.BQ), cfg.QKVBias, qCols, cfg.Dim)
		linear(layer(l, model.WK), layer(l, model.BK), cfg.QKVBias, kvCols, cfg.Dim)
		linear(layer(l, model.WV), layer(l, model.BV), cfg.QKVBias, kvCols, cfg.Dim)
		linear(layer(l, model.WO), layer(l, model.BO), cfg.OutBias, cfg.Dim, qCols)
		if cfg.PostNorms {
			add(layer(l, model.PostAttnNorm), roleNorm, cfg.Dim)
		}
		if !cfg.Parallel {
			norm(layer(l, model.FFNNorm), layer(l, model.FFNNormBias))
		}
		if cfg.GatedFFN {
			add(layer(l, model.WGate), roleMatrix, cfg.HiddenDim, cfg.Dim)
		}
		linear(layer(l, model.WUp), layer(l, model.BUp), cfg.FFNBias, cfg.HiddenDim, cfg.Dim)
		linear(layer(l, model.WDown), layer(l, model.BDown), cfg.FFNBias, cfg.Dim, cfg.HiddenDim)
		if cfg.PostNorms {
			add(layer(l, model.PostFFNNorm), roleNorm, cfg.Dim)
		}
	}
	norm(model.FinalNorm, model.FinalNormBias)
	if !cfg.Tied {
		add(model.LMHead, roleEmbed, cfg.VocabSize, cfg.Dim)
	}
	if cfg.LMHeadBias {
		add(model.LMHeadBiasName, roleBias, cfg.VocabSize)
	}
	return es
}
