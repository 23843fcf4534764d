//go:build cgo

package vulkan

/*
#include <stdlib.h>
#include "vkcalls.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	vk "github.com/vulkan-go/vulkan"

	"github.com/gpurun/gpurun/gpu"
)

// maxSetBindings is vkcalls.h's gr_max_bindings: the most bindings of one
// descriptor set that vkcalls.c writes.
const maxSetBindings = C.gr_max_bindings

// calls is a device's table of the Vulkan entry points that this package
// calls through vkcalls.c instead of the Go binding (vkcalls.h says why).
// Slices reach C only as direct arguments of a cgo call, never inside a
// structure, so cgo keeps them alive and in place for the call.
type calls struct{ f *C.gr_fns }

// newVkInstance is vkCreateInstance for api with flags and, unless it
// is "", the one instance extension ext.
func newVkInstance(api uint32, flags vk.InstanceCreateFlags, ext string) (vk.Instance, vk.Result) {
	var name *C.char
	if ext != "" {
		b := append([]byte(ext), 0)
		name = (*C.char)(unsafe.Pointer(unsafe.SliceData(b)))
	}
	var h C.gr_instance
	res := C.gr_create_instance(C.uint32_t(api), C.uint32_t(flags), name, &h)
	return vk.Instance(unsafe.Pointer(h)), vk.Result(res)
}

// loadCalls looks up the entry points of dev; free releases the table.
func loadCalls(inst vk.Instance, dev vk.Device) (calls, error) {
	f := C.gr_fns_load(C.gr_instance(unsafe.Pointer(inst)), C.gr_device(unsafe.Pointer(dev)))
	if f == nil {
		return calls{}, fmt.Errorf("vulkan: the loader returned no vkGetDeviceProcAddr or a device entry point is missing: %w", gpu.ErrNoDevice)
	}
	return calls{f}, nil
}

func (c *calls) free() {
	if c.f != nil {
		C.free(unsafe.Pointer(c.f))
		c.f = nil
	}
}

// nondispatchable is every non-dispatchable handle type this file passes:
// 64 bits on every target (TestHandleSizes), converted to and from
// C.gr_handle by reinterpretation.
type nondispatchable interface {
	vk.ShaderModule | vk.DescriptorSetLayout | vk.PipelineLayout | vk.Pipeline | vk.PipelineCache |
		vk.DescriptorPool | vk.DescriptorSet | vk.Buffer | vk.Fence | vk.CommandPool
}

func toC[H nondispatchable](h H) C.gr_handle { return *(*C.gr_handle)(unsafe.Pointer(&h)) }

func fromC[H nondispatchable](h C.gr_handle) H { return *(*H)(unsafe.Pointer(&h)) }

func (c calls) dev(d vk.Device) C.gr_device { return C.gr_device(unsafe.Pointer(d)) }

func (c calls) createShaderModule(d vk.Device, code []uint32) (vk.ShaderModule, vk.Result) {
	var h C.gr_handle
	res := C.gr_create_shader_module(c.f, c.dev(d), (*C.uint32_t)(unsafe.SliceData(code)), C.size_t(4*len(code)), &h)
	return fromC[vk.ShaderModule](h), vk.Result(res)
}

// createSetLayout makes binding i a descriptor of types[i] for the compute
// stage; more than maxSetBindings bindings is ErrInvalid (vkcalls.c
// writes the bindings of a set from fixed arrays).
func (c calls) createSetLayout(d vk.Device, types []int32) (vk.DescriptorSetLayout, error) {
	if len(types) > maxSetBindings {
		return vk.NullDescriptorSetLayout, fmt.Errorf("%d bindings, at most %d: %w", len(types), maxSetBindings, ErrInvalid)
	}
	var h C.gr_handle
	res := C.gr_create_set_layout(c.f, c.dev(d), (*C.int32_t)(unsafe.SliceData(types)), C.uint32_t(len(types)), &h)
	return fromC[vk.DescriptorSetLayout](h), check("vkCreateDescriptorSetLayout", vk.Result(res))
}

func (c calls) createPipelineLayout(d vk.Device, set vk.DescriptorSetLayout) (vk.PipelineLayout, vk.Result) {
	var h C.gr_handle
	res := C.gr_create_pipeline_layout(c.f, c.dev(d), toC(set), &h)
	return fromC[vk.PipelineLayout](h), vk.Result(res)
}

// createComputePipeline compiles entry of module; next is the create
// info's pNext chain (C memory) or nil.
func (c calls) createComputePipeline(d vk.Device, cache vk.PipelineCache, module vk.ShaderModule, entry string,
	layout vk.PipelineLayout, next unsafe.Pointer) (vk.Pipeline, vk.Result) {
	name := append([]byte(entry), 0)
	var h C.gr_handle
	res := C.gr_create_compute_pipeline(c.f, c.dev(d), toC(cache), toC(module), (*C.char)(unsafe.Pointer(unsafe.SliceData(name))),
		toC(layout), next, &h)
	return fromC[vk.Pipeline](h), vk.Result(res)
}

func (c calls) createDescriptorPool(d vk.Device, sets, storage, uniforms int) (vk.DescriptorPool, vk.Result) {
	var h C.gr_handle
	res := C.gr_create_descriptor_pool(c.f, c.dev(d), C.uint32_t(sets), C.uint32_t(storage), C.uint32_t(uniforms), &h)
	return fromC[vk.DescriptorPool](h), vk.Result(res)
}

func (c calls) allocateSet(d vk.Device, pool vk.DescriptorPool, layout vk.DescriptorSetLayout) (vk.DescriptorSet, vk.Result) {
	var h C.gr_handle
	res := C.gr_allocate_set(c.f, c.dev(d), toC(pool), toC(layout), &h)
	return fromC[vk.DescriptorSet](h), vk.Result(res)
}

// updateSet points binding i of set (a descriptor of types[i]) at infos[i].
func (c calls) updateSet(d vk.Device, set vk.DescriptorSet, types []int32, infos []vk.DescriptorBufferInfo) error {
	n := len(infos)
	if n != len(types) || n > maxSetBindings {
		return fmt.Errorf("vulkan: descriptor set of %d bindings (%d types; at most %d): %w", n, len(types), maxSetBindings, ErrInvalid)
	}
	if n == 0 {
		return nil
	}
	var bufs, offs, ranges [maxSetBindings]C.uint64_t
	for i, in := range infos {
		bufs[i], offs[i], ranges[i] = toC(in.Buffer), C.uint64_t(in.Offset), C.uint64_t(in.Range)
	}
	C.gr_update_set(c.f, c.dev(d), toC(set), C.uint32_t(n), (*C.int32_t)(unsafe.SliceData(types)), &bufs[0], &offs[0], &ranges[0])
	return nil
}

func (c calls) createCommandPool(d vk.Device, flags vk.CommandPoolCreateFlagBits, family uint32) (vk.CommandPool, vk.Result) {
	var h C.gr_handle
	res := C.gr_create_command_pool(c.f, c.dev(d), C.uint32_t(flags), C.uint32_t(family), &h)
	return fromC[vk.CommandPool](h), vk.Result(res)
}

// allocateCommandBuffer allocates one primary command buffer from pool.
func (c calls) allocateCommandBuffer(d vk.Device, pool vk.CommandPool) (vk.CommandBuffer, vk.Result) {
	var cb C.gr_command_buffer
	res := C.gr_allocate_command_buffer(c.f, c.dev(d), toC(pool), &cb)
	return vk.CommandBuffer(unsafe.Pointer(cb)), vk.Result(res)
}

func (c calls) beginCommandBuffer(cb vk.CommandBuffer, flags vk.CommandBufferUsageFlagBits) vk.Result {
	return vk.Result(C.gr_begin_command_buffer(c.f, C.gr_command_buffer(unsafe.Pointer(cb)), C.uint32_t(flags)))
}

func (c calls) queueSubmit(q vk.Queue, cbs []vk.CommandBuffer, fence vk.Fence) vk.Result {
	return vk.Result(C.gr_queue_submit(c.f, C.gr_queue(unsafe.Pointer(q)), (*C.gr_command_buffer)(unsafe.Pointer(unsafe.SliceData(cbs))),
		C.uint32_t(len(cbs)), toC(fence)))
}

// memoryBarrier records a pipeline barrier with one global memory barrier.
func (c calls) memoryBarrier(cb vk.CommandBuffer, srcStages, dstStages vk.PipelineStageFlags, srcAccess, dstAccess vk.AccessFlags) {
	C.gr_memory_barrier(c.f, C.gr_command_buffer(unsafe.Pointer(cb)), C.uint32_t(srcStages), C.uint32_t(dstStages),
		C.uint32_t(srcAccess), C.uint32_t(dstAccess))
}

func (c calls) copyBuffer(cb vk.CommandBuffer, src, dst vk.Buffer, srcOff, dstOff, size int64) {
	C.gr_copy_buffer(c.f, C.gr_command_buffer(unsafe.Pointer(cb)), toC(src), toC(dst), C.uint64_t(srcOff), C.uint64_t(dstOff), C.uint64_t(size))
}
