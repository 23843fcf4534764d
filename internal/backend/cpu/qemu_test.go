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
// (cortex-a57: SMULL+SADALP). The second model changes only the product
// kernels picked, so it reruns the tests that compare products and
// forward passes with references (a third of the package's emulated time;
// the allocation check, Go code the same for both, runs on max).
func TestARM64UnderQEMU(t *testing.T) {
	qemutest.Run(t, qemutest.Config{
		CPUs: []qemutest.CPU{{Model: "max"}, {Model: "cortex-a57",
			Run: "^(TestStories260KGolden|TestDynamicMathGGUF|TestBatchedStep|TestMatMulStoredTypes|TestStories260KCaches|TestKQuantDynamicVsLlamaCpp|TestKQuantExactIsF32|TestBlockTypesEqualDecodedF32|TestNarrowMatMul|TestKVQuantGoldens)$"}},
		// The binary would run this test again: it skips on arm64.
		MustPass: []string{"TestStories260KGolden", "TestDynamicMathGGUF", "TestBatchedStep", "TestMatMulStoredTypes", "TestDecodeAllocatesNothing", "TestStories260KCaches", "TestKQuantDynamicVsLlamaCpp", "TestKQuantExactIsF32",
			"TestBlockTypesEqualDecodedF32", "TestNarrowMatMul", "TestKVQuantGoldens"},
	})
}
