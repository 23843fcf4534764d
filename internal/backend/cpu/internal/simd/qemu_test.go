package simd

import (
	"testing"

	"github.com/gpurun/gpurun/internal/qemutest"
)

// TestARM64UnderQEMU tests the arm64 kernels on this (non-arm64) machine
// under qemu-user, once on a CPU model with the dot product extension
// (max: the neon and neon-sdot variants) and once on one without
// (cortex-a57: neon only). Every parity test of this package then runs
// against the arm64 implementations; SIMD_WANT_IMPLS makes a broken
// feature detection fail instead of quietly testing fewer variants.
func TestARM64UnderQEMU(t *testing.T) {
	qemutest.Run(t, qemutest.Config{
		CPUs: []qemutest.CPU{
			{Model: "max", Env: []string{"SIMD_WANT_IMPLS=go,neon,neon-sdot"}},
			{Model: "cortex-a57", Env: []string{"SIMD_WANT_IMPLS=go,neon"}},
		},
		MustPass: []string{"TestARM64Impls", "TestFloatParity", "TestBlockParity", "TestWeightedSumParity", "TestDynamicParity", "TestRowsParity", "TestExpParity", "TestKernelsAllocateNothing", "TestQuantizeQ8K", "TestKQuantReference", "TestKParity", "TestQ32Reference", "TestQ32Parity", "TestMXFP4Exponents", "TestMXFP4MatchesLlamaCpp", "TestGemmMatchesRowKernels", "TestGemmBitsMatchGo", "TestDotF32x2x4Bits", "TestPackLayout", "TestGemmKMatchesDotK", "TestPackKManyGroups"},
	})
}
