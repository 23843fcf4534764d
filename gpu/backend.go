// Package gpu defines the two interfaces below the pipeline: Backend, which
// compiles and runs fusion graphs (implemented by the CPU backend,
// internal/backend/cpu, directly in Go, and by the GPU backend,
// internal/backend/compute), and Device, the small GPU abstraction that
// internal/webgpu and internal/vulkan implement and the GPU backend runs on. Which
// backend runs a model is chosen above the pipeline, at the module root
// (gpurun.OpenBackend).
//
// Import it to run your own fusion graphs on a backend gpurun.OpenBackend
// opened (compute without a model), or to implement a backend or device of
// your own.
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
//
// What a backend can do beyond what every one does is its Caps, read
// once; a method whose capability is off fails with ErrUnsupported.
type Backend interface {
	Info() Info
	Caps() Caps
	LoadWeights(ctx context.Context, ws []*tensors.Tensor) (Weights, error)
	NewKVCache(spec fusion.KVSpec) (KVCache, error)
	Compile(g *fusion.Graph, w Weights, kv KVCache) (Program, error)
	// CompileBatch validates g (fusion.Graph.ValidateBatch) and prepares
	// it against the weights and the caches of its sequences, every cache
	// made for g.KV; Row.Seq i refers to kvs[i] (continuous batching: one
	// step, one row per active sequence, each with its own position and KV
	// cache, reading the weights once for all rows). It fails with
	// ErrUnsupported where !Caps().Batch; callers then step each sequence
	// with its own Program.
	CompileBatch(g *fusion.Graph, w Weights, kvs []KVCache) (BatchProgram, error)
	// CopyKV copies the keys and values of positions [0, n) of every layer
	// from src to dst, two caches of this backend with the same layers,
	// heads, head size and storage type (their lengths may differ; both
	// hold at least n positions). It is ordered after the work submitted
	// before it and before the work submitted after it; no program may run
	// on dst meanwhile. A prefix cache uses it to keep the keys and values
	// of finished requests and to give a new request the ones of its
	// prompt's cached prefix without running them again. It fails with
	// ErrUnsupported where !Caps().CopyKV. A recurrent layer's state
	// (fusion.LayerState) describes one position only: it is copied when
	// src's holds position n, n = 0 gives dst empty states (a reset), and
	// any other n fails with ErrStep before anything is copied.
	CopyKV(dst, src KVCache, n int) error
	// CopyState copies the recurrent layers' states (fusion.LayerState)
	// of src into dst, two caches of this backend made for specs with the
	// same layers and states (their keys and values, lengths and rings may
	// differ, and are not touched): dst's states then describe the
	// position src's do, and a step at that position continues them. A
	// cache of one position (MaxLen 1, no rings) so holds a checkpoint of a
	// sequence's states, which a copy back restores after the sequence
	// went past it, where CopyKV cannot (a state does not roll back): the
	// pipeline checkpoints hybrid models' states where a prompt or a chat
	// turn ends and before a speculative step. Ordered as CopyKV is. It
	// fails with ErrUnsupported where !Caps().CopyState, with ErrStep for
	// caches it cannot pair.
	CopyState(dst, src KVCache) error
	// FusionSupport says which fused ops the backend runs whole (as the
	// kernels of their kind, never split back into the parts) for weights
	// w that it loaded; nil: every one (the CPU backend). Fuse asks it.
	FusionSupport(w Weights) fusion.Support
	// MemoryUse is what the backend's device allocated (MemoryUse); zero
	// where nothing is counted (the CPU backend).
	MemoryUse() MemoryUse
	// ResetPeakMemory makes the peak the current allocation, so the next
	// MemoryUse covers what follows.
	ResetPeakMemory()
	Close() error
}

// Weights are a backend's copy of the model weights.
type Weights interface{ Release() }

// KVCache is a backend's cache of one sequence, made for a fusion.KVSpec:
// the keys and values of its attention layers and, where
// Caps().RecurrentState, the recurrent states of its other layers.
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
	// SetTokenMask makes the following runs of a one-token program ending
	// in fusion.Argmax or fusion.Sample pick only among the tokens allowed
	// (bit i % 64 of allowed[i / 64] allows token i; len(allowed) is
	// (vocabulary + 63) / 64), exactly as if the logits of the others were
	// -inf; nil allows every token again. Constrained generation (a
	// grammar) sets the mask of each step before running it, so a masked
	// program runs one step per Run (RunSteps refuses while a mask is
	// set). Every backend takes masks.
	SetTokenMask(allowed []uint64) error
	// SetInput gives a program whose graph has a fusion.InputOp the rows
	// that op reads in the following runs (row t of a run is
	// rows[t*cols:(t+1)*cols], cols the op's width; a run of n tokens
	// needs n rows): a step over embeddings (an image's) rather than
	// token ids. It fails with ErrUnsupported for a program without an
	// InputOp, and with fusion.ErrInvalid for rows that are not whole.
	SetInput(rows []float32) error
	// RunSteps runs up to n (1..Caps().MaxSteps) decode steps of a
	// one-token program ending in fusion.Argmax or fusion.Sample as one
	// submission and waits for them: step i runs the id step i-1 picked
	// (step 0: token) at position pos+i and picks the next. It returns the
	// picked ids in order: n of them, or fewer when the device picked one
	// of stops (at most Caps().MaxStops; a caller with more checks the
	// rest itself), which is then the last id returned and ends the
	// submission's work. The cache holds positions pos ..
	// pos+len(ids)-1 afterwards. It fails with ErrCacheFull when pos+n
	// exceeds the cache, checks ctx before it submits, and fails with
	// ErrUnsupported where Caps().MaxSteps is 0.
	RunSteps(ctx context.Context, token int32, pos, n int, stops []int32) ([]int32, error)
	// TimeSteps is RunSteps (same arguments, same effect) with device
	// timestamps before the submission's first dispatch and after its
	// last, where Caps().Timestamps (else ErrUnsupported): it also returns
	// the device time of the steps that ran, in nanoseconds, which a
	// caller sets against the wall time of its decode steps to see the
	// host's share (the passes are not split, unlike Profile's).
	TimeSteps(ctx context.Context, token int32, pos, n int, stops []int32) (ids []int32, deviceNanos uint64, err error)
	// StartSteps starts a window of up to steps (1..Caps().MaxSteps)
	// decode steps of a one-token program ending in fusion.Argmax or
	// fusion.Sample in submissions of up to perSubmit steps (the first
	// runs one step, each next twice the one before: the device starts
	// after one step is recorded), the device continuing each
	// submission from the step tensor the one before it left: step i
	// runs the id step i-1 picked (step 0: token) at position pos+i, as
	// RunSteps' steps do, and a picked stop id (at most Caps().MaxStops)
	// ends the window's work on the device. The window keeps later
	// submissions queued while the host reads one (where
	// Caps().ReadAhead, else ErrUnsupported; ErrUnsupported too for a
	// program that updates recurrent states, whose steps past a stop
	// could not be undone). With timed set the submissions are
	// bracketed with timestamps (Caps().Timestamps) and Close reports
	// their device time. The program's cache may hold positions past the
	// ids the caller took (submissions queued past the stop it reads
	// last): the caller keeps its own position. No other run of the
	// program may come before Close.
	StartSteps(ctx context.Context, token int32, pos, steps, perSubmit int, stops []int32, timed bool) (StepWindow, error)
	// SetSampling changes the rule of a decode program ending in
	// fusion.Sample for the following runs without compiling the graph
	// again, where Caps().Sampling (else ErrUnsupported). It rejects the
	// rules fusion validation rejects.
	SetSampling(r fusion.Sampling) error
	// Profile is Run (same arguments, same effect on the cache and the
	// logits) with device timestamps around every op: it also returns the
	// time of each op that dispatched work, in graph order, where
	// Caps().Timestamps (else ErrUnsupported). Passes split at each op, so
	// a profiled step runs a little slower than Run.
	Profile(ctx context.Context, tokens []int32, pos int) ([]OpTime, error)
	Release()
}

// StepWindow is a window of decode steps Program.StartSteps started.
type StepWindow interface {
	// Next returns the ids of the window's next submission in order
	// (as many as it ran steps, fewer at a stop id, which is then the
	// last), having queued the submissions that follow; none (nil, nil)
	// once the window is over.
	Next(ctx context.Context) ([]int32, error)
	// Close ends the window, waiting for what it still has queued, and,
	// for a timed window, returns the device time of its submissions in
	// nanoseconds. Call it once, whether or not the window is over. A ctx
	// that ends first (a cancelled generation) abandons the wait: Close
	// then returns at once, with an error wrapping ctx's where work was
	// still queued, which the device runs on its own (whatever the
	// program runs next is ordered after it).
	Close(ctx context.Context) (deviceNanos uint64, err error)
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

// Info names a backend's device, for people: what it can do is its Caps,
// which is what code branches on (never on these names).
type Info struct {
	Backend string // "cpu", "webgpu", "vulkan"
	Name    string
	Type    DeviceType
	Driver  string

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
