package gpurun

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/model"
)

// ErrTooBig: the model's weights, KV cache and activations do not fit the
// device's memory (the host's for the CPU backend). Open checks this
// before allocating anything on the device.
var ErrTooBig = errors.New("model does not fit in memory")

// memoryNeed estimates what loading a model allocates.
type memoryNeed struct {
	Weights     int64 // as stored (quantized types at their packed size)
	KVCache     int64
	Activations int64 // the decode and prefill graphs' intermediate buffers (an estimate)
	// Adapters is the unmerged LoRA adapters' F32 matrices (every
	// variant's set: WithAdapter variants each hold WithLoRA's too).
	Adapters int64
}

// Total is the sum.
func (n memoryNeed) Total() int64 { return n.Weights + n.KVCache + n.Activations + n.Adapters }

func (n memoryNeed) String() string {
	s := fmt.Sprintf("%s (weights %s, KV cache %s, activations about %s", humanBytes(n.Total()), humanBytes(n.Weights), humanBytes(n.KVCache), humanBytes(n.Activations))
	if n.Adapters > 0 {
		s += ", unmerged adapters " + humanBytes(n.Adapters)
	}
	return s + ")"
}

// adapterBytes is what lora.Unmerged adds to the weights for list: each
// pair's A and B in F32.
func adapterBytes(list []lora.Applied) int64 {
	var n int64
	for _, a := range list {
		for _, p := range a.Adapter.Pairs {
			n += 4 * int64(p.Rank) * int64(p.In+p.Out)
		}
	}
	return n
}

// estimateMemory sizes a model of cfg with weights of weightBytes, a cache
// of maxCache positions (0: the pipeline default) stored in f16 or f32.
func estimateMemory(cfg *model.Config, weightBytes int64, maxCache int, kvF16 bool, cacheK, cacheV fusion.KVType) memoryNeed {
	if maxCache == 0 {
		maxCache = pipeline.DefaultMaxCache
		if cfg.MaxSeqLen > 0 {
			maxCache = min(maxCache, cfg.MaxSeqLen)
		}
	}
	n := memoryNeed{Weights: weightBytes}
	// A hybrid's short convolution and Gated DeltaNet layers keep a small
	// f32 state instead (a window, and a DeltaNet's matrix per value head).
	kvLayers := int64(cfg.Layers - len(cfg.ConvLayers) - len(cfg.DeltaLayers))
	deltaState := int64(cfg.DeltaChannels())*int64(max(cfg.DeltaConvWidth-1, 0)) + int64(cfg.DeltaValueHeads)*int64(cfg.DeltaHeadDim)*int64(cfg.DeltaHeadDim)
	kvValues := kvLayers * int64(cfg.KVHeads) * int64(cfg.HeadDim) * int64(maxCache)
	n.KVCache = fusion.KVBytes(cacheK, kvF16, kvValues) + fusion.KVBytes(cacheV, kvF16, kvValues) +
		int64(len(cfg.ConvLayers))*int64(cfg.Dim)*int64(max(cfg.ConvWidth-1, 0))*4 + int64(len(cfg.DeltaLayers))*deltaState*4
	// The largest graph (the largest prefill size that fits) holds per
	// token the residual stream, attention and feed-forward intermediates
	// and the attention scores over the cache, plus one logits row.
	qdim := int64(cfg.Heads) * int64(cfg.HeadDim)
	ffn := 3 * int64(cfg.HiddenDim)
	if cfg.Experts > 0 {
		// A MoE block keeps per token its router logits; one expert's
		// hidden row at a time (counted as one token's worth). Every
		// expert's weights are in weightBytes: all are stored, k are read.
		ffn = int64(cfg.Experts) + int64(cfg.ExpertHidden)
	}
	perToken := (6*int64(cfg.Dim) + 3*qdim + ffn) * 4
	tokens := 1
	for _, size := range pipeline.DefaultPrefillSizes {
		if size <= maxCache {
			tokens = max(tokens, size)
		}
	}
	// Attention keeps the scores over the cache of a few query rows at a
	// time, not of the whole step: the CPU backend's tiles of 4 rows, the
	// GPU's split partials of steps of up to 4 tokens (longer steps are
	// tiled, their scores never stored).
	scores := int64(attnScoreRows) * int64(cfg.Heads) * int64(maxCache) * 4
	n.Activations = int64(tokens)*perToken + scores + int64(cfg.VocabSize)*4
	return n
}

// attnScoreRows is how many query rows' attention scores over the whole
// cache estimateMemory counts.
const attnScoreRows = 4

// MemoryEstimate is what Open estimates loading a model takes, and checks
// against the device's memory (or WithMemoryLimit) before it allocates
// anything: the weights as stored, one session's KV cache, and the
// activations of the largest prefill step (an estimate).
type MemoryEstimate struct {
	Weights, KVCache, Activations int64
}

// Total is the sum.
func (e MemoryEstimate) Total() int64 { return e.Weights + e.KVCache + e.Activations }

// EstimateMemory is Open's estimate for a model of cfg with weightBytes
// of weights and one KV cache of maxCache positions (0: Open's default)
// with keys of cache type k and values of type v (WithCacheTypes' names,
// f32 and f16 the float caches; "" is f16).
func EstimateMemory(cfg *model.Config, weightBytes int64, maxCache int, k, v string) (MemoryEstimate, error) {
	kt, kf16, err := parseCacheName(k)
	if err != nil {
		return MemoryEstimate{}, err
	}
	vt, vf16, err := parseCacheName(v)
	if err != nil {
		return MemoryEstimate{}, err
	}
	f16 := true // the precision of the float cache among them, if any
	switch {
	case !kt.Quantized() && !vt.Quantized():
		if kf16 != vf16 {
			return MemoryEstimate{}, fmt.Errorf("%w: float caches of two precisions, k %s and v %s", ErrOptions, k, v)
		}
		f16 = kf16
	case !kt.Quantized():
		f16 = kf16
	case !vt.Quantized():
		f16 = vf16
	}
	n := estimateMemory(cfg, weightBytes, maxCache, f16, kt, vt)
	return MemoryEstimate{Weights: n.Weights, KVCache: n.KVCache, Activations: n.Activations}, nil
}

// parseCacheName reads a cache type name of EstimateMemory.
func parseCacheName(name string) (fusion.KVType, bool, error) {
	if name == "" {
		return fusion.KVFloat, true, nil
	}
	t, f16, err := fusion.ParseKVType(name)
	if err != nil {
		return 0, false, fmt.Errorf("%w: cache type %s: %w", ErrOptions, name, err)
	}
	return t, f16, nil
}

// LargestContext is the longest KV cache (at most pipeline.MaxCacheLimit
// positions) whose EstimateMemory fits in budget bytes, 0 when not even
// one position does.
func LargestContext(cfg *model.Config, weightBytes, budget int64, k, v string) (int, error) {
	fits := func(n int) (bool, error) {
		e, err := EstimateMemory(cfg, weightBytes, n, k, v)
		return e.Total() <= budget, err
	}
	lo, hi := 0, pipeline.MaxCacheLimit // fits(lo) holds (0 positions: nothing to check), fits(hi+1) is not asked
	if ok, err := fits(1); err != nil || !ok {
		return 0, err
	}
	lo = 1
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}

// checkMemory fails with ErrTooBig when need does not fit the backend's
// device memory, or the host's available memory for the CPU backend and
// for software devices running on the CPU (such as lavapipe, whose heap
// size is nominal: its buffers are host memory). Weights already imported
// into host memory are not counted again for the CPU backend.
//
// A limit above 0 (WithMemoryLimit) is the memory there is when it is
// less than the device's (or where the device's is unknown), and then
// the weights count in full on the CPU backend too.
func checkMemory(info gpu.Info, caps gpu.Caps, need memoryNeed, weightsResident bool, limit int64) error {
	have, where := info.MemoryBytes, fmt.Sprintf("%s device %s", info.Backend, info.Name)
	if caps.Host || info.Type == gpu.CPU || have == 0 {
		have, where = hostAvailable(), "the host's available memory"
		if weightsResident && caps.Host && limit <= 0 {
			need.Weights = 0 // the CPU backend uses them where they are
		}
		if !caps.Host && info.Type != gpu.CPU {
			have = 0 // a GPU whose memory is unknown: not checked
		}
	}
	if limit > 0 && (have <= 0 || limit < have) {
		have, where = limit, "the memory limit"
	}
	if have <= 0 || need.Total() <= have {
		return nil
	}
	return fmt.Errorf("%w: it needs %s, %s has %s", ErrTooBig, need, where, humanBytes(have))
}

// hostAvailable is MemAvailable from /proc/meminfo, 0 when unknown.
func hostAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// cacheTypes parses WithCacheTypes' names: a quantized type, or the float
// cache ("", or "f16"/"f32" where they name the precision the activation
// policy resolved, kvF16).
func cacheTypes(k, v string, kvF16 bool) (kt, vt fusion.KVType, err error) {
	parse := func(which, name string) (fusion.KVType, error) {
		if name == "" {
			return fusion.KVFloat, nil
		}
		t, f16, err := fusion.ParseKVType(name)
		if err != nil {
			return 0, fmt.Errorf("%w: cache type %s: %w", ErrOptions, which, err)
		}
		if !t.Quantized() && f16 != kvF16 {
			return 0, fmt.Errorf("%w: cache type %s %s: the activation policy gives this backend a %s float cache (choose it with the activations policy)", ErrOptions, which, name, map[bool]string{true: "f16", false: "f32"}[kvF16])
		}
		return t, nil
	}
	if kt, err = parse("k", k); err != nil {
		return 0, 0, err
	}
	vt, err = parse("v", v)
	return kt, vt, err
}

// WithMemoryLimit makes Open refuse (ErrTooBig) a model whose weights,
// KV caches and activations (as Open estimates them: EstimateMemory, one
// cache per slot) need more than bytes, where that is less than the
// device's memory (the host's available memory for the CPU backend):
// the memory a deployment means to give the model, such as a phone's.
// The weights count in full then, also on the CPU backend where the model
// file's mapped pages could be shared. 0: no limit but the device's.
func WithMemoryLimit(bytes int64) Option { return func(o *openOptions) { o.memoryLimit = bytes } }
