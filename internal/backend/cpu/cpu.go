// Package cpu is the CPU backend, and the reference the GPU backend
// (internal/backend/compute) is tested against: it interprets fusion graphs in
// plain Go, one small function per op kind, in f32 with an f32 KV cache (or an
// f16 one when the graph's KVSpec asks for it). Matrix
// products read the weights in their stored type (f32, f16, bf16, int8,
// int4 with per-channel or block scales) and dequantize inside the dot
// product. Every GPU backend is tested against it, so its op semantics are
// exactly the contracts written on the op types of fusion/ops.go.
package cpu

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
)

// Options configures the backend.
type Options struct {
	// Threads is the number of threads (the caller and Threads-1 worker
	// goroutines, started once) a matrix product or attention is split
	// across; 0 means runtime.NumCPU().
	Threads int
	// Math is how matrix products with int8, int4 and K-quant weights
	// treat their inputs; the zero value, MathExact, is the reference.
	Math Math
}

// Math selects the arithmetic of matrix products with quantized weights.
type Math int

const (
	// MathExact multiplies the f32 inputs by the dequantized weights: the
	// reference the GPU backends are tested against.
	MathExact Math = iota
	// MathDynamic quantizes each input row to int8 once per matrix
	// product (dynamic-range quantization) and sums integer products,
	// applying the weight and input scales per block: per block of 32
	// values for int8 and int4 weights whose rows and blocks are multiples
	// of 32 (as llama.cpp does with its Q8_0 activation blocks), per block
	// of 256 with the sums of every 16 for llama.cpp's K-quant blocks
	// (Q2_K ... Q6_K, read in their GGUF layout; llama.cpp's Q8_K), and
	// per block of 32 for Q4_1, Q5_0 and Q5_1. Prefill steps (4 or more
	// tokens) use it only where a four-token kernel exists (int8, int4,
	// and Q4_K, Q5_K and Q6_K on amd64 and arm64) and run the other types
	// exactly, which is faster for them. On CPUs with AVX2 (arm64: SDOT), int8
	// and int4 weights with one binary16 scale per 32 values (GGUF Q8_0,
	// Q4_0) or one scale per row (converted per-channel int8, random
	// models' int8) are also repacked at load for the prefill GEMM (a
	// second copy of those weights in memory), and on amd64 Q2_K ... Q6_K
	// likewise for the K-quant GEMM. Other weights are used exactly.
	MathDynamic
)

// MathNames lists the names ParseMath accepts, in Math order.
var MathNames = []string{"exact", "dynamic"}

func (m Math) String() string {
	if m >= 0 && int(m) < len(MathNames) {
		return MathNames[m]
	}
	return fmt.Sprintf("Math(%d)", int(m))
}

// ParseMath returns the Math named s ("exact" or "dynamic").
func ParseMath(s string) (Math, error) {
	for i, n := range MathNames {
		if s == n {
			return Math(i), nil
		}
	}
	return 0, fmt.Errorf("cpu: unknown math %q (want one of %v): %w", s, MathNames, gpu.ErrUnsupported)
}

// errToken reports a token id outside the embedding table.
var errToken = errors.New("cpu: token out of range")

type backend struct {
	pool *pool
	math Math
}

// New returns the CPU backend. Its worker goroutines stop on Close, or
// when the backend is no longer reachable.
func New(opts Options) gpu.Backend {
	t := opts.Threads
	if t <= 0 {
		t = runtime.NumCPU()
	}
	b := &backend{pool: newPool(t), math: opts.Math}
	runtime.AddCleanup(b, func(p *pool) { p.close() }, b.pool)
	return b
}

func (b *backend) Info() gpu.Info {
	return gpu.Info{
		Backend: "cpu",
		Name:    fmt.Sprintf("Go (%d threads, %s math, %s kernels, %s/%s)", b.pool.threads, b.math, simd.Best().Name, runtime.GOOS, runtime.GOARCH),
		Type:    gpu.CPU,
		Driver:  runtime.Version(),
	}
}

// Caps: the backend computes in host memory, batches, copies caches, keeps
// recurrent layer states and masks tokens; it picks one token per Run (no RunSteps, no
// SetSampling), keeps no timestamps, and in dynamic math takes its LoRA
// matrices as binary16 (HalfLoRA: its products with quantized weights
// round their inputs anyway, and the adapters' matrices stay exact in
// f32 over the f16 values).
func (b *backend) Caps() gpu.Caps {
	return gpu.Caps{Host: true, Batch: true, CopyKV: true, QuantKV: true, QuantKVTypes: fusion.AllKVTypes(), CopyState: true, RecurrentState: true, HalfLoRA: b.math == MathDynamic, MaxBufferSize: 1 << 62}
}

// FusionSupport is nil: the backend runs every fused op whole.
func (b *backend) FusionSupport(gpu.Weights) fusion.Support { return nil }

// MemoryUse is zero: the backend's buffers are the Go heap's, which it does
// not count.
func (b *backend) MemoryUse() gpu.MemoryUse { return gpu.MemoryUse{} }

// ResetPeakMemory does nothing (MemoryUse).
func (b *backend) ResetPeakMemory() {}

func (b *backend) Close() error {
	b.pool.close()
	return nil
}

// kvCache holds, per layer, K and V as [MaxLen][KVHeads*HeadDim] values:
// f32, or binary16 bit patterns when spec.F16 (half the memory; see kv16.go).
type kvCache struct {
	spec   fusion.KVSpec
	layers []layerCache
}

// layerCache is one layer's keys and values: k and v for an f32 cache, k16
// and v16 for an f16 one (the other pair is nil). Each is head-major,
// [kv head][slot][head dim]: a head's keys (and values) are one contiguous
// run, so attention streams them (at = at(kh, pos)).
//
// A ring layer (KVSpec.Ring) keeps its last ring positions in a mirrored
// ring of 2*ring slots per head: position p is stored at slot p % ring and
// again at p % ring + ring, so any ring consecutive positions are
// consecutive slots from at(kh, first) and attention reads a window exactly
// as it reads a full cache (the same values in the same order).
//
// A recurrent layer (KVSpec.State) has no keys and values but its state:
// conv holds the state's values (fusion.LayerState.Values): the last
// ConvWindow convolution inputs, [window][channels] (oldest first), then
// the matrices of a Mamba-2 layer (mamba2.go), describing the sequence's first statePos positions
// (fusion.LayerState: a step at 0 starts it afresh, any other step must
// continue at statePos).
type layerCache struct {
	k, v     []float32
	k16, v16 []uint16
	// A quantized K or V (fusion.KVSpec.K, V; kvquant.go): kq or vq holds
	// its blocks, the same layout with every 32 values one block of kt
	// or vt; krot and vrot are the rotations (fusion.KVSpec.KRotation,
	// VRotation; 0: none) and tmp a head's row being rotated for a store.
	kq, vq     []byte
	kt, vt     fusion.KVType
	krot, vrot int
	tmp        []float32
	slots      int // slots per head: MaxLen, or 2*ring
	ring       int // 0: slot = position
	hd         int // values per head and position

	state    fusion.LayerState
	conv     []float32
	statePos int
}

// at is the index of kv head kh's first value at position pos.
func (c *layerCache) at(kh, pos int) int {
	if c.ring > 0 {
		pos %= c.ring
	}
	return (kh*c.slots + pos) * c.hd
}

// mirror is the index of the second copy of position pos in a ring layer
// (-1 for a full one).
func (c *layerCache) mirror(kh, pos int) int {
	if c.ring == 0 {
		return -1
	}
	return (kh*c.slots + pos%c.ring + c.ring) * c.hd
}

func (c *kvCache) Release() { c.layers = nil }

// kvRotAblation, when > 0, rotates the queries and keys of a rotated
// cache by H of that size instead (SetKVRotationAblation): a test's wrong
// matrix.
var kvRotAblation int

// maxKVValues bounds a cache allocation (16 GiB of f32) so that a corrupt
// spec fails cleanly instead of exhausting memory.
const maxKVValues = 1 << 32

func (b *backend) NewKVCache(spec fusion.KVSpec) (gpu.KVCache, error) {
	if spec.Layers < 0 || spec.KVHeads <= 0 || spec.HeadDim <= 0 || spec.MaxLen <= 0 {
		return nil, fmt.Errorf("cpu: kv cache spec %+v: %w", spec, gpu.ErrUnsupported)
	}
	per := spec.KVHeads * spec.HeadDim
	if per > maxKVValues/spec.MaxLen || 2*spec.Layers > maxKVValues/(per*spec.MaxLen) {
		return nil, fmt.Errorf("cpu: kv cache spec %+v is too large: %w", spec, gpu.ErrUnsupported)
	}
	if spec.Ring != nil && len(spec.Ring) != spec.Layers {
		return nil, fmt.Errorf("cpu: kv cache spec %+v: ring lengths for %d layers: %w", spec, len(spec.Ring), gpu.ErrUnsupported)
	}
	if spec.HeadDims != nil && len(spec.HeadDims) != spec.Layers {
		return nil, fmt.Errorf("cpu: kv cache spec %+v: head dims for %d layers: %w", spec, len(spec.HeadDims), gpu.ErrUnsupported)
	}
	if spec.State != nil && len(spec.State) != spec.Layers {
		return nil, fmt.Errorf("cpu: kv cache spec %+v: states for %d layers: %w", spec, len(spec.State), gpu.ErrUnsupported)
	}
	if err := spec.CheckTypes(); err != nil {
		return nil, fmt.Errorf("cpu: kv cache: %w: %w", err, gpu.ErrUnsupported)
	}
	c := &kvCache{spec: spec, layers: make([]layerCache, spec.Layers)}
	for l := range c.layers {
		if st := spec.LayerState(l); st.Recurrent() {
			if st.ConvChannels > maxKVValues/max(st.ConvWindow, 1) || st.ConvWindow <= 0 || st.ConvWindow > 1<<10 {
				return nil, fmt.Errorf("cpu: kv cache spec %+v: layer %d state %+v: %w", spec, l, st, gpu.ErrUnsupported)
			}
			c.layers[l] = layerCache{state: st, conv: make([]float32, st.Values())}
			continue
		}
		ring := spec.RingLen(l)
		if ring < 0 || ring > spec.MaxLen {
			return nil, fmt.Errorf("cpu: kv cache spec %+v: ring of %d: %w", spec, ring, gpu.ErrUnsupported)
		}
		// A layer of its own head dim (at most HeadDim); 0: none, its
		// attention reads another layer's cache.
		hd := spec.LayerHeadDim(l)
		if hd < 0 || hd > spec.HeadDim {
			return nil, fmt.Errorf("cpu: kv cache spec %+v: layer %d head dim %d: %w", spec, l, hd, gpu.ErrUnsupported)
		}
		per := spec.KVHeads * hd
		slots := spec.MaxLen
		if ring > 0 {
			slots = 2 * ring
		}
		lc := &c.layers[l]
		switch {
		case spec.K.Quantized():
			lc.kq = make([]byte, slots*per/fusion.KVBlock*spec.K.BlockBytes())
		case spec.F16:
			lc.k16 = make([]uint16, slots*per)
		default:
			lc.k = make([]float32, slots*per)
		}
		switch {
		case spec.V.Quantized():
			lc.vq = make([]byte, slots*per/fusion.KVBlock*spec.V.BlockBytes())
		case spec.F16:
			lc.v16 = make([]uint16, slots*per)
		default:
			lc.v = make([]float32, slots*per)
		}
		lc.slots, lc.ring, lc.hd = slots, ring, hd
		lc.kt, lc.vt, lc.krot, lc.vrot = spec.K, spec.V, spec.KRotation(l), spec.VRotation(l)
		if kvRotAblation > 0 && lc.krot > 0 {
			lc.krot = kvRotAblation
		}
		if spec.Quantized() {
			lc.tmp = make([]float32, hd)
		}
	}
	return c, nil
}
