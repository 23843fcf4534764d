//go:build cgo || js

// Package webgpu implements gpu.Device on WebGPU through
// github.com/cogentcore/webgpu (wgpu-native), with the workarounds
// platform-notes.md lists for its v0.23.0: instance creation without a
// descriptor, an explicit Vulkan, Metal or D3D12 adapter (never the GL fallback), device
// limits sanitized before RequestDevice, buffer reads mapped by a small cgo
// helper of ours, and resources validated before every Submit.
//
// No persistent pipeline cache: neither the binding nor the webgpu.h and
// wgpu.h of that wgpu-native release expose one (no pipeline cache object,
// no way to read back or seed the driver's cache), so every process
// compiles its pipelines again (WGSL through naga, then the driver). The
// driver's own on-disk shader cache, where it keeps one (Mesa's, NVIDIA's),
// is all that carries over. internal/vulkan keeps a persistent VkPipelineCache.
package webgpu

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/gpurun/gpurun/gpu"
)

// usedFeatures are the features gpurun uses on adapter a: timestamp
// queries where it has them; subgroup operations where its WGSL compiler
// has them (sg.min > 0: a browser's, not wgpu-native's; subgroupSizes);
// never f16 (wgpu-native's WGSL has no f16: activations are packed halves
// in u32 words).
func usedFeatures(a *wgpu.Adapter) (f16 bool, sg subgroupRange, timestamps bool) {
	return false, subgroupSizes(a), hasTimestamps(a)
}

// subgroupRange is the smallest and largest subgroup size an adapter's
// kernels may run with; zero where they may not use subgroups.
type subgroupRange struct{ min, max int }

var logOnce sync.Once

// quiet silences wgpu-native's stderr logging, and libwayland-client's
// complaint about a missing XDG_RUNTIME_DIR, which Mesa's Vulkan drivers
// print (once per instance and adapter query) when they probe for a Wayland
// display on a headless machine: with neither XDG_RUNTIME_DIR nor
// WAYLAND_DISPLAY set, WAYLAND_DISPLAY is pointed at a path that cannot
// exist (libwayland takes an absolute path as is), so the probe fails
// silently. Compute needs no display.
func quiet() {
	logOnce.Do(func() {
		wgpu.SetLogLevel(wgpu.LogLevelOff)
		if os.Getenv("XDG_RUNTIME_DIR") == "" && os.Getenv("WAYLAND_DISPLAY") == "" && os.Getenv("WAYLAND_SOCKET") == "" {
			os.Setenv("WAYLAND_DISPLAY", noWayland)
		}
	})
}

// noWayland is a WAYLAND_DISPLAY no socket can have: /dev/null is not a
// directory.
const noWayland = "/dev/null/gpurun-headless"

// Adapters lists every adapter wgpu-native sees.
func Adapters() ([]AdapterInfo, error) {
	quiet()
	inst := wgpu.CreateInstance(nil)
	if inst == nil {
		return nil, fmt.Errorf("webgpu: create instance: %w", gpu.ErrNoDevice)
	}
	defer inst.Release()
	var out []AdapterInfo
	for _, a := range inst.EnumerateAdapters(nil) {
		out = append(out, describe(a))
		a.Release()
	}
	return out, nil
}

func describe(a *wgpu.Adapter) AdapterInfo {
	info := a.GetInfo()
	l := a.GetLimits().Limits
	name, driver := adapterName(info)
	ai := AdapterInfo{
		Name:    name,
		Vendor:  info.VendorName,
		Type:    deviceType(info.AdapterType),
		Driver:  driver,
		Backend: info.BackendType.String(),
		Usable:  usableBackend(info),
		Limits: map[string]uint64{
			"maxBufferSize":                     l.MaxBufferSize,
			"maxStorageBufferBindingSize":       l.MaxStorageBufferBindingSize,
			"maxUniformBufferBindingSize":       l.MaxUniformBufferBindingSize,
			"maxStorageBuffersPerShaderStage":   uint64(l.MaxStorageBuffersPerShaderStage),
			"maxComputeWorkgroupStorageSize":    uint64(l.MaxComputeWorkgroupStorageSize),
			"maxComputeInvocationsPerWorkgroup": uint64(l.MaxComputeInvocationsPerWorkgroup),
			"maxComputeWorkgroupsPerDimension":  uint64(l.MaxComputeWorkgroupsPerDimension),
			"minStorageBufferOffsetAlignment":   uint64(l.MinStorageBufferOffsetAlignment),
			"minUniformBufferOffsetAlignment":   uint64(l.MinUniformBufferOffsetAlignment),
		},
	}
	f16, sg, timestamps := usedFeatures(a)
	ai.F16, ai.Subgroups, ai.Timestamps = f16, sg.min > 0, timestamps
	ai.Features = adapterFeatures(a)
	sort.Strings(ai.Features)
	return ai
}

// adapterName picks a readable adapter name. The bundled wgpu-native fills
// the `device` field with the PCI device id in hex ("0x0" on lavapipe) and
// puts the device's name in `description`, so a hex `device` gives way to
// the description.
func adapterName(info wgpu.AdapterInfo) (name, driver string) {
	name, driver = info.Name, info.DriverDescription
	if strings.HasPrefix(name, "0x") && driver != "" {
		return driver, ""
	}
	return name, driver
}

func deviceType(t wgpu.AdapterType) gpu.DeviceType {
	switch t {
	case wgpu.AdapterTypeDiscreteGPU:
		return gpu.Discrete
	case wgpu.AdapterTypeIntegratedGPU:
		return gpu.Integrated
	case wgpu.AdapterTypeCPU:
		return gpu.CPU
	}
	return gpu.Other
}
