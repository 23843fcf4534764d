//go:build cgo

// Implementation of vkext.h; see there for why it exists.

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#endif
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "vkext.h"
#include "vkext_types.h"

typedef void* (*gr_get_proc)(gr_instance, const char*);
typedef int32_t (*gr_enum_version)(uint32_t*);
typedef void (*gr_get_features2)(gr_physical_device, gr_features2*);
typedef void (*gr_get_properties2)(gr_physical_device, gr_properties2*);
typedef int32_t (*gr_create_device_fn)(gr_physical_device, const gr_device_create_info*, const void*, gr_device*);

static gr_get_proc gr_proc;

// gr_open_loader finds vkGetInstanceProcAddr in the system's Vulkan
// loader: vulkan-1.dll on Windows; on macOS the loader of the Vulkan SDK
// or Homebrew (libvulkan.1.dylib), else MoltenVK itself, which exports the
// entry point; elsewhere libvulkan.so.1, then libvulkan.so.
#if defined(_WIN32)
static gr_get_proc gr_open_loader(void) {
	HMODULE lib = LoadLibraryA("vulkan-1.dll");
	if (lib == NULL) {
		return NULL;
	}
	return (gr_get_proc)(void*)GetProcAddress(lib, "vkGetInstanceProcAddr");
}
#else
static gr_get_proc gr_open_loader(void) {
#if defined(__APPLE__)
	static const char* names[] = {"libvulkan.1.dylib", "libvulkan.dylib", "libMoltenVK.dylib", NULL};
#else
	static const char* names[] = {"libvulkan.so.1", "libvulkan.so", NULL};
#endif
	for (int i = 0; names[i] != NULL; i++) {
		void* lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (lib != NULL) {
			return (gr_get_proc)dlsym(lib, "vkGetInstanceProcAddr");
		}
	}
	return NULL;
}
#endif

void* gr_load(void) {
	if (gr_proc == NULL) {
		gr_proc = gr_open_loader();
	}
	return (void*)gr_proc;
}

uint32_t gr_instance_version(void) {
	uint32_t v = (1u << 22);
	if (gr_proc == NULL) {
		return v;
	}
	gr_enum_version f = (gr_enum_version)gr_proc(NULL, "vkEnumerateInstanceVersion");
	if (f == NULL || f(&v) != 0) {
		return (1u << 22);
	}
	return v;
}

// gr_feature_chain links the optional feature structures that api supports
// into f2 and returns whether vkGetPhysicalDeviceFeatures2 filled them.
static int gr_feature_chain(gr_instance inst, gr_physical_device phys, uint32_t api,
		gr_features2* f2, gr_16bit_storage* s16, gr_f16_int8* fi, gr_8bit_storage* s8) {
	memset(f2, 0, sizeof *f2);
	memset(s16, 0, sizeof *s16);
	memset(fi, 0, sizeof *fi);
	memset(s8, 0, sizeof *s8);
	if (gr_proc == NULL || api < GR_API_1_1) {
		return 0;
	}
	gr_get_features2 get = (gr_get_features2)gr_proc(inst, "vkGetPhysicalDeviceFeatures2");
	if (get == NULL) {
		return 0;
	}
	f2->sType = gr_st_features2;
	s16->sType = gr_st_16bit_storage;
	f2->pNext = s16;
	if (api >= GR_API_1_2) {
		fi->sType = gr_st_f16_int8;
		s8->sType = gr_st_8bit_storage;
		s16->pNext = fi;
		fi->pNext = s8;
	}
	get(phys, f2);
	return 1;
}

void gr_query(gr_instance inst, gr_physical_device phys, uint32_t api, gr_caps* caps) {
	memset(caps, 0, sizeof *caps);
	gr_features2 f2;
	gr_16bit_storage s16;
	gr_f16_int8 fi;
	gr_8bit_storage s8;
	if (gr_feature_chain(inst, phys, api, &f2, &s16, &fi, &s8)) {
		caps->storage_buffer16 = s16.storageBuffer16BitAccess;
		caps->uniform_storage16 = s16.uniformAndStorageBuffer16BitAccess;
		caps->shader_float16 = fi.shaderFloat16;
		caps->shader_int8 = fi.shaderInt8;
		caps->storage_buffer8 = s8.storageBuffer8BitAccess;
		caps->uniform_storage8 = s8.uniformAndStorageBuffer8BitAccess;
		caps->shader_int16 = f2.features[gr_feature_shader_int16];
		caps->shader_int64 = f2.features[gr_feature_shader_int64];
	}
	if (gr_proc == NULL || api < GR_API_1_1) {
		return;
	}
	gr_get_properties2 getp = (gr_get_properties2)gr_proc(inst, "vkGetPhysicalDeviceProperties2");
	if (getp == NULL) {
		return;
	}
	gr_properties2 p2;
	gr_subgroup_props sg;
	gr_maintenance3_props m3;
	gr_driver_props drv;
	memset(&p2, 0, sizeof p2);
	memset(&sg, 0, sizeof sg);
	memset(&m3, 0, sizeof m3);
	memset(&drv, 0, sizeof drv);
	p2.sType = gr_st_properties2;
	sg.sType = gr_st_subgroup_props;
	m3.sType = gr_st_maintenance3_props;
	p2.pNext = &sg;
	sg.pNext = &m3;
	if (api >= GR_API_1_2) {
		drv.sType = gr_st_driver_props;
		m3.pNext = &drv;
	}
	getp(phys, &p2);
	caps->has_props2 = 1;
	caps->subgroup_size = sg.subgroupSize;
	caps->subgroup_stages = sg.supportedStages;
	caps->subgroup_ops = sg.supportedOperations;
	caps->max_memory_allocation = m3.maxMemoryAllocationSize;
	if (api >= GR_API_1_2) {
		caps->has_driver = 1;
		caps->driver_id = drv.driverID;
		memcpy(caps->driver_name, drv.driverName, sizeof caps->driver_name);
		memcpy(caps->driver_info, drv.driverInfo, sizeof caps->driver_info);
		caps->driver_name[sizeof caps->driver_name - 1] = 0;
		caps->driver_info[sizeof caps->driver_info - 1] = 0;
	}
}

// VkExtensionProperties.
typedef struct { char extensionName[256]; uint32_t specVersion; } gr_extension_properties;
typedef int32_t (*gr_enum_device_extensions)(gr_physical_device, const char*, uint32_t*, gr_extension_properties*);

// gr_portability_subset reports whether phys offers VK_KHR_portability_subset
// (a portability implementation such as MoltenVK), which the device must
// then enable.
static int gr_portability_subset(gr_instance inst, gr_physical_device phys) {
	gr_enum_device_extensions f = (gr_enum_device_extensions)gr_proc(inst, "vkEnumerateDeviceExtensionProperties");
	uint32_t n = 0;
	if (f == NULL || f(phys, NULL, &n, NULL) != 0 || n == 0) {
		return 0;
	}
	gr_extension_properties* props = calloc(n, sizeof *props);
	if (props == NULL) {
		return 0;
	}
	int found = 0;
	int32_t res = f(phys, NULL, &n, props);
	if (res == 0 || res == 5) { // VK_SUCCESS, VK_INCOMPLETE
		for (uint32_t i = 0; i < n && !found; i++) {
			props[i].extensionName[sizeof props[i].extensionName - 1] = 0;
			found = strcmp(props[i].extensionName, "VK_KHR_portability_subset") == 0;
		}
	}
	free(props);
	return found;
}

int32_t gr_create_device(gr_instance inst, gr_physical_device phys, uint32_t api, uint32_t queue_family, gr_device* out) {
	*out = NULL;
	if (gr_proc == NULL) {
		return -3; // VK_ERROR_INITIALIZATION_FAILED
	}
	gr_create_device_fn create = (gr_create_device_fn)gr_proc(inst, "vkCreateDevice");
	if (create == NULL) {
		return -3;
	}
	float priority = 1.0f;
	gr_device_queue_create_info q;
	memset(&q, 0, sizeof q);
	q.sType = gr_st_device_queue_create_info;
	q.queueFamilyIndex = queue_family;
	q.queueCount = 1;
	q.pQueuePriorities = &priority;

	gr_device_create_info ci;
	memset(&ci, 0, sizeof ci);
	ci.sType = gr_st_device_create_info;
	ci.queueCreateInfoCount = 1;
	ci.pQueueCreateInfos = &q;
	static const char* const portability[] = {"VK_KHR_portability_subset"};
	if (gr_portability_subset(inst, phys)) {
		ci.enabledExtensionCount = 1;
		ci.ppEnabledExtensionNames = portability;
	}

	gr_features2 f2;
	gr_16bit_storage s16;
	gr_f16_int8 fi;
	gr_8bit_storage s8;
	gr_bool32 core[GR_CORE_FEATURES];
	memset(core, 0, sizeof core);
	if (gr_feature_chain(inst, phys, api, &f2, &s16, &fi, &s8)) {
		// Keep only what compute kernels may use; robust buffer access and
		// the graphics features would only cost speed.
		gr_bool32 int16 = f2.features[gr_feature_shader_int16];
		gr_bool32 int64 = f2.features[gr_feature_shader_int64];
		memset(f2.features, 0, sizeof f2.features);
		f2.features[gr_feature_shader_int16] = int16;
		f2.features[gr_feature_shader_int64] = int64;
		s16.storagePushConstant16 = 0;
		s16.storageInputOutput16 = 0;
		s8.storagePushConstant8 = 0;
		ci.pNext = &f2;
	} else {
		ci.pEnabledFeatures = core;
	}
	return create(phys, &ci, NULL, out);
}

struct gr_feedback {
	gr_creation_feedback_info info;
	gr_creation_feedback pipeline;
	gr_creation_feedback stage;
};

gr_feedback* gr_feedback_new(void) {
	gr_feedback* f = calloc(1, sizeof *f);
	if (f == NULL) {
		return NULL;
	}
	f->info.sType = gr_st_creation_feedback_info;
	f->info.pPipelineCreationFeedback = &f->pipeline;
	f->info.pipelineStageCreationFeedbackCount = 1;
	f->info.pPipelineStageCreationFeedbacks = &f->stage;
	return f;
}

void* gr_feedback_info(gr_feedback* f) { return &f->info; }

uint32_t gr_feedback_flags(gr_feedback* f) { return f->pipeline.flags; }
