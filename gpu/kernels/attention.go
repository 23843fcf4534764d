package kernels

import (
	"errors"
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// AttentionKind selects the attention kernels.
type AttentionKind uint8

const (
	// AttentionAuto runs decode graphs (up to attnSplitTokens tokens) on
	// CPU-class devices with attn_dec (see AttentionDecode) where the shape
	// fits it. Otherwise it runs prefill graphs (more than attnSplitTokens tokens)
	// tiled (attn_tiled, on every device class: on lavapipe it took 0.5x
	// then 0.72x of the per-(head, token) kernel's time, see the issue 8
	// attention note) and splits decode graphs over the sequence. On
	// CPU-class devices (lavapipe) it splits only where the per-head
	// kernel wastes work: GQA groups (each query head re-reads its kv
	// head) or head dims under 64 (idle invocations); for MHA with 64+
	// dims the split's extra dispatch and early-exit workgroups cost more
	// there than they save (measured in the issue 8 note).
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
	// AttentionDecode runs the CPU-class decode kernels (attn_dec*, one
	// position per invocation, then attn_dec_combine) for every graph,
	// prefill included (AttentionAuto picks them for decode graphs of up
	// to attnSplitTokens tokens on CPU-class devices); shapes attn_dec
	// does not take (head dims past attnDecMaxDim, queries past the 64 KiB
	// uniform window) fall back to AttentionAuto's choice.
	AttentionDecode
)

// The geometry attn_split is written for (shaders/wgsl/attention.wgsl).
const (
	attnChunk       = 64 // CHUNK: positions per attn_split workgroup
	attnGroupBatch  = 8  // GB: query heads per attn_split workgroup
	attnSplitTokens = 4  // AttentionAuto splits graphs of up to this many tokens
	attnQueryRows   = 8  // QR: query rows per attn_tiled workgroup
	maxDispatch     = 65535
	attnDecChunk    = 256 // DCH: positions per attn_dec workgroup
	attnDecLanes    = 8   // DL: invocations (partials) per attn_dec workgroup
	attnDecMaxDim   = 128 // the largest head dim attn_dec takes (attn_dec_d128)
	attnDecBatch    = 4   // DNB: query heads per attn_dec_g4 workgroup
)

// attention plans one Attention op.
func (pl *planner) attention(op *fusion.AttentionOp) error {
	if op.HeadDim > maxHeadDim {
		return fmt.Errorf("head dim %d over %d: %w", op.HeadDim, maxHeadDim, gpu.ErrUnsupported)
	}
	spec := pl.caches[0].spec
	T := pl.p.g.Tokens
	ap := shaders.AttnParams{Heads: u(op.Heads), KVHeads: u(op.KVHeads), HeadDim: u(op.HeadDim), MaxLen: u(spec.MaxLen),
		Scale: op.Scale, Cap: op.Cap, Window: u(op.Window), PosAt: u(pl.p.posAt),
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
	decFits := op.HeadDim <= attnDecMaxDim && int64(T)*int64(op.Heads)*int64(op.HeadDim)*4 <= uxBytes
	if kind == AttentionDecode && !decFits {
		kind = AttentionAuto
	}
	if kind == AttentionAuto && decFits && T <= attnSplitTokens && !pl.p.b.gpuClass {
		kind = AttentionDecode
	}
	if kind == AttentionAuto {
		kind = AttentionPerHead
		wasteful := op.Heads > op.KVHeads || op.HeadDim < 64
		if T <= attnSplitTokens && (pl.p.b.info.Type != gpu.CPU || wasteful) {
			kind = AttentionSplit
		}
		if T > attnSplitTokens {
			kind = AttentionTiled
		}
	}
	sink, err := pl.sinkBuf()
	if err != nil {
		return err
	}
	qu := gpu.Binding{Buf: pl.udummy, Size: uxBytes}
	if kind == AttentionDecode {
		if err := pl.decAttention(op, ap, step, q, k, v); err == nil || err != errNoFit {
			return err
		}
		kind = AttentionSplit
	}
	if kind == AttentionTiled {
		rows := T * (op.Heads / op.KVHeads)
		ap.Rows = u(rows)
		name := "attn_tiled"
		if spec.F16 {
			name = "attn_tiled_f16"
		}
		if spec.F16 && op.HeadDim == 64 && !pl.p.b.gpuClass {
			// Query in registers, vec4 loads of the staged keys and values
			// (lavapipe, BenchmarkAttentionPrefill: see attention.wgsl).
			name = "attn_tiled_d64_f16"
		}
		// The running sums live in part (f32) until the last chunk.
		acc, err := pl.partBuf(int64(T) * int64(op.Heads) * int64(op.HeadDim) * 4)
		if err != nil {
			return err
		}
		if tiles := ceilDiv(rows, attnQueryRows); tiles <= maxDispatch {
			pl.dispatch(name, ap, op.KVHeads, tiles, 1, step, q, k, v, pl.buf(op.Out), acc, qu)
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
		pl.dispatch(name, ap, op.Heads, T, 1, step, q, k, v, pl.buf(op.Out), sink, qu)
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
	pl.dispatch(name, ap, op.KVHeads*batches, chunks, T, step, q, k, v, sink, part, qu)
	pl.dispatch("attn_combine", ap, op.Heads, T, 1, step, none, none, none, pl.buf(op.Out), part, qu)
	return nil
}

// errNoFit: attn_dec's partials do not fit one binding or one dispatch.
var errNoFit = errors.New("attn_dec does not fit")

// decAttention plans attn_dec (or attn_dec_g4 for GQA groups) and
// attn_dec_combine: a one-token-per-invocation decode for CPU-class
// devices, the query read through the uniform window at q's offset 0.
func (pl *planner) decAttention(op *fusion.AttentionOp, ap shaders.AttnParams, step, q, k, v gpu.Binding) error {
	spec := pl.caches[0].spec
	T := pl.p.g.Tokens
	group := op.Heads / op.KVHeads
	// attn_dec4 (attndec.wgsl) reads an f16 cache in 16-byte words where
	// the head dim and the cache length allow (on lavapipe a storage load
	// costs a loop over the lanes whatever its width: 110M shape, 1000
	// positions, BenchmarkAttentionDecode device time ~2 -> ~1.1-1.3 ms).
	dec4 := spec.F16 && op.HeadDim%8 == 0 && spec.MaxLen%4 == 0
	name := "attn_dec"
	if dec4 {
		name = "attn_dec4"
	}
	nb := 1
	if group > 1 {
		nb, name = attnDecBatch, name+"_g4"
	}
	// The variant whose unrolled loops cover the head dim.
	switch {
	case op.HeadDim <= 8:
		name += "_d8"
	case op.HeadDim <= 64:
		name += "_d64"
	default:
		name += "_d128"
	}
	if spec.F16 && !dec4 {
		name += "_f16"
	}
	batches := ceilDiv(group, nb)
	chunks := ceilDiv(spec.MaxLen, attnDecChunk)
	partBytes := int64(T) * int64(op.Heads) * int64(chunks*attnDecLanes) * int64(op.HeadDim+2) * 4
	if chunks > maxDispatch || op.KVHeads*batches > maxDispatch || partBytes > pl.p.b.devBinding {
		return errNoFit
	}
	part, err := pl.partBuf(partBytes)
	if err != nil {
		return err
	}
	sink, err := pl.sinkBuf()
	if err != nil {
		return err
	}
	ap.Chunks, ap.Batches = u(chunks), u(batches)
	none := gpu.Binding{Buf: pl.dummy}
	qu := gpu.Binding{Buf: q.Buf, Size: uxBytes}
	bind := []gpu.Binding{step, none, k, v, sink, part, qu}
	if dec4 {
		bind = append(bind, k, v) // kc4, vc4: the same caches as 16-byte words
	}
	pl.dispatch(name, ap, op.KVHeads*batches, chunks, T, bind...)
	pl.dispatch("attn_dec_combine", ap, op.Heads, T, 1, step, none, none, none, pl.buf(op.Out), part, gpu.Binding{Buf: pl.udummy, Size: uxBytes})
	return nil
}

// batchAttention plans the Attention op of a batched step: row r reads
// sequence r's cache, so each row is its own per-head dispatch binding
// that cache (an unused row's workgroups return at once).
func (pl *planner) batchAttention(op *fusion.AttentionOp, ap shaders.AttnParams, step, q gpu.Binding) error {
	sink, err := pl.sinkBuf()
	if err != nil {
		return err
	}
	name := "attention"
	if pl.caches[0].spec.F16 {
		name = "attention_f16"
	}
	for r, c := range pl.caches {
		ap.Row0 = u(r)
		pl.dispatch(name, ap, op.Heads, 1, 1, step, q, gpu.Binding{Buf: c.k[op.Layer]}, gpu.Binding{Buf: c.v[op.Layer]}, pl.buf(op.Out), sink,
			gpu.Binding{Buf: pl.udummy, Size: uxBytes})
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
	case AttentionDecode:
		return "dec"
	}
	return fmt.Sprintf("AttentionKind(%d)", uint8(k))
}
