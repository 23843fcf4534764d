//go:build cgo

package vulkan

/*
#cgo linux LDFLAGS: -ldl
#include "vkext.h"
*/
import "C"

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	vk "github.com/vulkan-go/vulkan"

	"github.com/gpurun/gpurun/gpu"
)

// The binding keeps its function pointers in process-wide variables, so the
// package creates one Vulkan instance on first use and keeps it for the life
// of the process; devices are created and destroyed on top of it.
var (
	instanceOnce sync.Once
	sharedInst   *instance
	sharedErr    error
)

// instance is the process-wide VkInstance and the API version it asked for.
type instance struct {
	handle vk.Instance
	api    uint32
}

// maxAPI is the highest API version the package asks for: 1.3 is what the
// feature and property chains in vkext.c are written against.
var maxAPI = vk.MakeVersion(1, 3, 0)

func getInstance() (*instance, error) {
	instanceOnce.Do(func() { sharedInst, sharedErr = createInstance() })
	return sharedInst, sharedErr
}

func createInstance() (*instance, error) {
	proc := C.gr_load()
	if proc == nil {
		return nil, fmt.Errorf("vulkan: cannot load %s: %w", loaderHint, gpu.ErrNoDevice)
	}
	vk.SetGetInstanceProcAddr(proc)
	if err := vk.Init(); err != nil {
		return nil, fmt.Errorf("vulkan: init: %v: %w", err, gpu.ErrNoDevice)
	}
	api := uint32(C.gr_instance_version())
	if api > maxAPI {
		api = maxAPI
	}
	// Through vkcalls.c: the binding's wrapper would hold the extension
	// names in memory a garbage collection may free during the call.
	flags, ext := instanceExtensions(availableInstanceExtensions())
	handle, res := newVkInstance(api, flags, ext)
	if res != vk.Success {
		err := check("vkCreateInstance", res)
		if res == vk.ErrorIncompatibleDriver || res == vk.ErrorInitializationFailed {
			return nil, fmt.Errorf("%w (no Vulkan driver; %s): %w", err, driverHint, gpu.ErrNoDevice)
		}
		return nil, fmt.Errorf("%w: %w", err, gpu.ErrNoDevice)
	}
	if err := vk.InitInstance(handle); err != nil {
		vk.DestroyInstance(handle, nil)
		return nil, fmt.Errorf("vulkan: loading instance functions: %v: %w", err, gpu.ErrNoDevice)
	}
	return &instance{handle: handle, api: api}, nil
}

// portabilityEnumeration is the loader extension that lists portability
// implementations (MoltenVK on macOS, which implements Vulkan over Metal
// with a few features missing) beside conformant drivers: without it and
// its instance flag, loaders from 1.3.216 on hide them, and a Mac finds no
// Vulkan device.
const portabilityEnumeration = "VK_KHR_portability_enumeration"

// enumeratePortabilityBit is VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR.
const enumeratePortabilityBit vk.InstanceCreateFlags = 0x00000001

// instanceExtensions returns the instance flags and the extension ("" for
// none) to enable given those the loader offers: portability enumeration where it is
// offered, nothing else (compute needs no surface or debug extension).
func instanceExtensions(available []string) (vk.InstanceCreateFlags, string) {
	for _, name := range available {
		if name == portabilityEnumeration {
			return enumeratePortabilityBit, portabilityEnumeration
		}
	}
	return 0, ""
}

// availableInstanceExtensions lists the extensions the loader and its
// implicit layers offer; none when the query fails.
func availableInstanceExtensions() []string {
	var n uint32
	if vk.EnumerateInstanceExtensionProperties("", &n, nil) != vk.Success || n == 0 {
		return nil
	}
	props := make([]vk.ExtensionProperties, n)
	if res := vk.EnumerateInstanceExtensionProperties("", &n, props); res != vk.Success && res != vk.Incomplete {
		return nil
	}
	names := make([]string, 0, n)
	for _, p := range props[:n] {
		p.Deref()
		names = append(names, vk.ToString(p.ExtensionName[:]))
	}
	return names
}

// physical is everything the package knows about one physical device.
type physical struct {
	handle     vk.PhysicalDevice
	props      vk.PhysicalDeviceProperties
	limits     vk.PhysicalDeviceLimits
	mem        vk.PhysicalDeviceMemoryProperties
	family     uint32 // compute queue family
	tsBits     uint32 // timestampValidBits of that family
	api        uint32 // min(device, instance) API version
	caps       C.gr_caps
	info       DeviceInfo
	hasCompute bool
}

func (in *instance) physicalDevices() ([]*physical, error) {
	var count uint32
	if err := check("vkEnumeratePhysicalDevices", vk.EnumeratePhysicalDevices(in.handle, &count, nil)); err != nil {
		return nil, err
	}
	if count == 0 {
		return nil, nil
	}
	handles := make([]vk.PhysicalDevice, count)
	if err := check("vkEnumeratePhysicalDevices", vk.EnumeratePhysicalDevices(in.handle, &count, handles)); err != nil {
		return nil, err
	}
	out := make([]*physical, 0, count)
	for i, h := range handles[:count] {
		p := in.describe(h)
		p.info.Index = i
		out = append(out, p)
	}
	return out, nil
}

func (in *instance) describe(h vk.PhysicalDevice) *physical {
	p := &physical{handle: h}
	var props vk.PhysicalDeviceProperties
	vk.GetPhysicalDeviceProperties(h, &props)
	props.Deref()
	props.Limits.Deref()
	p.props, p.limits = props, props.Limits

	var mem vk.PhysicalDeviceMemoryProperties
	vk.GetPhysicalDeviceMemoryProperties(h, &mem)
	mem.Deref()
	for i := range mem.MemoryTypes {
		mem.MemoryTypes[i].Deref()
	}
	for i := range mem.MemoryHeaps {
		mem.MemoryHeaps[i].Deref()
	}
	p.mem = mem

	var nfam uint32
	vk.GetPhysicalDeviceQueueFamilyProperties(h, &nfam, nil)
	fams := make([]vk.QueueFamilyProperties, nfam)
	vk.GetPhysicalDeviceQueueFamilyProperties(h, &nfam, fams)
	for i := range fams[:nfam] {
		fams[i].Deref()
		f := fams[i]
		if vk.QueueFlagBits(f.QueueFlags)&vk.QueueComputeBit == 0 || f.QueueCount == 0 {
			continue
		}
		// Prefer the first compute family that can write timestamps.
		if !p.hasCompute || (p.tsBits == 0 && f.TimestampValidBits > 0) {
			p.family, p.tsBits, p.hasCompute = uint32(i), f.TimestampValidBits, true
		}
	}

	p.api = props.ApiVersion
	if p.api > in.api {
		p.api = in.api
	}
	C.gr_query(C.gr_instance(unsafe.Pointer(in.handle)), C.gr_physical_device(unsafe.Pointer(h)), C.uint32_t(p.api), &p.caps)
	p.info = p.describeInfo()
	return p
}

// hostMappedType returns a memory type that is device-local, host-visible
// and coherent on the largest device-local heap, so buffers can live mapped
// without giving up device memory (false on discrete GPUs without resizable
// BAR, whose mappable window is small).
func (p *physical) hostMappedType(allowed uint32) (uint32, bool) {
	want := vk.MemoryPropertyFlags(vk.MemoryPropertyDeviceLocalBit | vk.MemoryPropertyHostVisibleBit | vk.MemoryPropertyHostCoherentBit)
	largest := p.largestDeviceHeap()
	for i := uint32(0); i < p.mem.MemoryTypeCount; i++ {
		t := p.mem.MemoryTypes[i]
		if allowed&(1<<i) == 0 || t.PropertyFlags&want != want {
			continue
		}
		if p.mem.MemoryHeaps[t.HeapIndex].Size >= largest {
			return i, true
		}
	}
	return 0, false
}

// memoryType returns the first allowed type having all flags in want.
func (p *physical) memoryType(allowed uint32, want vk.MemoryPropertyFlags) (uint32, bool) {
	for i := uint32(0); i < p.mem.MemoryTypeCount; i++ {
		if allowed&(1<<i) != 0 && p.mem.MemoryTypes[i].PropertyFlags&want == want {
			return i, true
		}
	}
	return 0, false
}

func (p *physical) largestDeviceHeap() vk.DeviceSize {
	var largest vk.DeviceSize
	for i := uint32(0); i < p.mem.MemoryHeapCount; i++ {
		h := p.mem.MemoryHeaps[i]
		if vk.MemoryHeapFlagBits(h.Flags)&vk.MemoryHeapDeviceLocalBit != 0 && h.Size > largest {
			largest = h.Size
		}
	}
	if largest == 0 && p.mem.MemoryHeapCount > 0 {
		largest = p.mem.MemoryHeaps[0].Size
	}
	return largest
}

// instanceDevices is the shared instance and its physical devices; no
// devices is an error wrapping gpu.ErrNoDevice.
func instanceDevices() (*instance, []*physical, error) {
	in, err := getInstance()
	if err != nil {
		return nil, nil, err
	}
	phys, err := in.physicalDevices()
	if err != nil {
		return nil, nil, err
	}
	if len(phys) == 0 {
		return nil, nil, fmt.Errorf("vulkan: no physical devices: %w", gpu.ErrNoDevice)
	}
	return in, phys, nil
}

// Devices lists the Vulkan physical devices with what gpurun can use of
// them. Without a loader or driver it returns an error wrapping
// gpu.ErrNoDevice.
func Devices() ([]DeviceInfo, error) {
	_, phys, err := instanceDevices()
	if err != nil {
		return nil, err
	}
	out := make([]DeviceInfo, len(phys))
	for i, p := range phys {
		out[i] = p.info
	}
	return out, nil
}

// pick returns the physical device Open uses: index >= 0 selects by index,
// otherwise the best by type (discrete, integrated, virtual, CPU).
func pick(phys []*physical, index int) (*physical, error) {
	if sel := gpu.DefaultDevice(); index < 0 && sel != "" {
		i, err := selectPhysical(phys, sel)
		if err != nil {
			return nil, err
		}
		index = i
	}
	if index >= 0 {
		if index >= len(phys) {
			return nil, fmt.Errorf("vulkan: device index %d out of range (%d devices): %w", index, len(phys), ErrInvalid)
		}
		if !phys[index].hasCompute {
			return nil, fmt.Errorf("vulkan: device %d has no compute queue: %w", index, gpu.ErrNoDevice)
		}
		return phys[index], nil
	}
	rank := map[gpu.DeviceType]int{gpu.Discrete: 4, gpu.Integrated: 3, gpu.Virtual: 2, gpu.CPU: 1}
	var best *physical
	for _, p := range phys {
		if !p.hasCompute {
			continue
		}
		if best == nil || rank[p.info.Type] > rank[best.info.Type] {
			best = p
		}
	}
	if best == nil {
		return nil, fmt.Errorf("vulkan: no device with a compute queue: %w", gpu.ErrNoDevice)
	}
	return best, nil
}

// selectPhysical resolves a gpu.DeviceEnv selection: an index, or a
// case-insensitive part of a device's name (the first that has it).
func selectPhysical(phys []*physical, sel string) (int, error) {
	var names []string
	for i, p := range phys {
		names = append(names, fmt.Sprintf("%d: %s", i, p.info.Name))
	}
	if i, err := strconv.Atoi(sel); err == nil {
		if i < 0 || i >= len(phys) {
			return 0, fmt.Errorf("vulkan: %s=%s: no device %d among %s: %w", gpu.DeviceEnv, sel, i, strings.Join(names, ", "), gpu.ErrNoDevice)
		}
		return i, nil
	}
	for i, p := range phys {
		if strings.Contains(strings.ToLower(p.info.Name), strings.ToLower(sel)) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("vulkan: %s=%s: no device of that name among %s: %w", gpu.DeviceEnv, sel, strings.Join(names, ", "), gpu.ErrNoDevice)
}
