//go:build cgo && !js

package webgpu

import "github.com/cogentcore/webgpu/wgpu"

// compileUnlocked: natively NewKernel compiles under the device's mutex.
const compileUnlocked = false

// createPipeline creates a compute pipeline; wgpu-native compiles it in the
// call.
func createPipeline(dev *wgpu.Device, desc *wgpu.ComputePipelineDescriptor) (*wgpu.ComputePipeline, error) {
	return dev.CreateComputePipeline(desc)
}
