package compute

import (
	"context"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/vulkan"
	"github.com/gpurun/gpurun/internal/webgpu"
)

// TestDevice names a GPU device the package's tests and benchmarks open.
type TestDevice struct {
	Name string
	Open func(context.Context) (gpu.Device, error)
}

// TestDevices lists the devices every GPU test and benchmark of this
// package runs on, in this package and in kernels_test (exported to it from
// this test file): the kernels must give the same results through WebGPU
// (WGSL compiled by wgpu-native) and raw Vulkan (the SPIR-V generated
// offline by naga).
var TestDevices = []TestDevice{
	{"webgpu", webgpu.Open},
	{"vulkan", vulkan.Open},
}
