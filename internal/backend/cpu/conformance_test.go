package cpu_test

import (
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/conformance"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestStories260KCaches holds the reference itself to the stories260K
// golden checks of the conformance package, whose f16-cache bounds are
// stated against llama.cpp's f16-cache output.
func TestStories260KCaches(t *testing.T) {
	conformance.RunStories260K(t, func(testing.TB) gpu.Backend { return cpu.New(cpu.Options{}) },
		func(cfg *model.Config, tokens, maxLen int, kvF16 bool) (*fusion.Graph, error) {
			return arch.Build(cfg, arch.BuildOptions{Tokens: tokens, MaxLen: maxLen, KVF16: kvF16})
		})
}
