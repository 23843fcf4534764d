package pipeline

import (
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
	"github.com/gpurun/gpurun/tensors"
)

// DefaultMaxCache is the KV cache length when Options.MaxCache is 0 (capped
// by the model's trained context length).
const DefaultMaxCache = 1280

// MaxCacheLimit is the largest Options.MaxCache.
const MaxCacheLimit = 1 << 24

// DefaultPrefillSizes are the prefill graph sizes when Options.PrefillSizes
// is empty; sizes above MaxCache are dropped.
var DefaultPrefillSizes = []int{8, 32, 128, 512}

// Options configures loading.
type Options struct {
	// Backend runs the graphs; it is required (package gpurun's
	// OpenBackend opens one by name). The model does not close it.
	Backend gpu.Backend
	// MaxCache is the KV cache length in positions; 0 means 1280, or the
	// model's trained context (Config.MaxSeqLen) when that is shorter.
	MaxCache int
	// PrefillSizes are the token counts of the prefill graphs; a prompt
	// runs through the smallest that fits, longer ones in chunks of the
	// largest.
	PrefillSizes []int
	// Activations overrides the model file's activation precision policy
	// (model.PolicyAuto, PolicyF32, PolicyF16); "" keeps the file's. The
	// policy decides the KV cache's storage type (see kvDType); KVDType
	// reports the result.
	Activations string
	// CacheTypeK and CacheTypeV quantize the KV cache's keys and values
	// to a llama.cpp block type (fusion.KVType; llama.cpp's -ctk/-ctv),
	// rotated as llama.cpp rotates them; the zero value keeps the float
	// cache Activations decides. A backend whose Caps lack QuantKV
	// refuses a quantized type (ErrOptions wrapping gpu.ErrUnsupported).
	CacheTypeK, CacheTypeV fusion.KVType
	// NoFusion compiles the graphs as internal/arch builds them, one op per
	// kernel, rather than rewritten by fusion.Fuse into fewer, larger
	// kernels (for comparing the two; the results agree, bitwise on the CPU
	// backend).
	NoFusion bool
	// HostSampling reads the whole logits row back on a GPU backend too,
	// rather than a decode program ending in fusion.Argmax (greedy) or
	// fusion.Sample (temperature, top-k, top-p) whose only output is the
	// token id (for comparing the two; the ids agree whenever the logits
	// do). The CPU backend always samples on the host.
	HostSampling bool
	// StepsPerSubmit is how many decode steps one submission runs where
	// the device picks the tokens (greedy or sampled decoding on a GPU
	// backend, one session at a time): each step's id feeds the next
	// step on the device, a stop token ends the submission's work there,
	// and the ids come back together, to be streamed one by one (stop
	// strings and cancellation are checked between tokens; a submission
	// already made runs to its end). 0 means DefaultStepsPerSubmit; at
	// most the backend's Caps().MaxSteps. 1 submits and waits once per
	// token. Where the backend reads ahead (gpu.Caps.ReadAhead) the
	// submissions of a window start at one step and double up to this
	// (gpu.Program.StartSteps), so the device starts sooner.
	StepsPerSubmit int
	// Slots is how many KV caches the model holds over its one copy of the
	// weights, each with its own compiled programs: up to Slots sessions
	// generate at once, the others wait. With more than one slot on a
	// backend that runs batched graphs (the CPU and GPU backends) their
	// decode steps are batched where that pays, one round step for all of
	// them (always on a GPU, on the CPU for models of at least
	// BatchMinWeightBytes; smaller ones step each session alone,
	// concurrently). 0 means 1.
	Slots int
	// PrefixCacheBytes is the budget of the prefix cache (see prefix.go):
	// the keys and values a slot held are kept up to this many bytes (of
	// device memory on a GPU) when another session takes the slot over, the
	// least recently used dropped first, and a later session whose context
	// starts with kept tokens prefills only the rest. 0 keeps none (only
	// each slot's own cache is reused); DefaultPrefixCacheBytes is the
	// command line's default. A backend that copies no cache rows
	// (gpu.Caps.CopyKV) keeps none.
	PrefixCacheBytes int64
	// StateCheckpointBytes is the budget of the checkpoints of a hybrid
	// model's recurrent states (see checkpoint.go): taken where a prompt
	// ends, along long prompts and around speculative steps, so that a
	// context sharing only part of what a slot (or the prefix cache) holds
	// resumes at the latest one rather than at position 0 (a state cannot
	// roll back). The least recently used is dropped first. 0 means
	// DefaultStateCheckpointBytes; a negative value keeps none. A model
	// without recurrent layers, or a backend that copies no states
	// (gpu.Caps.CopyState), keeps none.
	StateCheckpointBytes int64
	// LoRA are adapters applied unmerged, at run time, in every graph:
	// y = W·x + s·B·(A·x) after each adapted projection (see
	// arch.BuildOptions.LoRA). Merging them into the weights instead
	// (lora.Merge) costs nothing per token.
	LoRA []lora.Applied

	// MMProj is a vision projector file (llama.cpp's mmproj GGUF, the
	// clip format; projector type gemma3) that lets prompts carry images
	// (Prompt.Images), or an audio one (qwen2a) that lets them carry WAV
	// files (Prompt.Audio). It must fit the model (its width, its image
	// marker tokens), else Load fails with ErrNoVision (ErrNoAudio). The encoder and the
	// image steps run on the model's backend, CPU or GPU.
	MMProj string

	// shared, set by FromCheckpointVariants, gives weights already loaded
	// (with the adapters' tensors) and the pairs of this model's set.
	shared *sharedWeights

	// tuning holds the knobs only tests turn (WithTuning).
	tuning tuning.Options
}

// WithTuning returns o with the knobs of pipeline/internal/tuning (the KV
// cache's rings and the batching rule overridden), which only the
// module's tests turn: a package outside the module cannot name them.
func (o Options) WithTuning(t tuning.Options) Options {
	o.tuning = t
	return o
}

// BatchMinWeightBytes is the size of the weights from which a model on the
// CPU backend batches the decode steps of concurrent sessions
// (Options.Slots). A smaller model's weights stay in the processor's
// caches, so a batched step saves no memory traffic, while it runs as one
// step whose small ops are shared out between the cores one at a time;
// concurrent per-slot steps keep every core busy with no synchronization.
// Measured on 2 cores (AMD EPYC, 1 MiB L2 per core, 32 MiB L3), batched / per-slot aggregate decode tok/s with 4
// sessions (2 sessions), alternated in one run: stories260K (1 MiB, f32)
// 0.57-0.68x (0.63-0.67x); random llama2.c checkpoints, f32: 5.3 MiB 0.68x
// (0.67x), 16.2 MiB 0.76-1.02x (0.83-0.87x), 20.9 MiB 1.10-1.31x
// (1.05-1.09x), 26 MiB 1.68-1.82x (1.29-1.42x), 58 MiB 1.54-1.62x
// (1.03-1.14x); the 110M shape in Q8_0 (137 MiB) 1.31-1.46x (0.92-1.22x),
// in f32 (418 MiB) 2.17-2.53x (1.11-1.24x).
const BatchMinWeightBytes = 20 << 20

// batchPays reports whether batching concurrent sessions' decode steps is
// worth its bookkeeping: always on a GPU, whose per-slot steps take turns
// on the device, and on the CPU (gpu.Caps.Host) for weights of at least
// BatchMinWeightBytes.
func batchPays(caps gpu.Caps, weightBytes int64) bool {
	return !caps.Host || weightBytes >= BatchMinWeightBytes
}

// DefaultStepsPerSubmit is Options.StepsPerSubmit's default, chosen by
// measurement: on lavapipe, stories260K greedy decoding (128 tokens, one
// process alternating models of N = 1, 4, 8, 16 on one backend, 4 rounds)
// ran at 1, 1.05, 1.09, 1.07x the tok/s of N = 1 on Vulkan (1, 1.04,
// 1.07, 1.10x on WebGPU) and took 1, 0.96, 0.93, 0.93x the process CPU
// time per token (WebGPU 1, 0.96, 0.93, 0.90x): 8 takes nearly all of
// the gain while a reply streams in bursts of at most 8 tokens.
const DefaultStepsPerSubmit = 8

// MaxSlots is the largest Options.Slots.
const MaxSlots = 256

// batching is whether the slots of a model with weights ws step in
// batched rounds (where the backend runs them).
func batching(opts Options, be gpu.Backend, ws []*tensors.Tensor) bool {
	return !opts.tuning.NoBatching && (opts.tuning.AlwaysBatch || batchPays(be.Caps(), weightBytes(ws)))
}
