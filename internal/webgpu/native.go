//go:build cgo && !js

package webgpu

import "github.com/cogentcore/webgpu/wgpu"

// The native (wgpu-native) side of what differs between the binding's cgo
// and browser implementations; js.go is the browser's.

// querySet is the timestamp query set.
type querySet = wgpu.QuerySet

// usableBackends are the wgpu-native backends gpurun opens adapters of:
// Vulkan (Linux, Windows, Android), Metal (macOS) and D3D12 (Windows),
// where wgpu runs WGSL compute as the kernels need it. GL is left out: on
// Mesa's llvmpipe GL (wgpu's GLES 3.1 path) the attention kernel does not
// compile (naga's GLSL for attn_split_f16 fails with a syntax error at
// "packed", a reserved word in GLSL), and asking for GL makes wgpu probe EGL. Adapters
// are ranked by type only (discrete first), the enumeration order (Vulkan,
// then Metal, then D3D12) breaking ties: the kernels are tested on Vulkan.
const usableBackends = wgpu.InstanceBackendVulkan | wgpu.InstanceBackendMetal | wgpu.InstanceBackendDX12

// noAdapter says that no adapter of usableBackends was found.
const noAdapter = "no Vulkan, Metal or D3D12 adapter"

// usableBackend: an adapter of one of usableBackends.
func usableBackend(info wgpu.AdapterInfo) bool {
	switch info.BackendType {
	case wgpu.BackendTypeVulkan, wgpu.BackendTypeMetal, wgpu.BackendTypeD3D12:
		return true
	}
	return false
}

// enumerateUsable lists the adapters of usableBackends.
func enumerateUsable(inst *wgpu.Instance) []*wgpu.Adapter {
	return inst.EnumerateAdapters(&wgpu.InstanceEnumerateAdapterOptons{Backends: usableBackends})
}

func hasTimestamps(a *wgpu.Adapter) bool {
	return a.HasFeature(wgpu.FeatureNameTimestampQuery)
}

func createTimestamps(dev *wgpu.Device, n uint32) (*querySet, error) {
	return dev.CreateQuerySet(&wgpu.QuerySetDescriptor{Type: wgpu.QueryTypeTimestamp, Count: n})
}

func writeTimestamp(enc *wgpu.CommandEncoder, qs *querySet, slot uint32) error {
	return enc.WriteTimestamp(qs, slot)
}

func resolveTimestamps(enc *wgpu.CommandEncoder, qs *querySet, n uint32, dst *wgpu.Buffer) error {
	return enc.ResolveQuerySet(qs, 0, n, dst, 0)
}

func endComputePass(p *wgpu.ComputePassEncoder) error { return p.End() }

func computePipeline(name string, layout *wgpu.PipelineLayout, stage wgpu.ProgrammableStageDescriptor) *wgpu.ComputePipelineDescriptor {
	return &wgpu.ComputePipelineDescriptor{Label: name, Layout: layout, Compute: stage}
}

func adapterFeatures(a *wgpu.Adapter) []string {
	var out []string
	for _, f := range a.EnumerateFeatures() {
		out = append(out, f.String())
	}
	return out
}

// requestDevice asks a for a device; subgroups is never true here
// (subgroupSizes).
func requestDevice(a *wgpu.Adapter, desc *wgpu.DeviceDescriptor, _ bool) (*wgpu.Device, error) {
	return a.RequestDevice(desc)
}

// subgroupSizes is none: wgpu-native's WGSL front end (naga 0.19) has no
// subgroup builtins.
func subgroupSizes(*wgpu.Adapter) subgroupRange { return subgroupRange{} }

func adapterInfo(a *wgpu.Adapter) wgpu.AdapterInfo { return a.GetInfo() }

// queueIdle polls wgpu-native without blocking: true once every submission
// has finished.
func queueIdle(dev *wgpu.Device) bool { return dev.Poll(false, nil) }
