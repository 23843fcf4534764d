// Package pipeline runs a model end to end: it builds the forward graphs of
// an architecture, compiles one decode graph and a few prefill graphs on the
// gpu.Backend its caller gives it (Options.Backend; sharing the weights; one
// KV cache per slot, Options.Slots), and drives sessions that prefill a
// prompt, sample, detokenize, stream, stop and measure. It chooses no
// backend itself: package gpurun at the module root does (OpenBackend).
//
// Import it to run a model on a gpu.Backend you opened yourself
// (gpurun.OpenBackend, or your own), or where package gpurun's Vulkan
// binding cannot build (the browser); gpurun.Model.Pipeline gives an
// opened model's view of it.
package pipeline

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/pipeline/constrain"
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
	caps       gpu.Caps // the backend's, read once
	weights    gpu.Weights
	maxCache   int
	kvF16      bool          // the cache stores binary16 (resolved activation policy)
	cacheK     fusion.KVType // Options.CacheTypeK
	cacheV     fusion.KVType // Options.CacheTypeV
	ringTokens int           // arch.BuildOptions.RingTokens of every graph (0: full caches)
	gatherRows int           // tuning.Options.GatherRows
	// perPositionRollback: tuning.Options.PerPositionRollback (verify.go).
	perPositionRollback bool
	kvSpec              fusion.KVSpec // every slot's cache
	actF16              bool          // the activations between kernels are binary16 (actF16)
	fuse                bool
	vision              *visionModel               // Options.MMProj's projector; nil: text only
	lora                map[string][]arch.LoRAPair // Options.LoRA, by projection
	shared              *sharedWeights             // weights shared with other variants
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
	// noWindows keeps multi-step decoding to one submission at a time
	// where the backend reads ahead (window.go): tests compare the two.
	noWindows bool
	closed    bool
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
	// states keeps the checkpoints of recurrent states (checkpoint.go);
	// nil on a model without them.
	states *stateStore
	// compileNanos is the wall time spent compiling programs (CompileTime).
	compileNanos atomic.Int64
	// ranSteps and ranTokens count the steps Model.run ran and their tokens
	// (tests and measurements of speculation's rollbacks).
	ranSteps, ranTokens atomic.Int64
	// batch gathers concurrent sessions' decode steps into batched steps;
	// nil with one slot, tuning.NoBatching, a model on the CPU backend too small
	// for batching to pay (see BatchMinWeightBytes), or a backend without
	// batched graphs.
	batch *batcher
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
		m.prefix.release(m)
		m.prefix = nil
	}
	if m.states != nil {
		m.states.release()
		m.states = nil
	}
	m.slots = nil
	if m.vision != nil {
		m.vision.enc.Close()
	}
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
