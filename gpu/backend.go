// Package gpu defines the two interfaces below the pipeline: Backend, which
// compiles and runs fusion graphs (implemented by the CPU backend,
// gpu/backend/cpu, directly in Go, and by the GPU backend,
// gpu/backend/compute), and Device, the small GPU abstraction that
// gpu/webgpu and gpu/vulkan implement and the GPU backend runs on. Which
// backend runs a model is chosen above the pipeline, at the module root
// (gpurun.OpenBackend).
package gpu

import (
	"context"
	"errors"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// Errors callers can test for with errors.Is.
var (
	ErrNoDevice    = errors.New("gpu: no usable device")
	ErrUnsupported = errors.New("gpu: unsupported")
	ErrCacheFull   = errors.New("gpu: KV cache full")
)

// Backend runs fusion graphs. Weights are uploaded once and shared by every
// program compiled against them (one per prefill length and one for decode),
// and so is the KV cache.
type Backend interface {
	Info() Info
	LoadWeights(ctx context.Context, ws []*tensors.Tensor) (Weights, error)
	NewKVCache(spec fusion.KVSpec) (KVCache, error)
	Compile(g *fusion.Graph, w Weights, kv KVCache) (Program, error)
	Close() error
}

// Weights are a backend's copy of the model weights.
type Weights interface{ Release() }

// KVCache is a backend's key/value cache.
type KVCache interface{ Release() }

// Program is a compiled graph.
type Program interface {
	// Run executes one step: len(tokens) <= graph.Tokens tokens at positions
	// pos, pos+1, ... It fails with ErrCacheFull when pos+len(tokens)
	// exceeds the cache.
	Run(ctx context.Context, tokens []int32, pos int) error
	// Logits copies the graph's Logits buffer rows written by the last Run
	// (T rows, or one for a LastRow output) into dst and returns the count of
	// float32 values copied.
	Logits(dst []float32) (int, error)
	Release()
}

// DeviceType classifies an adapter.
type DeviceType string

const (
	Discrete   DeviceType = "discrete"
	Integrated DeviceType = "integrated"
	Virtual    DeviceType = "virtual"
	CPU        DeviceType = "cpu"
	Other      DeviceType = "other"
)

// Info describes a backend's device.
type Info struct {
	Backend string // "cpu", "webgpu", "vulkan"
	Name    string
	Type    DeviceType
	Driver  string

	F16        bool // f16 shader arithmetic or storage usable
	Subgroups  bool
	Timestamps bool
	// SubgroupSize is the subgroup size of compute kernels where the
	// backend's kernels may use subgroup basic and shuffle operations
	// (Vulkan); 0 where they may not (WebGPU through wgpu-native, whose
	// shader compiler lacks them; the CPU backend).
	SubgroupSize int

	MaxBufferSize       int64
	MaxStorageBinding   int64 // largest range one storage binding may cover
	MaxWorkgroupStorage int
	MaxWorkgroupInvocs  int
	StorageOffsetAlign  int
	// MaxStorageBuffers and MaxUniformBuffers are the storage and uniform
	// buffer bindings one kernel may have (WebGPU: the adapter's limits,
	// which the device requests, not WebGPU's defaults of 8 and 12);
	// NewKernel refuses a kernel with more, wrapping ErrUnsupported.
	MaxStorageBuffers int
	MaxUniformBuffers int

	// MemoryBytes is the device's memory for buffers (Vulkan: its largest
	// device-local heap; gpurun.OpenBackend gives WebGPU the Vulkan device's of
	// the same name); 0 when unknown (the CPU backend: callers look at the
	// host's memory).
	MemoryBytes int64
}

// OpTime is the device time one op of a profiled step took, with the work
// its dispatches did where the backend counts it (matrix kernels: every
// weight byte and activation read once, outputs written once; a
// multiply-add is two FLOPs), so a profile shows GB/s and GFLOP/s.
type OpTime struct {
	Op      int // index in Graph.Ops
	Kind    fusion.Kind
	Kernels []string // the kernels it dispatched (with their variant)
	Nanos   uint64
	Bytes   int64 // 0 when not counted
	FLOPs   int64
}

// Profiler is implemented by programs that can run a step with device
// timestamps around every op: Profile is Run (same arguments, same effect
// on the cache and the logits) that also returns the time of each op that
// dispatched work, in graph order. Passes split at each op, so a profiled
// step runs a little slower than Run.
type Profiler interface {
	Profile(ctx context.Context, tokens []int32, pos int) ([]OpTime, error)
}

// LoRAHalf is implemented by a backend that wants the matrices of
// unmerged LoRA updates of quantized weights (A, [rank, in], and B, [out,
// rank]) stored as binary16 rather than f32: one whose products with
// quantized weights round their inputs anyway (the CPU backend's dynamic
// math), and for which the f32 adapters of a Q8_0 weight would stream a
// sixth as many bytes more as the weight itself at rank 16 (f16 halves
// that).
type LoRAHalf interface {
	HalfLoRA() bool
}
