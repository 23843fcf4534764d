package synthetic

import (
	"math"

	"github.com/gpurun/gpurun/tensors/model"
)

// role says how a tensor is stored and drawn.
type role uint8

const (
	roleMatrix role = iota // linear weight [out, in]: quantized per Options.Quant
	roleEmbed              // token embedding or LM head [vocab, dim]
	roleNorm               // norm scale: f32 near 1
	roleBias               // linear or LayerNorm bias: small f32
	roleRouter             // MoE router [experts, dim]: f32, as llama.cpp's quantizations keep it
	roleConv               // depthwise convolution kernel: f32, U(-1/sqrt(width), 1/sqrt(width))
	roleDecay              // Gated DeltaNet's and Mamba-2's A = -exp(A_log): f32, negative
)

// entry is one tensor of the checkpoint before its data exists.
type entry struct {
	name  string
	shape []int
	role  role
}

// layout lists every tensor the forward pass of cfg reads, under the names
// of tensors/model, mirroring the knobs internal/arch looks at: LayerNorm
// brings bias tensors, parallel blocks share one norm, gated FFNs add the
// gate, the bias flags add their biases, and a tied head reuses the
// embedding. Callers check the size with footprint first: the list has a
// dozen entries per layer.
func layout(cfg *model.Config) []entry {
	var es []entry
	add := func(e entry) { es = append(es, e) }
	head(cfg, add)
	for l := range cfg.Layers {
		layerEntries(cfg, l, add)
	}
	tail(cfg, add)
	return es
}

// head emits the tensors before the first layer: the token embedding
// and, for per-layer inputs (Gemma 4), their table, projection and norm.
func head(cfg *model.Config, add func(entry)) {
	add(entry{model.TokenEmbedding, []int{cfg.VocabSize, cfg.Dim}, roleEmbed})
	if p := cfg.PerLayerDim; p > 0 {
		add(entry{model.PerLayerEmbedding, []int{cfg.VocabSize, cfg.Layers * p}, roleEmbed})
		add(entry{model.PerLayerModelProj, []int{cfg.Layers * p, cfg.Dim}, roleMatrix})
		add(entry{model.PerLayerProjNorm, []int{p}, roleNorm})
	}
}

// tail emits the tensors after the last layer.
func tail(cfg *model.Config, add func(entry)) {
	add(entry{model.FinalNorm, []int{cfg.Dim}, roleNorm})
	if cfg.Norm == model.NormLayer {
		add(entry{model.FinalNormBias, []int{cfg.Dim}, roleBias})
	}
	if !cfg.Tied {
		add(entry{model.LMHead, []int{cfg.VocabSize, cfg.Dim}, roleEmbed})
	}
	if cfg.LMHeadBias {
		add(entry{model.LMHeadBiasName, []int{cfg.VocabSize}, roleBias})
	}
}

// layerEntries emits the tensors of layer l. Every layer of one kind
// (Mamba-2, Gated DeltaNet, short convolution or attention) has the same shapes unless the config
// varies them (uniformLayers): Gemma 4's head dims by layer kind, its FFN
// widths by layer, and its last layers without keys and values of their
// own.
func layerEntries(cfg *model.Config, l int, add func(entry)) {
	name := func(suffix string) string { return model.Layer(l, suffix) }
	norm := func(scale, bias string) {
		add(entry{name(scale), []int{cfg.Dim}, roleNorm})
		if cfg.Norm == model.NormLayer {
			add(entry{name(bias), []int{cfg.Dim}, roleBias})
		}
	}
	linear := func(w, b string, hasBias bool, out, in int) {
		add(entry{name(w), []int{out, in}, roleMatrix})
		if hasBias {
			add(entry{name(b), []int{out}, roleBias})
		}
	}
	norm(model.AttnNorm, model.AttnNormBias)
	switch {
	case cfg.SSMLayer(l):
		ssmEntries(cfg, l, add)
	case cfg.DeltaLayer(l):
		deltaEntries(cfg, l, add)
	case cfg.ConvLayer(l):
		// LFM2's gated short convolution: [B | C | x] rows, the
		// depthwise kernel, the output projection.
		add(entry{name(model.ConvInProj), []int{3 * cfg.Dim, cfg.Dim}, roleMatrix})
		add(entry{name(model.ConvKernel), []int{cfg.Dim, cfg.ConvWidth}, roleConv})
		add(entry{name(model.ConvOutProj), []int{cfg.Dim, cfg.Dim}, roleMatrix})
	default:
		attentionEntries(cfg, l, add, linear)
	}
	if !cfg.Parallel {
		norm(model.FFNNorm, model.FFNNormBias)
	}
	ffnEntries(cfg, l, add, linear)
	if p := cfg.PerLayerDim; p > 0 {
		add(entry{name(model.PerLayerGate), []int{p, cfg.Dim}, roleMatrix})
		add(entry{name(model.PerLayerProj), []int{cfg.Dim, p}, roleMatrix})
		add(entry{name(model.PerLayerPostNorm), []int{cfg.Dim}, roleNorm})
	}
	if cfg.LayerOutputScale {
		add(entry{name(model.LayerScale), []int{1}, roleNorm})
	}
}

// ssmEntries emits the mixer tensors of a Mamba-2 layer (model.Config.SSM).
func ssmEntries(cfg *model.Config, l int, add func(entry)) {
	name := func(suffix string) string { return model.Layer(l, suffix) }
	s := cfg.SSM
	cc := s.ConvChannels()
	add(entry{name(model.SSMIn), []int{s.InProjCols(), cfg.Dim}, roleMatrix})
	add(entry{name(model.SSMConv), []int{cc, s.Conv}, roleConv})
	add(entry{name(model.SSMConvBias), []int{cc}, roleBias})
	add(entry{name(model.SSMDtBias), []int{s.Heads}, roleNorm})
	add(entry{name(model.SSMA), []int{s.Heads}, roleDecay})
	add(entry{name(model.SSMD), []int{s.Heads}, roleNorm})
	add(entry{name(model.SSMNorm), []int{s.Inner}, roleNorm})
	add(entry{name(model.SSMOut), []int{cfg.Dim, s.Inner}, roleMatrix})
}

// deltaEntries emits the mixer tensors of a Gated DeltaNet layer.
func deltaEntries(cfg *model.Config, l int, add func(entry)) {
	name := func(suffix string) string { return model.Layer(l, suffix) }
	ch, v, d := cfg.DeltaChannels(), cfg.DeltaValueHeads, cfg.DeltaHeadDim
	add(entry{name(model.DeltaQKV), []int{ch, cfg.Dim}, roleMatrix})
	add(entry{name(model.DeltaZ), []int{v * d, cfg.Dim}, roleMatrix})
	add(entry{name(model.DeltaBeta), []int{v, cfg.Dim}, roleMatrix})
	add(entry{name(model.DeltaAlpha), []int{v, cfg.Dim}, roleMatrix})
	add(entry{name(model.DeltaConv), []int{ch, cfg.DeltaConvWidth}, roleConv})
	add(entry{name(model.DeltaDtBias), []int{v}, roleNorm})
	add(entry{name(model.DeltaA), []int{v}, roleDecay})
	add(entry{name(model.DeltaNorm), []int{d}, roleNorm})
	add(entry{name(model.DeltaOut), []int{cfg.Dim, v * d}, roleMatrix})
}

// attentionEntries emits the mixer tensors of an attention layer.
func attentionEntries(cfg *model.Config, l int, add func(entry), linear func(w, b string, hasBias bool, out, in int)) {
	name := func(suffix string) string { return model.Layer(l, suffix) }
	hd := cfg.LayerHeadDim(l)
	qCols, kvCols := cfg.Heads*hd, cfg.KVHeads*hd
	ownKV := cfg.KVLayer(l) == l
	linear(model.WQ, model.BQ, cfg.QKVBias, qCols, cfg.Dim)
	if cfg.AttnOutputGate {
		linear(model.WQGate, "", false, qCols, cfg.Dim)
	}
	if ownKV {
		linear(model.WK, model.BK, cfg.QKVBias, kvCols, cfg.Dim)
		linear(model.WV, model.BV, cfg.QKVBias, kvCols, cfg.Dim)
	}
	if cfg.QKNorm {
		add(entry{name(model.QNorm), []int{hd}, roleNorm})
		if ownKV {
			add(entry{name(model.KNorm), []int{hd}, roleNorm})
		}
	}
	linear(model.WO, model.BO, cfg.OutBias, cfg.Dim, qCols)
	if cfg.PostNorms {
		add(entry{name(model.PostAttnNorm), []int{cfg.Dim}, roleNorm})
	}
}

// ffnEntries emits the feed-forward tensors of layer l.
func ffnEntries(cfg *model.Config, l int, add func(entry), linear func(w, b string, hasBias bool, out, in int)) {
	name := func(suffix string) string { return model.Layer(l, suffix) }
	if cfg.Experts > 0 {
		e, h := cfg.Experts, cfg.ExpertHidden
		add(entry{name(model.Router), []int{e, cfg.Dim}, roleRouter})
		add(entry{name(model.ExpertsGate), []int{e, h, cfg.Dim}, roleMatrix})
		add(entry{name(model.ExpertsUp), []int{e, h, cfg.Dim}, roleMatrix})
		add(entry{name(model.ExpertsDown), []int{e, cfg.Dim, h}, roleMatrix})
	} else {
		hidden := cfg.LayerHiddenDim(l)
		if cfg.GatedFFN {
			add(entry{name(model.WGate), []int{hidden, cfg.Dim}, roleMatrix})
		}
		linear(model.WUp, model.BUp, cfg.FFNBias, hidden, cfg.Dim)
		linear(model.WDown, model.BDown, cfg.FFNBias, cfg.Dim, hidden)
	}
	if cfg.PostNorms {
		add(entry{name(model.PostFFNNorm), []int{cfg.Dim}, roleNorm})
	}
}

// uniformLayers reports whether every layer of cfg has layer 0's shapes.
func uniformLayers(cfg *model.Config) bool {
	return cfg.HeadDimLocal == 0 && cfg.SharedKVLayers == 0 && cfg.LayerHidden == nil
}

// footprint sums f over the tensors of cfg without listing them: the head
// and tail once, layer 0 times the layer count. Validated dimensions keep
// each term below 2^50 and the per-layer and once sums below 2^54; the
// product with the depth saturates at math.MaxInt64 instead of wrapping.
func footprint(cfg *model.Config, f func(entry) int64) int64 {
	var once, perLayer int64
	sum := func(acc *int64) func(entry) { return func(e entry) { *acc += f(e) } }
	head(cfg, sum(&once))
	tail(cfg, sum(&once))
	if !uniformLayers(cfg) {
		// Layers of several shapes (Gemma 4): each one counted.
		for l := range cfg.Layers {
			layerEntries(cfg, l, sum(&once))
			if once > math.MaxInt64/4 {
				return math.MaxInt64
			}
		}
		return once
	}
	// Layers of one kind (Mamba-2, Gated DeltaNet, short convolution or
	// attention) share their shapes: each kind counted from its first
	// layer.
	var first, count [4]int
	for l := cfg.Layers - 1; l >= 0; l-- {
		k := layerKind(cfg, l)
		first[k] = l
		count[k]++
	}
	total := once
	for k := range first {
		if count[k] == 0 {
			continue
		}
		perLayer = 0
		layerEntries(cfg, first[k], sum(&perLayer))
		layers := int64(count[k])
		if perLayer > (math.MaxInt64-total)/layers {
			return math.MaxInt64
		}
		total += perLayer * layers
	}
	return total
}

// layerKind is 0 for an attention layer, 1 for Gated DeltaNet, 2 for
// Mamba-2, 3 for a short convolution.
func layerKind(cfg *model.Config, l int) int {
	switch {
	case cfg.ConvLayer(l):
		return 3
	case cfg.SSMLayer(l):
		return 2
	case cfg.DeltaLayer(l):
		return 1
	}
	return 0
}
