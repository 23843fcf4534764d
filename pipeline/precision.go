package pipeline

import (
	"errors"
	"fmt"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// ErrActivations: Options.Activations is not an activation policy.
var ErrActivations = errors.New("pipeline: unknown activation policy")

// kvDType resolves an activation policy (Options.Activations, else the
// model file's Config.Activations; both empty mean auto) into the KV cache's
// storage type on a backend (actF16 resolves the same policy for the
// activations between kernels).
//
// auto means f16 on the GPU backends and f32 on the CPU backend:
//   - On a GPU the f16 cache halves the memory and the bytes attention reads
//     per token, which is what bounds decode at long contexts; it needs no
//     device feature (halves are packed two per u32 word, like f16 weights),
//     so it does not depend on Caps().F16(). MediaPipe's GPU path and
//     llama.cpp (whose golden ids stories260K is checked against) default
//     to an f16 cache too.
//   - The CPU backend is the reference the GPU kernels are held to and
//     matches llama.cpp's f32-cache logits to 1e-5; an f16 cache there
//     would cost its exactness, and host memory is rarely what limits a
//     model small enough to run on the CPU. "f16" still gives it an f16
//     cache.
//
// The importers set per-architecture policies (f32 for Falcon and Phi-2,
// f16 for Gemma, Gemma 2 and StableLM, auto for Llama), so an f32 policy
// keeps an f32 cache even on a GPU; gpurun convert --activations rewrites
// the file's policy and Options.Activations (gpurun run/bench
// --activations) overrides it for one load.
func kvDType(override, file string, caps gpu.Caps) (tensors.DType, error) {
	policy := override
	if policy == "" {
		policy = file
	}
	switch policy {
	case model.PolicyF32:
		return tensors.F32, nil
	case model.PolicyF16:
		return tensors.F16, nil
	case model.PolicyAuto, "":
		if caps.Host {
			return tensors.F32, nil
		}
		return tensors.F16, nil
	}
	return 0, fmt.Errorf("%w %q (want %s, %s or %s)", ErrActivations, policy, model.PolicyAuto, model.PolicyF32, model.PolicyF16)
}

// actF16 resolves the activation policy (as kvDType takes it) for the
// activations passed between kernels: true makes the compiled graphs' intermediate
// activations f16 (fusion.HalfActivations: every op output but the
// residual stream, the logits and the sampled ids is rounded to binary16
// where it is stored; arithmetic stays f32).
//
//   - --activations f16 (Options.Activations) forces it on every backend,
//     the CPU one included: the rounding needs no device feature.
//   - f32, from either, keeps f32 activations.
//   - auto, or a model file's f16 (the importers write f16 for Gemma,
//     Gemma 2 and StableLM), gives f16 on a GPU backend whose device
//     reports f16 storage and arithmetic (gpu.Caps.F16; SwiftShader does
//     not) for a model that is not Falcon or Phi-2 (MediaPipe runs those
//     two in f32; their importers write f32 anyway), and f32 on the CPU
//     backend (gpu.Caps.Host), the reference, which matches llama.cpp's
//     f32 logits.
func actF16(override, file string, caps gpu.Caps, arch string) (bool, error) {
	policy := override
	if policy == "" {
		policy = file
	}
	auto := !caps.Host && caps.F16() && arch != model.ArchFalcon && arch != model.ArchPhi2
	switch policy {
	case model.PolicyF16:
		return override == model.PolicyF16 || auto, nil
	case model.PolicyF32:
		return false, nil
	case model.PolicyAuto, "":
		return auto, nil
	}
	return false, fmt.Errorf("%w %q (want %s, %s or %s)", ErrActivations, policy, model.PolicyAuto, model.PolicyF32, model.PolicyF16)
}
