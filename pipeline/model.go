package pipeline

import (
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
	"time"
)

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

// KVCacheTypes names the cache's key and value types as llama.cpp's
// -ctk/-ctv do ("f32", "f16", "q8_0", ...), one name when they agree, else
// "k TYPE, v TYPE".
func (m *Model) KVCacheTypes() string {
	name := func(t fusion.KVType) string {
		if t.Quantized() {
			return t.String()
		}
		return m.KVDType().String()
	}
	k, v := name(m.cacheK), name(m.cacheV)
	if k == v {
		return k
	}
	return "k " + k + ", v " + v
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

// CompileTime is the wall time the model has spent compiling its programs
// so far (their kernels included: on a GPU backend, the device's pipeline
// creation), most of it at load.
func (m *Model) CompileTime() time.Duration { return time.Duration(m.compileNanos.Load()) }
