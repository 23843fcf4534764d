package arch_test

import (
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

func TestGemma4Golden(t *testing.T) {
	for _, fused := range []bool{false, true} {
		checkGolden(t, testmodels.Path(t, "arch3", "gemma4.gguf"), testmodels.Arch3(t, "gemma4").ArchGolden, 1e-3, true, fused)
	}
}
