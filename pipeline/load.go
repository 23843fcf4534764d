package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/modelfile"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// ErrNoConfig: a model file without a gpurun configuration, so its
// architecture is unknown.
var ErrNoConfig = errors.New("pipeline: model file has no configuration")

// Load opens a model file (.tflite weight container or .task bundle) and
// prepares it on opts.Backend. Weights alias the file's mapping, which stays
// open until Close.
func Load(ctx context.Context, path string, opts Options) (*Model, error) {
	f, err := modelfile.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := FromModelFile(ctx, f, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// FromModelFile prepares an open model file on opts.Backend. The model
// takes the file over and closes it with itself; on error the caller still
// owns it.
func FromModelFile(ctx context.Context, f *modelfile.File, opts Options) (*Model, error) {
	if !f.HasConfig() {
		return nil, ErrNoConfig
	}
	var tok textCodec
	if proto := f.Tokenizer(); proto != nil {
		var err error
		if tok, err = loadTokenizer(proto); err != nil {
			return nil, fmt.Errorf("pipeline: tokenizer: %w", err)
		}
	}
	cfg := f.Config()
	m, err := newModel(ctx, &cfg, f.Tensors(), tok, opts)
	if err != nil {
		return nil, err
	}
	m.file = f
	return m, nil
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
	m := &Model{cfg: *cfg, tok: tok, backend: opts.Backend, caps: opts.Backend.Caps(), maxCache: opts.MaxCache, turn: make(chan struct{}, nslots), fuse: !opts.NoFusion}
	if cfg.Recurrent() && !m.caps.RecurrentState {
		return nil, fmt.Errorf("pipeline: %s keeps recurrent layer states (ops %v), which the %s backend does not run: %w",
			cfg.Arch, arch.RecurrentOps(cfg), opts.Backend.Info().Backend, gpu.ErrUnsupported)
	}
	m.greedyOff = opts.HostSampling
	m.gatherRows = opts.tuning.GatherRows
	m.perPositionRollback = opts.tuning.PerPositionRollback
	m.stepsPerSubmit = opts.StepsPerSubmit
	if m.stepsPerSubmit == 0 {
		m.stepsPerSubmit = DefaultStepsPerSubmit
	}
	// The backend's most steps per submission bound it; one that runs one
	// step per Run (MaxSteps 0: the CPU backend) ignores it.
	switch most := m.caps.MaxSteps; {
	case m.stepsPerSubmit < 1:
		return nil, fmt.Errorf("%w: steps per submit %d, want at least 1", ErrOptions, opts.StepsPerSubmit)
	case most > 0 && m.stepsPerSubmit > most:
		return nil, fmt.Errorf("%w: steps per submit %d outside 1..%d", ErrOptions, opts.StepsPerSubmit, most)
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
	if m.caps.Host {
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
	kvType, err := kvDType(opts.Activations, cfg.Activations, m.caps)
	if err != nil {
		return nil, err
	}
	m.kvF16 = kvType == tensors.F16
	m.cacheK, m.cacheV = opts.CacheTypeK, opts.CacheTypeV
	if (m.cacheK.Quantized() || m.cacheV.Quantized()) && !m.caps.QuantKV {
		return nil, fmt.Errorf("%w: a %v/%v KV cache: this backend keeps no quantized caches: %w", ErrOptions, m.cacheK, m.cacheV, gpu.ErrUnsupported)
	}
	if m.caps.QuantKV && !m.caps.QuantKVTypes.Keeps(m.cacheK, m.cacheV) {
		return nil, fmt.Errorf("%w: a %v/%v KV cache: this backend keeps %v blocks only: %w", ErrOptions, m.cacheK, m.cacheV, m.caps.QuantKVTypes, gpu.ErrUnsupported)
	}
	if m.actF16, err = actF16(opts.Activations, cfg.Activations, m.caps, cfg.Arch); err != nil {
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
	if opts.MMProj != "" {
		if err := m.attachVision(opts.MMProj); err != nil {
			return nil, err
		}
	}
	sizes := opts.PrefillSizes
	if len(sizes) == 0 {
		sizes = DefaultPrefillSizes
	}
	sizes = slices.Sorted(slices.Values(sizes))
	sizes = slices.Compact(sizes)
	if !opts.tuning.FullKVCache && cfg.Pooling == model.PoolNone {
		// Rings must hold the keys of the largest step's first row. An
		// embedding model keeps full caches: its input runs in one step,
		// and non-causal attention reads positions after the row's.
		m.ringTokens = 1
		for _, n := range sizes {
			if n <= m.maxCache {
				m.ringTokens = max(m.ringTokens, n)
			}
		}
		if m.vision != nil {
			// An image's positions are one step.
			m.ringTokens = max(m.ringTokens, m.vision.enc.MaxTokens())
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
	if opts.PrefixCacheBytes > 0 && m.caps.CopyKV {
		m.prefix = newPrefixCache(m, opts.PrefixCacheBytes)
	}
	m.states = newStateStore(m, opts.StateCheckpointBytes, opts.tuning.CheckpointEvery)
	for _, sl := range m.slots {
		sl.states = m.states
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

// loadCancelled is ctx's error once it is done, checked between a load's
// compiles (a compile itself cannot be interrupted).
func loadCancelled(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pipeline: load: %w", err)
	}
	return nil
}
