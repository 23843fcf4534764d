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
	roleConv               // depthwise convolution kernel [channels, width]: f32, U(±1/√width)
	roleDecay              // Mamba-2's A = -exp(A_log): f32, -U(0.1, 2)
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

// head emits the tensors before the first layer.
func head(cfg *model.Config, add func(entry)) {
	add(entry{model.TokenEmbedding, []int{cfg.VocabSize, cfg.Dim}, roleEmbed})
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

// layerEntries emits the tensors of layer l; every layer has the same
// shapes but those whose mixer is Mamba-2 (model.Config.SSM), which have
// the same shapes as each other.
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
	if cfg.SSMLayer(l) {
		ssmEntries(cfg, name, add)
	} else {
		attentionEntries(cfg, name, linear, add)
	}
	ffnEntries(cfg, name, norm, linear, add)
}

// ssmEntries emits a Mamba-2 mixer's tensors (model.Config.SSM).
func ssmEntries(cfg *model.Config, name func(string) string, add func(entry)) {
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

// attentionEntries emits an attention mixer's tensors.
func attentionEntries(cfg *model.Config, name func(string) string, linear func(w, b string, hasBias bool, out, in int), add func(entry)) {
	qCols, kvCols := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	linear(model.WQ, model.BQ, cfg.QKVBias, qCols, cfg.Dim)
	linear(model.WK, model.BK, cfg.QKVBias, kvCols, cfg.Dim)
	linear(model.WV, model.BV, cfg.QKVBias, kvCols, cfg.Dim)
	if cfg.QKNorm {
		add(entry{name(model.QNorm), []int{cfg.HeadDim}, roleNorm})
		add(entry{name(model.KNorm), []int{cfg.HeadDim}, roleNorm})
	}
	linear(model.WO, model.BO, cfg.OutBias, cfg.Dim, qCols)
	if cfg.PostNorms {
		add(entry{name(model.PostAttnNorm), []int{cfg.Dim}, roleNorm})
	}
}

// ffnEntries emits the FFN block's tensors and norms.
func ffnEntries(cfg *model.Config, name func(string) string, norm func(scale, bias string), linear func(w, b string, hasBias bool, out, in int), add func(entry)) {
	if !cfg.Parallel {
		norm(model.FFNNorm, model.FFNNormBias)
	}
	if cfg.Experts > 0 {
		e, h := cfg.Experts, cfg.ExpertHidden
		add(entry{name(model.Router), []int{e, cfg.Dim}, roleRouter})
		add(entry{name(model.ExpertsGate), []int{e, h, cfg.Dim}, roleMatrix})
		add(entry{name(model.ExpertsUp), []int{e, h, cfg.Dim}, roleMatrix})
		add(entry{name(model.ExpertsDown), []int{e, cfg.Dim, h}, roleMatrix})
	} else {
		if cfg.GatedFFN {
			add(entry{name(model.WGate), []int{cfg.HiddenDim, cfg.Dim}, roleMatrix})
		}
		linear(model.WUp, model.BUp, cfg.FFNBias, cfg.HiddenDim, cfg.Dim)
		linear(model.WDown, model.BDown, cfg.FFNBias, cfg.Dim, cfg.HiddenDim)
	}
	if cfg.PostNorms {
		add(entry{name(model.PostFFNNorm), []int{cfg.Dim}, roleNorm})
	}
}

// footprint sums f over the tensors of cfg without listing them: the head
// and tail once, the first layer of each kind (attention, Mamba-2) times
// the count of its kind. Validated dimensions keep each term below 2^50
// and the per-layer and once sums below 2^54; the products with the
// depths saturate at math.MaxInt64 instead of wrapping.
func footprint(cfg *model.Config, f func(entry) int64) int64 {
	var once int64
	sum := func(acc *int64) func(entry) { return func(e entry) { *acc += f(e) } }
	head(cfg, sum(&once))
	tail(cfg, sum(&once))
	total := once
	ssm := int64(len(cfg.SSM.Layers))
	for _, kind := range []struct {
		ssm    bool
		layers int64
	}{{false, int64(cfg.Layers) - ssm}, {true, ssm}} {
		if kind.layers <= 0 {
			continue
		}
		var perLayer int64
		layerEntries(cfg, firstLayer(cfg, kind.ssm), sum(&perLayer))
		if perLayer > (math.MaxInt64-total)/kind.layers {
			return math.MaxInt64
		}
		total += perLayer * kind.layers
	}
	return total
}

// firstLayer is the first layer whose mixer is Mamba-2 (ssm) or not (the
// caller knows there is one).
func firstLayer(cfg *model.Config, ssm bool) int {
	for l := range cfg.Layers {
		if cfg.SSMLayer(l) == ssm {
			return l
		}
	}
	return -1
}
