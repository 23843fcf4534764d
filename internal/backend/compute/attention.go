package compute

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/tuning"
	"github.com/gpurun/gpurun/shaders"
)

// The geometry attn_split is written for (shaders/wgsl/attention.wgsl).
const (
	attnChunk       = 64 // CHUNK: positions per attn_split workgroup
	attnGroupBatch  = 8  // GB: query heads per attn_split workgroup
	attnSplitTokens = 4  // tuning.AttentionAuto splits graphs of up to this many tokens
	attnQueryRows   = 8  // QR: query rows per attn_tiled workgroup
	maxDispatch     = 65535
)

// attention plans one Attention op.
func (pl *planner) attention(op *fusion.AttentionOp) error {
	if op.HeadDim > maxHeadDim {
		return fmt.Errorf("head dim %d over %d: %w", op.HeadDim, maxHeadDim, gpu.ErrUnsupported)
	}
	if op.SymmetricWindow {
		// The kernels' windows reach back only; an embedding model's
		// symmetric sliding layers run on the CPU backend.
		return fmt.Errorf("non-causal attention with a symmetric window (an embedding model's encoder): %w", gpu.ErrUnsupported)
	}
	spec := pl.caches[0].spec
	ap := shaders.AttnParams{Heads: u(op.Heads), KVHeads: u(op.KVHeads), HeadDim: u(op.HeadDim), MaxLen: u(spec.MaxLen),
		Scale: op.Scale, Cap: op.Cap, Window: u(op.Window), PosAt: u(pl.p.posAt), Ring: u(spec.RingLen(op.Layer)),
		OutF16: b2u(pl.p.g.Bufs[op.Out].F16), QF16: pl.h(pl.buf(op.Q)), NonCausal: b2u(op.NonCausal), KVQuant: kvQuant(spec, op.Layer)}
	step, q := gpu.Binding{Buf: pl.p.step}, pl.buf(op.Q)
	// The sink logits (f32, one per query head: vectors load widened to
	// f32), or the read-only dummy.
	sinks, hasSinks, err := pl.vector(op.Sinks)
	if err != nil {
		return err
	}
	ap.HasSinks = b2u(hasSinks)
	if pl.p.g.Batch {
		return pl.batchAttention(op, ap, step, q, sinks)
	}
	kc, vc := gpu.Binding{Buf: pl.caches[0].k[op.Layer]}, gpu.Binding{Buf: pl.caches[0].v[op.Layer]}
	return pl.attend(ap, spec.F16, true, attentionBindings{Step: step, QW: q, Kc: kc, Vc: vc, OutW: pl.buf(op.Out), Sinks: sinks})
}

// attend plans the attention of an unbatched step over the cache bound in
// b (ap.MaxLen positions per kv head, f16 words or f32), into b.OutW, in
// the kernels chooseAttention picks; b.Part is set here. chunked marks an
// attn_split whose chunks count the program's cache (lenlists.go); a
// self-attention's private cache holds the step's rows alone.
func (pl *planner) attend(ap shaders.AttnParams, f16, chunked bool, b attentionBindings) error {
	T := pl.p.g.Tokens
	heads, kvHeads, hd := int(ap.Heads), int(ap.KVHeads), int(ap.HeadDim)
	chunks := ceilDiv(int(ap.MaxLen), attnChunk)
	batches := ceilDiv(heads/kvHeads, attnGroupBatch)
	partBytes := int64(T) * int64(heads) * int64(chunks) * int64(hd+2) * 4
	splitFits := chunks <= maxDispatch && kvHeads*batches <= maxDispatch && partBytes <= pl.p.b.devBinding
	rows := T * (heads / kvHeads)
	tiles := ceilDiv(rows, attnQueryRows)
	kind := chooseAttention(pl.p.b.attention, attnShape{tokens: T, tiles: tiles, splitFits: splitFits, quant: ap.KVQuant != 0})
	sink, err := pl.sinkBuf()
	if err != nil {
		return err
	}
	out := b.OutW
	switch kind {
	case tuning.AttentionTiled:
		ap.Rows = u(rows)
		k := kAttnTiled
		if f16 {
			k = kAttnTiledF16
		}
		// The running sums live in part (f32) until the last chunk.
		acc, err := pl.partBuf(int64(T) * int64(heads) * int64(hd) * 4)
		if err != nil {
			return err
		}
		b.Part = acc
		k.dispatch(pl, ap, kvHeads, tiles, 1, b)
		return nil
	case tuning.AttentionPerHead:
		k := perHeadKernel(ap, f16)
		b.Part = sink
		k.dispatch(pl, ap, heads, T, 1, b)
		return nil
	}
	part, err := pl.partBuf(partBytes)
	if err != nil {
		return err
	}
	ap.Chunks, ap.Batches = u(chunks), u(batches)
	k := kAttnSplit
	if f16 {
		k = kAttnSplitF16
	}
	none := pl.none()
	b.OutW, b.Part = sink, part
	k.dispatch(pl, ap, kvHeads*batches, chunks, T, b)
	if chunked {
		pl.chunked()
	}
	kAttnCombine.dispatch(pl, ap, heads, T, 1, attentionBindings{Step: b.Step, QW: none, Kc: none, Vc: none, OutW: out, Part: part, Sinks: b.Sinks})
	return nil
}

// attnShape is what the choice of attention kernels depends on besides
// Options.Attention.
type attnShape struct {
	tokens    int  // query tokens of the step
	batch     bool // a batched step (one row per sequence)
	tiles     int  // attn_tiled's workgroups along y (tiles of query rows)
	splitFits bool // attn_split's partials fit one binding and its grid one dispatch
	quant     bool // a quantized cache (ap.KVQuant): only the per-head kernel reads one
}

// chooseAttention resolves the attention kernels of an op: a pure
// function of the option and the shape (TestChooseAttention). Auto splits
// steps of up to attnSplitTokens tokens (attn_split + attn_combine) and
// tiles longer ones (attn_tiled); a batched step always splits, each row
// as its one-row step. Where the chosen kernels' grid or partials do not
// fit, and on a quantized cache, the per-head kernel runs.
func chooseAttention(opt tuning.AttentionKind, s attnShape) tuning.AttentionKind {
	if s.quant {
		return tuning.AttentionPerHead
	}
	if s.batch {
		if opt == tuning.AttentionPerHead || !s.splitFits {
			return tuning.AttentionPerHead
		}
		return tuning.AttentionSplit
	}
	kind := opt
	if kind == tuning.AttentionAuto {
		kind = tuning.AttentionSplit
		if s.tokens > attnSplitTokens {
			kind = tuning.AttentionTiled
		}
	}
	if kind == tuning.AttentionTiled && s.tiles > maxDispatch || kind == tuning.AttentionSplit && !s.splitFits {
		kind = tuning.AttentionPerHead
	}
	return kind
}

// batchAttention plans the Attention op of a batched step: row r reads
// sequence r's cache, so each row is its own dispatches binding that cache
// (an unused row's workgroups return at once): attn_split + attn_combine,
// the kernels of a one-row decode step, so that each row's attention is
// its sequence's step alone, bit for bit (tuning.AttentionPerHead, or partials
// past one binding or dispatch: the per-head kernel).
func (pl *planner) batchAttention(op *fusion.AttentionOp, ap shaders.AttnParams, step, q, sinks gpu.Binding) error {
	sink, err := pl.sinkBuf()
	if err != nil {
		return err
	}
	spec := pl.caches[0].spec
	T := pl.p.g.Tokens
	chunks := ceilDiv(spec.MaxLen, attnChunk)
	batches := ceilDiv(op.Heads/op.KVHeads, attnGroupBatch)
	partBytes := int64(T) * int64(op.Heads) * int64(chunks) * int64(op.HeadDim+2) * 4
	splitFits := chunks <= maxDispatch && op.KVHeads*batches <= maxDispatch && partBytes <= pl.p.b.devBinding
	if chooseAttention(pl.p.b.attention, attnShape{tokens: T, batch: true, splitFits: splitFits, quant: ap.KVQuant != 0}) == tuning.AttentionPerHead {
		k := perHeadKernel(ap, spec.F16)
		for r, c := range pl.caches {
			ap.Row0 = u(r)
			k.dispatch(pl, ap, op.Heads, 1, 1, attentionBindings{Step: step, QW: q, Kc: gpu.Binding{Buf: c.k[op.Layer]}, Vc: gpu.Binding{Buf: c.v[op.Layer]}, OutW: pl.buf(op.Out), Part: sink, Sinks: sinks})
		}
		return nil
	}
	part, err := pl.partBuf(partBytes)
	if err != nil {
		return err
	}
	ap.Chunks, ap.Batches = u(chunks), u(batches)
	k := kAttnSplit
	if spec.F16 {
		k = kAttnSplitF16
	}
	none := pl.none()
	for r, c := range pl.caches {
		ap.Row0 = u(r)
		k.dispatch(pl, ap, op.KVHeads*batches, chunks, 1, attentionBindings{Step: step, QW: q, Kc: gpu.Binding{Buf: c.k[op.Layer]}, Vc: gpu.Binding{Buf: c.v[op.Layer]}, OutW: sink, Part: part, Sinks: sinks})
		pl.chunked()
		kAttnCombine.dispatch(pl, ap, op.Heads, 1, 1, attentionBindings{Step: step, QW: none, Kc: none, Vc: none, OutW: pl.buf(op.Out), Part: part, Sinks: sinks})
	}
	return nil
}

// sinkBuf is bound at writable slots a kernel does not use (the read-only
// dummy stays free of writes, so it adds no barriers).
func (pl *planner) sinkBuf() (gpu.Binding, error) {
	if pl.sink == nil {
		b, err := pl.p.newBuf(16)
		if err != nil {
			return gpu.Binding{}, err
		}
		pl.sink = b
	}
	return gpu.Binding{Buf: pl.sink}, nil
}

// partBuf is the buffer attn_split writes its partials to, shared by every
// layer (each combine reads it before the next layer's split writes it).
func (pl *planner) partBuf(size int64) (gpu.Binding, error) {
	if pl.part == nil || pl.partSize < size {
		b, err := pl.p.newBuf(size)
		if err != nil {
			return gpu.Binding{}, err
		}
		pl.part, pl.partSize = b, size
	}
	return gpu.Binding{Buf: pl.part, Size: align4(size)}, nil
}

// perHeadKernel is the per-head attention kernel of the cache: attention_q
// for a quantized one (the code in ap.KVQuant says its float side's
// storage), else attention or attention_f16.
func perHeadKernel(ap shaders.AttnParams, f16 bool) contract[shaders.AttnParams, attentionBindings] {
	switch {
	case ap.KVQuant != 0:
		return kAttentionQ
	case f16:
		return kAttentionF16
	}
	return kAttention
}
