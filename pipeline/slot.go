package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
)

// slot is one KV cache and the programs compiled against it. Its state
// is the cache: keys and values, and on a hybrid model the recurrent
// layers' states (fusion.LayerState), which hold exactly cached and cannot
// roll back (Model.recurrent).
type slot struct {
	index   int // in Model.slots
	seq     int // the row sequence (gpu.Row.Seq) of a batched step
	adapter int // the row's adapter set (gpu.Row.Adapter)
	kv      gpu.KVCache
	programs
	cached []int // tokens whose keys and values the cache holds, from position 0
	busy   bool
	// recurrent: the cache keeps recurrent states (Model.recurrent).
	recurrent bool
	// points are the checkpoints of the states of cached's prefixes
	// (checkpoint.go), ascending by position, in states (the model's;
	// nil where it keeps none).
	points []*checkpoint
	states *stateStore
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
	sl.argmax = newPickProgram(p, fusion.Sampling{}, m.caps)
	if err := loadCancelled(ctx); err != nil {
		return err
	}
	rule := fusion.Sampling{Temperature: 1}
	p, err = m.compileWith(sl, arch.BuildOptions{Tokens: 1, Sample: &rule})
	if ok, err := m.deviceOp(err); !ok {
		return err
	}
	sl.sample = newPickProgram(p, rule, m.caps)
	return nil
}

// newSlot gives sl its KV cache and compiles its decode program and the
// prefill programs of sizes (those above 1 and at most the cache).
func (m *Model) newSlot(ctx context.Context, sl *slot, sizes []int) error {
	var err error
	spec := arch.KVSpec(&m.cfg, arch.BuildOptions{MaxLen: m.maxCache, KVF16: m.kvF16, CacheK: m.cacheK, CacheV: m.cacheV, RingTokens: m.ringTokens})
	sl.kv, err = m.backend.NewKVCache(spec)
	if spec.Ring != nil && errors.Is(err, gpu.ErrUnsupported) {
		// The backend keeps full caches only (every backend here takes
		// rings; another gpu.Backend may not).
		m.ringTokens = 0
		spec = arch.KVSpec(&m.cfg, arch.BuildOptions{MaxLen: m.maxCache, KVF16: m.kvF16, CacheK: m.cacheK, CacheV: m.cacheV})
		sl.kv, err = m.backend.NewKVCache(spec)
	}
	if err != nil {
		return fmt.Errorf("pipeline: kv cache: %w", err)
	}
	m.kvSpec = spec
	sl.recurrent = spec.Recurrent()
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

func (m *Model) compile(sl *slot, tokens int) (gpu.Program, error) {
	return m.compileWith(sl, arch.BuildOptions{Tokens: tokens})
}

// graph builds the graph of opts with the model's cache options, fused
// (unless Options.NoFusion) and with the model's activation type.
func (m *Model) graph(opts arch.BuildOptions) (*fusion.Graph, error) {
	opts.MaxLen, opts.KVF16, opts.RingTokens = m.maxCache, m.kvF16, m.ringTokens
	opts.CacheK, opts.CacheV = m.cacheK, m.cacheV
	g, err := arch.Build(&m.cfg, opts)
	if err != nil {
		return nil, err
	}
	if m.fuse {
		g = gpu.Fuse(m.backend, m.weights, g)
	}
	if m.actF16 {
		fusion.HalfActivations(g)
	}
	return g, nil
}

// compileWith builds, fuses and compiles the graph of opts (Tokens,
// Argmax, Sample, AllLogits; the cache options and adapters are the
// model's) against sl's cache.
func (m *Model) compileWith(sl *slot, opts arch.BuildOptions) (gpu.Program, error) {
	tokens := opts.Tokens
	opts.LoRA = m.lora
	g, err := m.graph(opts)
	if err != nil {
		return nil, fmt.Errorf("pipeline: graph for %d tokens: %w", tokens, err)
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

func (sl *slot) release() {
	sl.cut(0)
	sl.programs.release()
	if sl.kv != nil {
		sl.kv.Release()
		sl.kv = nil
	}
	sl.cached = nil
}
