package vulkan

import (
	"context"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/internal/conformance"
	"github.com/gpurun/gpurun/gpu/kernels"
	"github.com/gpurun/gpurun/internal/gputest"
)

// One device serves every backend test of the binary: kernels.New builds
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
	return backendDev
}

// TestKernelBackendConformance runs the shared kernel backend on this
// device through the per-op parity table against gpu/cpu and the
// stories260K golden generation.
func TestKernelBackendConformance(t *testing.T) {
	conformance.Run(t, func(t testing.TB) gpu.Backend { return kernels.New(backendDevice(t)) })
}

// TestKernelBackendStagingConformance runs the op table on a device whose
// buffers take the staging path of discrete GPUs (device-local memory,
// transfers through a host-visible buffer).
func TestKernelBackendStagingConformance(t *testing.T) {
	d := openTest(t, true)
	conformance.RunOps(t, func(t testing.TB) gpu.Backend { return kernels.New(d) })
}
