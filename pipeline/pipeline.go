// Package pipeline runs a model end to end: it builds the forward graphs of
// an architecture, compiles one decode graph and a few prefill graphs on the
// gpu.Backend its caller gives it (Options.Backend; sharing the weights; one
// KV cache per slot, Options.Slots), and drives sessions that prefill a
// prompt, sample, detokenize, stream, stop and measure. It chooses no
// backend itself: package gpurun at the module root does (OpenBackend).
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/pipeline/arch"
	"github.com/gpurun/gpurun/pipeline/constrain"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/lora"
	"github.com/gpurun/gpurun/tensors/model"
)

// Errors callers can test for with errors.Is.
var (
	// ErrPromptTooLong: the prompt (with the session's earlier context)
	// does not fit the KV cache.
	ErrPromptTooLong = errors.New("pipeline: prompt longer than the KV cache")
	// ErrNoTokenizer: a text prompt or stop strings on a model without a
	// tokenizer.
	ErrNoTokenizer = errors.New("pipeline: model has no tokenizer")
	// ErrPrompt: an empty prompt or a token id outside the vocabulary.
	ErrPrompt = errors.New("pipeline: invalid prompt")
	// ErrClosed: Generate on a closed model.
	ErrClosed = errors.New("pipeline: model closed")
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
	// NoFusion compiles the graphs as pipeline/arch builds them, one op per
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
	// most gpu.MaxStepsPerSubmit. 1 submits and waits once per token.
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
	// (gpu.KVCopier) keeps none.
	PrefixCacheBytes int64
	// LoRA are adapters applied unmerged, at run time, in every graph:
	// y = W·x + s·B·(A·x) after each adapted projection (see
	// arch.BuildOptions.LoRA). Merging them into the weights instead
	// (lora.Merge) costs nothing per token.
	LoRA []lora.Applied

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
// expected to pay on a backend for weights of the given size: always on a
// GPU, whose per-slot steps take turns on the device, and on the CPU for
// weights of at least BatchMinWeightBytes.
func batchPays(info gpu.Info, weightBytes int64) bool {
	return info.Backend != "cpu" || weightBytes >= BatchMinWeightBytes
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

// Model is a loaded model: its weights on a backend and one or more slots
// (Options.Slots), each a KV cache with the decode and prefill programs
// compiled against it and the shared weights. A generation holds a slot
// from its prefill to its last token; when every slot is busy, sessions
// wait their turn. A session whose context is not in the slot it gets
// replays it (reusing the longest common prefix with what that slot holds;
// sessions go back to the slot holding most of their context).
type Model struct {
	cfg        model.Config
	tok        textCodec // nil without a tokenizer
	backend    gpu.Backend
	weights    gpu.Weights
	maxCache   int
	kvF16      bool          // the cache stores binary16 (resolved activation policy)
	ringTokens int           // arch.BuildOptions.RingTokens of every graph (0: full caches)
	gatherRows int           // tuning.Options.GatherRows
	kvSpec     fusion.KVSpec // every slot's cache
	actF16     bool          // the activations between kernels are binary16 (actF16)
	fuse       bool
	lora       map[string][]arch.LoRAPair // Options.LoRA, by projection
	shared     *sharedWeights             // weights shared with other variants
	// decodeWeights is the bytes of weights one decode step reads (see
	// DecodeBytes).
	decodeWeights int64

	file interface{ Close() error } // the mapped model file the weights alias, if any

	// turn holds one token per busy slot: a generation sends one to
	// start, so at most len(slots) run at once.
	turn chan struct{}
	// mu guards slots' busy flags, greedyOff and closed.
	mu        sync.Mutex
	slots     []*slot
	greedyOff bool // greedy ids are sampled on the host
	// stepsPerSubmit is Options.StepsPerSubmit resolved.
	stepsPerSubmit int
	closed         bool
	// device serializes the backend calls (compiling, running, reading
	// back) of concurrent slots on GPU backends, whose device queue is
	// shared; nil on the CPU backend, whose programs run concurrently.
	device *sync.Mutex
	// vocab is each token's bytes for constrained generation, computed
	// once; maskers caches the token masks of grammars.
	vocabOnce sync.Once
	vocab     [][]byte
	maskMu    sync.Mutex
	maskers   map[maskerKey]*constrain.Masker
	// prefix keeps the caches of earlier sessions; nil without
	// Options.PrefixCacheBytes.
	prefix *prefixCache
	// compileNanos is the wall time spent compiling programs (CompileTime).
	compileNanos atomic.Int64
	// batch gathers concurrent sessions' decode steps into batched steps;
	// nil with one slot, tuning.NoBatching, a model on the CPU backend too small
	// for batching to pay (see BatchMinWeightBytes), or a backend without
	// batched graphs.
	batch *batcher
}

// slot is one KV cache and the programs compiled against it.
type slot struct {
	index   int // in Model.slots
	seq     int // the row sequence (gpu.Row.Seq) of a batched step
	adapter int // the row's adapter set (gpu.Row.Adapter)
	kv      gpu.KVCache
	decode  gpu.Program
	prefill []prefillProgram // ascending by size
	// greedy is the decode graph ending in fusion.Argmax, compiled at
	// load where the device picks the tokens (see compilePickers).
	greedy gpu.Program
	// sample is the decode graph ending in fusion.Sample with rule,
	// compiled at load too; a generation with another rule sets it in the
	// step tensor (gpu.SamplingSetter) or, on a backend without that,
	// compiles it again. step is the one the running generation uses.
	sample gpu.Program
	rule   fusion.Sampling
	step   gpu.Program
	cached []int // tokens whose keys and values the cache holds, from position 0
	busy   bool
	// verify holds the speculative verifiers by tokens per step
	// (speculative.go).
	verify map[int]gpu.Program
}

type prefillProgram struct {
	size int
	prog gpu.Program
}

// FromCheckpoint uploads a checkpoint's weights and compiles its graphs.
// A checkpoint with a tokenizer (a serialized SentencePiece model, or a
// plain vocabulary turned into one) gets text prompts and pieces.
func FromCheckpoint(ctx context.Context, ck *model.Checkpoint, opts Options) (*Model, error) {
	if ck == nil {
		return nil, fmt.Errorf("pipeline: nil checkpoint")
	}
	tok, err := checkpointTokenizer(ck)
	if err != nil {
		return nil, fmt.Errorf("pipeline: tokenizer: %w", err)
	}
	return newModel(ctx, &ck.Config, ck.Tensors, tok, opts)
}

func newModel(ctx context.Context, cfg *model.Config, ws []*tensors.Tensor, tok textCodec, opts Options) (_ *Model, err error) {
	if opts.Backend == nil {
		return nil, fmt.Errorf("%w: no Backend (gpurun.OpenBackend opens one by name)", ErrOptions)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	nslots := opts.Slots
	if nslots == 0 {
		nslots = 1
	}
	if nslots < 1 || nslots > MaxSlots {
		return nil, fmt.Errorf("%w: slots %d outside 1..%d", ErrOptions, opts.Slots, MaxSlots)
	}
	if opts.tuning.NoBatching && opts.tuning.AlwaysBatch {
		return nil, fmt.Errorf("%w: NoBatching and AlwaysBatch together", ErrOptions)
	}
	m := &Model{cfg: *cfg, tok: tok, backend: opts.Backend, maxCache: opts.MaxCache, turn: make(chan struct{}, nslots), fuse: !opts.NoFusion}
	m.greedyOff = opts.HostSampling
	m.gatherRows = opts.tuning.GatherRows
	m.stepsPerSubmit = opts.StepsPerSubmit
	if m.stepsPerSubmit == 0 {
		m.stepsPerSubmit = DefaultStepsPerSubmit
	}
	if m.stepsPerSubmit < 1 || m.stepsPerSubmit > gpu.MaxStepsPerSubmit {
		return nil, fmt.Errorf("%w: steps per submit %d outside 1..%d", ErrOptions, opts.StepsPerSubmit, gpu.MaxStepsPerSubmit)
	}
	if m.maxCache == 0 {
		m.maxCache = DefaultMaxCache
		if cfg.MaxSeqLen > 0 {
			m.maxCache = min(m.maxCache, cfg.MaxSeqLen)
		}
	}
	if m.maxCache < 1 || m.maxCache > MaxCacheLimit {
		return nil, fmt.Errorf("%w: max cache %d outside 1..%d", ErrOptions, m.maxCache, MaxCacheLimit)
	}
	if m.backend.Info().Backend == "cpu" {
		// The logits are already in host memory: nothing to save.
		m.greedyOff = true
	} else if opts.shared != nil {
		// Variants over one copy of the weights share the device.
		m.device = opts.shared.device
	} else {
		m.device = new(sync.Mutex)
	}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	kvType, err := kvDType(opts.Activations, cfg.Activations, m.backend.Info())
	if err != nil {
		return nil, err
	}
	m.kvF16 = kvType == tensors.F16
	if m.actF16, err = actF16(opts.Activations, cfg.Activations, m.backend.Info(), cfg.Arch); err != nil {
		return nil, err
	}
	if opts.shared != nil {
		m.weights, m.lora, m.shared = opts.shared.w, opts.shared.pairs, opts.shared
		m.shared.hold()
	} else {
		if ws, m.lora, err = unmergedLoRA(cfg, ws, opts.LoRA, m.backend); err != nil {
			return nil, err
		}
		if m.weights, err = m.backend.LoadWeights(ctx, ws); err != nil {
			return nil, fmt.Errorf("pipeline: weights: %w", err)
		}
	}
	m.decodeWeights = decodeWeightBytes(cfg, ws)
	sizes := opts.PrefillSizes
	if len(sizes) == 0 {
		sizes = DefaultPrefillSizes
	}
	sizes = slices.Sorted(slices.Values(sizes))
	sizes = slices.Compact(sizes)
	if !opts.tuning.FullKVCache {
		// Rings must hold the keys of the largest step's first row.
		m.ringTokens = 1
		for _, n := range sizes {
			if n <= m.maxCache {
				m.ringTokens = max(m.ringTokens, n)
			}
		}
	}
	for i := range nslots {
		sl := &slot{index: i}
		m.slots = append(m.slots, sl)
		if err := m.newSlot(ctx, sl, sizes); err != nil {
			return nil, err
		}
	}
	if opts.PrefixCacheBytes < 0 {
		return nil, fmt.Errorf("%w: prefix cache of %d bytes", ErrOptions, opts.PrefixCacheBytes)
	}
	if opts.PrefixCacheBytes > 0 && gpu.CanCopyKV(m.backend) {
		m.prefix = newPrefixCache(m, opts.PrefixCacheBytes)
	}
	if opts.shared != nil {
		// FromCheckpointVariants batches the variants together, then
		// calls finish.
		return m, nil
	}
	if nslots > 1 && batching(opts, m.backend, ws) {
		if err := loadCancelled(ctx); err != nil {
			return nil, err
		}
		if m.batch, err = m.newBatcher(); err != nil {
			return nil, err
		}
	}
	if err := m.finish(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// batching is whether the slots of a model with weights ws step in
// batched rounds (where the backend runs them).
func batching(opts Options, be gpu.Backend, ws []*tensors.Tensor) bool {
	return !opts.tuning.NoBatching && (opts.tuning.AlwaysBatch || batchPays(be.Info(), weightBytes(ws)))
}

// finish compiles the device pickers of a model that steps its slots
// apart (with batching, the host picks).
func (m *Model) finish(ctx context.Context) error {
	if !m.greedyOff && m.batch == nil {
		for _, sl := range m.slots {
			if err := m.compilePickers(ctx, sl); err != nil {
				return err
			}
		}
	}
	return nil
}

// compilePickers compiles sl's token-picking decode programs, greedy and
// sampling, so that no generation waits for a compile (a sampled first
// generation on Vulkan waited seconds for the sampling kernels, with no
// progress shown and an interrupt unheard). The sampling program starts
// with a placeholder rule that generations replace. A backend without the
// ops turns device picking off.
func (m *Model) compilePickers(ctx context.Context, sl *slot) error {
	if err := loadCancelled(ctx); err != nil {
		return err
	}
	p, err := m.compileWith(sl, arch.BuildOptions{Tokens: 1, Argmax: true})
	if ok, err := m.deviceOp(err); !ok {
		return err
	}
	sl.greedy = p
	if err := loadCancelled(ctx); err != nil {
		return err
	}
	rule := fusion.Sampling{Temperature: 1}
	p, err = m.compileWith(sl, arch.BuildOptions{Tokens: 1, Sample: &rule})
	if ok, err := m.deviceOp(err); !ok {
		return err
	}
	sl.sample, sl.rule = p, rule
	return nil
}

// newSlot gives sl its KV cache and compiles its decode program and the
// prefill programs of sizes (those above 1 and at most the cache).
func (m *Model) newSlot(ctx context.Context, sl *slot, sizes []int) error {
	var err error
	spec := arch.KVSpec(&m.cfg, arch.BuildOptions{MaxLen: m.maxCache, KVF16: m.kvF16, RingTokens: m.ringTokens})
	sl.kv, err = m.backend.NewKVCache(spec)
	if spec.Ring != nil && errors.Is(err, gpu.ErrUnsupported) {
		// The backend keeps full caches only (every backend here takes
		// rings; another gpu.Backend may not).
		m.ringTokens = 0
		spec = arch.KVSpec(&m.cfg, arch.BuildOptions{MaxLen: m.maxCache, KVF16: m.kvF16})
		sl.kv, err = m.backend.NewKVCache(spec)
	}
	if err != nil {
		return fmt.Errorf("pipeline: kv cache: %w", err)
	}
	m.kvSpec = spec
	if err := loadCancelled(ctx); err != nil {
		return err
	}
	if sl.decode, err = m.compile(sl, 1); err != nil {
		return err
	}
	for _, n := range sizes {
		if n <= 1 || n > m.maxCache {
			continue
		}
		if err := loadCancelled(ctx); err != nil {
			return err
		}
		p, err := m.compile(sl, n)
		if err != nil {
			return err
		}
		sl.prefill = append(sl.prefill, prefillProgram{size: n, prog: p})
	}
	return nil
}

// loadCancelled is ctx's error once it is done, checked between a load's
// compiles (a compile itself cannot be interrupted).
func loadCancelled(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pipeline: load: %w", err)
	}
	return nil
}

func (m *Model) compile(sl *slot, tokens int) (gpu.Program, error) {
	return m.compileWith(sl, arch.BuildOptions{Tokens: tokens})
}

// compileWith builds, fuses and compiles the graph of opts (Tokens and
// Argmax; the cache options are the model's) against sl's cache.
func (m *Model) compileWith(sl *slot, opts arch.BuildOptions) (gpu.Program, error) {
	tokens := opts.Tokens
	opts.MaxLen, opts.KVF16, opts.RingTokens, opts.LoRA = m.maxCache, m.kvF16, m.ringTokens, m.lora
	g, err := arch.Build(&m.cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("pipeline: graph for %d tokens: %w", tokens, err)
	}
	if m.fuse {
		g = gpu.Fuse(m.backend, m.weights, g)
	}
	if m.actF16 {
		fusion.HalfActivations(g)
	}
	m.lockDevice()
	start := time.Now()
	p, err := m.backend.Compile(g, m.weights, sl.kv)
	m.compileNanos.Add(int64(time.Since(start)))
	m.unlockDevice()
	if err != nil {
		return nil, fmt.Errorf("pipeline: compile graph for %d tokens: %w", tokens, err)
	}
	return p, nil
}

// CompileTime is the wall time the model has spent compiling its programs
// so far (their kernels included: on a GPU backend, the device's pipeline
// creation), most of it at load.
func (m *Model) CompileTime() time.Duration { return time.Duration(m.compileNanos.Load()) }

// Config returns the model's architecture configuration.
func (m *Model) Config() model.Config { return m.cfg }

// BackendInfo describes the backend the model runs on.
func (m *Model) BackendInfo() gpu.Info { return m.backend.Info() }

// Slots is how many sessions can generate at once, each on its own KV
// cache (Options.Slots).
func (m *Model) Slots() int { return len(m.slots) }

// Batching reports whether the decode steps of concurrent sessions run as
// one batched step per round (continuous batching; see BatchMinWeightBytes).
func (m *Model) Batching() bool { return m.batch != nil }

// MaxCache is the KV cache length in positions (of each slot).
func (m *Model) MaxCache() int { return m.maxCache }

// ActivationDType is the type of the activations passed between kernels,
// tensors.F32 or tensors.F16 (f16: fusion.HalfActivations), as resolved
// from the activation policy, the backend and the architecture.
func (m *Model) ActivationDType() tensors.DType {
	if m.actF16 {
		return tensors.F16
	}
	return tensors.F32
}

// KVDType is the KV cache's storage type, tensors.F32 or tensors.F16, as
// resolved from the activation policy and the backend.
func (m *Model) KVDType() tensors.DType {
	if m.kvF16 {
		return tensors.F16
	}
	return tensors.F32
}

// KVCacheBytes is the size of one session slot's KV cache: keys and
// values of every layer, MaxCache positions each, or for a sliding-window
// layer on a ring (tuning.Options.FullKVCache unset, a backend that takes
// rings) twice its ring's positions.
func (m *Model) KVCacheBytes() int64 {
	s := m.kvSpec
	elem := int64(4)
	if s.F16 {
		elem = 2
	}
	var n int64
	for l := range s.Layers {
		pos := int64(s.MaxLen)
		if r := s.RingLen(l); r > 0 {
			pos = 2 * int64(r)
		}
		n += 2 * pos * int64(s.KVHeads) * int64(s.HeadDim) * elem
	}
	return n
}

// DecodeBytes is what one decode step reads from memory, the figures a
// bandwidth-bound decoder's speed follows: the weights (every tensor but
// the token embedding table, of which a step reads one row, unless the LM
// head is that table) and, per cache position the step attends to, the
// keys and values of every layer in the cache's type.
func (m *Model) DecodeBytes() (weights, kvPerPosition int64) {
	return m.decodeWeights, kvBytesPerPosition(&m.cfg, m.kvF16)
}

// DecodeBytesOf is Model.DecodeBytes for the configuration cfg, its
// weight tensors ws and a KV cache of binary16 (kvF16) or f32, for
// measurements that run a backend's programs without a Model (the
// valid-length benchmark of gpu/backend/compute).
func DecodeBytesOf(cfg *model.Config, ws []*tensors.Tensor, kvF16 bool) (weights, kvPerPosition int64) {
	return decodeWeightBytes(cfg, ws), kvBytesPerPosition(cfg, kvF16)
}

// kvBytesPerPosition is DecodeBytes' keys and values per cache position.
func kvBytesPerPosition(cfg *model.Config, kvF16 bool) int64 {
	elem := int64(4)
	if kvF16 {
		elem = 2
	}
	return 2 * int64(cfg.Layers) * int64(cfg.KVHeads) * int64(cfg.HeadDim) * elem
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

// HasTokenizer reports whether text prompts and pieces are available.
func (m *Model) HasTokenizer() bool { return m.tok != nil }

// Encode tokenizes text without adding BOS.
func (m *Model) Encode(text string) ([]int, error) {
	if m.tok == nil {
		return nil, ErrNoTokenizer
	}
	return m.tok.Encode(text), nil
}

// Decode turns ids into text.
func (m *Model) Decode(ids []int) (string, error) {
	if m.tok == nil {
		return "", ErrNoTokenizer
	}
	return m.tok.Decode(ids), nil
}

// Close releases the programs, caches and weights, the model file, and the
// backend when the model created it. It waits for running generations to
// end, so it must not be called from inside a Generate loop.
func (m *Model) Close() error {
	for range cap(m.turn) {
		m.turn <- struct{}{}
	}
	defer func() {
		for range cap(m.turn) {
			<-m.turn
		}
	}()
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	if m.batch != nil {
		m.batch.stop()
		m.batch = nil
	}
	for _, sl := range m.slots {
		sl.release()
	}
	if m.prefix != nil {
		m.prefix.release()
		m.prefix = nil
	}
	m.slots = nil
	if m.shared != nil {
		m.shared.drop()
		m.shared, m.weights = nil, nil
	}
	if m.weights != nil {
		m.weights.Release()
		m.weights = nil
	}
	var errs []error
	if m.file != nil {
		errs = append(errs, m.file.Close())
		m.file = nil
	}
	return errors.Join(errs...)
}

func (sl *slot) release() {
	for _, p := range sl.prefill {
		p.prog.Release()
	}
	sl.prefill = nil
	if sl.decode != nil {
		sl.decode.Release()
		sl.decode = nil
	}
	if sl.greedy != nil {
		sl.greedy.Release()
		sl.greedy = nil
	}
	if sl.sample != nil {
		sl.sample.Release()
		sl.sample = nil
	}
	sl.step = nil
	sl.releaseVerifiers()
	if sl.kv != nil {
		sl.kv.Release()
		sl.kv = nil
	}
	sl.cached = nil
}
