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
// storage type on a backend. The policy decides the cache only: activations
// are computed and stored in f32 on every backend (they are small next to
// the cache and the weights, and f16 activation buffers would need f16
// variants of every kernel), so the cache, which dominates memory and decode
// bandwidth at long contexts, is where f16 pays.
//
// auto means f16 on the GPU backends and f32 on the CPU backend:
//   - On a GPU the f16 cache halves the memory and the bytes attention reads
//     per token, which is what bounds decode at long contexts; it needs no
//     device feature (halves are packed two per u32 word, like f16 weights),
//     so it does not depend on Info().F16. MediaPipe's GPU path and
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
func kvDType(override, file string, info gpu.Info) (tensors.DType, error) {
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
		if info.Backend == "cpu" {
			return tensors.F32, nil
		}
		return tensors.F16, nil
	}
	return 0, fmt.Errorf("%w %q (want %s, %s or %s)", ErrActivations, policy, model.PolicyAuto, model.PolicyF32, model.PolicyF16)
}
