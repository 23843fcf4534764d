package webgpu

// The part of the package's API that needs no binding: shared by the
// wgpu-native and browser builds and the stub (nobinding.go) that a native
// build without cgo gets.

import "github.com/gpurun/gpurun/gpu"

// AdapterInfo describes one adapter, for `gpurun devices`.
type AdapterInfo struct {
	Name    string
	Vendor  string
	Type    gpu.DeviceType
	Driver  string
	Backend string // "vulkan", "metal", "d3d12", "open-gl", ...
	Usable  bool   // gpurun can open it (Vulkan, Metal and D3D12 adapters)
	// F16, Subgroups and Timestamps are what gpu.Info reports for a device
	// opened on the adapter: the features gpurun uses.
	F16, Subgroups, Timestamps bool
	Features                   []string // the adapter's own WebGPU features, used or not
	Limits                     map[string]uint64
}
