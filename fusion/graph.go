// Package fusion holds the op-graph IR that architecture builders emit and
// every backend executes: the typed ops and their contracts, the validation
// of a graph against them (Validate, ValidateBatch), the fusion rules that
// rewrite it into fewer, larger ops (Fuse, FuseFor) and the f16 activation
// policy (HalfActivations). How a graph runs, its execution plan, is each
// backend's own (the GPU backend's planner, for one).
//
// A Graph describes one forward step over up to Tokens tokens. Every
// activation is a matrix of f32 values, one row per token; row t of a step
// belongs to absolute position Pos+t, where Pos and the actual token count
// T <= Tokens are given when the step runs (pseudo-dynamic shapes: the same
// compiled graph serves every step). Ops only touch rows < T.
//
// A batched graph (Graph.Batch) is the decode step of several sequences at
// once (continuous batching): its rows are independent sequences, each at
// its own position and with its own KV cache, so one step reads the weights
// once for all of them. See Graph.Batch for how its positional ops differ.
//
// Ops are typed (ops.go): one Go type per Kind (EmbedOp, NormOp, MatMulOp,
// ..., RopeStoreKVOp), each with exactly the fields its kind uses, its
// contract as its doc comment and its own validation, all behind the
// sealed interface Op. Shared field groups are small embedded structs
// (HeadShape, RopeParams, Projection), the RMS-norm prologue of the
// products is an optional *RMSPrologue, and the fused kinds are built of
// the typed parts they fuse (MatMulGLUOp of two Projections,
// MultiMatMulOp of Products), so a fused op cannot be half-described. The
// parameters are typed enums (NormKind, Act, RopeStyle); Parse* converts a
// model config's names to them, the one place strings come in. Backends
// type-switch on the op types and report a type they do not run as an
// error when compiling.
//
// Import it to build op graphs for a gpu.Backend yourself (package gpu
// runs them): the typed ops, buffers, KV cache specs and the fusion rules.
package fusion

import (
	"fmt"
	"math"
	"slices"
)

// Buf names an activation buffer of a graph.
type Buf int

// BufInfo describes an activation buffer: Rows x Cols f32 values. Rows is
// Graph.Tokens for per-token buffers, 1 for LastRow outputs.
//
// F16 makes it an f16 activation (the f16 activation policy, see
// HalfActivations): every op writing it rounds each value it writes to
// binary16 (nearest, ties to even; values past the largest finite half,
// 65504, saturate to it, as the f16 KV cache stores them) after computing
// it in f32, so every op reading it reads halves. Only the op's output is
// rounded: the values a fused op keeps inside (a norm prologue's normed
// row, MatMulGLU's gate and up products, the rotated k of RopeStoreKV)
// stay f32. The logits, the ids of Argmax and Sample and the inputs of
// SoftCap, Argmax and Sample are never f16. The GPU backends store an f16
// activation as binary16 halves packed two per u32 word (the flat buffer:
// element i is the low half of word i/2 when i is even, the high half
// when odd), half the bytes of an f32 one; the CPU backend keeps f32
// values that are halves.
type BufInfo struct {
	Name string
	Rows int
	Cols int
	F16  bool
}

// Kind names an op kind: each has its own op type (EmbedOp for Embed, and
// so on), whose comment is the kind's contract; the CPU backend (internal/backend/cpu)
// is the reference implementation.
type Kind uint8

const (
	Embed        Kind = iota + 1 // EmbedOp
	Norm                         // NormOp
	MatMul                       // MatMulOp
	Rope                         // RopeOp
	StoreKV                      // StoreKVOp
	Attention                    // AttentionOp
	GLU                          // GLUOp
	Activation                   // ActivationOp
	Add                          // AddOp
	SoftCap                      // SoftCapOp
	LastRow                      // LastRowOp
	MultiMatMul                  // MultiMatMulOp
	MatMulGLU                    // MatMulGLUOp
	Argmax                       // ArgmaxOp
	Sample                       // SampleOp
	RopeStoreKV                  // RopeStoreKVOp
	MatMulRopeKV                 // MatMulRopeKVOp
	MoE                          // MoEOp
	RowLoRA                      // RowLoRAOp
	Scale                        // ScaleOp
	Columns                      // ColumnsOp
	ShortConv                    // ShortConvOp
	SelfAttn                     // SelfAttnOp
	AvgPool                      // AvgPoolOp
	Input                        // InputOp
	DeltaNet                     // DeltaNetOp
	SigmoidGate                  // SigmoidGateOp
	Mamba2                       // Mamba2Op
)

// Sampling is the rule of a Sample op (internal/sampler.Options' fields):
// Temperature > 0 and finite, TopK 0 (all) or at least 1 (at least the
// row's width keeps all), TopP 0 (all) or in (0, 1], and the seed keying
// the draws.
type Sampling struct {
	Temperature float32
	TopK        int
	TopP        float32
	Seed        uint64
}

// Validate checks the rule's ranges (see Sampling): a Sample op's rule
// and the rule gpu.Program.SetSampling takes are valid ones. Callers build
// the rule from options they validated already (package pipeline's
// GenerateOptions.Validate), so this is an invariant, not a user's error.
func (s Sampling) Validate() error {
	t := float64(s.Temperature)
	if !(t > 0) || math.IsInf(t, 0) || s.TopK < 0 || s.TopK > math.MaxInt32 || !(s.TopP >= 0 && s.TopP <= 1) {
		return fmt.Errorf("%w: sample rule %+v (want temperature > 0 and finite, top-k in 0..2^31-1, top-p in [0, 1])", ErrInvalid, s)
	}
	return nil
}

var kindNames = map[Kind]string{Embed: "embed", Norm: "norm", MatMul: "matmul", Rope: "rope",
	StoreKV: "store_kv", Attention: "attention", GLU: "glu", Activation: "activation", Add: "add",
	SoftCap: "softcap", LastRow: "last_row",
	MultiMatMul: "multi_matmul", MatMulGLU: "matmul_glu", Argmax: "argmax", Sample: "sample",
	RopeStoreKV: "rope_store_kv", MatMulRopeKV: "matmul_rope_kv", MoE: "moe",
	RowLoRA: "row_lora", Scale: "scale", Columns: "columns", ShortConv: "short_conv",
	SelfAttn: "self_attention", AvgPool: "avg_pool", Input: "input",
	DeltaNet: "gated_delta_net", SigmoidGate: "sigmoid_gate", Mamba2: "mamba2"}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// KVSpec sizes the KV cache a graph reads and writes.
type KVSpec struct {
	Layers  int
	KVHeads int
	HeadDim int
	MaxLen  int // positions per layer; Pos+T must not exceed it
	// F16 stores keys and values as IEEE binary16, halving the cache and
	// the bandwidth attention spends reading it: StoreKV rounds each value
	// to the nearest half (ties to even; magnitudes past the largest finite
	// half, 65504, saturate to it) and Attention reads the rounded values,
	// computing in f32 as with an f32 cache. The zero value is an f32 cache.
	F16 bool
	// Ring, when not nil, has one entry per layer: a layer with Ring[l] > 0
	// (a sliding-window layer) keeps only its last Ring[l] positions, the
	// others all MaxLen. Every Attention of a ring layer has a window w
	// with w + Tokens - 1 <= Ring[l] (w <= Ring[l] in a batched graph), so
	// no position a step reads is overwritten by one it stores; the logits
	// are those of a full cache. Backends may refuse rings
	// (gpu.ErrUnsupported).
	Ring []int
	// HeadDims, when not nil, has one entry per layer: the head dim of
	// that layer's keys and values (HeadDim is then the largest), 0 for a
	// layer with no cache of its own, whose attention reads another
	// layer's (Gemma 4: sliding and global layers of two head dims, the
	// last layers sharing the KV of earlier ones). Backends may refuse
	// them (gpu.ErrUnsupported).
	HeadDims []int
	// State, when not nil, has one entry per layer: a layer whose entry is
	// Recurrent keeps that state (LayerState) instead of keys and values,
	// and only the ops of its mixer (ShortConvOp, DeltaNetOp, Mamba2Op) name it; no StoreKV or
	// Attention does. Backends that keep no states refuse those ops when
	// compiling (gpu.ErrUnsupported).
	State []LayerState
	// K and V are the element types of keys and values (kvtype.go): the
	// zero value is the float cache F16 chooses; a block type quantizes
	// them as llama.cpp's `-ctk`/`-ctv` do, rotated per KRotation and
	// VRotation. F16 then only concerns a float K or V. Backends that
	// keep no quantized caches refuse them (gpu.Caps.QuantKV).
	K, V KVType
	// SWA, when not nil, has one entry per layer: true for a
	// sliding-window layer. llama.cpp keeps those in a cache of their
	// own, whose quantization rotation it decides apart (KRotation); it
	// changes nothing else.
	SWA []bool
	// NoRotation skips the rotation of a quantized cache (llama.cpp's
	// LLAMA_ATTN_ROT_DISABLE): for ablations.
	NoRotation bool
}

// Equal reports whether s and o describe the same cache.
func (s KVSpec) Equal(o KVSpec) bool {
	return s.Layers == o.Layers && s.KVHeads == o.KVHeads && s.HeadDim == o.HeadDim && s.MaxLen == o.MaxLen &&
		s.F16 == o.F16 && slices.Equal(s.Ring, o.Ring) && slices.Equal(s.HeadDims, o.HeadDims) && slices.Equal(s.State, o.State) &&
		s.K == o.K && s.V == o.V && s.NoRotation == o.NoRotation && slices.Equal(s.SWA, o.SWA)
}

// LayerHeadDim is the head dim of layer l's cache (HeadDim without
// HeadDims; 0: the layer has none, or l is out of range).
func (s KVSpec) LayerHeadDim(l int) int {
	if s.HeadDims == nil {
		if l < 0 || l >= s.Layers {
			return 0
		}
		return s.HeadDim
	}
	if l < 0 || l >= len(s.HeadDims) {
		return 0
	}
	return s.HeadDims[l]
}

// RingLen is the ring length of layer l (0: the layer keeps MaxLen
// positions).
func (s KVSpec) RingLen(l int) int {
	if l < 0 || l >= len(s.Ring) {
		return 0
	}
	return s.Ring[l]
}

// Graph is a forward step. Graph.Validate checks it against the contracts
// above; backends call it when compiling.
type Graph struct {
	Tokens int // maximum tokens per step (rows of a batched graph)
	// Batch makes the graph a batched step: row t is one token of its own
	// sequence, given when the step runs as a position Pos[t] and a
	// sequence index Seq[t] choosing one of the KV caches the program was
	// compiled against (all of the spec KV; the rows of a step name
	// distinct sequences). Rope rotates row t at Pos[t] (not Pos+t),
	// StoreKV writes row t into sequence Seq[t] at Pos[t], and Attention
	// reads, for row t, sequence Seq[t]'s positions p <= Pos[t] (the window
	// counted from Pos[t]). Every other op is row-wise and unchanged.
	// Every buffer is per-token (Tokens rows): LastRow and Argmax, which
	// reduce a step to one row, are invalid, and the logits of all T rows
	// are read. Backends run batched graphs through gpu.Backend.CompileBatch; their
	// plain Compile rejects them (Validate does, with ErrBatch).
	Batch  bool
	Bufs   []BufInfo
	Ops    []Op // each a non-nil pointer to one of this package's op types
	Logits Buf  // the output the host reads
	KV     KVSpec
}

// NewBuf adds an activation buffer and returns its handle.
func (g *Graph) NewBuf(name string, rows, cols int) Buf {
	g.Bufs = append(g.Bufs, BufInfo{Name: name, Rows: rows, Cols: cols})
	return Buf(len(g.Bufs) - 1)
}

// Add appends an op and returns its first output buffer (-1 for an op
// that writes none, StoreKV).
func (g *Graph) Add(op Op) Buf {
	g.Ops = append(g.Ops, op)
	if outs := op.Outputs(); len(outs) > 0 {
		return outs[0]
	}
	return -1
}

// UsesKV reports whether the graph reads or writes the KV cache (keys and
// values or a layer's recurrent state), so that a backend compiling it
// needs one.
func (g *Graph) UsesKV() bool {
	for _, op := range g.Ops {
		switch op.(type) {
		case *StoreKVOp, *AttentionOp, *RopeStoreKVOp, *MatMulRopeKVOp, *ShortConvOp, *DeltaNetOp, *Mamba2Op:
			return true
		}
	}
	return false
}
