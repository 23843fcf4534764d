package cpu_test

import (
	"testing"

	"github.com/gpurun/gpurun/internal/qemutest"
)

// TestARM64UnderQEMU runs this package's tests built for arm64 under
// qemu-user: the CPU backend with its NEON kernels against llama.cpp's
// goldens (stories260K and the architecture GGUFs, exact and dynamic
// math; the K-quant mixes of testdata/gguf against llama.cpp's
// log-probabilities), the batched step, and no allocation per decode step, on a CPU
// model with the dot product extension (max: SDOT) and on one without
// (cortex-a57: SMULL+SADALP).
func TestARM64UnderQEMU(t *testing.T) {
	qemutest.Run(t, qemutest.Config{
		CPUs: []qemutest.CPU{{Model: "max"}, {Model: "cortex-a57"}},
		// The binary would run this test again: it skips on arm64.
		MustPass: []string{"TestStories260KGolden", "TestDynamicMathGGUF", "TestBatchedStep", "TestMatMulStoredTypes", "TestDecodeAllocatesNothing", "TestStories260KCaches", "TestKQuantDynamicVsLlamaCpp", "TestKQuantExactIsF32"},
	})
}
