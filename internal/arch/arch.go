// Package arch builds the forward pass of a decoder-only transformer, as
// described by a model.Config, as a fusion graph. One builder serves every
// supported architecture: the differences (norm kind, RoPE pairing and
// partial rotary, gated or plain FFN, parallel or sequential blocks, Gemma 2
// post-norms, soft caps and sliding windows, biases, tied heads, embedding
// scale; q/k norms per head, RoPE factor tables and attention factor,
// per-layer RoPE bases and NoPE layers; LFM2's gated short convolution
// layers and Qwen3.5's Gated DeltaNet layers in place of attention, and
// its gated attention; an embedding model's bidirectional attention,
// BERT's learned positions and post-LN blocks, and a step that ends in
// hidden states rather than logits, BuildOptions.Embed) are all knobs of
// the config.
package arch

import (
	"errors"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors/model"
)

// BuildOptions sizes a graph.
type BuildOptions struct {
	Tokens    int  // tokens per step: 1 for decode, the bucket size for prefill
	MaxLen    int  // KV cache positions
	AllLogits bool // logits for every row rather than the last one only
	// Embed builds an embedding model's step (model.Config.Pooling): its
	// Logits buffer is the final-norm hidden state of every row, through
	// the config's dense projections (DenseDim) when it has them: Dim
	// values per row, which the caller pools. It excludes Argmax, Sample
	// and Batch.
	Embed bool
	KVF16 bool // the graph's KV cache stores binary16 (fusion.KVSpec.F16)
	// CacheK and CacheV are the element types of the cache's keys and
	// values (fusion.KVSpec.K, V): the zero value is KVF16's float cache,
	// a block type llama.cpp's `-ctk`/`-ctv` quantization.
	CacheK, CacheV fusion.KVType
	// Argmax appends fusion.Argmax after the logits (and the final soft
	// cap): the graph's Logits is then one value, the greedy token id as
	// an f32, so greedy decoding reads back one value per step. It needs
	// the single logits row (not AllLogits).
	Argmax bool
	// Sample, when set, appends fusion.Sample with this rule after the
	// logits, as Argmax appends fusion.Argmax (and excludes it).
	Sample *fusion.Sampling
	// Batch builds a batched decode step (fusion.Graph.Batch): Tokens
	// rows, each one token of its own sequence, and the logits of every
	// row. It excludes Argmax.
	Batch bool
	// RingTokens, when > 0, gives every sliding-window layer a ring cache
	// of window + RingTokens - 1 positions (fusion.KVSpec.Ring) where that
	// is less than half of MaxLen (a ring holds each position twice on the
	// CPU backend): every graph over one cache must share it and have at
	// most RingTokens tokens (a batched graph's rows are one token each).
	RingTokens int
	// LoRA applies adapters unmerged: for each projection weight name, the
	// pairs whose updates are added to its output (see LoRAPair).
	LoRA map[string][]LoRAPair
	// RowLoRA, in a batched graph, gives its rows a choice of adapter
	// sets: after each projection that a set adapts, a fusion.RowLoRAOp
	// adds to each row the updates of its set (gpu.Row.Adapter indexes
	// RowLoRA; an empty set applies none). LoRA's pairs, if any, apply to
	// every row besides.
	RowLoRA []map[string][]LoRAPair
	// Embeddings makes the step read its rows from the host
	// (fusion.InputOp, gpu.Program.SetInput) in place of the token
	// embeddings, taken as they are (no embedding scale): an image's
	// embeddings from its encoder (llama.cpp scales only token
	// embeddings, src/models/gemma3.cpp).
	Embeddings bool
	// NonCausal makes every attention of the step non-causal
	// (fusion.AttentionOp.NonCausal): the rows of an image attend to each
	// other, as llama.cpp decodes a Gemma 3 image.
	NonCausal bool
}

// KVSpec is the cache a graph of cfg with opts reads and writes: the
// pipeline allocates it with the same options.
func KVSpec(cfg *model.Config, opts BuildOptions) fusion.KVSpec {
	spec := fusion.KVSpec{Layers: cfg.Layers, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, MaxLen: opts.MaxLen, F16: opts.KVF16, K: opts.CacheK, V: opts.CacheV}
	if cfg.HeadDimLocal > 0 || cfg.SharedKVLayers > 0 {
		// Per-layer head dims; a layer reading another's cache has none.
		spec.HeadDims = make([]int, cfg.Layers)
		spec.HeadDim = 0
		for l := range cfg.Layers {
			if cfg.KVLayer(l) == l {
				spec.HeadDims[l] = cfg.LayerHeadDim(l)
				spec.HeadDim = max(spec.HeadDim, spec.HeadDims[l])
			}
		}
	}
	for l := range cfg.Layers {
		// Only a quantized cache's rotation reads it (fusion.KVSpec.SWA):
		// float caches' specs stay as they were.
		if spec.Quantized() && cfg.LayerWindow(l) > 0 {
			if spec.SWA == nil {
				spec.SWA = make([]bool, cfg.Layers)
			}
			spec.SWA[l] = true
		}
	}
	for l := range cfg.Layers {
		if cfg.RecurrentLayer(l) && spec.State == nil {
			spec.State = make([]fusion.LayerState, cfg.Layers)
		}
		switch {
		case cfg.ConvLayer(l):
			spec.State[l] = fusion.LayerState{ConvChannels: cfg.Dim, ConvWindow: cfg.ConvWidth - 1}
		case cfg.DeltaLayer(l):
			spec.State[l] = deltaNetOp(cfg, l, 0, 0, 0, 0).State()
		case cfg.SSMLayer(l):
			spec.State[l] = mamba2State(cfg)
		}
	}
	if opts.RingTokens <= 0 {
		return spec
	}
	for l := range cfg.Layers {
		if w := cfg.LayerWindow(l); w > 0 && spec.LayerHeadDim(l) > 0 && 2*(w+opts.RingTokens-1) < opts.MaxLen {
			if spec.Ring == nil {
				spec.Ring = make([]int, cfg.Layers)
			}
			spec.Ring[l] = w + opts.RingTokens - 1
		}
	}
	return spec
}

// ErrOptions reports unusable build options.
var ErrOptions = errors.New("arch: invalid build options")

// Build returns the graph of one forward step. Its Logits buffer holds
// VocabSize values per row: one row, or Tokens rows with AllLogits; with
// Argmax, one value: the id of the largest logit.
func Build(cfg *model.Config, opts BuildOptions) (*fusion.Graph, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%w: nil config", model.ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("arch: %w", err)
	}
	if cfg.Parallel && cfg.PostNorms {
		return nil, fmt.Errorf("arch: %w: parallel blocks with post-norms", model.ErrConfig)
	}
	if opts.Tokens <= 0 || opts.MaxLen <= 0 || opts.Tokens > opts.MaxLen || opts.MaxLen > 1<<24 {
		return nil, fmt.Errorf("%w: tokens %d, max len %d", ErrOptions, opts.Tokens, opts.MaxLen)
	}
	if opts.Sample != nil && (opts.Argmax || opts.AllLogits || opts.Batch) {
		return nil, fmt.Errorf("%w: sampling on the device needs the last row's logits only, without argmax or batching", ErrOptions)
	}
	if opts.Embed && (opts.Argmax || opts.Sample != nil || opts.Batch) {
		return nil, fmt.Errorf("%w: an embedding step outputs hidden states, without argmax, sampling or batching", ErrOptions)
	}
	if opts.Argmax && opts.AllLogits {
		return nil, fmt.Errorf("%w: argmax needs the last row's logits only, not all logits", ErrOptions)
	}
	if opts.Batch && opts.Argmax {
		return nil, fmt.Errorf("%w: a batched step has one logits row per sequence, not argmax", ErrOptions)
	}
	if err := checkLoRA(opts.LoRA); err != nil {
		return nil, err
	}
	for _, set := range opts.RowLoRA {
		if err := checkLoRA(set); err != nil {
			return nil, err
		}
	}
	if opts.Embeddings && cfg.PerLayerDim > 0 {
		return nil, fmt.Errorf("%w: a step of embeddings for a model with per-layer token inputs", ErrOptions)
	}
	if (opts.Embeddings || opts.NonCausal) && opts.Batch {
		return nil, fmt.Errorf("%w: a batched step of embeddings or non-causal attention", ErrOptions)
	}
	if len(opts.RowLoRA) > 0 && !opts.Batch {
		return nil, fmt.Errorf("%w: adapters chosen per row need a batched graph", ErrOptions)
	}
	b := &builder{cfg: cfg, g: &fusion.Graph{Tokens: opts.Tokens, Batch: opts.Batch}, maxLen: opts.MaxLen, lora: opts.LoRA, rowLoRA: opts.RowLoRA,
		embeddings: opts.Embeddings, nonCausal: opts.NonCausal, shared: -1}
	// The one place the config's parameter names become fusion's types.
	var err error
	if b.normKind, err = fusion.ParseNormKind(cfg.Norm); err != nil {
		return nil, fmt.Errorf("arch: %w", err)
	}
	if b.act, err = fusion.ParseAct(cfg.Act); err != nil {
		return nil, fmt.Errorf("arch: %w", err)
	}
	if cfg.RopeDims > 0 {
		if b.ropeStyle, err = fusion.ParseRopeStyle(cfg.RopeStyle); err != nil {
			return nil, fmt.Errorf("arch: %w", err)
		}
	}
	if opts.RingTokens < 0 || opts.RingTokens > 0 && !opts.Batch && opts.Tokens > opts.RingTokens {
		return nil, fmt.Errorf("%w: %d tokens over rings for %d", ErrOptions, opts.Tokens, opts.RingTokens)
	}
	b.g.KV = KVSpec(cfg, opts)
	b.forward(opts.AllLogits || opts.Batch || opts.Embed, opts.Embed)
	if opts.Argmax {
		b.g.Logits = b.g.Add(&fusion.ArgmaxOp{Out: b.g.NewBuf("token_id", 1, 1), In: b.g.Logits})
	}
	if opts.Sample != nil {
		b.g.Logits = b.g.Add(&fusion.SampleOp{Out: b.g.NewBuf("token_id", 1, 1), In: b.g.Logits, Sampling: *opts.Sample})
	}
	return b.g, nil
}

// builder holds the graph and the activation buffers every layer reuses.
type builder struct {
	cfg    *model.Config
	g      *fusion.Graph
	maxLen int // KV cache positions: the context that picks LongRoPE's factors

	embeddings, nonCausal bool // BuildOptions'

	normKind  fusion.NormKind  // cfg.Norm
	act       fusion.Act       // cfg.Act
	ropeStyle fusion.RopeStyle // cfg.RopeStyle (when RopeDims > 0)

	x        fusion.Buf // residual stream [T, dim]
	h        fusion.Buf // normed input of a block
	q, k, v  fusion.Buf // projections
	att      fusion.Buf // attention output before the output projection
	proj     fusion.Buf // attention block output [T, dim]
	up, gate fusion.Buf // FFN hidden [T, hidden]
	// heads and hidden hold the buffers of the other head dims and FFN
	// widths of a model with more than one (Gemma 4), by size.
	heads  map[int]headBufs
	hidden map[int][2]fusion.Buf
	// pl holds every layer's per-layer input [T, layers*PerLayerDim];
	// plGate and plIn one layer's gate and input [T, PerLayerDim].
	pl, plGate, plIn fusion.Buf
	ffn              fusion.Buf // FFN block output [T, dim]
	bcx, conv        fusion.Buf // a short convolution layer's [B | C | x] and gated output
	delta            deltaBufs  // a Gated DeltaNet layer's buffers
	qGate            fusion.Buf // the attention output gate's rows (AttnOutputGate)
	shared           fusion.Buf // a shared expert's output (-1 until used)
	sharedGate       fusion.Buf // its gate's one value per row
	ssmIn, ssmY      fusion.Buf // a Mamba-2 layer's [z | x | B | C | dt] and gated, normed y
	h2               fusion.Buf // normed input of the FFN in sequential blocks
	dim, qCols       int

	lora     map[string][]LoRAPair   // BuildOptions.LoRA
	rowLoRA  []map[string][]LoRAPair // BuildOptions.RowLoRA
	loraBufs map[[3]int]fusion.Buf   // A·x per (rows, rank, index in a linears run)
}

// forward emits the whole step, reading like llama2.c's forward(); with
// embed, up to the final norm (and the dense projections) only.
func (b *builder) forward(allLogits, embed bool) {
	c, g := b.cfg, b.g
	T := g.Tokens
	b.dim, b.qCols = c.Dim, c.Heads*c.HeadDim
	kvCols := c.KVHeads * c.HeadDim
	b.x = g.NewBuf("x", T, c.Dim)
	b.h = g.NewBuf("h", T, c.Dim)
	b.h2 = g.NewBuf("h2", T, c.Dim)
	b.q = g.NewBuf("q", T, b.qCols)
	b.k = g.NewBuf("k", T, kvCols)
	b.v = g.NewBuf("v", T, kvCols)
	b.att = g.NewBuf("att", T, b.qCols)
	b.proj = g.NewBuf("attn_out", T, c.Dim)
	if c.Experts == 0 {
		b.up = g.NewBuf("ffn_up", T, c.HiddenDim)
		if c.GatedFFN {
			b.gate = g.NewBuf("ffn_gate", T, c.HiddenDim)
		}
	}
	b.ffn = g.NewBuf("ffn_out", T, c.Dim)
	b.heads = map[int]headBufs{c.HeadDim: {b.q, b.k, b.v, b.att}}
	b.hidden = map[int][2]fusion.Buf{}
	if c.Experts == 0 {
		b.hidden[c.HiddenDim] = [2]fusion.Buf{b.up, b.gate}
	}
	if len(c.SSM.Layers) > 0 {
		b.ssmIn = g.NewBuf("ssm_in", T, c.SSM.InProjCols())
		b.ssmY = g.NewBuf("ssm_y", T, c.SSM.Inner)
	}
	if len(c.ConvLayers) > 0 {
		b.bcx = g.NewBuf("conv_bcx", T, 3*c.Dim)
		b.conv = g.NewBuf("conv_out", T, c.Dim)
	}
	if len(c.DeltaLayers) > 0 {
		b.delta = newDeltaBufs(g, c)
	}
	if c.AttnOutputGate {
		b.qGate = g.NewBuf("q_gate", T, b.qCols)
	}

	if b.embeddings {
		g.Add(&fusion.InputOp{Out: b.x})
	} else {
		g.Add(&fusion.EmbedOp{Out: b.x, Weight: model.TokenEmbedding, Scale: c.EmbedScale})
		if c.LearnedPositions {
			// BERT: the position's row (the token type 0 row folded in).
			pos := g.NewBuf("position_embd", T, c.Dim)
			g.Add(&fusion.EmbedOp{Out: pos, Weight: model.PositionEmbedding, Positions: true})
			g.Add(&fusion.AddOp{Out: b.x, A: b.x, B: pos})
		}
		if c.EmbedNorm {
			b.norm(b.x, b.x, model.EmbedNorm, model.EmbedNormBias)
		}
	}
	if c.PerLayerDim > 0 {
		b.perLayerInputs()
	}
	for l := range c.Layers {
		b.layer(l)
	}

	x := b.x
	rows := T
	if !allLogits {
		x = g.NewBuf("x_last", 1, c.Dim)
		g.Add(&fusion.LastRowOp{Out: x, In: b.x})
		rows = 1
	}
	final := x // post-LN blocks end normed: no final norm
	if !c.PostLN {
		final = g.NewBuf("final_norm", rows, c.Dim)
		b.norm(final, x, model.FinalNorm, model.FinalNormBias)
	}
	if embed {
		g.Logits = final
		if d := c.DenseDim; d > 0 {
			// Linear, so applied to every row before the caller pools
			// them rather than after (llama.cpp's order): the same
			// vector up to rounding.
			dense := g.NewBuf("dense", rows, d)
			b.linear(dense, final, model.DenseIn, "", false)
			g.Logits = g.NewBuf("dense_out", rows, c.Dim)
			b.linear(g.Logits, dense, model.DenseOut, "", false)
		}
		return
	}
	head, bias := model.LMHead, ""
	if c.Tied {
		head = model.TokenEmbedding
	}
	if c.LMHeadBias {
		bias = model.LMHeadBiasName
	}
	logits := g.NewBuf("logits", rows, c.VocabSize)
	b.linear(logits, final, head, bias, bias != "")
	if c.LogitScale != 0 && c.LogitScale != 1 {
		// Granite divides its logits by logits_scaling.
		g.Add(&fusion.ScaleOp{Out: logits, In: logits, Scale: 1 / c.LogitScale})
	}
	if c.FinalSoftCap > 0 {
		g.Add(&fusion.SoftCapOp{Out: logits, In: logits, Cap: c.FinalSoftCap})
	}
	g.Logits = logits
}

// layer emits one transformer block:
//
//	sequential: x += post(attn(norm(x)));  x += post(ffn(norm2(x)))
//	parallel:   h = norm(x);  x += attn(h) + ffn(h)
//	post-LN:    x = norm(x + attn(x));  x = norm2(x + ffn(x))
func (b *builder) layer(l int) {
	c, g := b.cfg, b.g
	if c.PostLN {
		// BERT: x = norm(x + attn(x)); x = norm2(x + ffn(x)).
		b.attention(l, b.x)
		g.Add(&fusion.AddOp{Out: b.x, A: b.x, B: b.proj})
		b.norm(b.x, b.x, model.Layer(l, model.AttnNorm), model.Layer(l, model.AttnNormBias))
		b.feedForward(l, b.x)
		g.Add(&fusion.AddOp{Out: b.x, A: b.x, B: b.ffn})
		b.norm(b.x, b.x, model.Layer(l, model.FFNNorm), model.Layer(l, model.FFNNormBias))
		return
	}
	b.norm(b.h, b.x, model.Layer(l, model.AttnNorm), model.Layer(l, model.AttnNormBias))
	switch {
	case c.ConvLayer(l):
		b.shortConv(l, b.h)
	case c.DeltaLayer(l):
		b.deltaNet(l, b.h)
	case c.SSMLayer(l):
		b.mamba2(l, b.h)
	default:
		b.attention(l, b.h)
	}
	b.residualScale(b.proj)
	if c.PostNorms {
		b.norm(b.proj, b.proj, model.Layer(l, model.PostAttnNorm), "")
	}
	if c.Parallel {
		b.feedForward(l, b.h)
		b.residualScale(b.ffn)
		g.Add(&fusion.AddOp{Out: b.x, A: b.x, B: b.proj})
		g.Add(&fusion.AddOp{Out: b.x, A: b.x, B: b.ffn})
		return
	}
	g.Add(&fusion.AddOp{Out: b.x, A: b.x, B: b.proj})
	b.norm(b.h2, b.x, model.Layer(l, model.FFNNorm), model.Layer(l, model.FFNNormBias))
	b.feedForward(l, b.h2)
	b.residualScale(b.ffn)
	if c.PostNorms {
		b.norm(b.ffn, b.ffn, model.Layer(l, model.PostFFNNorm), "")
	}
	g.Add(&fusion.AddOp{Out: b.x, A: b.x, B: b.ffn})
	if c.PerLayerDim > 0 {
		// x += norm(proj(act(gate·x) * pl[l])) (src/models/gemma4.cpp).
		b.linear(b.plGate, b.x, model.Layer(l, model.PerLayerGate), "", false)
		g.Add(&fusion.ColumnsOp{Out: b.plIn, In: b.pl, Offset: l * c.PerLayerDim})
		g.Add(&fusion.GLUOp{Out: b.plGate, Gate: b.plGate, Up: b.plIn, Act: b.act})
		b.linear(b.ffn, b.plGate, model.Layer(l, model.PerLayerProj), "", false)
		b.norm(b.ffn, b.ffn, model.Layer(l, model.PerLayerPostNorm), "")
		g.Add(&fusion.AddOp{Out: b.x, A: b.x, B: b.ffn})
	}
	if c.LayerOutputScale {
		g.Add(&fusion.ScaleOp{Out: b.x, In: b.x, Weight: model.Layer(l, model.LayerScale)})
	}
}

// headBufs are the q, k, v and attention output buffers of one head dim.
type headBufs struct{ q, k, v, att fusion.Buf }

// headsOf returns the buffers of head dim hd, adding them at first use.
func (b *builder) headsOf(hd int) headBufs {
	if hb, ok := b.heads[hd]; ok {
		return hb
	}
	c, g, T := b.cfg, b.g, b.g.Tokens
	suffix := fmt.Sprintf("_hd%d", hd)
	hb := headBufs{g.NewBuf("q"+suffix, T, c.Heads*hd), g.NewBuf("k"+suffix, T, c.KVHeads*hd),
		g.NewBuf("v"+suffix, T, c.KVHeads*hd), g.NewBuf("att"+suffix, T, c.Heads*hd)}
	b.heads[hd] = hb
	return hb
}

// hiddenOf returns the up and gate buffers of an FFN of width n.
func (b *builder) hiddenOf(n int) (up, gate fusion.Buf) {
	if h, ok := b.hidden[n]; ok {
		return h[0], h[1]
	}
	g := b.g
	suffix := fmt.Sprintf("_%d", n)
	up = g.NewBuf("ffn_up"+suffix, g.Tokens, n)
	if b.cfg.GatedFFN {
		gate = g.NewBuf("ffn_gate"+suffix, g.Tokens, n)
	}
	b.hidden[n] = [2]fusion.Buf{up, gate}
	return up, gate
}

// perLayerInputs emits Gemma 4's per-layer inputs of every layer from the
// scaled embedding b.x, as llama.cpp computes them once before layer 0:
//
//	pl = (norm(proj·x / sqrt(dim)) + embd_pl[id]·sqrt(P)) / sqrt(2)
//
// the norm per layer's P values (PerLayerProjNorm).
func (b *builder) perLayerInputs() {
	c, g, T := b.cfg, b.g, b.g.Tokens
	p := c.PerLayerDim
	b.pl = g.NewBuf("per_layer", T, c.Layers*p)
	embd := g.NewBuf("per_layer_embd", T, c.Layers*p)
	b.plGate = g.NewBuf("per_layer_gate", T, p)
	b.plIn = g.NewBuf("per_layer_in", T, p)
	g.Add(&fusion.EmbedOp{Out: embd, Weight: model.PerLayerEmbedding, Scale: float32(math.Sqrt(float64(p)))})
	b.linear(b.pl, b.x, model.PerLayerModelProj, "", false)
	g.Add(&fusion.ScaleOp{Out: b.pl, In: b.pl, Scale: float32(1 / math.Sqrt(float64(c.Dim)))})
	g.Add(&fusion.NormOp{Out: b.pl, In: b.pl, Norm: fusion.NormRMS, Weight: model.PerLayerProjNorm, Eps: c.NormEps, HeadDim: p})
	g.Add(&fusion.AddOp{Out: b.pl, A: b.pl, B: embd})
	g.Add(&fusion.ScaleOp{Out: b.pl, In: b.pl, Scale: float32(1 / math.Sqrt2)})
}

// attention emits the attention block of layer l on input h into b.proj.
// A layer sharing another's KV (Config.KVLayer) projects, norms and
// rotates only its queries and attends to that layer's cache.
func (b *builder) attention(l int, h fusion.Buf) {
	c, g := b.cfg, b.g
	hd := c.LayerHeadDim(l)
	hb := b.headsOf(hd)
	src := c.KVLayer(l)
	own := src == l
	ps := []proj{{hb.q, model.Layer(l, model.WQ), model.Layer(l, model.BQ)}}
	if own {
		ps = append(ps, proj{hb.k, model.Layer(l, model.WK), model.Layer(l, model.BK)},
			proj{hb.v, model.Layer(l, model.WV), model.Layer(l, model.BV)})
	}
	if c.AttnOutputGate {
		// After q, k and v, so that their run stays the one fusion
		// rewrites; the gate has no bias.
		ps = append(ps, proj{b.qGate, model.Layer(l, model.WQGate), ""})
	}
	b.linears(h, c.QKVBias, ps...)
	if c.QKNorm {
		g.Add(&fusion.NormOp{Out: hb.q, In: hb.q, Norm: fusion.NormRMS, Weight: model.Layer(l, model.QNorm), Eps: c.NormEps, HeadDim: hd})
		if own {
			g.Add(&fusion.NormOp{Out: hb.k, In: hb.k, Norm: fusion.NormRMS, Weight: model.Layer(l, model.KNorm), Eps: c.NormEps, HeadDim: hd})
		}
	}
	if c.VNorm && own {
		g.Add(&fusion.NormOp{Out: hb.v, In: hb.v, Norm: fusion.NormRMS, Unit: true, Eps: c.NormEps, HeadDim: hd})
	}
	if base, factors, scale, ok := c.LayerRope(l, b.maxLen); ok {
		if scale == 1 {
			scale = 0
		}
		rp := fusion.RopeParams{Dims: c.LayerRopeDims(l), Base: base, Style: b.ropeStyle, Factors: factors, Scale: scale}
		g.Add(&fusion.RopeOp{Out: hb.q, In: hb.q, Heads: c.Heads, HeadDim: hd, RopeParams: rp})
		if own {
			g.Add(&fusion.RopeOp{Out: hb.k, In: hb.k, Heads: c.KVHeads, HeadDim: hd, RopeParams: rp.Clone()})
		}
	}
	if own {
		g.Add(&fusion.StoreKVOp{K: hb.k, V: hb.v, Layer: l, KVHeads: c.KVHeads, HeadDim: hd})
	}
	att := &fusion.AttentionOp{Out: hb.att, Q: hb.q, Layer: src,
		HeadShape: fusion.HeadShape{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: hd},
		Scale:     c.Scale(), Cap: c.AttnSoftCap, Window: c.LayerWindow(l),
		// An embedding model's encoder (its windows symmetric), or an
		// image's positions (BuildOptions.NonCausal).
		NonCausal: c.NonCausal || b.nonCausal, SymmetricWindow: c.NonCausal}
	if c.AttnSinks {
		att.Sinks = model.Layer(l, model.AttnSinks)
	}
	g.Add(att)
	if c.AttnOutputGate {
		g.Add(&fusion.SigmoidGateOp{Out: hb.att, In: hb.att, Gate: b.qGate})
	}
	b.linear(b.proj, hb.att, model.Layer(l, model.WO), model.Layer(l, model.BO), c.OutBias)
}

// shortConv emits the gated short convolution block of layer l (LFM2) on
// input h into b.proj: [B | C | x] = in_proj·h, the convolution with its
// state (fusion.ShortConvOp), then out_proj.
func (b *builder) shortConv(l int, h fusion.Buf) {
	c := b.cfg
	b.linear(b.bcx, h, model.Layer(l, model.ConvInProj), "", false)
	b.g.Add(&fusion.ShortConvOp{Out: b.conv, In: b.bcx, Weight: model.Layer(l, model.ConvKernel), Layer: l, Channels: c.Dim, Width: c.ConvWidth})
	b.linear(b.proj, b.conv, model.Layer(l, model.ConvOutProj), "", false)
}

// feedForward emits the FFN of layer l on input h into b.ffn:
// down(act(gate·h) * (up·h)) when gated, else down(act(up·h + b_up)) + b_down;
// with experts, one MoE op.
func (b *builder) feedForward(l int, h fusion.Buf) {
	c, g := b.cfg, b.g
	if c.Experts > 0 {
		moe := &fusion.MoEOp{Out: b.ffn, In: h, Router: model.Layer(l, model.Router),
			Gate: model.Layer(l, model.ExpertsGate), Up: model.Layer(l, model.ExpertsUp), Down: model.Layer(l, model.ExpertsDown),
			Experts: c.Experts, Used: c.ExpertsUsed, Hidden: c.ExpertHidden, Act: b.act, NormTopK: c.NormTopK}
		if c.ExpertGating == model.GatingTopKSoftmax {
			moe.Gating = fusion.GatingSoftmaxWeight
		}
		if b.act == fusion.ActSwiGLUOAI {
			moe.SwiGLUOAI = fusion.SwiGLUOAIDefault
		}
		if c.RouterBias {
			moe.RouterBias = model.Layer(l, model.RouterBias)
		}
		if c.ExpertBias {
			moe.GateBias, moe.UpBias, moe.DownBias = model.Layer(l, model.ExpertsGateBias), model.Layer(l, model.ExpertsUpBias), model.Layer(l, model.ExpertsDownBias)
		}
		g.Add(moe)
		if c.SharedExpertHidden > 0 {
			b.sharedExpert(l, h)
		}
		return
	}
	upBuf, gateBuf := b.hiddenOf(c.LayerHiddenDim(l))
	up := proj{upBuf, model.Layer(l, model.WUp), model.Layer(l, model.BUp)}
	if c.GatedFFN {
		b.linears(h, c.FFNBias, up, proj{gateBuf, model.Layer(l, model.WGate), ""})
		g.Add(&fusion.GLUOp{Out: upBuf, Gate: gateBuf, Up: upBuf, Act: b.act})
	} else {
		b.linears(h, c.FFNBias, up)
		g.Add(&fusion.ActivationOp{Out: upBuf, In: upBuf, Act: b.act})
	}
	b.linear(b.ffn, upBuf, model.Layer(l, model.WDown), model.Layer(l, model.BDown), c.FFNBias)
}

// linear emits out = W·in (+ bias when hasBias).
func (b *builder) linear(out, in fusion.Buf, w, bias string, hasBias bool) {
	b.linears(in, hasBias, proj{out, w, bias})
}

// proj is one projection of linears: out = W·in + bias.
type proj struct {
	out     fusion.Buf
	w, bias string
}

// linears emits the projections ps of one input (biases when hasBias):
// their products first, then their adapters' updates (loraUpdates), so
// that the products of a run, and the adapters' A products, stay
// consecutive products of one input that fusion.Fuse can make one
// MultiMatMul.
func (b *builder) linears(in fusion.Buf, hasBias bool, ps ...proj) {
	for _, p := range ps {
		bias := p.bias
		if !hasBias {
			bias = ""
		}
		b.g.Add(&fusion.MatMulOp{Out: p.out, In: in, Projection: fusion.Projection{Weight: p.w, Bias: bias}})
	}
	b.loraUpdates(in, ps)
}

// norm emits out = norm(in) with the config's norm kind; LayerNorm carries
// the bias tensor.
func (b *builder) norm(out, in fusion.Buf, scale, bias string) {
	if b.normKind != fusion.NormLayer {
		bias = ""
	}
	b.g.Add(&fusion.NormOp{Out: out, In: in, Norm: b.normKind, Weight: scale, Bias: bias, Eps: b.cfg.NormEps})
}
