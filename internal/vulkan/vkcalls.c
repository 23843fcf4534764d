//go:build cgo

// Implementation of vkcalls.h; see there for why it exists.

#include <stdlib.h>
#include <string.h>

#include "vkcalls.h"
#include "vkext_types.h"

typedef void* (*gr_instance_proc_fn)(gr_instance, const char*);
typedef void* (*gr_device_proc_fn)(gr_device, const char*);

struct gr_fns {
	int32_t (*create_shader_module)(gr_device, const gr_shader_module_create_info*, const void*, uint64_t*);
	int32_t (*create_set_layout)(gr_device, const gr_set_layout_create_info*, const void*, uint64_t*);
	int32_t (*create_pipeline_layout)(gr_device, const gr_pipeline_layout_create_info*, const void*, uint64_t*);
	int32_t (*create_compute_pipelines)(gr_device, uint64_t, uint32_t, const gr_compute_pipeline_create_info*, const void*, uint64_t*);
	int32_t (*create_descriptor_pool)(gr_device, const gr_pool_create_info*, const void*, uint64_t*);
	int32_t (*allocate_sets)(gr_device, const gr_set_allocate_info*, uint64_t*);
	void (*update_sets)(gr_device, uint32_t, const gr_write_set*, uint32_t, const void*);
	int32_t (*create_command_pool)(gr_device, const gr_command_pool_create_info*, const void*, uint64_t*);
	int32_t (*allocate_command_buffers)(gr_device, const gr_command_buffer_allocate_info*, gr_command_buffer*);
	int32_t (*begin_command_buffer)(gr_command_buffer, const gr_begin_info*);
	int32_t (*queue_submit)(gr_queue, uint32_t, const gr_submit_info*, uint64_t);
	void (*pipeline_barrier)(gr_command_buffer, uint32_t, uint32_t, uint32_t, uint32_t, const gr_memory_barrier_info*, uint32_t,
		const void*, uint32_t, const void*);
	void (*copy_buffer)(gr_command_buffer, uint64_t, uint64_t, uint32_t, const gr_buffer_copy*);
};

typedef int32_t (*gr_create_instance_fn)(const gr_instance_create_info*, const void*, gr_instance*);

int32_t gr_create_instance(uint32_t api, uint32_t flags, const char* extension, gr_instance* out) {
	*out = NULL;
	gr_instance_proc_fn instance_proc = (gr_instance_proc_fn)gr_load();
	if (instance_proc == NULL) {
		return -3; // VK_ERROR_INITIALIZATION_FAILED
	}
	gr_create_instance_fn create = (gr_create_instance_fn)instance_proc(NULL, "vkCreateInstance");
	if (create == NULL) {
		return -3;
	}
	gr_application_info app;
	memset(&app, 0, sizeof app);
	app.sType = gr_st_application_info;
	app.pApplicationName = "gpurun";
	app.pEngineName = "gpurun";
	app.apiVersion = api;
	gr_instance_create_info info;
	memset(&info, 0, sizeof info);
	info.sType = gr_st_instance_create_info;
	info.flags = flags;
	info.pApplicationInfo = &app;
	const char* names[1] = {extension};
	if (extension != NULL) {
		info.enabledExtensionCount = 1;
		info.ppEnabledExtensionNames = names;
	}
	return create(&info, NULL, out);
}

gr_fns* gr_fns_load(gr_instance inst, gr_device dev) {
	gr_instance_proc_fn instance_proc = (gr_instance_proc_fn)gr_load();
	if (instance_proc == NULL) {
		return NULL;
	}
	gr_device_proc_fn proc = (gr_device_proc_fn)instance_proc(inst, "vkGetDeviceProcAddr");
	if (proc == NULL) {
		return NULL;
	}
	gr_fns* f = calloc(1, sizeof *f);
	if (f == NULL) {
		return NULL;
	}
	// Each pointer is stored through memcpy: C forbids converting a data
	// pointer to a function pointer, POSIX guarantees the representation.
	struct {
		const char* name;
		void* dst;
	} entries[] = {
		{"vkCreateShaderModule", &f->create_shader_module},
		{"vkCreateDescriptorSetLayout", &f->create_set_layout},
		{"vkCreatePipelineLayout", &f->create_pipeline_layout},
		{"vkCreateComputePipelines", &f->create_compute_pipelines},
		{"vkCreateDescriptorPool", &f->create_descriptor_pool},
		{"vkAllocateDescriptorSets", &f->allocate_sets},
		{"vkUpdateDescriptorSets", &f->update_sets},
		{"vkCreateCommandPool", &f->create_command_pool},
		{"vkAllocateCommandBuffers", &f->allocate_command_buffers},
		{"vkBeginCommandBuffer", &f->begin_command_buffer},
		{"vkQueueSubmit", &f->queue_submit},
		{"vkCmdPipelineBarrier", &f->pipeline_barrier},
		{"vkCmdCopyBuffer", &f->copy_buffer},
	};
	for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
		void* p = proc(dev, entries[i].name);
		if (p == NULL) {
			free(f);
			return NULL;
		}
		memcpy(entries[i].dst, &p, sizeof p);
	}
	return f;
}

int32_t gr_create_shader_module(const gr_fns* f, gr_device dev, const uint32_t* code, size_t bytes, gr_handle* out) {
	gr_shader_module_create_info info;
	memset(&info, 0, sizeof info);
	info.sType = gr_st_shader_module_create_info;
	info.codeSize = bytes;
	info.pCode = code;
	return f->create_shader_module(dev, &info, NULL, out);
}

int32_t gr_create_set_layout(const gr_fns* f, gr_device dev, const int32_t* types, uint32_t n, gr_handle* out) {
	if (n > gr_max_bindings) {
		return -1; // VK_ERROR_OUT_OF_HOST_MEMORY: the Go side checks first
	}
	gr_set_layout_binding b[gr_max_bindings];
	memset(b, 0, sizeof b);
	for (uint32_t i = 0; i < n; i++) {
		b[i].binding = i;
		b[i].descriptorType = types[i];
		b[i].descriptorCount = 1;
		b[i].stageFlags = gr_shader_stage_compute;
	}
	gr_set_layout_create_info info;
	memset(&info, 0, sizeof info);
	info.sType = gr_st_descriptor_set_layout_create_info;
	info.bindingCount = n;
	info.pBindings = n > 0 ? b : NULL;
	return f->create_set_layout(dev, &info, NULL, out);
}

int32_t gr_create_pipeline_layout(const gr_fns* f, gr_device dev, gr_handle set_layout, gr_handle* out) {
	gr_pipeline_layout_create_info info;
	memset(&info, 0, sizeof info);
	info.sType = gr_st_pipeline_layout_create_info;
	info.setLayoutCount = 1;
	info.pSetLayouts = &set_layout;
	return f->create_pipeline_layout(dev, &info, NULL, out);
}

int32_t gr_create_compute_pipeline(const gr_fns* f, gr_device dev, gr_handle cache, gr_handle module, const char* entry,
		gr_handle layout, void* next, gr_handle* out) {
	gr_compute_pipeline_create_info info;
	memset(&info, 0, sizeof info);
	info.sType = gr_st_compute_pipeline_create_info;
	info.pNext = next;
	info.stage.sType = gr_st_pipeline_shader_stage_create_info;
	info.stage.stage = gr_shader_stage_compute;
	info.stage.module = module;
	info.stage.pName = entry;
	info.layout = layout;
	info.basePipelineIndex = -1;
	return f->create_compute_pipelines(dev, cache, 1, &info, NULL, out);
}

int32_t gr_create_descriptor_pool(const gr_fns* f, gr_device dev, uint32_t max_sets, uint32_t storage, uint32_t uniforms, gr_handle* out) {
	gr_pool_size sizes[2] = {{gr_descriptor_storage_buffer, storage}, {gr_descriptor_uniform_buffer, uniforms}};
	gr_pool_create_info info;
	memset(&info, 0, sizeof info);
	info.sType = gr_st_descriptor_pool_create_info;
	info.maxSets = max_sets;
	info.poolSizeCount = 2;
	info.pPoolSizes = sizes;
	return f->create_descriptor_pool(dev, &info, NULL, out);
}

int32_t gr_allocate_set(const gr_fns* f, gr_device dev, gr_handle pool, gr_handle layout, gr_handle* out) {
	gr_set_allocate_info info;
	memset(&info, 0, sizeof info);
	info.sType = gr_st_descriptor_set_allocate_info;
	info.descriptorPool = pool;
	info.descriptorSetCount = 1;
	info.pSetLayouts = &layout;
	return f->allocate_sets(dev, &info, out);
}

int32_t gr_update_set(const gr_fns* f, gr_device dev, gr_handle set, uint32_t n, const int32_t* types,
		const gr_handle* buffers, const uint64_t* offsets, const uint64_t* ranges) {
	if (n > gr_max_bindings) {
		return -1;
	}
	if (n == 0) {
		return 0;
	}
	gr_buffer_info infos[gr_max_bindings];
	gr_write_set writes[gr_max_bindings];
	memset(writes, 0, n * sizeof writes[0]);
	for (uint32_t i = 0; i < n; i++) {
		infos[i].buffer = buffers[i];
		infos[i].offset = offsets[i];
		infos[i].range = ranges[i];
		writes[i].sType = gr_st_write_descriptor_set;
		writes[i].dstSet = set;
		writes[i].dstBinding = i;
		writes[i].descriptorCount = 1;
		writes[i].descriptorType = types[i];
		writes[i].pBufferInfo = &infos[i];
	}
	f->update_sets(dev, n, writes, 0, NULL);
	return 0;
}

int32_t gr_create_command_pool(const gr_fns* f, gr_device dev, uint32_t flags, uint32_t queue_family, gr_handle* out) {
	gr_command_pool_create_info info;
	memset(&info, 0, sizeof info);
	info.sType = gr_st_command_pool_create_info;
	info.flags = flags;
	info.queueFamilyIndex = queue_family;
	return f->create_command_pool(dev, &info, NULL, out);
}

int32_t gr_allocate_command_buffer(const gr_fns* f, gr_device dev, gr_handle pool, gr_command_buffer* out) {
	gr_command_buffer_allocate_info info;
	memset(&info, 0, sizeof info);
	info.sType = gr_st_command_buffer_allocate_info;
	info.commandPool = pool;
	info.level = 0; // VK_COMMAND_BUFFER_LEVEL_PRIMARY
	info.commandBufferCount = 1;
	return f->allocate_command_buffers(dev, &info, out);
}

int32_t gr_begin_command_buffer(const gr_fns* f, gr_command_buffer cb, uint32_t flags) {
	gr_begin_info info;
	memset(&info, 0, sizeof info);
	info.sType = gr_st_command_buffer_begin_info;
	info.flags = flags;
	return f->begin_command_buffer(cb, &info);
}

int32_t gr_queue_submit(const gr_fns* f, gr_queue q, const gr_command_buffer* cbs, uint32_t n, gr_handle fence) {
	gr_submit_info info;
	memset(&info, 0, sizeof info);
	info.sType = gr_st_submit_info;
	info.commandBufferCount = n;
	info.pCommandBuffers = cbs;
	return f->queue_submit(q, 1, &info, fence);
}

void gr_memory_barrier(const gr_fns* f, gr_command_buffer cb, uint32_t src_stages, uint32_t dst_stages, uint32_t src_access,
		uint32_t dst_access) {
	gr_memory_barrier_info mb;
	memset(&mb, 0, sizeof mb);
	mb.sType = gr_st_memory_barrier;
	mb.srcAccessMask = src_access;
	mb.dstAccessMask = dst_access;
	f->pipeline_barrier(cb, src_stages, dst_stages, 0, 1, &mb, 0, NULL, 0, NULL);
}

void gr_copy_buffer(const gr_fns* f, gr_command_buffer cb, gr_handle src, gr_handle dst, uint64_t src_off, uint64_t dst_off,
		uint64_t size) {
	gr_buffer_copy region = {src_off, dst_off, size};
	f->copy_buffer(cb, src, dst, 1, &region);
}
