package gpu

import "github.com/gpurun/gpurun/fusion"

// Caps is what a backend or a device can do beyond what every one does,
// read once (Backend.Caps, Device.Caps) and then consulted as data, as
// gioui.org's driver.Device.Caps is: the interfaces carry every method,
// and a method whose capability is off fails with ErrUnsupported. Callers
// branch on these fields, never on an Info().Backend name nor on a type
// assertion (a test in internal/layers holds the module to that).
//
// A device's Caps describe its shaders and limits; a backend's add what
// its programs do with them (the GPU backend, internal/backend/compute, reports
// its device's with its own features; the CPU backend reports only its
// own).
type Caps struct {
	// F16Storage: binary16 values in storage buffers are loaded and
	// stored as 16-bit (Vulkan's storageBuffer16BitAccess). Packed halves
	// (two per u32 word, as f16 weights, caches and activations are kept)
	// need no such feature.
	F16Storage bool
	// F16Math: shaders may compute in binary16 (Vulkan's shaderFloat16).
	// The GPU backend's f16 kernels need both F16Storage and F16Math, as
	// does the pipeline's auto activation policy.
	F16Math bool
	// Subgroups: compute kernels may use subgroup basic and arithmetic
	// operations.
	Subgroups bool
	// SubgroupSize is the subgroup size of compute kernels where the
	// kernels may use subgroup basic and shuffle operations (Vulkan; a
	// browser's WebGPU offering subgroups: the smallest size it may run);
	// 0 where they may not (WebGPU through wgpu-native, whose shader
	// compiler lacks them; the CPU backend).
	SubgroupSize int
	// SubgroupMaxSize is the largest subgroup size a kernel may run with
	// where the device names a range (a browser's subgroupMaxSize); 0
	// where it runs SubgroupSize alone (Vulkan).
	SubgroupMaxSize int
	// Timestamps: Commands.Timestamp and Device.ReadTimestamps record and
	// report device time; on a backend, Program.Profile times each op.
	Timestamps bool
	// HostBuffers: Device.NewHostBuffer places a buffer in host-visible,
	// coherent memory (Vulkan).
	HostBuffers bool

	// Host: the backend computes in host memory on the host's cores (the
	// CPU backend): its logits need no readback, its per-sequence steps
	// run side by side rather than taking turns on a device queue, and it
	// is the f32 reference the GPU kernels are held to, so the pipeline's
	// auto policy keeps its caches and activations f32.
	Host bool
	// Batch: Backend.CompileBatch compiles batched graphs (continuous
	// batching).
	Batch bool
	// CopyKV: Backend.CopyKV copies cached positions between two caches
	// (the prefix cache).
	CopyKV bool
	// CopyState: Backend.CopyState copies recurrent states between caches
	// (checkpoints of a hybrid model's sequences, see RecurrentState).
	CopyState bool
	// RecurrentState: the backend's KV caches keep recurrent layer states
	// (fusion.KVSpec.State) beside keys and values, and its programs run
	// the ops that read and update them (fusion.ShortConvOp). Where it is
	// off, NewKVCache refuses a spec with states and Compile such ops, with
	// ErrUnsupported naming the op.
	RecurrentState bool
	// Sampling: a decode program ending in fusion.Sample keeps its rule in
	// its step tensor, so Program.SetSampling changes it without compiling
	// the graph again.
	Sampling bool
	// MaxSteps is the most decode steps Program.RunSteps runs in one
	// submission for a one-token program ending in fusion.Argmax or
	// fusion.Sample, each step's id fed to the next on the device; 0 where
	// a program runs one step per Run (the CPU backend, batched programs).
	MaxSteps int
	// MaxStops is the most stop ids RunSteps checks on the device.
	MaxStops int
	// ReadAhead: on a device, Device.SubmitRead queues a read back behind
	// a submission and returns before it is done, so the host can queue
	// the next submission before it reads the first one's result; on a
	// backend, Program.StartSteps runs a window of decode steps that
	// way (where a program runs several steps per submission, MaxSteps,
	// and updates no recurrent state). The page's WebGPU gains most: its
	// read's round trip through the browser's GPU process (milliseconds)
	// then overlaps the device's next submission.
	ReadAhead bool
	// HalfLoRA: the backend wants the matrices of unmerged LoRA updates of
	// quantized weights (A, [rank, in], and B, [out, rank]) stored as
	// binary16 rather than f32: its products with quantized weights round
	// their inputs anyway (the CPU backend's dynamic math), and the f32
	// adapters of a Q8_0 weight would stream a sixth as many bytes more as
	// the weight itself at rank 16 (f16 halves that).
	HalfLoRA bool
	// QuantKV: the backend's caches keep quantized keys and values
	// (fusion.KVSpec.K, V: llama.cpp's block types, rotated as it
	// rotates them). Where it is off, NewKVCache refuses such a spec with
	// ErrUnsupported.
	QuantKV bool
	// QuantKVTypes: with QuantKV, the block types its caches keep (a
	// cache needing another is refused with ErrUnsupported).
	QuantKVTypes fusion.KVTypeSet

	// Limits (0: unknown, not checked).
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
}

// F16 reports whether kernels may keep binary16 in storage and compute in
// it (F16Storage and F16Math).
func (c Caps) F16() bool { return c.F16Storage && c.F16Math }
