// vkcalls.h declares the Vulkan calls this package makes through its own C
// rather than through the Go binding. The binding (vulkan-go) copies a
// call's structures into C memory that only a Go finalizer owns, or stores
// pointers to Go memory inside C structures where the collector cannot see
// them: a garbage collection during the call could free either while the
// driver still reads it (lavapipe crashed in vkCreateComputePipelines, the
// validation layer saw a pipeline whose shader module was 0x0). Here the
// structures live on the C stack for the length of the call and every Go
// slice arrives as a direct argument, which cgo keeps alive and in place.
// The calls are those made per kernel, per command list, per dispatch and
// per submission. (The binding's wrappers for calls that take one
// structure copy it into C memory nobody frees: the calls made often are
// here for that reason too.)

#ifndef GPURUN_VKCALLS_H
#define GPURUN_VKCALLS_H

#include <stddef.h>
#include <stdint.h>

#include "vkext.h"

// Non-dispatchable handles are 64 bits on every target; dispatchable ones
// (device, queue, command buffer) are pointers.
typedef uint64_t gr_handle;
typedef void* gr_queue;
typedef void* gr_command_buffer;

// gr_max_bindings bounds the descriptors of one set that gr_update_set
// writes in one call.
enum { gr_max_bindings = 64 };

// gr_create_instance creates the instance for Vulkan api with the create
// flags and, unless extension is NULL, that one instance extension.
int32_t gr_create_instance(uint32_t api, uint32_t flags, const char* extension, gr_instance* out);

// gr_fns is a device's table of the entry points below, from
// vkGetDeviceProcAddr. gr_fns_load returns NULL when the loader or one of
// the entry points is missing; free the table with free.
typedef struct gr_fns gr_fns;
gr_fns* gr_fns_load(gr_instance inst, gr_device dev);

// The calls return the VkResult where Vulkan's does.
int32_t gr_create_shader_module(const gr_fns* f, gr_device dev, const uint32_t* code, size_t bytes, gr_handle* out);
// types holds each binding's VkDescriptorType, binding i at index i.
int32_t gr_create_set_layout(const gr_fns* f, gr_device dev, const int32_t* types, uint32_t n, gr_handle* out);
int32_t gr_create_pipeline_layout(const gr_fns* f, gr_device dev, gr_handle set_layout, gr_handle* out);
// entry is NUL-terminated; next is the create info's pNext chain (may be NULL).
int32_t gr_create_compute_pipeline(const gr_fns* f, gr_device dev, gr_handle cache, gr_handle module, const char* entry,
	gr_handle layout, void* next, gr_handle* out);
int32_t gr_create_descriptor_pool(const gr_fns* f, gr_device dev, uint32_t max_sets, uint32_t storage, uint32_t uniforms, gr_handle* out);
int32_t gr_allocate_set(const gr_fns* f, gr_device dev, gr_handle pool, gr_handle layout, gr_handle* out);
// gr_update_set points binding i of set (descriptor type types[i]) at
// buffers[i] from offsets[i] for ranges[i] bytes; it returns -1 (and writes
// nothing) when n exceeds gr_max_bindings.
int32_t gr_update_set(const gr_fns* f, gr_device dev, gr_handle set, uint32_t n, const int32_t* types,
	const gr_handle* buffers, const uint64_t* offsets, const uint64_t* ranges);
int32_t gr_create_command_pool(const gr_fns* f, gr_device dev, uint32_t flags, uint32_t queue_family, gr_handle* out);
// gr_allocate_command_buffer allocates one primary command buffer from pool.
int32_t gr_allocate_command_buffer(const gr_fns* f, gr_device dev, gr_handle pool, gr_command_buffer* out);
int32_t gr_begin_command_buffer(const gr_fns* f, gr_command_buffer cb, uint32_t flags);
int32_t gr_queue_submit(const gr_fns* f, gr_queue q, const gr_command_buffer* cbs, uint32_t n, gr_handle fence);
// gr_memory_barrier records a pipeline barrier with one global memory barrier.
void gr_memory_barrier(const gr_fns* f, gr_command_buffer cb, uint32_t src_stages, uint32_t dst_stages, uint32_t src_access,
	uint32_t dst_access);
void gr_copy_buffer(const gr_fns* f, gr_command_buffer cb, gr_handle src, gr_handle dst, uint64_t src_off, uint64_t dst_off,
	uint64_t size);

#endif
