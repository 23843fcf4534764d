package pipeline

import (
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// KVCacheBytes is the size of one session slot's KV cache: keys and
// values of every layer, MaxCache positions each, or for a sliding-window
// layer on a ring (tuning.Options.FullKVCache unset, a backend that takes
// rings) twice its ring's positions, in the cache's types
// (Options.CacheTypeK, CacheTypeV).
func (m *Model) KVCacheBytes() int64 {
	s := m.kvSpec
	var n int64
	for l := range s.Layers {
		pos := int64(s.MaxLen)
		if r := s.RingLen(l); r > 0 {
			pos = 2 * int64(r)
		}
		vals := pos * int64(s.KVHeads) * int64(s.LayerHeadDim(l))
		n += fusion.KVBytes(s.K, s.F16, vals) + fusion.KVBytes(s.V, s.F16, vals)
	}
	return n
}

// DecodeBytes is what one decode step reads from memory, the figures a
// bandwidth-bound decoder's speed follows: the weights (every tensor but
// the token embedding table, of which a step reads one row, unless the LM
// head is that table) and, per cache position the step attends to, the
// keys and values of every layer in the cache's type.
func (m *Model) DecodeBytes() (weights, kvPerPosition int64) {
	return m.decodeWeights, kvBytesPerPosition(&m.cfg, m.kvF16, m.cacheK, m.cacheV)
}

// DecodeBytesOf is Model.DecodeBytes for the configuration cfg, its
// weight tensors ws and a KV cache of binary16 (kvF16) or f32, for
// measurements that run a backend's programs without a Model (the
// valid-length benchmark of internal/backend/compute).
func DecodeBytesOf(cfg *model.Config, ws []*tensors.Tensor, kvF16 bool) (weights, kvPerPosition int64) {
	return decodeWeightBytes(cfg, ws), kvBytesPerPosition(cfg, kvF16, fusion.KVFloat, fusion.KVFloat)
}

// kvBytesPerPosition is DecodeBytes' keys and values per cache position,
// keys of type k and values of type v (a float one binary16 or f32 per
// kvF16).
func kvBytesPerPosition(cfg *model.Config, kvF16 bool, k, v fusion.KVType) int64 {
	var n int64
	for l := range cfg.Layers {
		if cfg.KVLayer(l) == l && !cfg.ConvLayer(l) { // a layer sharing another's cache, or a recurrent one, reads no keys of its own
			vals := int64(cfg.KVHeads) * int64(cfg.LayerHeadDim(l))
			n += fusion.KVBytes(k, kvF16, vals) + fusion.KVBytes(v, kvF16, vals)
		}
	}
	return n
}

// decodeWeightBytes is DecodeBytes' weights of the tensors ws: all but
// the embedding's other rows and, in a mixture of experts, the experts a
// token does not use (each token reads ExpertsUsed of Experts: its active
// bytes).
func decodeWeightBytes(cfg *model.Config, ws []*tensors.Tensor) int64 {
	n := weightBytes(ws)
	if cfg.Experts > 0 {
		for _, t := range ws {
			if t != nil && model.IsExperts(t.Name) {
				b := weightBytes([]*tensors.Tensor{t})
				n -= b - b/int64(cfg.Experts)*int64(cfg.ExpertsUsed)
			}
		}
	}
	if cfg.Tied {
		return n
	}
	for _, t := range ws {
		if t != nil && t.Name == model.TokenEmbedding {
			n -= weightBytes([]*tensors.Tensor{t})
			if len(t.Shape) == 2 && t.Shape[0] > 0 {
				n += weightBytes([]*tensors.Tensor{t}) / int64(t.Shape[0]) // the row read
			}
		}
	}
	return n
}

// weightBytes is the size of the tensors' data (and of their scales).
func weightBytes(ws []*tensors.Tensor) int64 {
	var n int64
	for _, t := range ws {
		if t == nil {
			continue
		}
		if t.Deferred() {
			// Not read yet (streamed): its stored size, scales aside.
			n += int64(t.DType.ByteSize(t.NumElements()))
			continue
		}
		n += int64(len(t.Data))
		if t.Scales != nil {
			n += int64(len(t.Scales.Data))
		}
	}
	return n
}

// KVBytesPerPosition is the KV cache memory one position takes in a model
// of cfg (every layer that keeps keys and values of its own) with keys of
// type k and values of type v, a float one binary16 when kvF16
// (Options.CacheTypeK, CacheTypeV): what inspect and bench report.
func KVBytesPerPosition(cfg *model.Config, kvF16 bool, k, v fusion.KVType) int64 {
	return kvBytesPerPosition(cfg, kvF16, k, v)
}
