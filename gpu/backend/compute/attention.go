package compute

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// AttentionKind selects the attention kernels.
type AttentionKind uint8

const (
	// AttentionAuto runs prefill graphs (more than attnSplitTokens
	// tokens) tiled (attn_tiled: each key and value chunk staged once for
	// a tile of query rows) and splits decode graphs over the sequence
	// (attn_split + attn_combine: a decode step has one query row per
	// head, too few workgroups to fill a GPU unless the sequence is split
	// across them, flash-decoding), on every device.
	AttentionAuto AttentionKind = iota
	// AttentionPerHead runs one workgroup per (head, token) over the whole
	// visible sequence (attention / attention_f16).
	AttentionPerHead
	// AttentionSplit always splits over the sequence: attn_split per
	// (kv head, head batch, chunk, token), then attn_combine.
	AttentionSplit
	// AttentionTiled runs attn_tiled for every graph: one workgroup per
	// (kv head, tile of attnQueryRows (token, head) rows), each key and
	// value chunk staged once for the whole tile, online softmax.
	AttentionTiled
)

// The geometry attn_split is written for (shaders/wgsl/attention.wgsl).
const (
	attnChunk       = 64 // CHUNK: positions per attn_split workgroup
	attnGroupBatch  = 8  // GB: query heads per attn_split workgroup
	attnSplitTokens = 4  // AttentionAuto splits graphs of up to this many tokens
	attnQueryRows   = 8  // QR: query rows per attn_tiled workgroup
	maxDispatch     = 65535
)

// attention plans one Attention op.
func (pl *planner) attention(op *fusion.AttentionOp) error {
	if op.HeadDim > maxHeadDim {
		return fmt.Errorf("head dim %d over %d: %w", op.HeadDim, maxHeadDim, gpu.ErrUnsupported)
	}
	spec := pl.caches[0].spec
	T := pl.p.g.Tokens
	ap := shaders.AttnParams{Heads: u(op.Heads), KVHeads: u(op.KVHeads), HeadDim: u(op.HeadDim), MaxLen: u(spec.MaxLen),
		Scale: op.Scale, Cap: op.Cap, Window: u(op.Window), PosAt: u(pl.p.posAt), Ring: u(spec.RingLen(op.Layer)),
		OutF16: b2u(pl.p.g.Bufs[op.Out].F16), QF16: pl.h(pl.buf(op.Q))}
	step, q := gpu.Binding{Buf: pl.p.step}, pl.buf(op.Q)
	if pl.p.g.Batch {
		return pl.batchAttention(op, ap, step, q)
	}
	k, v := gpu.Binding{Buf: pl.caches[0].k[op.Layer]}, gpu.Binding{Buf: pl.caches[0].v[op.Layer]}
	chunks := ceilDiv(spec.MaxLen, attnChunk)
	batches := ceilDiv(op.Heads/op.KVHeads, attnGroupBatch)
	partBytes := int64(T) * int64(op.Heads) * int64(chunks) * int64(op.HeadDim+2) * 4
	kind := pl.p.b.attention
	if kind == AttentionAuto {
		kind = AttentionSplit
		if T > attnSplitTokens {
			kind = AttentionTiled
		}
	}
	sink, err := pl.sinkBuf()
	if err != nil {
		return err
	}
	if kind == AttentionTiled {
		rows := T * (op.Heads / op.KVHeads)
		ap.Rows = u(rows)
		name := "attn_tiled"
		if spec.F16 {
			name = "attn_tiled_f16"
		}
		// The running sums live in part (f32) until the last chunk.
		acc, err := pl.partBuf(int64(T) * int64(op.Heads) * int64(op.HeadDim) * 4)
		if err != nil {
			return err
		}
		if tiles := ceilDiv(rows, attnQueryRows); tiles <= maxDispatch {
			pl.dispatch(name, ap, op.KVHeads, tiles, 1, step, q, k, v, pl.buf(op.Out), acc)
			return nil
		}
		kind = AttentionPerHead
	}
	if kind == AttentionSplit && (chunks > maxDispatch || op.KVHeads*batches > maxDispatch || partBytes > pl.p.b.devBinding) {
		kind = AttentionPerHead // the partials would not fit one binding or one dispatch
	}
	if kind == AttentionPerHead {
		name := "attention"
		if spec.F16 {
			name = "attention_f16"
		}
		pl.dispatch(name, ap, op.Heads, T, 1, step, q, k, v, pl.buf(op.Out), sink)
		return nil
	}
	part, err := pl.partBuf(partBytes)
	if err != nil {
		return err
	}
	ap.Chunks, ap.Batches = u(chunks), u(batches)
	name := "attn_split"
	if spec.F16 {
		name = "attn_split_f16"
	}
	none := gpu.Binding{Buf: pl.dummy}
	pl.dispatch(name, ap, op.KVHeads*batches, chunks, T, step, q, k, v, sink, part)
	pl.dispatch("attn_combine", ap, op.Heads, T, 1, step, none, none, none, pl.buf(op.Out), part)
	return nil
}

// batchAttention plans the Attention op of a batched step: row r reads
// sequence r's cache, so each row is its own dispatches binding that cache
// (an unused row's workgroups return at once): attn_split + attn_combine,
// the kernels of a one-row decode step, so that each row's attention is
// its sequence's step alone, bit for bit (AttentionPerHead, or partials
// past one binding or dispatch: the per-head kernel).
func (pl *planner) batchAttention(op *fusion.AttentionOp, ap shaders.AttnParams, step, q gpu.Binding) error {
	sink, err := pl.sinkBuf()
	if err != nil {
		return err
	}
	spec := pl.caches[0].spec
	T := pl.p.g.Tokens
	chunks := ceilDiv(spec.MaxLen, attnChunk)
	batches := ceilDiv(op.Heads/op.KVHeads, attnGroupBatch)
	partBytes := int64(T) * int64(op.Heads) * int64(chunks) * int64(op.HeadDim+2) * 4
	if pl.p.b.attention == AttentionPerHead || chunks > maxDispatch || op.KVHeads*batches > maxDispatch || partBytes > pl.p.b.devBinding {
		name := "attention"
		if spec.F16 {
			name = "attention_f16"
		}
		for r, c := range pl.caches {
			ap.Row0 = u(r)
			pl.dispatch(name, ap, op.Heads, 1, 1, step, q, gpu.Binding{Buf: c.k[op.Layer]}, gpu.Binding{Buf: c.v[op.Layer]}, pl.buf(op.Out), sink)
		}
		return nil
	}
	part, err := pl.partBuf(partBytes)
	if err != nil {
		return err
	}
	ap.Chunks, ap.Batches = u(chunks), u(batches)
	name := "attn_split"
	if spec.F16 {
		name = "attn_split_f16"
	}
	none := gpu.Binding{Buf: pl.dummy}
	for r, c := range pl.caches {
		ap.Row0 = u(r)
		pl.dispatch(name, ap, op.KVHeads*batches, chunks, 1, step, q, gpu.Binding{Buf: c.k[op.Layer]}, gpu.Binding{Buf: c.v[op.Layer]}, sink, part)
		pl.dispatch("attn_combine", ap, op.Heads, 1, 1, step, none, none, none, pl.buf(op.Out), part)
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

func (k AttentionKind) String() string {
	switch k {
	case AttentionAuto:
		return "auto"
	case AttentionPerHead:
		return "perhead"
	case AttentionSplit:
		return "split"
	case AttentionTiled:
		return "tiled"
	}
	return fmt.Sprintf("AttentionKind(%d)", uint8(k))
}
