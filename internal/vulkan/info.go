//go:build cgo

package vulkan

import (
	"fmt"
	"strings"

	vk "github.com/vulkan-go/vulkan"

	"github.com/gpurun/gpurun/gpu"
)

func (p *physical) describeInfo() DeviceInfo {
	props, lim, c := p.props, p.limits, p.caps
	d := DeviceInfo{
		VendorID:      props.VendorID,
		DeviceID:      props.DeviceID,
		APIVersion:    versionString(props.ApiVersion),
		DriverVersion: driverVersionString(props.VendorID, props.DriverVersion),
		ShaderFloat16: c.shader_float16 != 0,
		ShaderInt8:    c.shader_int8 != 0,
		ShaderInt16:   c.shader_int16 != 0,
		ShaderInt64:   c.shader_int64 != 0,
		Storage16Bit:  c.storage_buffer16 != 0,
		Storage8Bit:   c.storage_buffer8 != 0,

		MaxUniformBinding: int64(lim.MaxUniformBufferRange),
	}
	for i := 0; i < 3; i++ {
		d.MaxWorkgroupCount[i] = int(lim.MaxComputeWorkGroupCount[i])
		d.MaxWorkgroupSize[i] = int(lim.MaxComputeWorkGroupSize[i])
	}
	if c.has_driver != 0 {
		d.DriverName = cString(c.driver_name[:])
		d.DriverInfo = cString(c.driver_info[:])
	}
	const computeStage = uint32(vk.ShaderStageComputeBit)
	if c.has_props2 != 0 && uint32(c.subgroup_stages)&computeStage != 0 {
		d.SubgroupSize = int(c.subgroup_size)
		d.SubgroupOps = subgroupOpNames(uint32(c.subgroup_ops))
	}
	if p.tsBits > 0 {
		d.TimestampPeriod = float64(lim.TimestampPeriod)
		d.TimestampBits = int(p.tsBits)
	}
	_, d.UnifiedMemory = p.hostMappedType(^uint32(0))

	maxAlloc := int64(c.max_memory_allocation)
	if maxAlloc <= 0 {
		maxAlloc = int64(p.largestDeviceHeap())
	}
	driver := d.DriverName
	if d.DriverInfo != "" {
		driver += " " + d.DriverInfo
	}
	if driver == "" {
		driver = fmt.Sprintf("vendor 0x%04x driver %s", props.VendorID, d.DriverVersion)
	}
	ops := uint32(c.subgroup_ops)
	wantOps := uint32(vk.SubgroupFeatureBasicBit | vk.SubgroupFeatureArithmeticBit)
	d.Info = gpu.Info{
		Backend:     "vulkan",
		Name:        cString(props.DeviceName[:]),
		Type:        deviceType(props.DeviceType),
		Driver:      strings.TrimSpace(driver),
		MemoryBytes: int64(p.largestDeviceHeap()),
	}
	d.Caps = gpu.Caps{
		F16Storage:  d.Storage16Bit,
		F16Math:     d.ShaderFloat16,
		HostBuffers: true,
		ReadAhead:   true, // SubmitRead (readahead.go)
		Subgroups:   d.SubgroupSize > 0 && ops&wantOps == wantOps,
		Timestamps:  d.TimestampBits > 0 && d.TimestampPeriod > 0,

		MaxBufferSize:       maxAlloc,
		MaxStorageBinding:   int64(lim.MaxStorageBufferRange),
		MaxWorkgroupStorage: int(lim.MaxComputeSharedMemorySize),
		MaxWorkgroupInvocs:  int(lim.MaxComputeWorkGroupInvocations),
		StorageOffsetAlign:  int(lim.MinStorageBufferOffsetAlignment),
		MaxStorageBuffers:   int(lim.MaxPerStageDescriptorStorageBuffers),
		MaxUniformBuffers:   int(lim.MaxPerStageDescriptorUniformBuffers),
	}
	if shuffle := uint32(vk.SubgroupFeatureBasicBit | vk.SubgroupFeatureShuffleBit); d.SubgroupSize > 0 && ops&shuffle == shuffle {
		d.Caps.SubgroupSize = d.SubgroupSize
	}
	return d
}

// cString returns the text of a NUL-terminated fixed-size C char array.
func cString[T ~byte | ~int8](b []T) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

func deviceType(t vk.PhysicalDeviceType) gpu.DeviceType {
	switch t {
	case vk.PhysicalDeviceTypeDiscreteGpu:
		return gpu.Discrete
	case vk.PhysicalDeviceTypeIntegratedGpu:
		return gpu.Integrated
	case vk.PhysicalDeviceTypeVirtualGpu:
		return gpu.Virtual
	case vk.PhysicalDeviceTypeCpu:
		return gpu.CPU
	}
	return gpu.Other
}

func versionString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v>>22&0x7f, v>>12&0x3ff, v&0xfff)
}

// driverVersionString decodes driverVersion, which is vendor-defined:
// NVIDIA packs 10.8.8.6 bits, Intel's Windows driver 18.14; everyone else
// (Mesa, AMD) uses the Vulkan version encoding.
func driverVersionString(vendor, v uint32) string {
	switch vendor {
	case 0x10de:
		return fmt.Sprintf("%d.%d.%d.%d", v>>22&0x3ff, v>>14&0xff, v>>6&0xff, v&0x3f)
	}
	return versionString(v)
}

func subgroupOpNames(ops uint32) []string {
	names := []string{"basic", "vote", "arithmetic", "ballot", "shuffle", "shuffle_relative", "clustered", "quad"}
	var out []string
	for i, n := range names {
		if ops&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// Features lists the optional capabilities in words for `gpurun devices`:
// f16/int8/int16/int64 arithmetic, 8/16-bit storage, subgroups with their
// size and operations, timestamps with their period.
func (d DeviceInfo) Features() []string {
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{
		{d.ShaderFloat16, "f16 arithmetic"}, {d.Storage16Bit, "16-bit storage"},
		{d.ShaderInt8, "int8 arithmetic"}, {d.Storage8Bit, "8-bit storage"},
		{d.ShaderInt16, "int16 arithmetic"}, {d.ShaderInt64, "int64 arithmetic"},
	} {
		if f.on {
			out = append(out, f.name)
		}
	}
	if d.SubgroupSize > 0 {
		out = append(out, fmt.Sprintf("subgroups (size %d: %s)", d.SubgroupSize, strings.Join(d.SubgroupOps, ", ")))
	}
	if d.Timestamps {
		out = append(out, fmt.Sprintf("timestamps (%g ns/tick, %d bits)", d.TimestampPeriod, d.TimestampBits))
	}
	return out
}
