//go:build cgo

package vulkan

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/conformance"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/tuning"
	"github.com/gpurun/gpurun/tensors/model"
)

// One device serves every backend test of the binary: compute.New builds
// its pipelines per backend, the device itself is shared.
var (
	backendDevOnce sync.Once
	backendDev     *Device
	backendDevErr  error
)

func backendDevice(t testing.TB) *Device {
	t.Helper()
	backendDevOnce.Do(func() { backendDev, backendDevErr = OpenDevice(context.Background(), -1) })
	gputest.NoDevice(t, "vulkan", backendDevErr)
	gputest.CheckDriver(t, backendDev.Info().Name, backendDev.Info().Driver)
	return backendDev
}

// TestKernelBackendConformance runs the GPU backend (internal/backend/compute)
// on this device through the per-op parity table against internal/backend/cpu and the
// stories260K golden generation.
func TestKernelBackendConformance(t *testing.T) {
	conformance.Run(t, func(t testing.TB) gpu.Backend { return compute.New(backendDevice(t)) }, archGraph)
}

// archGraph builds the conformance package's model graphs with the
// pipeline's builder (conformance.GraphBuilder).
func archGraph(cfg *model.Config, tokens, maxLen int, kvF16 bool) (*fusion.Graph, error) {
	return arch.Build(cfg, arch.BuildOptions{Tokens: tokens, MaxLen: maxLen, KVF16: kvF16})
}

// TestKernelBackendStagingConformance runs the op table on a device whose
// buffers take the staging path of discrete GPUs (device-local memory,
// transfers through a host-visible buffer).
func TestKernelBackendStagingConformance(t *testing.T) {
	d := openTest(t, true)
	conformance.RunOps(t, func(t testing.TB) gpu.Backend { return compute.New(d) })
}

// TestKernelBackendVariants runs the op table with the kernel variants the
// device would not get by default forced (the matrix kernels without
// subgroup operations, attention split over the sequence for every graph,
// attention per head and token for every graph) and the f16-activation
// cases, whose decode runs in f16 arithmetic where the device has it, so
// every kernel runs here and under the validation layer
// (TestValidationClean).
func TestKernelBackendVariants(t *testing.T) {
	for _, opts := range []tuning.Options{
		{Attention: tuning.AttentionSplit},
		{Subgroups: tuning.SubgroupsOff, Attention: tuning.AttentionPerHead},
	} {
		t.Run(fmt.Sprintf("%s_%s", opts.Subgroups, opts.Attention), func(t *testing.T) {
			conformance.RunOps(t, func(t testing.TB) gpu.Backend { return compute.NewWithOptions(backendDevice(t), opts) })
		})
	}
	// The f16 activation policy: on devices with f16 arithmetic
	// (lavapipe) its decode kernel is matvec_sg_h.
	t.Run("f16arith", func(t *testing.T) {
		conformance.RunCases(t, conformance.F16ArithCases(), func(t testing.TB) gpu.Backend {
			return compute.NewWithOptions(backendDevice(t), tuning.Options{})
		})
	})
}

// TestSwiftShader runs the GPU backend's conformance tests again on
// SwiftShader, the second Vulkan driver CI installs.
func TestSwiftShader(t *testing.T) {
	gputest.RerunOnSwiftShader(t, "^TestKernelBackendConformance$")
}
