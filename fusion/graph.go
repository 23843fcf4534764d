// Package fusion holds the op-graph IR that architecture builders emit and
// every backend executes, the fusion rules that rewrite it into fewer, larger
// kernels, and the execution plan.
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
package fusion

import "fmt"

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

// Kind is an op kind. The comment of each kind is its contract; the CPU
// backend (gpu/cpu) is its reference implementation.
type Kind uint8

const (
	// Embed: Out[t] = Scale * W[tokens[t]] (Scale 0 means 1). W is [vocab, Out.Cols].
	Embed Kind = iota + 1
	// Norm: Out[t] = norm(In[0][t]) * W + Bias, with NormKind rms or layer and Eps.
	// Bias is empty for RMSNorm.
	Norm
	// MatMul: Out[t] = W · In[0][t] + Bias; W is [Out.Cols, In[0].Cols] in any
	// stored type (f32, f16, bf16, int8, int4; per-channel or block scales).
	// With Accumulate, Out[t] = Out[t] + (W · In[0][t] + Bias): the residual
	// add fused into the projection, evaluated in exactly that order so it
	// matches a MatMul into a temporary followed by an Add. Out must not
	// alias In[0].
	//
	// MatMul, MultiMatMul and MatMulGLU take an RMS-norm prologue: with
	// NormWeight set, every product reads n[t] = rmsnorm(In[0][t]) *
	// NormWeight (a Norm of NormKind rms, no bias, with Eps) in place of
	// In[0][t], computed exactly as that Norm computes it; In[0] itself is
	// only read.
	MatMul
	// Rope: Out = In[0] with each of Heads heads of HeadDim rotated at
	// position Pos+t: the first RopeDims dims, pairs per RopeStyle, angle
	// (Pos+t) * RopeBase^(-2i/RopeDims) for pair i. Out may equal In[0].
	Rope
	// StoreKV: writes K = In[0][t] and V = In[1][t] (KVHeads*HeadDim each) into
	// the cache of Layer at position Pos+t, rounded to binary16 when the
	// cache is KVSpec.F16.
	StoreKV
	// Attention: for each head h of Heads (kv head h / (Heads/KVHeads)),
	// Out[t] = sum_p softmax_p(s_p) V[p], s_p = cap(Scale * Q[t]·K[p]) over
	// cache positions p of Layer with p <= Pos+t and, when Window > 0,
	// Pos+t-p < Window; cap(s) = Cap*tanh(s/Cap) when Cap > 0. Q = In[0].
	// Scale must be > 0. Out must not alias In[0].
	Attention
	// GLU: Out = act(In[0]) * In[1], act per Act (silu, gelu_tanh, gelu, relu).
	// gelu_tanh is the tanh approximation evaluated as llama.cpp's CPU
	// backend does: fp16(gelu_tanh(fp16(x))) for -10 < x < 10, 0 for
	// x <= -10, x for x >= 10 (an exact f32 formula is within ~2e-3
	// relative; gpu/cpu implements the table form).
	GLU
	// Activation: Out = act(In[0]), act per Act.
	Activation
	// Add: Out = In[0] + In[1] (elementwise; Out may alias either).
	Add
	// SoftCap: Out = Cap * tanh(In[0] / Cap).
	SoftCap
	// LastRow: Out[0] = In[0][T-1]. Out has one row.
	LastRow
	// MultiMatMul: Outs[i][t] = Weights[i] · In[0][t] + Biases[i] for every
	// i (2 to 4 projections of one input, e.g. Q, K and V), each as MatMul.
	// Out must equal Outs[0]; the outputs are distinct and none aliases
	// In[0]. Biases is empty or has one name ("" for none) per weight.
	MultiMatMul
	// MatMulGLU: Out[t] = act(W · In[0][t] + Bias) * (Up · In[0][t] + UpBias),
	// act per Act: a gate and an up projection and their GLU in one op, each
	// value computed as MatMul and GLU compute it. W and Up are both
	// [Out.Cols, In[0].Cols]. Out must not alias In[0].
	MatMulGLU
	// Argmax: Out[0][0] = float32(i), i the index of the largest value of
	// In[0]'s single row: the lowest index wins ties, NaN never wins, and a
	// row of NaNs gives 0 (pipeline/sampler.Greedy's answer). In[0] has one
	// row, Out is 1x1. Greedy sampling on the device, so that decoding reads
	// back one value per step rather than a vocabulary of logits; ids are
	// exact in f32 below 2^24.
	Argmax
	// Sample: Out[0][0] = float32(i), i the token drawn from In[0]'s single
	// row by Sampling (temperature, top-k, top-p) with the draw of the
	// step Pos+T, the position the token takes: the algorithm of
	// pipeline/sampler, whose SampleAt gives the same id for the same row
	// and step on every backend. In[0] has one row, Out is 1x1.
	Sample
	// RopeStoreKV: the two Ropes and the StoreKV of an attention block in
	// one op. With q = In[0], k = In[1], v = In[2] (distinct buffers) and
	// Out = q: q's Heads heads are rotated in place as Rope rotates them;
	// then K = rope(k[t]) (KVHeads heads, the same rotation) and V = v[t]
	// are stored into the cache of Layer at position Pos+t as StoreKV
	// stores them. k itself is left unchanged (only read). The rope fields
	// are Rope's, the head fields StoreKV's (Heads for q). Not valid in a
	// batched graph.
	RopeStoreKV
)

// Sampling is the rule of a Sample op (pipeline/sampler.Options' fields):
// Temperature > 0 and finite, TopK 0 (all) or at least 1 (at least the
// row's width keeps all), TopP 0 (all) or in (0, 1], and the seed keying
// the draws.
type Sampling struct {
	Temperature float32
	TopK        int
	TopP        float32
	Seed        uint64
}

var kindNames = map[Kind]string{Embed: "embed", Norm: "norm", MatMul: "matmul", Rope: "rope",
	StoreKV: "store_kv", Attention: "attention", GLU: "glu", Activation: "activation", Add: "add",
	SoftCap: "softcap", LastRow: "last_row",
	MultiMatMul: "multi_matmul", MatMulGLU: "matmul_glu", Argmax: "argmax", Sample: "sample",
	RopeStoreKV: "rope_store_kv"}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Op is one node of the graph. Only the fields its Kind documents are used.
type Op struct {
	Kind   Kind
	Out    Buf
	In     []Buf
	Weight string // tensor name (Embed, Norm, MatMul, MatMulGLU)
	Bias   string // tensor name or ""

	Accumulate bool     // MatMul: add into Out rather than overwrite it
	Up, UpBias string   // MatMulGLU: the up projection and its bias ("" for none)
	Outs       []Buf    // MultiMatMul
	Weights    []string // MultiMatMul
	Biases     []string // MultiMatMul

	Layer    int     // StoreKV, Attention, RopeStoreKV
	NormKind string  // model.NormRMS or model.NormLayer
	Eps      float32 // Norm, and the norm prologue of the MatMul kinds
	Act      string  // GLU, Activation, MatMulGLU: model.ActSiLU, ...
	Scale    float32 // Embed, Attention
	Cap      float32 // Attention, SoftCap (0: none)
	Window   int     // Attention (0: none)

	Heads, KVHeads, HeadDim int     // Rope, StoreKV, Attention, RopeStoreKV
	RopeDims                int     // Rope, RopeStoreKV
	RopeBase                float32 // Rope, RopeStoreKV
	RopeStyle               string  // Rope, RopeStoreKV: model.RopeInterleaved or model.RopeHalves

	Sampling Sampling // Sample

	// NormWeight is the scale of the RMS-norm prologue of a MatMul,
	// MultiMatMul or MatMulGLU ("" for none); its epsilon is Eps.
	NormWeight string
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
	// are read. Backends run batched graphs through gpu.BatchBackend; their
	// plain Compile rejects them (Validate does, with ErrBatch).
	Batch  bool
	Bufs   []BufInfo
	Ops    []Op
	Logits Buf // the output the host reads
	KV     KVSpec
}

// NewBuf adds an activation buffer and returns its handle.
func (g *Graph) NewBuf(name string, rows, cols int) Buf {
	g.Bufs = append(g.Bufs, BufInfo{Name: name, Rows: rows, Cols: cols})
	return Buf(len(g.Bufs) - 1)
}

// Add appends an op and returns its output buffer.
func (g *Graph) Add(op Op) Buf {
	g.Ops = append(g.Ops, op)
	return op.Out
}

// UsesKV reports whether the graph reads or writes the KV cache, so that a
// backend compiling it needs one.
func (g *Graph) UsesKV() bool {
	for _, op := range g.Ops {
		if op.Kind == StoreKV || op.Kind == Attention || op.Kind == RopeStoreKV {
			return true
		}
	}
	return false
}
